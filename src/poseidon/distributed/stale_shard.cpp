#include "poseidon/distributed/stale_shard.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "poseidon/distributed/param_server.hpp"
#include "poseidon/distributed/tags.hpp"
#include "poseidon/distributed/wire.hpp"

namespace poseidon {
namespace dist {

std::string ConsistencyName(Consistency c, int staleness) {
  switch (c) {
    case Consistency::kBsp: return "BSP";
    case Consistency::kSsp: return StrCat("SSP(", staleness, ")");
    case Consistency::kAsync: return "ASYNC";
  }
  return "?";
}

Consistency ConsistencyFromProto(DistributedParameter::Consistency c) {
  switch (c) {
    case DistributedParameter::SSP: return Consistency::kSsp;
    case DistributedParameter::ASYNC: return Consistency::kAsync;
    default: return Consistency::kBsp;
  }
}

// A held block: its workers' clocks and its latest parameters (a whole
// message, header room first: the push the last step was applied to, so an
// answer is one copy and a push none).
template <typename Dtype>
struct StaleShard<Dtype>::Block {
  std::mutex mu;
  std::condition_variable changed;  // a clock moved, or the shard stopped
  std::vector<int64_t> clocks;      // GUARDED_BY(mu), per worker
  std::vector<char> latest;         // GUARDED_BY(mu)
  bool stopped = false;             // GUARDED_BY(mu)
};

template <typename Dtype>
StaleShard<Dtype>::StaleShard(Communicator* comm,
                              const BlockPartition* partition,
                              std::vector<int> workers,
                              std::vector<int> servers, int shard,
                              const std::vector<std::vector<int>>& schedule,
                              const Options& options, Update update,
                              Count count, std::function<void(Status)> done)
    : comm_(comm),
      partition_(partition),
      workers_(std::move(workers)),
      servers_(std::move(servers)),
      shard_(shard),
      options_(options),
      update_(std::move(update)),
      count_(std::move(count)),
      done_(std::move(done)) {
  POSEIDON_REQUIRE(update_ != nullptr, ConfigError,
                   ConsistencyName(options.consistency, options.staleness),
                   " serving needs the update on the servers "
                   "(distributed server_update: true)");
  POSEIDON_REQUIRE(options.consistency != Consistency::kBsp, ConfigError,
                   "StaleShard serves SSP or ASYNC; BSP is ParamServer's");
  POSEIDON_REQUIRE(options.staleness >= 0, ConfigError,
                   "distributed staleness must be >= 0, got ",
                   options.staleness);
  CHECK(shard >= 0 && shard < static_cast<int>(servers_.size()) &&
        servers_[shard] == comm->rank())
      << "StaleShard of shard " << shard << " on rank " << comm->rank();
  const int w_count = static_cast<int>(workers_.size());
  blocks_.resize(partition->blocks().size());
  for (int w = 0; w < w_count; ++w) {
    order_.push_back(std::move(Orders(*partition, schedule, w)[shard]));
  }
  for (const std::vector<int>& exchange : schedule) {
    for (int id : exchange) {
      if (partition->blocks()[id].shard != shard || blocks_[id]) continue;
      blocks_[id] = std::make_unique<Block>();
      blocks_[id]->clocks.assign(w_count, options.first_iter);
    }
  }
  ends_.reset(new std::atomic<int64_t>[w_count]);
  for (int w = 0; w < w_count; ++w) ends_[w] = -1;
  if (order_.empty() || order_[0].empty()) {
    // No block of this shard is exchanged: the workers send it no end.
    if (done_) done_(Status::OK());
    done_ = nullptr;
    return;
  }
  running_ = 2 * w_count;
  for (int w = 0; w < w_count; ++w) {
    threads_.emplace_back([this, w] { TakePushes(w); });
    threads_.emplace_back([this, w] { Answer(w); });
  }
}

template <typename Dtype>
std::vector<std::vector<int>> StaleShard<Dtype>::Orders(
    const BlockPartition& partition,
    const std::vector<std::vector<int>>& schedule, int worker) {
  std::vector<std::vector<int>> orders(partition.num_shards());
  for (const std::vector<int>& exchange : schedule) {
    std::vector<typename ParamServer<Dtype>::BlockRef> refs;
    for (int id : exchange) refs.push_back({id, nullptr});
    for (const auto& ref :
         ParamServer<Dtype>::StaggeredOrder(partition, refs, worker)) {
      orders[partition.blocks()[ref.id].shard].push_back(ref.id);
    }
  }
  return orders;
}

template <typename Dtype>
Status StaleShard<Dtype>::SendEnd(Communicator* comm,
                                  const BlockPartition& partition,
                                  const std::vector<int>& servers,
                                  const std::vector<std::vector<int>>& schedule,
                                  int worker, int64_t end) {
  // One message per shard, the size of the push it replaces (the shard
  // receives a whole push); its elements are not read.
  const std::vector<std::vector<int>> orders =
      Orders(partition, schedule, worker);
  std::vector<std::pair<int, int>> firsts;  // (shard, its first block)
  for (int s = 0; s < partition.num_shards(); ++s) {
    if (!orders[s].empty()) firsts.emplace_back(s, orders[s][0]);
  }
  std::vector<std::vector<char>> messages(firsts.size());
  std::vector<Communicator::SendOp> ops;
  std::vector<std::string> shards;
  for (size_t i = 0; i < firsts.size(); ++i) {
    const auto [s, first] = firsts[i];
    messages[i].resize(sizeof(BlockHeader) +
                       partition.blocks()[first].count * sizeof(Dtype));
    const BlockHeader header{-1 - end, first, comm->rank()};
    std::memcpy(messages[i].data(), &header, sizeof(header));
    ops.push_back({messages[i].data(), messages[i].size(), servers[s],
                   PushTag(first)});
    shards.push_back(StrCat(comm->JobRank(servers[s])));
  }
  const Status st = comm->SendAll(ops);
  if (st.ok()) return st;
  return Status::Failure(StrCat("telling the shards of ranks ",
                                ListForMessage(shards, 4),
                                " that this worker ended at iteration ", end,
                                ": ", st.message()));
}

template <typename Dtype>
StaleShard<Dtype>::~StaleShard() {
  for (std::thread& t : threads_) t.join();
}

template <typename Dtype>
bool StaleShard<Dtype>::Due(const Block& b, int w, int64_t iter) const {
  // Under b.mu. See Note [Stale-synchronous serving].
  if (b.clocks[w] <= iter) return false;  // its own push not yet applied
  if (options_.consistency == Consistency::kAsync) return true;
  // A worker that has ended (and whose pushes are all applied) holds no
  // one back.
  for (size_t j = 0; j < b.clocks.size(); ++j) {
    const int64_t end = ends_[j].load();
    const bool finished = end >= 0 && b.clocks[j] >= end;
    if (!finished && b.clocks[j] <= iter - options_.staleness) return false;
  }
  return true;
}

template <typename Dtype>
void StaleShard<Dtype>::TakePushes(int w) {
  const int peer = workers_[w];
  std::vector<char> msg;
  Status s;
  for (int64_t iter = options_.first_iter; s.ok(); ++iter) {
    for (size_t k = 0; k < order_[w].size() && s.ok(); ++k) {
      const int id = order_[w][k];
      const ParamBlock& pb = partition_->blocks()[id];
      const size_t bytes = sizeof(BlockHeader) + pb.count * sizeof(Dtype);
      msg.resize(bytes);
      s = comm_->Recv(msg.data(), bytes, peer, PushTag(id));
      if (s.ok() && count_ && peer != comm_->rank()) count_(id, bytes);
      BlockHeader header;
      std::memcpy(&header, msg.data(), sizeof(header));
      if (s.ok() && header.iter < 0 && header.rank == peer) {
        // The worker's end (SendEnd), in place of its next push.
        const int64_t end = -1 - header.iter;
        if (k != 0 || end != iter || header.block != id) {
          s = Status::Failure(StrCat(
              "rank ", comm_->JobRank(peer), " ended at iteration ", end,
              " (block ", header.block, ") where its push of block ", id,
              " (iteration ", iter, ") was due"));
        } else {
          EndWorker(w, end);
          return Finished(Status::OK());
        }
      }
      if (s.ok()) {
        s = CheckBlockHeader(*comm_, *partition_, servers_, sizeof(Dtype),
                             BlockMessageKind::kPush, peer, iter, id, header,
                             bytes);
      }
      if (!s.ok()) {
        Fail(Status::Failure(StrCat(
            "taking rank ", comm_->JobRank(peer), "'s push of block ", id,
            " (iteration ", iter, "): ", s.message())));
        break;
      }
      Block& b = *blocks_[id];
      Dtype* values = reinterpret_cast<Dtype*>(msg.data() + sizeof(BlockHeader));
      std::lock_guard<std::mutex> lock(b.mu);
      update_(iter, id, values);
      // The message now holds the block's parameters: it becomes the latest
      // (its header is rewritten for each answer), and the old buffer takes
      // the next push.
      b.latest.swap(msg);
      b.clocks[w] = iter + 1;
      b.changed.notify_all();
    }
  }
  Finished(s);
}

template <typename Dtype>
void StaleShard<Dtype>::EndWorker(int w, int64_t end) {
  ends_[w] = end;
  for (auto& b : blocks_) {
    if (!b) continue;
    std::lock_guard<std::mutex> lock(b->mu);
    b->changed.notify_all();
  }
}

template <typename Dtype>
void StaleShard<Dtype>::Answer(int w) {
  const int peer = workers_[w];
  std::vector<char> msg;
  Status s;
  for (int64_t iter = options_.first_iter; s.ok(); ++iter) {
    for (size_t k = 0; k < order_[w].size() && s.ok(); ++k) {
      const int id = order_[w][k];
      Block& b = *blocks_[id];
      {
        std::unique_lock<std::mutex> lock(b.mu);
        auto ended = [&] {
          const int64_t end = ends_[w].load();
          return end >= 0 && iter >= end;
        };
        b.changed.wait(lock,
                       [&] { return b.stopped || ended() || Due(b, w, iter); });
        if (b.stopped) return Finished(Status::Failure("stopped"));
        if (ended()) return Finished(Status::OK());
        msg = b.latest;
      }
      // The header names the answered iteration (the worker checks it).
      BlockHeader header{iter, id, comm_->rank()};
      std::memcpy(msg.data(), &header, sizeof(header));
      s = comm_->Send(msg.data(), msg.size(), peer, PullTag(id));
      if (s.ok() && count_ && peer != comm_->rank()) count_(id, msg.size());
      if (!s.ok()) {
        Fail(Status::Failure(StrCat("sending block ", id, " (iteration ", iter,
                                    ") to rank ", comm_->JobRank(peer), ": ",
                                    s.message())));
      }
    }
  }
  Finished(s);
}

template <typename Dtype>
void StaleShard<Dtype>::Fail(const Status& s) {
  const Status named = Status::Failure(
      StrCat(ConsistencyName(options_.consistency, options_.staleness),
             " parameter server shard of rank ",
             comm_->JobRank(comm_->rank()), ": ", s.message()));
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) {
      first_error_ = named;
      first = true;
    }
  }
  for (auto& b : blocks_) {
    if (!b) continue;
    std::lock_guard<std::mutex> lock(b->mu);
    b->stopped = true;
    b->changed.notify_all();
  }
  if (first) comm_->Abort(named.message());
}

template <typename Dtype>
void StaleShard<Dtype>::Finished(const Status& s) {
  std::function<void(Status)> done;
  Status result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok() && first_error_.ok()) first_error_ = s;
    if (--running_ > 0) return;
    done = std::move(done_);
    result = first_error_;
  }
  if (done) done(result);
}

template class StaleShard<float>;
template class StaleShard<double>;

}  // namespace dist
}  // namespace poseidon
