// The parameter-server transport, the workers' side: the staggered order
// of an exchange's blocks, the push and pull threads' windows, and the
// pushes and pulls themselves (Note [Server pipeline] in param_server.cpp).
#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "param_server_impl.hpp"
#include "poseidon/util/timeline.hpp"

namespace poseidon {
namespace dist {

// Note [Windows across exchanges]
// The synchroniser posts an exchange per layer group, as backward produces
// them (VGG-16: 16 exchanges an iteration). When a push or pull thread
// finished one exchange's windows before it started the next's, the last
// window of each exchange ran alone: the small convolution layers at the
// end of VGG-16's backward went one round trip after another (in one
// timeline the last 13 layers, 59 MB, took 2.5 s where their bytes needed
// 1.7 s, 8 emulated hosts at 1 Gbit/s). So each thread keeps a queue of
// the exchanges posted to it (a Feed); at each turn it takes every queued
// exchange of one iteration, deals itself its blocks of each (positions
// i, i + threads, ... of each exchange's staggered order, exchange after
// exchange) and cuts windows over them all, so a window may hold the end
// of one exchange and the start of the next. An exchange is reported done
// once the windows holding its blocks are. Exchanges of different
// iterations (staleness) never share a window: their headers differ. The
// argument of Note [Server pipeline] holds with (exchange, round) in place
// of the round: every shard takes the exchanges in the order posted, and
// a window holds consecutive blocks of that order. Measured: VGG-16 on 8
// emulated hosts at 1 Gbit/s, wait-free, every layer by PS, 4% shorter
// iterations (docs/distributed.md, "Windows across exchanges").
template <typename Dtype>
std::vector<typename ParamServer<Dtype>::BlockRef>
ParamServer<Dtype>::StaggeredOrder(const BlockPartition& partition,
                                   const std::vector<BlockRef>& blocks,
                                   int worker) {
  // See Note [Server pipeline]: block b's round is how many blocks of its
  // shard come before it in `blocks`; within a round this worker starts at
  // shard `worker` (mod the shards).
  const int n = partition.num_shards();
  std::vector<int> seen(n, 0);
  std::vector<std::pair<std::pair<int, int>, size_t>> keys;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int shard = partition.blocks()[blocks[i].id].shard;
    keys.push_back({{seen[shard]++, ((shard - worker) % n + n) % n}, i});
  }
  std::sort(keys.begin(), keys.end());
  std::vector<BlockRef> order;
  for (const auto& key : keys) order.push_back(blocks[key.second]);
  return order;
}

template <typename Dtype>
void ParamServer<Dtype>::Exchange(int64_t iter, std::vector<BlockRef> blocks,
                                  std::function<void(Status)> done) {
  // Every shard takes its blocks in the order posted; this worker pushes
  // and pulls them in a staggered order. See Note [Server pipeline].
  CHECK(is_worker()) << "ParamServer::Exchange on rank " << comm_->rank()
                     << ", which is not a worker (Serve is for servers)";
  std::vector<int> mine;
  for (const BlockRef& b : blocks) {
    if (ServerOf(b.id) == comm_->rank()) mine.push_back(b.id);
  }
  auto shared = std::make_shared<const std::vector<BlockRef>>(
      StaggeredOrder(*partition_, blocks, worker_index_));
  auto pending = std::make_shared<Pending>();
  pending->done = std::move(done);
  const int num_push = static_cast<int>(push_.size());
  const int num_pull = static_cast<int>(pull_.size());
  pending->parts = num_push + num_pull;

  // This shard's part first: its thread may already hold pushes for it.
  // (Under SSP and ASYNC the shard serves on its own: ServeStale.)
  if (!mine.empty() && options_.consistency == Consistency::kBsp) {
    PostServe(iter, std::move(mine), {});
  }
  for (int t = 0; t < num_push; ++t) {
    Enqueue(/*push=*/true, t, iter, shared, pending);
  }
  for (int t = 0; t < num_pull; ++t) {
    Enqueue(/*push=*/false, t, iter, shared, pending);
  }
}

template <typename Dtype>
void ParamServer<Dtype>::Enqueue(
    bool push, int thread, int64_t iter,
    std::shared_ptr<const std::vector<BlockRef>> order,
    std::shared_ptr<Pending> pending) {
  Feed* feed = (push ? push_feeds_ : pull_feeds_)[thread].get();
  {
    std::lock_guard<std::mutex> lock(feed->mu);
    feed->queue.push_back({iter, std::move(order), std::move(pending)});
  }
  // One turn per exchange: a turn finds the queue empty when an earlier
  // one took its exchange along.
  (push ? push_ : pull_)[thread]->Post(
      [this, push, thread] { RunQueued(push, thread); });
}

template <typename Dtype>
void ParamServer<Dtype>::RunQueued(bool push, int thread) {
  // See Note [Windows across exchanges].
  Feed* feed = (push ? push_feeds_ : pull_feeds_)[thread].get();
  std::vector<Queued> batch;
  {
    std::lock_guard<std::mutex> lock(feed->mu);
    while (!feed->queue.empty() &&
           (batch.empty() || (!windows_per_exchange_ &&
                              feed->queue.front().iter == batch[0].iter))) {
      batch.push_back(std::move(feed->queue.front()));
      feed->queue.pop_front();
    }
  }
  if (batch.empty()) return;
  const size_t threads = push ? push_.size() : pull_.size();
  std::vector<BlockRef> mine;
  std::vector<size_t> ends;  // per exchange: its blocks end in `mine`
  for (const Queued& q : batch) {
    for (size_t j = thread; j < q.order->size(); j += threads) {
      mine.push_back((*q.order)[j]);
    }
    ends.push_back(mine.size());
  }
  size_t reported = 0;
  Status s;
  try {
    s = RunBlocks(push, thread, batch[0].iter, mine, [&](size_t done) {
      for (; reported < batch.size() && ends[reported] <= done; ++reported) {
        batch[reported].pending->Report(Status::OK());
      }
    });
  } catch (const std::exception& e) {
    s = Status::Failure(StrCat("communication thread '",
                               (push ? push_ : pull_)[thread]->name(),
                               "' failed: ", e.what()));
  }
  // The rest: those the failure stopped (or with no blocks left here).
  for (; reported < batch.size(); ++reported) {
    batch[reported].pending->Report(s);
  }
}

template <typename Dtype>
Status ParamServer<Dtype>::RunBlocks(
    bool push, int thread, int64_t iter, const std::vector<BlockRef>& mine,
    const std::function<void(size_t)>& progress) {
  // See Note [Sliding windows] in mpi_communicator_progress.cpp.
  const int lane =
      timeline_ ? timeline_->Lane(StrCat(push ? "push " : "pull ", thread))
                : 0;
  const int64_t begin = timeline_ ? timeline_->NowMicros() : 0;
  own_windows_->Set(push, thread, &mine, 0, iter);
  const Status s = push ? Push(iter, mine, thread, progress)
                        : Pull(iter, mine, thread, progress);
  own_windows_->Set(push, thread, nullptr, 0, 0);
  if (timeline_) {
    std::vector<std::string> ids;
    int64_t bytes = 0;
    for (const BlockRef& b : mine) {
      ids.push_back(StrCat(b.id));
      bytes += partition_->blocks()[b.id].count * sizeof(Dtype);
    }
    timeline_->Complete(
        lane,
        StrCat(mine.size() == 1 ? "block " : "blocks ", ListForMessage(ids, 4)),
        push ? "push" : "pull", begin, timeline_->NowMicros(),
        {{"iter", iter},
         {"bytes", bytes},
         {"blocks", static_cast<int64_t>(mine.size())}});
  }
  return s;
}

template <typename Dtype>
std::vector<typename ParamServer<Dtype>::BlockRef> ParamServer<Dtype>::WindowAt(
    const std::vector<BlockRef>& blocks, size_t from) const {
  // Push and pull tags of a block differ by a constant: one will do.
  const size_t end = WindowEnd(
      from, blocks.size(), options_.bytes_in_flight,
      [&](size_t j) {
        return MessageBytes<Dtype>(partition_->blocks()[blocks[j].id]);
      },
      [&](size_t j) {
        return std::make_pair(ServerOf(blocks[j].id), PushTag(blocks[j].id));
      });
  return std::vector<BlockRef>(blocks.begin() + from, blocks.begin() + end);
}

template <typename Dtype>
std::string ParamServer<Dtype>::Describe(
    bool push, int64_t iter, const std::vector<BlockRef>& window) const {
  std::vector<std::string> ids, shards;
  for (const BlockRef& b : window) {
    ids.push_back(StrCat(b.id));
    shards.push_back(StrCat(comm_->JobRank(ServerOf(b.id))));
  }
  const std::set<std::string> distinct(shards.begin(), shards.end());
  return StrCat(push ? "push of " : "pull of ",
                ids.size() == 1 ? "block " : "blocks ",
                ListForMessage(ids, 4), " (iteration ", iter, ") ",
                push ? "to" : "from",
                distinct.size() == 1 ? " the shard of rank "
                                     : " the shards of ranks ",
                ListForMessage(shards, 4));
}

template <typename Dtype>
void ParamServer<Dtype>::CountTraffic(const std::vector<BlockRef>& window) {
  for (const BlockRef& ref : window) {
    const ParamBlock& b = partition_->blocks()[ref.id];
    if (ServerOf(ref.id) != comm_->rank()) {
      counters_->Add(ref.id, MessageBytes<Dtype>(b));
    }
  }
}

template <typename Dtype>
Status ParamServer<Dtype>::Push(int64_t iter,
                                const std::vector<BlockRef>& blocks, int thread,
                                const std::function<void(size_t)>& progress) {
  // Each push is a header and the block's elements where they are.
  std::vector<BlockHeader> headers(blocks.size());
  std::vector<Communicator::SendOp> ops;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const ParamBlock& b = partition_->blocks()[blocks[i].id];
    headers[i] = {iter, blocks[i].id, comm_->rank()};
    ops.push_back({&headers[i], sizeof(BlockHeader), ServerOf(blocks[i].id),
                   PushTag(blocks[i].id), blocks[i].data,
                   b.count * sizeof(Dtype)});
  }
  size_t done = 0;
  const Status s =
      comm_->SendWindowed(ops, options_.bytes_in_flight, [&](size_t k) {
        done = k;
        own_windows_->Set(/*is_push=*/true, thread, &blocks, k, iter);
        progress(k);
        return Status::OK();
      });
  CountTraffic(blocks);
  if (!s.ok()) {
    return Status::Failure(
        StrCat(Describe(/*push=*/true, iter, WindowAt(blocks, done)), ": ",
               s.message()));
  }
  return Status::OK();
}

template <typename Dtype>
Status ParamServer<Dtype>::Pull(int64_t iter,
                                const std::vector<BlockRef>& blocks, int thread,
                                const std::function<void(size_t)>& progress) {
  // Each sum's elements go straight into the block's memory, its header
  // apart (Note [Server pipeline]).
  std::vector<BlockHeader> headers(blocks.size());
  std::vector<Communicator::RecvOp> ops;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const ParamBlock& b = partition_->blocks()[blocks[i].id];
    ops.push_back({&headers[i], sizeof(BlockHeader), ServerOf(blocks[i].id),
                   PullTag(blocks[i].id), blocks[i].data,
                   b.count * sizeof(Dtype)});
  }
  size_t done = 0;
  const Status s =
      comm_->RecvWindowed(ops, options_.bytes_in_flight, [&](size_t k) {
        for (; done < k; ++done) {
          Status d = Decode(BlockMessageKind::kSum, ops[done].src, iter,
                            blocks[done].id, headers[done],
                            ops[done].bytes + ops[done].bytes2);
          if (!d.ok()) return d;
        }
        own_windows_->Set(/*is_push=*/false, thread, &blocks, k, iter);
        progress(k);
        return Status::OK();
      });
  CountTraffic(blocks);
  if (!s.ok()) {
    return Status::Failure(
        StrCat(Describe(/*push=*/false, iter, WindowAt(blocks, done)), ": ",
               s.message()));
  }
  return Status::OK();
}

#define POSEIDON_INSTANTIATE_PS_WORKER(Dtype)                                 \
  template std::vector<ParamServer<Dtype>::BlockRef>                          \
  ParamServer<Dtype>::StaggeredOrder(const BlockPartition&,                   \
                                     const std::vector<BlockRef>&, int);      \
  template void ParamServer<Dtype>::Exchange(int64_t, std::vector<BlockRef>,  \
                                             std::function<void(Status)>);    \
  template void ParamServer<Dtype>::Enqueue(                                  \
      bool, int, int64_t, std::shared_ptr<const std::vector<BlockRef>>,       \
      std::shared_ptr<Pending>);                                              \
  template void ParamServer<Dtype>::RunQueued(bool, int);                     \
  template Status ParamServer<Dtype>::RunBlocks(                              \
      bool, int, int64_t, const std::vector<BlockRef>&,                       \
      const std::function<void(size_t)>&);                                    \
  template std::vector<ParamServer<Dtype>::BlockRef>                          \
  ParamServer<Dtype>::WindowAt(const std::vector<BlockRef>&, size_t) const;   \
  template std::string ParamServer<Dtype>::Describe(                          \
      bool, int64_t, const std::vector<BlockRef>&) const;                     \
  template void ParamServer<Dtype>::CountTraffic(                             \
      const std::vector<BlockRef>&);                                          \
  template Status ParamServer<Dtype>::Push(                                   \
      int64_t, const std::vector<BlockRef>&, int,                             \
      const std::function<void(size_t)>&);                                    \
  template Status ParamServer<Dtype>::Pull(int64_t,                           \
                                           const std::vector<BlockRef>&, int, \
                                           const std::function<void(size_t)>&)
POSEIDON_INSTANTIATE_PS_WORKER(float);
POSEIDON_INSTANTIATE_PS_WORKER(double);
#undef POSEIDON_INSTANTIATE_PS_WORKER

}  // namespace dist
}  // namespace poseidon
