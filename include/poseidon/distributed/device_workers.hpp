// DeviceWorkers: the device level of the three-level hierarchy
// (docs/distributed.md): inside one process, T workers each run a replica of
// the train net on their own slice of the data, and their gradients are summed
// locally before the process talks to the cluster. Worker 0 is the solver's own
// net on the calling (training) thread; workers 1..T-1 are threads started
// here, one per CPU worker, or one per GPU.
//
// The replicas alias the solver net's weights (Blob::ShareData), so there is
// nothing to broadcast after an update; each keeps its own activations and
// diffs. Per layer l with parameters, in iteration j:
//   worker forward(l)    waits until the solver's net has passed
//                        before_forward(l) in iteration j (where the
//                        distributed synchroniser applies l's update);
//   solver backward(l)   after the last iter_size pass, waits for every
//                        worker's backward(l), then sets
//                        diff = (diff_0 + diff_1 + ... + diff_{T-1}) / T,
//                        added in worker order (deterministic);
// so T workers with batch K match one with batch T K up to float rounding,
// and the synchroniser (which must be attached after this object) sees the
// node's summed gradient in its own after_backward hook.
//
// Data: worker t of this process reads shard (rank * T + t) of (W * T) of
// every Data layer (Poseidon::DataShard); batch_size is per worker, as in
// Caffe's multi-GPU training. Parameters with lr_mult 0 (BatchNorm's
// statistics) are copied, not shared, as they are written in forward.
// The displayed loss is worker 0's.
//
// Several GPUs (`gpus` of two or more devices, worker t on gpus[t]): the
// replicas cannot alias weights on another device, so each keeps its own
// copy; the local reduce and the weights' way back run through NCCL
// (nccl_reducer.hpp, Note [NCCL streams]): after a layer's backward every
// worker hands its gradients to an ncclReduce into worker 0's (which then
// scales by 1 / T), and before a layer's forward worker 0's weights reach
// the others by ncclBroadcast. The sum is NCCL's, not added in worker
// order; the replicas' weights are worker 0's bits.
//
// Threads: T - 1 worker threads, each owning its replica; they touch the
// solver net's weights only to read them between the waits above, and their
// own diffs, which the training thread reads only after they signal.
// Errors on a worker thread are rethrown on the training thread where it
// next waits for that worker.
#ifndef POSEIDON_DISTRIBUTED_DEVICE_WORKERS_HPP_
#define POSEIDON_DISTRIBUTED_DEVICE_WORKERS_HPP_

#include <memory>
#include <vector>

#include "poseidon/solver.hpp"

namespace poseidon {
namespace dist {

template <typename Dtype>
class DeviceWorkers {
 public:
  // Starts threads-1 workers for `solver` (observed; must outlive this).
  // `rank`/`ranks` place this process in the job for the data shards.
  // `gpus`: empty, or one device per worker (then threads == gpus.size(),
  // GPU mode, and the calling thread on gpus[0]). Throws ConfigError for
  // threads < 1 and for GPUs without NCCL.
  DeviceWorkers(Solver<Dtype>* solver, int threads, int rank = 0,
                int ranks = 1, std::vector<int> gpus = {});
  // Stops the workers after their current iteration.
  ~DeviceWorkers();
  DeviceWorkers(const DeviceWorkers&) = delete;
  DeviceWorkers& operator=(const DeviceWorkers&) = delete;

  int size() const;
  // The replicas of workers 1..T-1 (worker 0's net is the solver's), for
  // the synchroniser's sufficient factors, which need every worker's
  // activations. Valid while this object lives.
  vector<Net<Dtype>*> replicas() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_DEVICE_WORKERS_HPP_
