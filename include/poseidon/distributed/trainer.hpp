// Trainer: everything one process needs to train, alone or as one rank of a
// distributed job, assembled in one place and in one order for every entry
// point (poseidon_train, the Python bindings):
//
//   1. the data shard: worker t of rank r reads shard r T + t of W T
//      (Poseidon::DataShard), from one database or from partitions;
//   2. the solver, built on that shard;
//   3. optionally emulated compute (benchmarks: --emulate_compute);
//   4. the device workers (T per process, device_workers.hpp);
//   5. the timeline (after a barrier that aligns the ranks' clocks);
//   6. the synchroniser (synchronizer.hpp; with a communicator of more than
//      one rank): gradient exchange, the plan, and the signal agreement
//      (action_agreement.hpp);
//   7. the solver's action function (the tool's signal handler).
// Teardown runs in the reverse order. Finish() logs the measured traffic
// next to the cost model's prediction and writes the timeline.
//
// Thread safety: one thread (the training thread) uses a Trainer.
#ifndef POSEIDON_DISTRIBUTED_TRAINER_HPP_
#define POSEIDON_DISTRIBUTED_TRAINER_HPP_

#include <memory>
#include <string>
#include <vector>

#include "poseidon/distributed/communicator.hpp"
#include "poseidon/distributed/device_workers.hpp"
#include "poseidon/distributed/synchronizer.hpp"
#include "poseidon/solver.hpp"
#include "poseidon/util/emulation.hpp"
#include "poseidon/util/timeline.hpp"

namespace poseidon {
namespace dist {

struct TrainerOptions {
  // The solver's `distributed` block with command-line overrides applied.
  DistributedParameter settings;
  int threads = 1;                // device workers per process
  // One device worker per GPU (threads == gpus.size(), NCCL between them;
  // device_workers.hpp); empty for CPU workers or one GPU.
  std::vector<int> gpus;
  bool partitioned_data = false;  // read <source>_<k> partitions
  // Write a Chrome trace here ("" for none); with several ranks each writes
  // TimelinePathForRank(path, rank, size).
  std::string timeline_path;
  // Benchmarks (--emulate_compute): a file of "layer forward_ms
  // backward_ms" lines, as `poseidon_train time --profile` writes; each
  // layer of the train net then sleeps that long instead of computing
  // (Net::SetEmulatedTimes). "" to compute.
  std::string emulate_compute;
  // With emulate_compute: time dilation (Note [Time dilation] in
  // util/emulation.cpp; the layer times are multiplied by it), and the
  // parameters, gradients and solver history kept in one shared-memory
  // mapping that every rank on the machine shares (Note [Shared emulated
  // parameters] in trainer.cpp).
  double emulate_dilation = 1;
  bool emulate_shared_params = false;
  // Net::set_share_diffs on the training nets (Note [Shared diffs] in
  // net_diffs.cpp); the synchroniser keeps the diffs it sends.
  bool share_blob_diffs = false;
  // This process's own stop/snapshot requests (a signal handler); may be
  // empty.
  ActionCallback action;
  // Dedicated parameter servers (synchronizer.hpp); `comm` then holds the
  // workers only.
  DedicatedServers servers;
};

template <typename Dtype>
class Trainer {
 public:
  // `comm` (observed; may be null when training alone) must outlive the
  // trainer. Throws ConfigError for bad options, DistributedError when the
  // ranks disagree at start-up.
  Trainer(const SolverParameter& param, Communicator* comm,
          TrainerOptions options);
  ~Trainer();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Trainer);

  Solver<Dtype>* solver() const { return solver_.get(); }
  // Null when training alone.
  Synchronizer<Dtype>* synchronizer() const { return sync_.get(); }
  int rank() const { return comm_ ? comm_->rank() : 0; }
  int size() const { return comm_ ? comm_->size() : 1; }

  // Logs the traffic of the iterations since construction (distributed) and
  // writes the timeline, if any.
  void Finish();

  // Detaches the synchroniser and stops the device workers, leaving a
  // solver that trains alone (the Python bindings call it at interpreter
  // exit, before MPI finalises, while scripts may still hold the solver).
  void Detach();

 private:
  Communicator* comm_;
  TrainerOptions options_;
  int start_iter_ = 0;
  // Declared before the solver: it holds the memory the solver's blobs
  // observe with emulate_shared_params.
  std::unique_ptr<emulation::SharedRegion> shared_params_;
  std::unique_ptr<Solver<Dtype>> solver_;
  std::unique_ptr<DeviceWorkers<Dtype>> workers_;
  std::unique_ptr<Timeline> timeline_;
  std::vector<Subscription> timeline_hooks_;  // when training alone
  std::unique_ptr<Synchronizer<Dtype>> sync_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_TRAINER_HPP_
