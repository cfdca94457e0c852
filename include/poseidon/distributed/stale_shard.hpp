// StaleShard: a parameter-server shard that serves stale-synchronous (SSP)
// or asynchronous training. The servers own the model (Note [Server-side
// update] in shard_state.hpp): a worker pushes its own gradient of each
// block, the shard applies it to the block's parameters on arrival, and
// the worker pulls the block's parameters back, as soon as the consistency
// model lets it.
//
// Note [Stale-synchronous serving]
// Under bulk-synchronous serving (ParamServer's own shard) a block's
// parameters go back only when every worker's push of the iteration has
// come, summed in worker order. Here each push is a step of its own, in
// arrival order: the update function gets one worker's gradient (which
// ShardState::Apply divides by the number of workers W, so W pushes step
// the block as far as one BSP sum does). Per held block the shard keeps a
// clock for each worker: the number of iterations whose push of that block
// it has applied. Worker w's pull of block b at iteration t is answered
//   SSP(s): once w's own push of (b, t) is applied and every worker has
//           pushed (b, t - s), i.e. min over workers of clock(b) > t - s;
//   ASYNC:  once w's own push of (b, t) is applied, with no other wait;
// with the block's parameters as they are then (every update so far, some
// perhaps of later iterations). So a worker that waits for its pull of t
// before computing t + 1 runs at most s iterations ahead of the slowest
// worker's pushes, and under ASYNC never waits on another worker. SSP(0)
// answers every worker's pull of t once the last push of t is applied;
// unlike BSP, the W steps come in the order of arrival, and an answer may
// already hold a push of t + 1 from a worker that got its answer first
// (SSP promises a floor on what a read holds, not a ceiling).
//   Per worker the shard runs two threads. `push from rank r` takes r's
//   pushes, iteration after iteration, each exchange of the schedule in
//   r's staggered order (ParamServer::StaggeredOrder, the order r pushes
//   them), one message at a time, and applies them; `pull of rank r`
//   sends r's answers in the order r pulls them, each when it is due. So a
//   slow worker's pushes never hold up another's, an answer never waits
//   behind an answer to another worker, and messages between a worker and
//   the shard match in the order both sides use (by source and tag, one
//   push and one answer per block and iteration). A worker pushes all of
//   an iteration's blocks before it needs any of that iteration's answers
//   (it pulls before its next forward), so no wait forms a cycle.
//
// Errors: a failed message or a malformed push aborts the job
// (comm->Abort) naming the shard, the worker, the block and the
// iteration, as a failed BSP shard does; `done` then gets the failure.
//
// Serving has no set length (a Step may end early, on a signal): each
// worker, when it stops, sends every shard an end message in place of its
// next push (SendEnd), and the shard's two threads for that worker end
// once the answers before it are sent.
//
// Threads: 2 W of its own, started by the constructor, ended when every
// worker's end has come and its answers are sent, or on the first failure.
#ifndef POSEIDON_DISTRIBUTED_STALE_SHARD_HPP_
#define POSEIDON_DISTRIBUTED_STALE_SHARD_HPP_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/communicator.hpp"
#include "poseidon/proto/caffe.pb.h"

namespace poseidon {
namespace dist {

// How the parameter server's shards answer pulls (Note [Stale-synchronous
// serving]).
enum class Consistency { kBsp, kSsp, kAsync };

// "BSP", "SSP(2)", "ASYNC".
std::string ConsistencyName(Consistency c, int staleness);
Consistency ConsistencyFromProto(DistributedParameter::Consistency c);

template <typename Dtype>
class StaleShard {
 public:
  // Called with one worker's gradient of `block` at iteration `iter`
  // (partition.blocks()[block].count elements), which it replaces with the
  // block's parameters after the step (ShardState::Apply).
  using Update = std::function<void(int64_t iter, int block, Dtype* values)>;
  // Bytes moved to or from another rank, for the traffic counters.
  using Count = std::function<void(int block, size_t bytes)>;

  struct Options {
    Consistency consistency = Consistency::kSsp;
    int staleness = 0;  // SSP's bound s >= 0
    // The first iteration served; each iteration posts the exchanges of
    // the schedule, until each worker's end (SendEnd).
    int64_t first_iter = 0;
  };

  // Serves shard `shard` (on this rank: servers[shard] == comm->rank()) of
  // `partition` to the ranks `workers` (in their order), for each iteration
  // the exchanges of `schedule` (block ids, each exchange as the workers
  // post it), until every worker has sent its end (SendEnd). `update` must
  // not be empty; `count` may be. `done` runs once, on one of the shard's
  // threads, when every worker is served to its end or on the first
  // failure. comm, partition and the callbacks must outlive this.
  StaleShard(Communicator* comm, const BlockPartition* partition,
             std::vector<int> workers, std::vector<int> servers, int shard,
             const std::vector<std::vector<int>>& schedule,
             const Options& options, Update update, Count count,
             std::function<void(Status)> done);
  // Waits for the threads: everything served, or stopped by a failure.
  ~StaleShard();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(StaleShard);

  // Per shard, its blocks among `schedule`'s in the order worker number
  // `worker` pushes and pulls them in one iteration.
  static std::vector<std::vector<int>> Orders(
      const BlockPartition& partition,
      const std::vector<std::vector<int>>& schedule, int worker);

  // On worker number `worker` (rank workers[worker] of `comm`), which
  // has pushed every iteration before `end` and will push no more: tells
  // each shard that holds blocks of `schedule`, with a message in place of
  // its push of iteration `end`'s first block (a header whose iteration is
  // -1 - end). The first failure, naming the shard.
  static Status SendEnd(Communicator* comm, const BlockPartition& partition,
                        const std::vector<int>& servers,
                        const std::vector<std::vector<int>>& schedule,
                        int worker, int64_t end);

 private:
  struct Block;
  // The loops of the two threads of worker number `w`.
  void TakePushes(int w);
  void Answer(int w);
  bool Due(const Block& b, int w, int64_t iter) const;
  void EndWorker(int w, int64_t end);
  void Fail(const Status& s);
  void Finished(const Status& s);

  Communicator* const comm_;
  const BlockPartition* const partition_;
  const std::vector<int> workers_;
  const std::vector<int> servers_;
  const int shard_;
  const Options options_;
  const Update update_;
  const Count count_;
  std::function<void(Status)> done_;
  // Per worker: this shard's blocks of one iteration in the order that
  // worker pushes and pulls them (exchange after exchange).
  std::vector<std::vector<int>> order_;
  std::vector<std::unique_ptr<Block>> blocks_;  // by block id; null: not held
  std::mutex mu_;
  // Per worker: the iteration it ended before (SendEnd), or -1 while it
  // trains; set by its push thread, which then wakes every block's waiters.
  std::unique_ptr<std::atomic<int64_t>[]> ends_;
  Status first_error_;  // GUARDED_BY(mu_)
  int running_ = 0;     // GUARDED_BY(mu_): threads not finished
  std::vector<std::thread> threads_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_STALE_SHARD_HPP_
