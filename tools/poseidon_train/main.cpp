// poseidon_train: the command-line trainer, with Caffe's actions and flags.
//   poseidon_train train --solver=solver.prototxt [--snapshot=S | --weights=W]
//   poseidon_train test  --model=net.prototxt --weights=W [--iterations=50]
//   poseidon_train time  --model=net.prototxt [--iterations=50]
//   poseidon_train device_query
// User mistakes end with "Error: ..." on stderr and exit status 1.
// This file: the flags, the table of actions and main(); the actions are in
// train.cpp, test_time.cpp and devices.cpp (poseidon_train.hpp).
#include <gflags/gflags.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <sstream>

#include "poseidon/common.hpp"
#include "poseidon/layers/base_data_layer.hpp"
#include "poseidon/util/sgemm.hpp"
#include "poseidon/util/signal_handler.hpp"
#include "poseidon/version.hpp"
#include "poseidon_train.hpp"


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
namespace train_tool {

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

namespace {

const std::map<string, int (*)()>& Actions() {
  static const std::map<string, int (*)()> actions = {
      {"train", Train},
      {"test", Test},
      {"time", Time},
      {"device_query", DeviceQuery}};
  return actions;
}

}  // namespace
}  // namespace train_tool
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
  const auto& actions = poseidon::train_tool::Actions();
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
