// poseidon_train train: the solver and the trainer's options from the flags,
// training alone or as one rank of an mpirun job (dedicated parameter
// servers included), and the summary line that ends it.
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "poseidon/distributed/trainer.hpp"
#include "poseidon/solver.hpp"
#include "poseidon/solver_summary.hpp"
#include "poseidon/util/device_select.hpp"
#include "poseidon/util/emulation.hpp"
#include "poseidon/util/signal_handler.hpp"
#include "poseidon_train.hpp"
#ifdef USE_MPI
#include "poseidon/distributed/mpi_communicator.hpp"
#include "poseidon/distributed/server_process.hpp"
#endif

namespace poseidon {
namespace train_tool {
namespace {

// The solver's `distributed` block with the flags given on the command line
// applied over it.
DistributedParameter DistributedSettings(const SolverParameter& param) {
  DistributedParameter d = param.distributed();
  if (!FLAGS_comm.empty()) {
    DistributedParameter::CommType type;
    POSEIDON_REQUIRE(DistributedParameter::CommType_Parse(FLAGS_comm, &type),
                     ConfigError, "--comm=", FLAGS_comm,
                     " is not one of AUTO, PS, SFB, ALLREDUCE");
    d.set_comm(type);
  }
  if (FLAGS_staleness >= 0) d.set_staleness(FLAGS_staleness);
  if (!FLAGS_consistency.empty()) {
    DistributedParameter::Consistency c;
    POSEIDON_REQUIRE(
        DistributedParameter::Consistency_Parse(FLAGS_consistency, &c),
        ConfigError, "--consistency=", FLAGS_consistency,
        " is not one of BSP, SSP, ASYNC");
    d.set_consistency(c);
  }
  if (FLAGS_block_size > 0) d.set_block_size(FLAGS_block_size);
  if (FLAGS_num_push_threads > 0) d.set_num_push_threads(FLAGS_num_push_threads);
  if (FLAGS_num_pull_threads > 0) d.set_num_pull_threads(FLAGS_num_pull_threads);
  if (FLAGS_bytes_in_flight > 0) d.set_bytes_in_flight(FLAGS_bytes_in_flight);
  if (FLAGS_server_lanes > 0) d.set_server_lanes(FLAGS_server_lanes);
  // --name=true|false over the solver's setting, when given.
  auto boolean = [](const char* name, const string& value,
                    void (DistributedParameter::*set)(bool),
                    DistributedParameter* out) {
    if (value.empty()) return;
    POSEIDON_REQUIRE(value == "true" || value == "false", ConfigError, "--",
                     name, " must be true or false, got ", value);
    (out->*set)(value == "true");
  };
  boolean("wait_free", FLAGS_wait_free, &DistributedParameter::set_wait_free,
          &d);
  boolean("shared_memory", FLAGS_shared_memory,
          &DistributedParameter::set_shared_memory, &d);
  boolean("host_level", FLAGS_host_level,
          &DistributedParameter::set_host_level, &d);
  boolean("server_update", FLAGS_server_update,
          &DistributedParameter::set_server_update, &d);
  if (FLAGS_network_gbits != 0) {
    POSEIDON_REQUIRE(FLAGS_network_gbits > 0, ConfigError,
                     "--network_gbits must be positive, got ",
                     FLAGS_network_gbits);
    d.set_network_gbits(static_cast<float>(FLAGS_network_gbits));
  }
  return d;
}

SolverParameter ReadTrainSolver() {
  POSEIDON_REQUIRE(!FLAGS_solver.empty(), ConfigError,
                   "train needs --solver=<solver.prototxt>");
  POSEIDON_REQUIRE(FLAGS_snapshot.empty() || FLAGS_weights.empty(),
                   ConfigError,
                   "give either --snapshot (resume) or --weights (fine-tune), "
                   "not both");
  SolverParameter param;
  ReadSolverParamsFromTextFile(FLAGS_solver, &param);
  param.mutable_train_state()->set_level(FLAGS_level);
  for (const auto& stage : SplitList(FLAGS_stage)) {
    param.mutable_train_state()->add_stage(stage);
  }
  SelectDevice(&param);
  PreparePythonLayers(NetsOfSolver(param));
  return param;
}

// Builds the solver, loads --weights, and trains (resuming from --snapshot).
// The trainer's options from the flags (distributed/trainer.hpp).
dist::TrainerOptions TrainerOptionsFromFlags(const SolverParameter& param,
                                             SignalHandler* signals) {
  dist::TrainerOptions options;
  options.settings = DistributedSettings(param);
  options.threads = FLAGS_threads;
  if (!g_worker_gpus.empty()) {
    const int n = static_cast<int>(g_worker_gpus.size());
    POSEIDON_REQUIRE(FLAGS_threads == 1 || FLAGS_threads == n, ConfigError,
                     "--gpu lists ", n, " GPUs, one device worker each; "
                     "--threads=", FLAGS_threads, " does not match");
    options.threads = n;
    options.gpus = g_worker_gpus;
  }
  options.partitioned_data = FLAGS_partitioned_data;
  options.timeline_path = FLAGS_timeline;
  options.emulate_compute = FLAGS_emulate_compute;
  options.emulate_dilation = FLAGS_emulate_dilation;
  options.emulate_shared_params = FLAGS_emulate_shared_params;
  options.share_blob_diffs = FLAGS_share_blob_diffs;
  options.action = signals->GetActionFunction();
  return options;
}

// Trains, restoring --snapshot or copying --weights first; returns the
// number of iterations run (a resumed run starts at the snapshot's).
int RunSolver(Solver<float>* solver) {
  if (!FLAGS_snapshot.empty()) {
    LOG(INFO) << "Resuming from " << FLAGS_snapshot;
    solver->Restore(FLAGS_snapshot.c_str());
  } else if (!FLAGS_weights.empty()) {
    CopyWeights(FLAGS_weights, solver->net().get());
    for (const auto& test_net : solver->test_nets()) {
      CopyWeights(FLAGS_weights, test_net.get());
    }
  }
  const int start_iter = solver->iter();
  solver->Solve();
  return solver->iter() - start_iter;
}

// The summary line that ends `train` (see solver_summary.hpp) for
// `iterations` run since `start`; `workers` counts the net replicas that
// each consume a batch per iteration.
string TrainingSummaryLine(const Solver<float>& solver, Clock::time_point start,
                           int iterations, int workers) {
  const double seconds = MsSince(start) / 1000.0;
  const double images = static_cast<double>(TrainBatchSize(*solver.net())) *
                        solver.param().iter_size() * workers;
  return TrainingSummary(solver, iterations, seconds, images);
}

#ifdef USE_MPI
// --servers, or when it is not given POSEIDON_SERVERS (psd_run exports it
// for a config whose server_nodes are hosts of their own).
int DedicatedServerCount() {
  gflags::CommandLineFlagInfo info;
  const char* env = std::getenv("POSEIDON_SERVERS");
  if (!gflags::GetCommandLineFlagInfo("servers", &info) || !info.is_default ||
      env == nullptr || *env == '\0') {
    return FLAGS_servers;
  }
  char* end = nullptr;
  const long n = std::strtol(env, &end, 10);  // NOLINT(runtime/int)
  POSEIDON_REQUIRE(*end == '\0' && n >= 0 && n <= 1 << 20, ConfigError,
                   "POSEIDON_SERVERS='", env,
                   "' is not a number of server ranks");
  return static_cast<int>(n);
}

// Training as one rank of an mpirun job: see distributed/synchronizer.hpp. Any
// error after MPI starts ends the whole job (MPI_Abort), so no peer is left
// waiting for this rank.
int TrainDistributed() {
  dist::MpiOptions options;
  options.timeout = std::chrono::seconds(FLAGS_comm_timeout);
  dist::MpiCommunicator comm(options);
  const int rank = comm.rank();
  const int size = comm.size();
  Poseidon::set_node(rank, size);
  // mpirun stops the other ranks with SIGTERM when one fails: each says so
  // in one line, the failing rank's own error being the one to read.
  InstallTerminationMessage(
      StrCat("poseidon_train: rank ", rank, " of ", size),
      "stopped by SIGTERM from mpirun, which ends every rank when one fails "
      "or the job is cancelled (a failing rank prints its error above)");
  // A rank stopped and continued says so instead of blaming its peers
  // (Note [Stopped ranks] in distributed/communicator.cpp).
  RecordContinues();
  if (Poseidon::mode() == Poseidon::GPU && rank == 0) {
    string how;
    dist::MpiCudaAware(&how);
    LOG(INFO) << "CUDA-aware MPI: " << how
              << "; gradients go to the host and cluster levels through "
              << "host memory";
  }
  if (rank != 0 && std::getenv("POSEIDON_LOG_ALL_RANKS") == nullptr) {
    FLAGS_minloglevel = std::max(FLAGS_minloglevel, 1);  // warnings and up
  }
  try {
    POSEIDON_REQUIRE(FLAGS_client_id < 0 || FLAGS_client_id == rank,
                     ConfigError, "--client_id=", FLAGS_client_id,
                     " but mpirun started this process as rank ", rank);
    POSEIDON_REQUIRE(FLAGS_num_clients < 0 || FLAGS_num_clients == size,
                     ConfigError, "--num_clients=", FLAGS_num_clients,
                     " but mpirun started ", size, " ranks");
    // Dedicated parameter servers: the last --servers ranks (Note
    // [Dedicated servers] in distributed/server_process.hpp); the workers train
    // on a communicator of their own.
    const int servers = DedicatedServerCount();
    POSEIDON_REQUIRE(servers < size, ConfigError, servers,
                     " dedicated server ranks (--servers or POSEIDON_SERVERS) "
                     "leave no worker among the job's ", size, " ranks");
    POSEIDON_REQUIRE(servers >= 0, ConfigError, "--servers=", servers,
                     " is negative");
    const int workers = size - servers;
    std::unique_ptr<dist::Communicator> worker_comm;
    dist::DedicatedServers dedicated;
    if (servers > 0) {
      worker_comm = comm.Split(rank < workers ? 0 : 1, rank, comm.timeout());
      if (rank >= workers) {
        // A server of an emulated cluster stretches its sums and updates
        // as the workers stretch theirs (Note [Time dilation]).
        if (!FLAGS_emulate_compute.empty()) {
          emulation::SetDilation(FLAGS_emulate_dilation);
        }
        Status s = dist::RunDedicatedServer(&comm, 0);
        if (emulation::Dilation() != 1) {
          LOG(INFO) << "Time dilation " << emulation::Dilation()
                    << "x: " << dist::FormatDuration(
                                    emulation::OverrunSeconds())
                    << " of real compute could not be stretched (server rank "
                    << rank << "; 0 means the emulation kept up)";
        }
        if (s.ok()) s = comm.Barrier();
        POSEIDON_REQUIRE(s.ok(), DistributedError, s.message());
        return 0;
      }
      for (int r = 0; r < size; ++r) {
        (r < workers ? dedicated.roles.workers : dedicated.roles.servers)
            .push_back(r);
      }
      dedicated.job = &comm;
      Poseidon::set_node(rank, workers);
      LOG_IF(INFO, rank == 0) << "Ranks " << workers << " to " << size - 1
                              << " of " << size
                              << " are dedicated parameter servers";
    }
    SolverParameter param = ReadTrainSolver();
    SignalHandler signals(FLAGS_sigint_effect, FLAGS_sighup_effect,
                          FLAGS_sigterm_effect);
    dist::TrainerOptions trainer_options =
        TrainerOptionsFromFlags(param, &signals);
    trainer_options.servers = dedicated;
    string summary;
    {
      dist::Trainer<float> trainer(
          param, worker_comm ? worker_comm.get() : &comm, trainer_options);
      try {
        const Clock::time_point start = Clock::now();
        const int iterations = RunSolver(trainer.solver());
        LogGpuMemory();
        trainer.Finish();
        summary = TrainingSummaryLine(*trainer.solver(), start, iterations,
                                      FLAGS_threads * workers);
      } catch (const std::exception& e) {
        // Abort before the trainer's destructor frees the exchanges'
        // buffers: after a timeout MPI may still write into them (Note [MPI
        // timeouts] in distributed/mpi_communicator.hpp). Found with
        // scripts/fault_matrix.py: a rank stopped and continued, its waits
        // all run out, unwound into a heap corrupted by a late receive.
        if (size > 1) comm.Abort(e.what());
        throw;
      }
    }  // joins the trainer's communication threads before the barrier
    Status s = comm.Barrier();
    POSEIDON_REQUIRE(s.ok(), DistributedError, s.message());
    if (rank == 0) LOG(INFO) << summary;
  } catch (const std::exception& e) {
    if (size > 1) comm.Abort(e.what());  // prints "Error: rank k of N: ..."
    std::fprintf(stderr, "Error: rank %d of %d: %s\n", rank, size, e.what());
    return 1;
  }
  return 0;
}
#endif

}  // namespace

int Train() {
  if (WorldSizeFromEnvironment() > 1) {
#ifdef USE_MPI
    return TrainDistributed();
#else
    POSEIDON_THROW(ConfigError, "started by a launcher with ",
                   WorldSizeFromEnvironment(),
                   " ranks, but this poseidon_train was built without MPI "
                   "(USE_MPI=OFF); rebuild with USE_MPI=ON or run it alone");
#endif
  }
  SolverParameter param = ReadTrainSolver();
  SignalHandler signals(FLAGS_sigint_effect, FLAGS_sighup_effect,
                        FLAGS_sigterm_effect);
  dist::Trainer<float> trainer(param, nullptr,
                               TrainerOptionsFromFlags(param, &signals));
  const Clock::time_point start = Clock::now();
  const int iterations = RunSolver(trainer.solver());
  LogGpuMemory();
  trainer.Finish();
  LOG(INFO) << TrainingSummaryLine(*trainer.solver(), start, iterations,
                                   FLAGS_threads);
  return 0;
}

}  // namespace train_tool
}  // namespace poseidon
