// SharedAllreduce: the ALLREDUCE transport of ranks that all run on one host
// (Communicator::OnOneHost). Gradients meet in memory every rank maps
// (Communicator::MapSharedMemory) instead of travelling in messages: each
// rank copies its gradient into its own slot and raises a flag, and each
// rank sums every rank's slot itself, in rank order, so every rank gets the
// same bits. No communication thread and no MPI call take part. See Note
// [Shared memory allreduce] in the .cpp for the protocol.
//
// Usage, per exchanged group g and iteration j, on every rank:
//
//   Dtype* mine = all->Slot(g, j);  // may wait until the slot is free
//   ... copy this rank's gradient of g into mine ...
//   all->Publish(g, j);
//   ... later (any number of other groups' calls in between) ...
//   all->Wait(g, j);                // every rank published j
//   all->Sum(g, j, offset, count, scale, out);  // any parts, any times
//   all->Release(g, j);             // this rank is done reading j
//
// Iterations of a group must be published in increasing order (they need
// not be consecutive: a restored solver starts anywhere) and released in the
// order published. Up to `slots` published iterations of a group may be
// unreleased on some rank before Slot waits.
//
// Errors: a wait that lasts longer than the communicator's timeout throws
// DistributedError naming the group and the ranks that are behind.
//
// Thread safety: one thread per rank (the training thread) makes all calls.
// The ranks synchronise through std::atomic flags in the shared memory.
#ifndef POSEIDON_DISTRIBUTED_SHARED_ALLREDUCE_HPP_
#define POSEIDON_DISTRIBUTED_SHARED_ALLREDUCE_HPP_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/distributed/communicator.hpp"

namespace poseidon {
namespace dist {

template <typename Dtype>
class SharedAllreduce {
 public:
  struct Group {
    std::string name;  // for messages: the layer
    size_t count = 0;  // elements
  };

  // Collective: maps the memory for `groups`, each with `slots` >= 1
  // slots. Returns nullptr on every rank when the ranks cannot share memory
  // (not on one host, or the memory could not be had; see MapSharedMemory).
  static std::unique_ptr<SharedAllreduce> Create(Communicator* comm,
                                                 std::vector<Group> groups,
                                                 int slots);
  ~SharedAllreduce();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(SharedAllreduce);

  // This rank's slot for iteration `iter` of group g, groups[g].count
  // elements; first waits until every rank has released the iteration the
  // slot held before (iter - slots), if this rank published it.
  Dtype* Slot(int g, int64_t iter);
  // Tells the other ranks that this rank's slot for `iter` is written.
  void Publish(int g, int64_t iter);
  // Whether every rank has published `iter` of g (never waits).
  bool Ready(int g, int64_t iter) const;
  // Waits until Ready(g, iter).
  void Wait(int g, int64_t iter);
  // out[i] <- (x_0[offset + i] + x_1[offset + i] + ... ) * scale over the
  // ranks' slots of `iter`, added in rank order. Call after Wait.
  void Sum(int g, int64_t iter, size_t offset, size_t count, Dtype scale,
           Dtype* out) const;
  // Tells the other ranks that this rank no longer reads `iter` of g.
  void Release(int g, int64_t iter);

 private:
  SharedAllreduce(Communicator* comm, std::vector<Group> groups, int slots,
                  std::vector<size_t> offsets,
                  std::unique_ptr<SharedMemory> memory);
  char* Line(int g, int rank) const;
  Dtype* RankSlot(int g, int rank, int64_t iter) const;
  // Waits until every rank's flag (published or released) for g reaches
  // iter; throws DistributedError after the timeout.
  void WaitForFlag(int g, int64_t iter, bool published) const;

  Communicator* comm_;
  std::vector<Group> groups_;
  int slots_;
  std::vector<size_t> offsets_;      // of each group in a rank's part
  std::vector<int64_t> first_iter_;  // each group's first Slot, or -1
  std::unique_ptr<SharedMemory> memory_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_SHARED_ALLREDUCE_HPP_
