// poseidon_train: the command-line trainer, with Caffe's actions and flags.
//   poseidon_train train --solver=solver.prototxt [--snapshot=S | --weights=W]
//   poseidon_train test  --model=net.prototxt --weights=W [--iterations=50]
//   poseidon_train time  --model=net.prototxt [--iterations=50]
//   poseidon_train device_query
// User mistakes end with "Error: ..." on stderr and exit status 1.
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <cstdlib>
#include <cstdio>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include "poseidon/common.hpp"
#include "poseidon/distributed/trainer.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/base_data_layer.hpp"
#include "poseidon/net.hpp"
#include "poseidon/solver.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/solver_summary.hpp"
#include "poseidon/util/device_select.hpp"
#include "poseidon/util/emulation.hpp"
#include "poseidon/util/gpu_context.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/sgemm.hpp"
#include "poseidon/util/signal_handler.hpp"
#include "poseidon/util/timeline.hpp"
#include "poseidon/version.hpp"
#ifdef USE_MPI
#include "poseidon/distributed/mpi_communicator.hpp"
#include "poseidon/distributed/server_process.hpp"
#endif
#ifdef POSEIDON_EMBED_PYTHON
#include <pybind11/embed.h>
#endif

DEFINE_string(gpu, "",
              "Optional; run on the GPU with this id (needs a CUDA build). "
              "Under mpirun, a comma-separated list or 'all': the ranks of a "
              "host take the listed GPUs in turn.");
DEFINE_bool(deterministic, false,
            "GPU: only deterministic cuDNN algorithms (bitwise repeatable "
            "runs; also POSEIDON_DETERMINISTIC=1).");
DEFINE_bool(allow_tf32, false,
            "GPU: let FP32 convolutions and GEMMs use TF32 tensor cores "
            "(faster, about 10 mantissa bits in the products; also "
            "POSEIDON_ALLOW_TF32=1).");
DEFINE_string(solver, "", "The solver definition protocol buffer text file.");
DEFINE_string(model, "", "The model definition protocol buffer text file.");
DEFINE_string(phase, "", "Optional; network phase (TRAIN or TEST), for time.");
DEFINE_int32(level, 0, "Optional; network level.");
DEFINE_string(stage, "",
              "Optional; network stages (not to be confused with phase), "
              "separated by ','.");
DEFINE_string(snapshot, "",
              "Optional; the snapshot solver state to resume training.");
DEFINE_string(weights, "",
              "Optional; the pretrained weights to initialize finetuning, "
              "separated by ','. Cannot be set simultaneously with snapshot.");
DEFINE_int32(iterations, 50, "The number of iterations to run.");
// Distributed training (under mpirun); each flag overrides the solver's
// `distributed { ... }` block when given.
DEFINE_string(comm, "",
              "Distributed: transport for every layer: AUTO, PS, SFB or "
              "ALLREDUCE (per-layer ParamSpec.comm still wins).");
DEFINE_int32(staleness, -1,
             "Distributed: bounded staleness s (0 = bulk synchronous).");
DEFINE_string(consistency, "",
              "Distributed: how the parameter server answers pulls: BSP "
              "(the default), SSP (each worker at most --staleness "
              "iterations ahead of the slowest) or ASYNC (no wait).");
DEFINE_uint64(block_size, 0, "Distributed: parameter-server block bytes.");
DEFINE_int32(num_push_threads, 0, "Distributed: push threads per rank.");
DEFINE_int32(num_pull_threads, 0, "Distributed: pull threads per rank.");
DEFINE_uint64(bytes_in_flight, 0,
              "Distributed: parameter-server message bytes each push and "
              "each pull thread keeps in flight at once (default 64 MB).");
DEFINE_int32(server_lanes, 0,
             "Distributed: parameter-server blocks each shard takes pushes "
             "of at once (default 4).");
DEFINE_string(wait_free, "",
              "Distributed: true (wait-free backprop) or false (exchange "
              "after the whole backward).");
DEFINE_string(shared_memory, "",
              "Distributed: true (ranks that all run on one host exchange "
              "ALLREDUCE layers through shared memory) or false (messages).");
DEFINE_string(host_level, "",
              "Distributed: true (ranks of a host combine gradients through "
              "shared memory before the network; several hosts of several "
              "ranks) or false.");
DEFINE_string(server_update, "",
              "Distributed: true (the parameter-server shards hold their "
              "blocks' parameters and solver history and apply the update; "
              "workers pull parameters) or false (the shards only sum; "
              "every worker updates).");
DEFINE_int32(servers, 0,
             "Distributed: the last N ranks of the mpirun job are dedicated "
             "parameter servers: they train nothing and hold the PS layers' "
             "blocks (and, with server_update, their solver state); 0: every "
             "rank is a worker hosting one shard. Default: the environment's "
             "POSEIDON_SERVERS (psd_run sets it from server_nodes), else 0.");
DEFINE_double(network_gbits, 0,
              "Distributed: each host's link bandwidth in Gbit/s for the "
              "cost model (default 10).");
DEFINE_bool(partitioned_data, false,
            "Distributed: rank k reads the part database <source>_<k> made "
            "by scripts/partition_data instead of every N-th record of "
            "<source>.");
DEFINE_int32(comm_timeout, 600,
             "Distributed: seconds a rank waits for a peer before it names "
             "the peer and ends the job (at least 1).");
DEFINE_double(data_timeout, 600,
              "Seconds a data layer waits for its prefetch thread's next "
              "batch before it fails naming the layer (a stuck data "
              "source); default: POSEIDON_DATA_TIMEOUT, else 600.");
DEFINE_int32(client_id, -1,
             "Distributed: optional check that this process is this MPI "
             "rank (the seeds' client_id).");
DEFINE_int32(num_clients, -1,
             "Distributed: optional check of the number of ranks mpirun "
             "started.");
DEFINE_int32(threads, 1,
             "Device workers per process (train): each runs a replica of "
             "the net on its own slice of the data (batch_size is per "
             "worker); their gradients are summed before the process "
             "exchanges with the cluster.");
DEFINE_string(emulate_compute, "",
              "Benchmarks only (train): a file of 'layer forward_ms "
              "backward_ms' lines, as `time --profile` writes; each layer "
              "of the train net sleeps that long instead of computing.");
DEFINE_double(emulate_dilation, 1,
              "Benchmarks only (train, with --emulate_compute): run k times "
              "slower than the emulated cluster: layer times times k, real "
              "compute stretched to k times its CPU time, the cost model's "
              "rates divided by k (cap the links at rate / k yourself).");
DEFINE_bool(emulate_shared_params, false,
            "Benchmarks only (train, with --emulate_compute): keep the "
            "parameters, gradients and solver history in one shared-memory "
            "mapping used by every rank on this machine (the values become "
            "meaningless; the traffic is real).");
DEFINE_string(profile, "",
              "time: also write the per-layer averages to this file, for "
              "--emulate_compute.");
DEFINE_string(timeline, "",
              "Write a Chrome-trace JSON (open it in Perfetto) of each "
              "layer's forward/backward and each exchange; with N ranks "
              "rank k writes FILE with .rank<k> before the extension.");
DEFINE_bool(share_blob_diffs, true,
            "train, time: on the CPU, let blobs whose backward lifetimes do "
            "not overlap share their diffs' memory (Note [Shared diffs] in "
            "src/poseidon/net_diffs.cpp); the net's inputs and outputs keep "
            "theirs.");
DEFINE_string(sigint_effect, "stop",
              "Optional; action to take when a SIGINT signal is received: "
              "snapshot, stop or none.");
DEFINE_string(sighup_effect, "snapshot",
              "Optional; action to take when a SIGHUP signal is received: "
              "snapshot, stop or none.");
// none by default: mpirun also ends the surviving ranks of a failed job with
// SIGTERM, and they should end at once (Note [SIGTERM as a solver action] in
// src/poseidon/util/signal_handler.cpp).
DEFINE_string(sigterm_effect, "none",
              "Optional; action to take when a SIGTERM signal is received: "
              "snapshot, stop or none. none ends the process at once (exit "
              "status 143); stop finishes the iteration under way on every "
              "rank, snapshots and exits 0: use it under a batch scheduler "
              "that sends SIGTERM at a job's time limit (docs/slurm.md).");

namespace poseidon {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

vector<string> SplitList(const string& s) {
  vector<string> out;
  std::stringstream ss(s);
  string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// GPU mode on the device --gpu names (or, for train, the solver's
// solver_mode: GPU and device_id), with the --deterministic and
// --allow_tf32 switches; CPU mode otherwise. Under mpirun the ranks of a host
// take the listed GPUs in turn (util/device_select.hpp).
// Training on several GPUs in one process: one device worker on each
// (set by SelectDevice for train).
vector<int> g_worker_gpus;

void SelectDevice(const SolverParameter* solver = nullptr) {
  string flag = FLAGS_gpu;
  // As in Caffe, only a solver_mode the file states counts: the field's
  // default (GPU) does not move a solver that never mentions it.
  if (flag.empty() && solver != nullptr && solver->has_solver_mode() &&
      solver->solver_mode() == SolverParameter::GPU) {
#ifdef CPU_ONLY
    LOG(WARNING) << "the solver asks for solver_mode: GPU, but this build "
                 << "has no CUDA; training on the CPU";
    return;
#else
    // Model-zoo solvers state solver_mode: GPU; on a machine without one
    // they train on the CPU, as in a CPU-only build (--gpu still insists).
    if (gpu::DeviceCount() == 0) {
      LOG(WARNING) << "the solver asks for solver_mode: GPU, but no GPU is "
                   << "available (" << gpu::UnavailableReason()
                   << "); training on the CPU";
      return;
    }
    // Caffe's device_id; ranks sharing a host spread over its GPUs unless
    // the solver pins one.
    flag = solver->has_device_id() || LocalRankFromEnvironment().size == 1
               ? std::to_string(solver->device_id())
               : string("all");
#endif
  }
  if (flag.empty()) return;
#ifdef CPU_ONLY
  POSEIDON_THROW(ConfigError, "--gpu=", flag,
                 " given, but Poseidon was built without CUDA (configure "
                 "with -DUSE_CUDA=ON -DUSE_CUDNN=ON)");
#else
  POSEIDON_REQUIRE(gpu::DeviceCount() > 0, ConfigError, "--gpu=", flag,
                   ": no GPU is available: ", gpu::UnavailableReason());
  const vector<int> ids = ParseGpuList(flag, gpu::DeviceCount());
  bool shared = false;
  int id = 0;
  if (solver != nullptr) {  // train: every listed GPU when alone on a host
    g_worker_gpus = GpusForProcess(ids, LocalRankFromEnvironment(), &shared);
    id = g_worker_gpus[0];
    if (g_worker_gpus.size() == 1) g_worker_gpus.clear();
  } else {
    id = GpuForLocalRank(ids, LocalRankFromEnvironment(), &shared);
  }
  LOG_IF(WARNING, shared) << "--gpu=" << flag << " lists fewer GPUs than "
                          << "this host runs ranks: ranks share GPU " << id;
  if (FLAGS_deterministic) gpu::SetDeterministic(true);
  if (FLAGS_allow_tf32) gpu::SetAllowTf32(true);
  Poseidon::set_device(id);
  Poseidon::set_mode(Poseidon::GPU);
  const gpu::DeviceInfo info = gpu::QueryDevice(id);
  LOG(INFO) << "Using GPU " << id << ": " << info.name << " (compute "
            << info.major << "." << info.minor << ", "
            << info.total_memory / (1 << 20) << " MiB; "
            << gpu::LibraryVersions() << "; TF32 "
            << (gpu::GetSettings().allow_tf32 ? "on" : "off")
            << ", deterministic "
            << (gpu::GetSettings().deterministic ? "on" : "off") << ")";
#endif
}

// What the GPU's caching allocator held at its peak (GPU mode only).
void LogGpuMemory() {
  if (Poseidon::mode() != Poseidon::GPU) return;
  const BlockCache::Stats s = gpu::DeviceMemoryStats();
  LOG(INFO) << "GPU memory: peak " << s.peak_in_use / 1048576.0
            << " MiB in use, " << s.peak_reserved / 1048576.0
            << " MiB reserved (" << s.backend_allocations
            << " allocations from the driver, " << s.cache_hits
            << " served from the cache)";
}

void CopyWeights(const string& weights, Net<float>* net) {
  for (const auto& file : SplitList(weights)) {
    LOG(INFO) << "Loading weights from " << file;
    net->CopyTrainedLayersFrom(file);
  }
}

// Nets with `type: "Python"` layers need the `caffe` Python package, which
// registers that layer type when imported. A poseidon_train built with the
// bindings (BUILD_python=ON) starts an interpreter for such nets and imports
// it (from PYTHONPATH or site-packages); the interpreter lives until the
// process exits, and the training thread hands the GIL back so that any
// thread running a Python layer can take it.
bool UsesPythonLayers(const NetParameter& net) {
  for (const LayerParameter& layer : net.layer()) {
    if (layer.type() == "Python") return true;
  }
  return false;
}

void PreparePythonLayers(const vector<NetParameter>& nets) {
  if (LayerRegistry<float>::Has("Python")) return;
  bool needed = false;
  for (const NetParameter& net : nets) needed = needed || UsesPythonLayers(net);
  if (!needed) return;
#ifdef POSEIDON_EMBED_PYTHON
  namespace py = pybind11;
  static py::scoped_interpreter* interpreter = new py::scoped_interpreter();
  (void)interpreter;
  try {
    // An activated virtualenv is not seen by an embedded interpreter by
    // itself: add its site-packages, where `pip install ./python` put caffe.
    if (const char* venv = std::getenv("VIRTUAL_ENV")) {
      py::module_::import("site").attr("addsitedir")(
          py::module_::import("os.path")
              .attr("join")(venv, "lib",
                            py::str("python{}.{}").attr("format")(
                                PY_MAJOR_VERSION, PY_MINOR_VERSION),
                            "site-packages"));
    }
    py::module_::import("caffe");
  } catch (const py::error_already_set& e) {
    POSEIDON_THROW(ConfigError,
                   "the net has Python layers, but the caffe package does "
                   "not import: ", e.what(),
                   " (set PYTHONPATH to <build>/python, or pip install "
                   "./python)");
  }
  static py::gil_scoped_release* release = new py::gil_scoped_release();
  (void)release;
  LOG(INFO) << "Python layers: started an interpreter and imported caffe";
#else
  POSEIDON_THROW(ConfigError,
                 "the net has Python layers, but this poseidon_train was "
                 "built without the Python bindings (configure with "
                 "-DBUILD_python=ON)");
#endif
}

// The nets a solver describes, for PreparePythonLayers.
vector<NetParameter> NetsOfSolver(const SolverParameter& param) {
  vector<NetParameter> nets;
  auto read = [&nets](const string& file) {
    nets.emplace_back();
    ReadNetParamsFromTextFile(file, &nets.back());
  };
  if (param.has_net()) read(param.net());
  if (param.has_train_net()) read(param.train_net());
  for (const string& file : param.test_net()) read(file);
  if (param.has_net_param()) nets.push_back(param.net_param());
  if (param.has_train_net_param()) nets.push_back(param.train_net_param());
  for (const NetParameter& net : param.test_net_param()) nets.push_back(net);
  return nets;
}

NetParameter NetOfModel(const string& model) {
  NetParameter net;
  ReadNetParamsFromTextFile(model, &net);
  return net;
}

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

int Test() {
  POSEIDON_REQUIRE(!FLAGS_model.empty(), ConfigError,
                   "test needs --model=<net.prototxt>");
  POSEIDON_REQUIRE(!FLAGS_weights.empty(), ConfigError,
                   "test needs --weights=<file.caffemodel>");
  SelectDevice();
  vector<string> stages = SplitList(FLAGS_stage);
  PreparePythonLayers({NetOfModel(FLAGS_model)});
  Net<float> net(FLAGS_model, TEST, FLAGS_level, &stages);
  CopyWeights(FLAGS_weights, &net);
  LOG(INFO) << "Running for " << FLAGS_iterations << " iterations.";

  vector<double> scores;
  vector<string> names;
  vector<float> weights;
  double loss = 0;
  for (int i = 0; i < FLAGS_iterations; ++i) {
    float iter_loss = 0;
    const auto& outputs = net.Forward(&iter_loss);
    loss += iter_loss;
    size_t idx = 0;
    for (size_t j = 0; j < outputs.size(); ++j) {
      const string& name = net.blob_names()[net.output_blob_indices()[j]];
      const float w = net.blob_loss_weights()[net.output_blob_indices()[j]];
      for (int k = 0; k < outputs[j]->count(); ++k, ++idx) {
        const float v = outputs[j]->cpu_data()[k];
        if (i == 0) {
          scores.push_back(v);
          names.push_back(name);
          weights.push_back(w);
        } else {
          scores[idx] += v;
        }
        LOG(INFO) << "Batch " << i << ", " << name << " = " << v;
      }
    }
  }
  loss /= FLAGS_iterations;
  LOG(INFO) << "Loss: " << loss;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double mean = scores[i] / FLAGS_iterations;
    std::ostringstream line;
    line << names[i] << " = " << mean;
    if (weights[i] != 0) {
      line << " (* " << weights[i] << " = " << weights[i] * mean
           << " loss)";
    }
    LOG(INFO) << line.str();
  }
  return 0;
}

int Time() {
  POSEIDON_REQUIRE(!FLAGS_model.empty(), ConfigError,
                   "time needs --model=<net.prototxt>");
  POSEIDON_REQUIRE(FLAGS_iterations > 0, ConfigError,
                   "--iterations must be positive");
  SelectDevice();
  Phase phase = TRAIN;
  if (!FLAGS_phase.empty()) {
    POSEIDON_REQUIRE(Phase_Parse(FLAGS_phase, &phase), ConfigError,
                     "--phase must be TRAIN or TEST, got ", FLAGS_phase);
  }
  vector<string> stages = SplitList(FLAGS_stage);
  PreparePythonLayers({NetOfModel(FLAGS_model)});
  Net<float> net(FLAGS_model, phase, FLAGS_level, &stages);
  net.set_share_diffs(FLAGS_share_blob_diffs);

  LOG(INFO) << "Performing Forward";
  float initial_loss = 0;
  net.Forward(&initial_loss);
  LOG(INFO) << "Initial loss: " << initial_loss;
  LOG(INFO) << "Performing Backward";
  net.Backward();

  // GPU work is asynchronous: each layer's time is taken after its kernels
  // have finished (Caffe's `time` waits per layer too).
  auto wait_for_device = [] {
#ifndef CPU_ONLY
    if (Poseidon::mode() == Poseidon::GPU) gpu::Synchronize();
#endif
  };
  wait_for_device();
  const int n = static_cast<int>(net.layers().size());
  vector<double> forward_ms(n, 0), backward_ms(n, 0);
  double forward_total = 0, backward_total = 0;
  const auto total_start = Clock::now();
  LOG(INFO) << "*** Benchmark begins ***";
  LOG(INFO) << "Testing for " << FLAGS_iterations << " iterations.";
  // The Net's own passes, timed layer by layer from its after-layer hooks
  // (a layer's time runs from the end of the one before), so that what is
  // timed is what training runs, folded layers included (Note [BatchNorm +
  // Scale] in net_fold.cpp: a folded Scale's work shows in its BatchNorm).
  Clock::time_point mark;
  auto lap = [&](vector<double>* ms, int i) {
    wait_for_device();
    (*ms)[i] += MsSince(mark);
    mark = Clock::now();
  };
  const auto forward_laps =
      net.add_after_forward([&](int i) { lap(&forward_ms, i); });
  const auto backward_laps =
      net.add_after_backward([&](int i) { lap(&backward_ms, i); });
  for (int it = 0; it < FLAGS_iterations; ++it) {
    const auto iter_start = Clock::now();
    mark = iter_start;
    net.Forward();
    const double fwd = MsSince(iter_start);
    forward_total += fwd;
    const auto back_start = Clock::now();
    mark = back_start;
    net.Backward();
    const double bwd = MsSince(back_start);
    backward_total += bwd;
    LOG(INFO) << "Iteration: " << it + 1
              << " forward-backward time: " << fwd + bwd << " ms.";
  }
  LOG(INFO) << "Average time per layer: ";
  for (int i = 0; i < n; ++i) {
    LOG(INFO) << std::setfill(' ') << std::setw(10) << net.layer_names()[i]
              << "\tforward: " << forward_ms[i] / FLAGS_iterations << " ms.";
    LOG(INFO) << std::setfill(' ') << std::setw(10) << net.layer_names()[i]
              << "\tbackward: " << backward_ms[i] / FLAGS_iterations
              << " ms.";
  }
  if (!FLAGS_profile.empty()) {
    std::ostringstream out;
    out << "# layer forward_ms backward_ms (poseidon_train time, "
        << FLAGS_iterations << " iterations of " << FLAGS_model << ")\n";
    for (int i = 0; i < n; ++i) {
      out << net.layer_names()[i] << " " << forward_ms[i] / FLAGS_iterations
          << " " << backward_ms[i] / FLAGS_iterations << "\n";
    }
    WriteFileAtomically(FLAGS_profile, out.str());
    LOG(INFO) << "Per-layer profile written to " << FLAGS_profile;
  }
  LOG(INFO) << "Average Forward pass: " << forward_total / FLAGS_iterations
            << " ms.";
  LOG(INFO) << "Average Backward pass: " << backward_total / FLAGS_iterations
            << " ms.";
  LOG(INFO) << "Average Forward-Backward: "
            << (forward_total + backward_total) / FLAGS_iterations << " ms.";
  LOG(INFO) << "Total Time: " << MsSince(total_start) << " ms.";
  LOG(INFO) << "*** Benchmark ends ***";
  return 0;
}

int DeviceQuery() {
  LOG(INFO) << "Poseidon " << gflags::VersionString() << "; GPU libraries: "
            << gpu::LibraryVersions();
  LOG(INFO) << "Hardware threads: " << std::thread::hardware_concurrency()
            << "; registered layer types: "
            << LayerRegistry<float>::LayerTypeList().size();
  const int count = gpu::DeviceCount();
  if (count == 0) {
    LOG(INFO) << "No GPU: " << gpu::UnavailableReason();
    POSEIDON_REQUIRE(FLAGS_gpu.empty(), ConfigError, "--gpu=", FLAGS_gpu,
                     ": no GPU is available: ", gpu::UnavailableReason());
    return 0;
  }
  const vector<int> ids = FLAGS_gpu.empty() ? ParseGpuList("all", count)
                                            : ParseGpuList(FLAGS_gpu, count);
  for (int id : ids) {
    const gpu::DeviceInfo d = gpu::QueryDevice(id);
    LOG(INFO) << "Device id:                     " << d.id;
    LOG(INFO) << "Name:                          " << d.name;
    LOG(INFO) << "Compute capability:            " << d.major << "." << d.minor;
    LOG(INFO) << "Total global memory:           " << d.total_memory
              << " bytes (" << d.free_memory << " free)";
    LOG(INFO) << "Multiprocessors:               " << d.multiprocessors;
    LOG(INFO) << "Clock rate:                    " << d.clock_khz << " kHz";
    LOG(INFO) << "Memory clock, bus width:       " << d.memory_clock_khz
              << " kHz, " << d.memory_bus_width << " bits";
    LOG(INFO) << "L2 cache:                      " << d.l2_cache_bytes
              << " bytes";
    LOG(INFO) << "Shared memory, registers/block:" << " "
              << d.shared_memory_per_block << " bytes, "
              << d.registers_per_block;
    LOG(INFO) << "Warp size, max threads/block:  " << d.warp_size << ", "
              << d.max_threads_per_block;
    LOG(INFO) << "ECC:                           " << (d.ecc ? "on" : "off");
    LOG(INFO) << "PCI domain:bus:device:         " << d.pci_domain << ":"
              << d.pci_bus << ":" << d.pci_device;
  }
  return 0;
}

const std::map<string, int (*)()>& Actions() {
  static const std::map<string, int (*)()> actions = {
      {"train", Train},
      {"test", Test},
      {"time", Time},
      {"device_query", DeviceQuery}};
  return actions;
}

}  // namespace
}  // namespace poseidon

int main(int argc, char** argv) {
  FLAGS_alsologtostderr = 1;
  gflags::SetUsageMessage(
      "command line brew\n"
      "usage: poseidon_train <command> <args>\n\n"
      "commands:\n"
      "  train           train or finetune a model\n"
      "  test            score a model\n"
      "  device_query    show build and device information\n"
      "  time            benchmark model execution time");
  gflags::SetVersionString(POSEIDON_VERSION);
  poseidon::GlobalInit(&argc, &argv);
  // One line, not glog's stack trace, when killed (TrainDistributed names
  // the rank once MPI has started).
  poseidon::InstallTerminationMessage("poseidon_train", "stopped by SIGTERM");
  if (!gflags::GetCommandLineFlagInfoOrDie("data_timeout").is_default) {
    if (!(FLAGS_data_timeout > 0)) {
      std::fprintf(stderr, "Error: --data_timeout must be a positive number "
                   "of seconds, got %g\n", FLAGS_data_timeout);
      return 1;
    }
    poseidon::SetDataTimeout(std::chrono::milliseconds(
        static_cast<int64_t>(FLAGS_data_timeout * 1000 + 0.5)));
  }
  // Every wait on a peer has a deadline (docs/reliability.md).
  if (FLAGS_comm_timeout < 1) {
    std::fprintf(stderr, "Error: --comm_timeout must be a positive number of "
                 "seconds, got %d\n", FLAGS_comm_timeout);
    return 1;
  }
  if (argc != 2) {
    gflags::ShowUsageWithFlagsRestrict(argv[0], "tools/poseidon_train");
    return 1;
  }
  const auto& actions = poseidon::Actions();
  auto it = actions.find(argv[1]);
  if (it == actions.end()) {
    std::fprintf(stderr, "Error: unknown action '%s' (use train, test, time "
                 "or device_query)\n", argv[1]);
    return 1;
  }
  // Which float GEMM the CPU path uses (util/sgemm.hpp).
  LOG(INFO) << poseidon::SgemmDescription();
  try {
    return it->second();
  } catch (const poseidon::Error& e) {
    std::fprintf(stderr, "Error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "Error: %s\n", e.what());
    return 1;
  }
}
