// Distributed training from Python: a script started by `mpirun -np N`
// whose solver prototxt has a `distributed { ... }` block trains as one rank
// of the job, exactly as `poseidon_train train` would (distributed/synchronizer.hpp):
// the solver is built on this rank's data shard and a Synchronizer attaches
// to it, so solver.step()/solve() exchange gradients with the other ranks.
// Alone, or without the block, a solver trains by itself as in pycaffe.
//
// The MPI communicator is created on first need and lives until the
// interpreter exits; at exit (Python's atexit) every live synchroniser is
// detached and the communicator freed before MPI_Finalize runs. An uncaught
// Python exception on one rank aborts the whole job (MPI_Abort) after the
// traceback is printed, so no peer is left waiting in a collective.
//
// Threads: everything here runs on the interpreter's thread with the GIL.
#include <cstdlib>
#include <memory>
#include <vector>

#include "_caffe.hpp"
#include "poseidon/common.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/device_select.hpp"
#include "poseidon/util/status.hpp"
#ifdef USE_MPI
#include "poseidon/distributed/mpi_communicator.hpp"
#include "poseidon/distributed/trainer.hpp"
#endif

namespace py = pybind11;

namespace poseidon {
namespace python {
namespace {

int EnvInt(const char* const* names, int fallback) {
  for (; *names != nullptr; ++names) {
    const char* value = std::getenv(*names);
    if (value != nullptr) return std::atoi(value);
  }
  return fallback;
}

#ifdef USE_MPI
// A solver that trains as one rank of an mpirun job, assembled as
// poseidon_train assembles it (distributed/trainer.hpp).
struct RankSolver {
  std::unique_ptr<dist::Trainer<Dtype>> trainer;
};

struct DistState {
  std::unique_ptr<dist::MpiCommunicator> comm;
  std::vector<std::weak_ptr<RankSolver>> solvers;
};

DistState& State() {
  static DistState* state = new DistState();  // lives until exit
  return *state;
}

void ShutDown() {
  DistState& s = State();
  for (auto& weak : s.solvers) {
    if (auto solver = weak.lock()) solver->trainer->Detach();
  }
  s.solvers.clear();
  s.comm.reset();
}

// Prints the traceback as usual, then ends every rank of the job.
void InstallAbortingExceptHook() {
  py::module_ sys = py::module_::import("sys");
  py::object previous = sys.attr("excepthook");
  sys.attr("excepthook") = py::cpp_function(
      [previous](py::object type, py::object value, py::object tb) {
        previous(type, value, tb);
        DistState& s = State();
        if (s.comm) {
          py::module_::import("sys").attr("stderr").attr("flush")();
          s.comm->Abort(StrCat("rank ", s.comm->rank(),
                               ": uncaught Python exception"));
        }
      });
}

dist::MpiCommunicator* Comm() {
  DistState& s = State();
  if (!s.comm) {
    s.comm = std::make_unique<dist::MpiCommunicator>();
    Poseidon::set_node(s.comm->rank(), s.comm->size());
    py::module_::import("atexit").attr("register")(
        py::cpp_function(&ShutDown));
    InstallAbortingExceptHook();
  }
  return s.comm.get();
}
#endif

}  // namespace

int LaunchedRank() {
  static const char* const kNames[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                       "PMIX_RANK", nullptr};
  return EnvInt(kNames, 0);
}

std::shared_ptr<Solver<Dtype>> MakeSolver(const SolverParameter& param) {
  if (WorldSizeFromEnvironment() <= 1 || !param.has_distributed()) {
    return std::shared_ptr<Solver<Dtype>>(CreateSolver<Dtype>(param));
  }
#ifdef USE_MPI
  dist::MpiCommunicator* comm = Comm();
  dist::TrainerOptions options;
  options.settings = param.distributed();
  auto owner = std::make_shared<RankSolver>();
  owner->trainer =
      std::make_unique<dist::Trainer<Dtype>>(param, comm, std::move(options));
  State().solvers.push_back(owner);
  return std::shared_ptr<Solver<Dtype>>(owner, owner->trainer->solver());
#else
  POSEIDON_THROW(ConfigError, "started by mpirun with ", WorldSizeFromEnvironment(),
                 " ranks and a `distributed` solver, but Poseidon was built "
                 "without MPI (USE_MPI=OFF)");
#endif
}

void BindDistributed(py::module_& m) {
  m.def("rank", [] {
#ifdef USE_MPI
    if (State().comm) return State().comm->rank();
#endif
    return LaunchedRank();
  }, "This process's rank in an mpirun job (0 when alone).");
  m.def("world_size", [] {
#ifdef USE_MPI
    if (State().comm) return State().comm->size();
#endif
    return WorldSizeFromEnvironment();
  }, "The number of ranks of the mpirun job (1 when alone).");
  m.def("is_distributed", [] {
#ifdef USE_MPI
    return static_cast<bool>(State().comm);
#else
    return false;
#endif
  }, "Whether a distributed solver has joined the mpirun job.");
}

}  // namespace python
}  // namespace poseidon
