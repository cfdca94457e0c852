// ParamServer: the parameter-server transport. The learnable parameters are
// cut into blocks by a BlockPartition (block_size bytes, spread over the
// shards). Roles (PsRoles): the workers push and pull, and each shard lives
// on a rank of its own choosing; by default every rank is a worker and
// hosts shard number `rank` (colocated), and a job may instead name server
// ranks that push nothing (dedicated servers, Note [Roles]). For each block
// a worker pushes its gradient to the owning shard; the shard waits for the
// push of every worker for that iteration, adds them in the workers' order,
//   sum = (((g_w0 + g_w1) + g_w2) + ...),
// and sends the same sum back to every worker, so all replicas stay
// bit-identical whatever the arrival order. With an update function (the
// servers own the model, Note [Server-side update] in shard_state.hpp) the
// shard turns the sum into the block's new parameters before sending, and
// the ranks pull parameters; without one it sends the sum and every worker
// applies the update rule itself.
//
// Threads (each a CommThread, see comm_thread.hpp):
//   push i  (push_threads) sends the blocks at positions j with
//           j % push_threads == i of this rank's order of each exchange, a
//           window of them at a time (Windows): every push of a window in
//           flight at once (Communicator::SendAll), up to bytes_in_flight
//           bytes, each a header and the block's elements sent from the
//           caller's memory; the exchanges of one iteration posted while
//           the thread was busy share windows (Note [Windows across
//           exchanges] in param_server_worker.cpp);
//   pull i  (pull_threads) receives the sums of the blocks at positions j
//           with j % pull_threads == i, in that order, a window at a time
//           (RecvAll), the elements straight into the caller's memory;
//   server  takes this shard's blocks' pushes, in order, sums them and
//           applies the update function, if any;
//   server send
//           sends each sum to every worker, while `server` sums the next
//           block (Note [Server pipeline] in param_server.cpp).
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
// or block than it expects names both; every message's header is checked
// (DecodeBlockHeader, wire.hpp) before its payload is used: a sum whose
// header is wrong fails the exchange, and the elements it left in the
// caller's memory are never applied.
#ifndef POSEIDON_DISTRIBUTED_PARAM_SERVER_HPP_
#define POSEIDON_DISTRIBUTED_PARAM_SERVER_HPP_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/comm_thread.hpp"
#include "poseidon/distributed/communicator.hpp"
#include "poseidon/distributed/stale_shard.hpp"
#include "poseidon/distributed/tags.hpp"
#include "poseidon/distributed/wire.hpp"

namespace poseidon {
class Timeline;
}

namespace poseidon {
namespace dist {

// Note [Roles]
// Which ranks push and pull (workers) and which rank hosts each shard
// (servers). A rank may be both (colocated, the default: the lists empty
// stand for workers 0..n-1 and shard s on rank s), a worker only, or a
// server only: a dedicated server posts no exchange of its own but serves
// each one the workers post (ParamServer::Serve), with the block ids in the
// order they posted them. A shard adds its workers' pushes in the order of
// `workers`, so the sum's bits depend on that list, not on arrival.
// (PsRoles itself is in block_partition.hpp.)

struct ParamServerOptions {
  PsRoles roles;         // empty lists: colocated (Note [Roles])
  int push_threads = 1;  // >= 1
  int pull_threads = 1;  // >= 1
  // Message bytes each push and each pull thread keeps in flight at once: a
  // window holds consecutive blocks of the thread's order up to this many
  // bytes, and at least one block whatever its size. It costs no memory
  // (messages stay in the caller's memory); it bounds how many operations
  // wait on the communicator at once.
  size_t bytes_in_flight = size_t{64} << 20;
  // How shards answer pulls. BSP (the default): the sum of every worker's
  // push, served within each exchange (Exchange, Serve). SSP and ASYNC:
  // each push applied on arrival by a free-running StaleShard (ServeStale;
  // Note [Stale-synchronous serving] in stale_shard.hpp), which needs the
  // update function; Exchange then only pushes and pulls.
  Consistency consistency = Consistency::kBsp;
  int staleness = 0;  // SSP's bound
  // Blocks a shard takes pushes of at once under BSP (>= 1): its blocks of
  // an exchange are dealt to this many lanes, each a thread that takes a
  // block's pushes and sums them and a thread that sends the sums back
  // (Note [Server lanes] in param_server.cpp). Each lane keeps a buffer for
  // a block's pushes from up to every worker.
  int server_lanes = 4;
  // The shard holds each block after its update function instead of
  // sending it back: the parameters go out later, by SendHeld (BSP only;
  // Note [Clipping on the servers] in server_clip.hpp).
  bool hold_updates = false;
};

// DecodeBlockHeader (wire.hpp) of a push or sum of `bytes` bytes that rank
// comm.rank() received from `peer`, for block `block` of `iter`, under
// `servers` (the rank of each shard): a Status naming this rank instead of
// an exception (the communication threads do not throw).
Status CheckBlockHeader(const Communicator& comm,
                        const BlockPartition& partition,
                        const std::vector<int>& servers, size_t dtype_bytes,
                        BlockMessageKind kind, int peer, int64_t iter,
                        int block, const BlockHeader& header, size_t bytes);

template <typename Dtype>
class ParamServer {
 public:
  // A block of the partition and where its elements live in the caller's
  // gradient buffer (partition.blocks()[id].count elements).
  struct BlockRef {
    int id = 0;
    Dtype* data = nullptr;
  };

  // What the shard does with a block's sum before sending it back: called
  // on the thread of the block's lane (so for different blocks at once;
  // Note [Server lanes]) with the sum of iteration `iter`'s pushes of
  // `block` (partition.blocks()[block].count elements), which it may
  // replace in place (ShardState::Apply).
  using Update = std::function<void(int64_t iter, int block, Dtype* values)>;

  // `comm` and `partition` are observed and must outlive the server; the
  // partition must be the same on every rank and have one shard per server
  // rank (options.roles.servers, or comm->size() when colocated). Throws
  // ConfigError for options out of range or roles that are not ranks of
  // `comm` or repeat one. `timeline` (may be null)
  // receives one event per window pushed or pulled and per block summed and
  // sent back, on the lanes "push i", "pull i", "server i" and "server
  // send i".
  // `update` may be empty (the sums go back as they are).
  ParamServer(Communicator* comm, const BlockPartition* partition,
              const ParamServerOptions& options,
              Timeline* timeline = nullptr, Update update = {});
  // Finishes the exchanges already posted, then stops the threads.
  ~ParamServer();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(ParamServer);

  // On a worker: pushes the blocks (summing iteration `iter`'s gradients),
  // and writes the sums over all workers (or what the update made of them)
  // back into the same memory. `done` runs once, on a communication thread,
  // when every sum is in place or on the first error. Every worker must
  // post the same block ids in the same order; the memory must stay valid
  // and untouched by others until `done`. A worker that also hosts a shard
  // serves that shard's blocks of the exchange too.
  void Exchange(int64_t iter, std::vector<BlockRef> blocks,
                std::function<void(Status)> done);

  // With options.hold_updates, on the rank hosting block `block`'s shard:
  // sends `params` (the block's elements, which must stay valid and
  // unchanged until the send ends) to every worker as the block's answer of
  // iteration `iter`, on the block's lane's sending thread. A failed send
  // aborts the job, as a failed shard does.
  void SendHeld(int64_t iter, int block, const Dtype* params);

  // On a dedicated server (a rank that is not a worker): serves this rank's
  // shard's blocks among `blocks`, the ids of an exchange the workers post
  // (all of it, in their order): takes the workers' pushes, sums them,
  // applies the update and sends the result to every worker. `done` runs
  // once, on a lane's thread (before Serve returns when the shard has none
  // of the blocks), when every such block has been summed and handed to
  // its lane's sending thread, or on the first error (which also aborts
  // the job, as a failed shard does on a worker).
  void Serve(int64_t iter, std::vector<int> blocks,
             std::function<void(Status)> done);

  // On a rank hosting a shard, under SSP or ASYNC (options.consistency):
  // serves the shard's blocks from iteration `first_iter` on, each
  // iteration posting the exchanges of `schedule` (block ids, every
  // exchange as the workers post it), on threads of its own (StaleShard)
  // while this rank's worker, if any, goes on with Exchange, until every
  // worker has called EndStale. `done` runs once then, or on the first
  // failure (which aborts the job). Throws ConfigError without an update
  // function. The next call, or the destructor, waits for the previous
  // serving to end.
  void ServeStale(const std::vector<std::vector<int>>& schedule,
                  int64_t first_iter, std::function<void(Status)> done);
  // On a worker under SSP or ASYNC, once every exchange it posted has
  // finished and it has pushed every iteration before `end`: ends its part
  // in the serving of `schedule` on every shard (StaleShard::SendEnd).
  Status EndStale(const std::vector<std::vector<int>>& schedule, int64_t end);

  // This rank's roles.
  bool is_worker() const { return worker_index_ >= 0; }
  int shard() const { return shard_; }  // -1: this rank hosts none

  // The order in which worker number `worker` (its place in the roles'
  // workers; its rank when colocated) pushes and pulls `blocks` (one
  // exchange's, as posted): by round, a block's place among the blocks of
  // its shard in `blocks`, and within a round starting at shard `worker`
  // (mod the number of shards) and going up, so that at any time the
  // workers push to, and pull from, different shards. See Note [Server
  // pipeline].
  static std::vector<BlockRef> StaggeredOrder(
      const BlockPartition& partition, const std::vector<BlockRef>& blocks,
      int worker);

  // Bytes this rank has sent to and received from other ranks, pushes and
  // pulls together with its shard's traffic (headers included).
  uint64_t bytes_moved() const;
  // The part of bytes_moved() that was block `block`'s.
  uint64_t block_bytes(int block) const;

 private:
  struct Pending;
  // Sends the pushes of `blocks` (in order) through a sliding window of
  // bytes_in_flight bytes (Communicator::SendWindowed), calling
  // progress(k) once the first k are done; the first failure, naming the
  // blocks and shards not yet done.
  Status Push(int64_t iter, const std::vector<BlockRef>& blocks, int thread,
              const std::function<void(size_t)>& progress);
  // Receives the sums of `blocks` the same way, into the blocks' memory,
  // each header checked before its block counts as done.
  Status Pull(int64_t iter, const std::vector<BlockRef>& blocks, int thread,
              const std::function<void(size_t)>& progress);
  // An exchange queued for a push or pull thread, and each thread's queue
  // (Note [Windows across exchanges]).
  struct Queued;
  struct Feed;
  // Queues an exchange's blocks (its staggered order) for push or pull
  // thread `thread`, and posts the thread a turn.
  void Enqueue(bool push, int thread, int64_t iter,
               std::shared_ptr<const std::vector<BlockRef>> order,
               std::shared_ptr<Pending> pending);
  // A thread's turn: takes the exchanges of one iteration queued for it
  // and runs their blocks' windows, reporting each exchange once its
  // blocks are done, or the failure.
  void RunQueued(bool push, int thread);
  // Runs Push or Pull over `mine` (blocks in order, through a sliding
  // window), with a timeline event for the run; progress(blocks done so far) as
  // they complete. The first failure.
  Status RunBlocks(bool push, int thread, int64_t iter,
                   const std::vector<BlockRef>& mine,
                   const std::function<void(size_t)>& progress);
  // The blocks of `blocks` from `from` on that a window holds (WindowEnd
  // over bytes_in_flight, keyed by shard and tag; Note [Sliding windows]),
  // for messages: the blocks in flight when a run stops there.
  std::vector<BlockRef> WindowAt(const std::vector<BlockRef>& blocks,
                                 size_t from) const;
  // "push of block 3 (iteration 5) to the shard of rank 1", or of several
  // blocks, for messages.
  std::string Describe(bool push, int64_t iter,
                       const std::vector<BlockRef>& window) const;
  // Adds a window's messages to or from other ranks to the byte counters.
  void CountTraffic(const std::vector<BlockRef>& window);
  // Deals the serving of `mine` (this shard's blocks of an exchange, in
  // order) to the lanes; `done` (may be empty) as Serve's, once every lane
  // has served its part.
  void PostServe(int64_t iter, std::vector<int> mine,
                 std::function<void(Status)> done);
  struct Lane;
  // On `lane`'s take thread: takes block `block`'s pushes and sums them
  // into a free sum buffer of the lane, then hands it to the lane's send
  // thread.
  Status ServeBlock(int64_t iter, int block, Lane* lane);
  // The rank that hosts the shard of block `block`.
  int ServerOf(int block) const {
    return servers_[partition_->blocks()[block].shard];
  }
  // Sends the sum in `lane`'s `slot` to every worker; frees the slot.
  void SendSum(int64_t iter, int block, Lane* lane, int slot);
  // On `lane`'s send thread: block `block`'s answer of `iter` (a message
  // of `first_bytes` at `first`, then `second_bytes` at `second`) to every
  // worker, counted and recorded on the lane's timeline (SendSum's and
  // SendHeld's common part); the failure, if any.
  Status SendToWorkers(int64_t iter, int block, Lane* lane, const void* first,
                       size_t first_bytes, const void* second,
                       size_t second_bytes);
  // Aborts the job naming this shard, what it was sending and the failure.
  void AbortSending(const char* what, int64_t iter, int block,
                    const Status& s);
  // DecodeBlockHeader of a push or sum of `bytes` bytes received from
  // `peer`, as a Status naming this rank too (the communication threads do
  // not throw).
  Status Decode(BlockMessageKind kind, int peer, int64_t iter, int block,
                const BlockHeader& header, size_t bytes) const;

  Communicator* comm_;
  const BlockPartition* partition_;
  const ParamServerOptions options_;
  Timeline* timeline_;
  const Update update_;
  std::vector<int> workers_;  // resolved roles (Note [Roles])
  std::vector<int> servers_;
  int worker_index_ = -1;  // this rank's place in workers_, or -1
  int shard_ = -1;         // the shard this rank hosts, or -1
  std::vector<std::unique_ptr<CommThread>> push_;
  std::vector<std::unique_ptr<CommThread>> pull_;
  std::vector<std::unique_ptr<Feed>> push_feeds_;  // one per push thread
  std::vector<std::unique_ptr<Feed>> pull_feeds_;  // one per pull thread
  // POSEIDON_PS_WINDOWS=exchange: windows end with each exchange, as
  // before they spanned exchanges (for side-by-side benchmarks).
  bool windows_per_exchange_ = false;
  struct Counters;
  std::unique_ptr<Counters> counters_;
  struct OwnWindows;  // Note [Own worker's windows]
  std::unique_ptr<OwnWindows> own_windows_;
  struct SumSlots;
  std::vector<std::unique_ptr<Lane>> lanes_;  // Note [Server lanes]
  std::vector<int> lane_of_;  // per block id: its lane, on a shard's rank
  // Per block id: the header of its held answer (SendHeld), alive while
  // the send is in flight.
  std::vector<BlockHeader> held_headers_;
  std::unique_ptr<StaleShard<Dtype>> stale_;  // ServeStale's
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_PARAM_SERVER_HPP_
