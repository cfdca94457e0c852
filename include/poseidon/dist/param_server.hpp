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
//   push i  (num_push_threads) sends the blocks at positions j with
//           j % num_push == i of this rank's order of each exchange;
//   pull i  (num_pull_threads) receives the sums of the blocks at positions
//           j with j % num_pull == i, in that order, into the caller's
//           memory;
//   server  takes this shard's blocks' pushes, in order, and sums them;
//   server send
//           sends each sum to every rank, while `server` sums the next block
//           (Note [Server pipeline] in param_server.cpp).
// Every rank posts exchanges in the same order, and every shard takes the
// blocks of an exchange in the order posted; a rank pushes and pulls them in
// a staggered order of rounds (StaggeredOrder), so that the ranks load
// different shards at once. Matching by (source, tag) is exact (one message
// per block and direction between two ranks, the tag naming the block), and
// waits form no cycle (Note [Server pipeline] in param_server.cpp).
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
  // `timeline` (may be null) receives one event per block pushed, pulled,
  // summed and sent back, on the lanes "push i", "pull i", "server" and
  // "server send".
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

  // The order in which `rank` pushes and pulls `blocks` (one exchange's,
  // as posted): by round, a block's place among the blocks of its shard in
  // `blocks`, and within a round starting at the shard `rank` and going up
  // (mod the number of shards), so that at any time the ranks push to, and
  // pull from, different shards. See Note [Server pipeline].
  static std::vector<BlockRef> StaggeredOrder(
      const BlockPartition& partition, const std::vector<BlockRef>& blocks,
      int rank);

  // Bytes this rank has sent to and received from other ranks, pushes and
  // pulls together with its shard's traffic (headers included).
  uint64_t bytes_moved() const;
  // The part of bytes_moved() that was block `block`'s.
  uint64_t block_bytes(int block) const;

 private:
  struct Pending;
  void Push(int64_t iter, const BlockRef& block, Status* status);
  void Pull(int64_t iter, const BlockRef& block, Status* status);
  // Takes block `block`'s pushes and sums them into a free sum buffer,
  // then hands it to the server send thread.
  Status Serve(int64_t iter, int block);
  // Sends the sum in `slot` to every rank; frees the slot.
  void SendSum(int64_t iter, int block, int slot);
  // DecodeBlockMessage of a push or sum received from `peer`, as a Status
  // naming this rank too (the communication threads do not throw).
  Status Decode(BlockMessageKind kind, int peer, int64_t iter, int block,
                const char* msg, size_t bytes) const;

  Communicator* comm_;
  const BlockPartition* partition_;
  Timeline* timeline_;
  std::vector<std::unique_ptr<CommThread>> push_;
  std::vector<std::unique_ptr<CommThread>> pull_;
  struct Counters;
  std::unique_ptr<Counters> counters_;
  struct SumSlots;
  std::unique_ptr<SumSlots> sums_;  // shared by server_ and server_send_
  std::unique_ptr<CommThread> server_send_;
  std::unique_ptr<CommThread> server_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DIST_PARAM_SERVER_HPP_
