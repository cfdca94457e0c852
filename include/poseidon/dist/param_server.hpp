// ParamServer: the parameter-server transport. Every rank hosts one server
// shard; the learnable parameters are cut into blocks by a BlockPartition
// (block_size bytes, spread over the shards). For each block a worker pushes
// its gradient to the owning shard; the shard waits for the push of every
// rank for that iteration, adds them in rank order,
//   sum = (((g_0 + g_1) + g_2) + ...) + g_{n-1},
// and sends the same sum back to every rank, so all replicas stay
// bit-identical whatever the arrival order. (The shard keeps no weights:
// every worker applies the update rule to the summed gradient itself, which
// is what makes N workers with batch K match one with batch N K.)
//
// Threads (each a CommThread, see comm_thread.hpp):
//   push i  (num_push_threads) sends blocks j with j % num_push == i of each
//           exchange, in order;
//   pull i  (num_pull_threads) receives the sums of blocks j with
//           j % num_pull == i, in order, into the caller's memory;
//   server  serves this shard's blocks of each exchange, in order.
// Every rank posts exchanges in the same order, so each thread's sequence of
// messages is the same everywhere and matching by (source, tag) is exact.
// Waits form no cycle: every thread handles blocks in the same global order
// and a shard only sends a block's sum after receiving all its pushes.
//
// Errors: a failed push or pull reaches the exchange's `done` callback; a
// failed shard cannot serve any rank, so it aborts the job (comm->Abort)
// with a message naming the shard, the block and the peer. Pushes carry
// (iteration, block) so a shard that receives a push of another iteration
// or block than it expects names both; every message is checked by
// DecodeBlockMessage (wire.hpp) before its payload is used.
#ifndef POSEIDON_DIST_PARAM_SERVER_HPP_
#define POSEIDON_DIST_PARAM_SERVER_HPP_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "poseidon/dist/block_partition.hpp"
#include "poseidon/dist/comm_thread.hpp"
#include "poseidon/dist/communicator.hpp"
#include "poseidon/dist/tags.hpp"
#include "poseidon/dist/wire.hpp"

namespace poseidon {
class Timeline;
}

namespace poseidon {
namespace dist {

template <typename Dtype>
class ParamServer {
 public:
  // A block of the partition and where its elements live in the caller's
  // gradient buffer (partition.blocks()[id].count elements).
  struct BlockRef {
    int id = 0;
    Dtype* data = nullptr;
  };

  // `comm` and `partition` are observed and must outlive the server; the
  // partition must have comm->size() shards and be the same on every rank.
  // `timeline` (may be null) receives one event per block pushed, pulled
  // and served, on the lanes "push i", "pull i" and "server".
  ParamServer(Communicator* comm, const BlockPartition* partition,
              int num_push_threads, int num_pull_threads,
              Timeline* timeline = nullptr);
  // Finishes the exchanges already posted, then stops the threads.
  ~ParamServer();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(ParamServer);

  // Pushes the blocks (summing iteration `iter`'s gradients), and writes the
  // sums over all ranks back into the same memory. `done` runs once, on a
  // communication thread, when every sum is in place or on the first error.
  // Every rank must post the same block ids in the same order; the memory
  // must stay valid and untouched by others until `done`.
  void Exchange(int64_t iter, std::vector<BlockRef> blocks,
                std::function<void(Status)> done);

  // Bytes this rank has sent to and received from other ranks, pushes and
  // pulls together with its shard's traffic (headers included).
  uint64_t bytes_moved() const;
  // The part of bytes_moved() that was block `block`'s.
  uint64_t block_bytes(int block) const;

 private:
  struct Pending;
  void Push(int64_t iter, const BlockRef& block, Status* status);
  void Pull(int64_t iter, const BlockRef& block, Status* status);
  Status Serve(int64_t iter, int block);
  // DecodeBlockMessage of a push or sum received from `peer`, as a Status
  // naming this rank too (the communication threads do not throw).
  Status Decode(BlockMessageKind kind, int peer, int64_t iter, int block,
                const char* msg, size_t bytes) const;

  Communicator* comm_;
  const BlockPartition* partition_;
  Timeline* timeline_;
  std::vector<std::unique_ptr<CommThread>> push_;
  std::vector<std::unique_ptr<CommThread>> pull_;
  std::unique_ptr<CommThread> server_;
  struct Counters;
  std::unique_ptr<Counters> counters_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DIST_PARAM_SERVER_HPP_
