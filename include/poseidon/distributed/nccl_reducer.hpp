// NcclReducer: the device level across the GPUs of one process
// (docs/distributed.md, What each rank does: device -> node -> cluster). Device
// worker t computes on devices[t] on its own thread; after a layer's backward
// every worker hands that layer's gradients to NCCL, which sums them into
// worker 0's (ncclReduce, root 0), and before a layer's forward worker 0's
// updated weights go to the others (ncclBroadcast). DeviceWorkers
// (device_workers.hpp) drives it.
//
// Note [NCCL streams]
// Each worker has a dedicated NCCL stream beside its compute stream
// (gpu::Stream()). An operation first makes the NCCL stream wait for the
// work queued on the compute stream so far (an event), so it reads finished
// gradients or weights, and returns without waiting on the host. Who reads
// the result next waits for it on the device: worker 0's compute stream
// waits for each reduce (it scales the sum and hands it to the host and
// cluster levels right after), the other workers' compute streams wait for
// each broadcast (their forward reads the weights). The other side does
// not wait, so a worker's reduce of layer l overlaps its backward of layer
// l - 1; Settle(t) makes worker t's compute stream wait for all of its NCCL
// work, before it overwrites its gradients for the next iteration. Worker
// 0's weights are next written by an update, which its stream orders after
// its reduces, and so after the earlier broadcasts on the same NCCL stream.
//
// Calls: every worker issues the same operations on the same parameters in
// the same order (forward order for broadcasts, backward order for
// reduces), each from its own thread on its own communicator
// (ncclCommInitAll). Abort() (a worker failed) ends the communicators so
// that no device waits forever for a peer.
//
// Without NCCL (a build without CUDA or without NCCL) the constructor
// throws ConfigError saying so; Available() tells beforehand.
#ifndef POSEIDON_DISTRIBUTED_NCCL_REDUCER_HPP_
#define POSEIDON_DISTRIBUTED_NCCL_REDUCER_HPP_

#include <memory>
#include <string>
#include <vector>

#include "poseidon/common.hpp"

namespace poseidon {
namespace dist {

class NcclReducer {
 public:
  // Whether this build has NCCL, and its version ("NCCL 2.27.3").
  static bool Available();
  static std::string Version();

  // One communicator per device (distinct ids; one device is allowed, and
  // its operations leave the buffers as they are).
  explicit NcclReducer(const std::vector<int>& devices);
  ~NcclReducer();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(NcclReducer);

  int size() const;
  int device(int t) const;

  // Called by worker t on its thread (device devices[t]); see Note [NCCL
  // streams]. Reduce sums `count` elements of every worker's `buf` into
  // worker 0's; Broadcast copies worker 0's `buf` into the others'.
  template <typename Dtype>
  void Reduce(int t, Dtype* buf, size_t count);
  template <typename Dtype>
  void Broadcast(int t, Dtype* buf, size_t count);
  // Worker t's compute stream waits for everything t handed to NCCL.
  void Settle(int t);
  // Ends every communicator; later calls throw DistributedError.
  void Abort(const std::string& why);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_NCCL_REDUCER_HPP_
