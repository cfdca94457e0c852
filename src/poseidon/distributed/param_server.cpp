// The parameter-server transport: the object's life and the shard's side
// (taking the pushes, summing, updating, sending back); the workers' pushes
// and pulls are in param_server_worker.cpp.
#include "poseidon/distributed/param_server.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "param_server_impl.hpp"
#include "poseidon/util/emulation.hpp"
#include "poseidon/util/timeline.hpp"

namespace poseidon {
namespace dist {
namespace {

// The server's buffer for pushes, owned by its thread and reused across
// blocks and iterations: a block's pushes from a group of ranks are up to
// kPushBytesInFlight large, too big to allocate anew for every block. (The
// push and pull threads need none: their messages leave from, and arrive
// in, the caller's memory.)
char* ThreadBuffer(size_t bytes) {
  thread_local std::vector<char> buffer;
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

}  // namespace

// Note [Server pipeline]
// A shard's work per block is: take every rank's push, add them in rank
// order, send the sum to every rank. Written as one loop of blocking
// messages (receive from rank 0, rank 1, ..., then send to rank 0, rank 1,
// ...) with every rank pushing and pulling the blocks in the same order,
// it ran 8 emulated hosts at 1 Gbit/s (VGG-16, naive PS, timelines of every
// rank) at about 40% of the links' rate: a shard took 2.1 s (dilated) per
// 3.3 MB block where its link needs 0.4 s each way. Three things made it
// slow: each message waited for the one before it (and, above MPI's eager
// limit, for a rendezvous with a peer's thread that had to reach the same
// block); a shard used its host's link one way at a time, in while it
// received and out while it sent; and since every rank pushed the same
// block at the same time, every push went to the same shard: one host's
// downlink was full while the others' idled. Now:
//  - `server` takes a block's pushes from all ranks at once
//    (Communicator::RecvAll; from at most kPushBytesInFlight / block bytes
//    ranks at a time, in rank order, to bound its buffer) and adds them in
//    rank order as before, so the sums keep their bits (Note [Deterministic
//    allreduce]); it hands the sum, in one of kSumSlots buffers, to
//  - `server send`, which sends it to every rank at once (SendAll) and
//    frees the buffer, while `server` takes the next block's pushes: the
//    link carries both ways;
//  - every rank pushes and pulls an exchange's blocks in rounds (the r-th
//    round holds the r-th block of each shard, in the order posted), and
//    within a round starts at its own shard and goes up, rank k reaching
//    shard s at step s - k (mod n): at each step the ranks push to n
//    different shards (StaggeredOrder).
//  - each push and pull thread keeps a window of its blocks in flight at
//    once (up to bytes_in_flight bytes of consecutive blocks of its order;
//    since Note [Sliding windows], a window that slides: a block starts
//    as soon as one in flight completes): with one block at a time,
//    a rank's single pull thread waited on each block's shard in turn
//    while that shard took its pushes from every rank, and the links
//    idled (Inception-V3, 32 emulated hosts at 1 Gbit/s: 297 blocks, 43
//    waits of 0.3 s or more made 60.5 of the 66.9 s of rank 0's
//    exchange). Pushes leave from the caller's memory and sums land in it
//    as two-part messages (Communicator::SendOp / RecvOp: the header
//    beside the block's elements), so a window costs no copy and no
//    buffer; a sum whose header is wrong fails the exchange, and the
//    elements it left are never applied.
// Matching stays exact: between two ranks there is one push and one sum
// per block, each with its block's tag, and a window never holds two
// blocks of one shard with one tag. Waits form no cycle, by induction
// over rounds: once the blocks of rounds before r are done, a thread's
// current window holds blocks of rounds r and later only, all started at
// once, so each of its round-r blocks is in flight or done; every push of
// round r is thus taken (each shard is at its round-r block and takes all
// its ranks' pushes; with more ranks than fit, the lowest ranks first, and
// they never wait on a higher one), so each shard's sum comes, and every
// pull of round r is served; a shard waiting for a free sum buffer waits
// for sends of earlier rounds only. (A communicator whose SendAll and
// RecvAll run their ops one by one runs a window in the thread's order,
// as one block at a time would: the same argument with windows of one.)
//
// Note [Server lanes]
// With one `server` thread a shard took one block's pushes at a time, and
// its link idled at each block's end while the last pushes trickled in
// from senders whose uplinks carried other shards' blocks too, and while
// the sum was made: 8 emulated hosts at 1 Gbit/s (VGG-16, the exchange
// after the whole backward, everything by PS) moved the 968 MB each link
// carries each way per exchange in 27.4 s, 57% of the links' rate. So a
// shard has `server_lanes` lanes, each the pipeline above with its own
// threads (`server i` takes and sums, `server send i` sends) and sum
// buffers; the shard's blocks are dealt to the lanes in turn, in the
// partition's order, and a block always goes to the same lane. The lanes
// take several blocks' pushes at once; there the same exchange took
// 21.7-22.5 s with 4 lanes (67-71%); with earlier dealings 2 lanes took
// 23.6 s and 8 gained nothing over 4 (docs/distributed.md, "Server
// lanes").
// A block keeps its lane because its messages carry the block's tag, not
// the iteration's: when exchanges of two iterations overlap (staleness),
// the two takes of one block must not be in flight at once, and on one
// lane they run in posting order. Each lane serves its blocks in the
// order posted and sends their sums in that order, so the argument above
// holds lane by lane: a lane waiting for a free sum buffer waits for
// sends of earlier rounds only, and a take of a later round never delays
// an earlier one's.
//
template <typename Dtype>
ParamServer<Dtype>::ParamServer(Communicator* comm,
                                const BlockPartition* partition,
                                const ParamServerOptions& options,
                                Timeline* timeline, Update update)
    : comm_(comm),
      partition_(partition),
      options_(options),
      timeline_(timeline),
      update_(std::move(update)),
      counters_(new Counters(partition->blocks().size())),
      own_windows_(new OwnWindows) {
  POSEIDON_REQUIRE(options.push_threads >= 1 && options.pull_threads >= 1,
                   ConfigError,
                   "distributed num_push_threads and num_pull_threads must "
                   "be >= 1, got ",
                   options.push_threads, " and ", options.pull_threads);
  POSEIDON_REQUIRE(options.bytes_in_flight >= 1, ConfigError,
                   "distributed bytes_in_flight must be >= 1, got ",
                   options.bytes_in_flight);
  POSEIDON_REQUIRE(options.server_lanes >= 1, ConfigError,
                   "distributed server_lanes must be >= 1, got ",
                   options.server_lanes);
  const int n = comm->size();
  workers_ = options.roles.workers;
  servers_ = options.roles.servers;
  if (workers_.empty()) {
    for (int r = 0; r < n; ++r) workers_.push_back(r);
  }
  if (servers_.empty()) {
    for (int r = 0; r < n; ++r) servers_.push_back(r);
  }
  for (const auto* list : {&workers_, &servers_}) {
    const char* what = list == &workers_ ? "worker" : "server";
    std::set<int> seen;
    for (int r : *list) {
      POSEIDON_REQUIRE(r >= 0 && r < n, ConfigError, "parameter server ",
                       what, " rank ", r, " is not a rank of the job's ", n);
      POSEIDON_REQUIRE(seen.insert(r).second, ConfigError,
                       "parameter server ", what, " rank ", r,
                       " is named twice");
    }
  }
  POSEIDON_REQUIRE(!options.hold_updates ||
                       (update_ && options.consistency == Consistency::kBsp),
                   ConfigError,
                   "a parameter server that holds its updates needs an "
                   "update function and BSP");
  POSEIDON_REQUIRE(
      partition->num_shards() == static_cast<int>(servers_.size()),
      ConfigError, "the parameter partition has ", partition->num_shards(),
      " shards for ", servers_.size(), " server ranks");
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i] == comm->rank()) worker_index_ = static_cast<int>(i);
  }
  for (size_t s = 0; s < servers_.size(); ++s) {
    if (servers_[s] == comm->rank()) shard_ = static_cast<int>(s);
  }
  const char* windows = std::getenv("POSEIDON_PS_WINDOWS");
  windows_per_exchange_ =
      windows != nullptr && std::string(windows) == "exchange";
  for (int i = 0; i < options.push_threads; ++i) {
    push_.push_back(std::make_unique<CommThread>(StrCat("push ", i)));
    push_feeds_.push_back(std::make_unique<Feed>());
  }
  for (int i = 0; i < options.pull_threads; ++i) {
    pull_.push_back(std::make_unique<CommThread>(StrCat("pull ", i)));
    pull_feeds_.push_back(std::make_unique<Feed>());
  }
  if (shard_ >= 0) {
    for (int i = 0; i < options.server_lanes; ++i) {
      lanes_.push_back(std::make_unique<Lane>(i));
    }
    // Note [Server lanes]: the shard's blocks to the lanes in turn.
    lane_of_.assign(partition->blocks().size(), 0);
    if (options.hold_updates) {
      held_headers_.resize(partition->blocks().size());
    }
    int turn = 0;
    for (const int id : partition->shard_blocks(shard_)) {
      lane_of_[id] = turn;
      turn = (turn + 1) % options.server_lanes;
    }
  }
}

template <typename Dtype>
ParamServer<Dtype>::~ParamServer() {
  // The threads' tasks use counters_ and the lanes' sum buffers; join
  // them first (a lane joins its take thread before its send thread).
  push_.clear();
  pull_.clear();
  stale_.reset();
  lanes_.clear();
}

template <typename Dtype>
uint64_t ParamServer<Dtype>::bytes_moved() const {
  return counters_->bytes.load();
}

template <typename Dtype>
uint64_t ParamServer<Dtype>::block_bytes(int block) const {
  return counters_->per_block[block].load();
}

template <typename Dtype>
void ParamServer<Dtype>::Serve(int64_t iter, std::vector<int> blocks,
                               std::function<void(Status)> done) {
  CHECK(!is_worker()) << "ParamServer::Serve on rank " << comm_->rank()
                      << ", a worker (its Exchange serves its shard)";
  CHECK(options_.consistency == Consistency::kBsp)
      << "ParamServer::Serve under "
      << ConsistencyName(options_.consistency, options_.staleness)
      << " (ServeStale serves it)";
  std::vector<int> mine;
  for (int id : blocks) {
    CHECK(id >= 0 && static_cast<size_t>(id) < partition_->blocks().size())
        << "block " << id;
    if (ServerOf(id) == comm_->rank()) mine.push_back(id);
  }
  PostServe(iter, std::move(mine), std::move(done));
}

template <typename Dtype>
void ParamServer<Dtype>::PostServe(int64_t iter, std::vector<int> mine,
                                   std::function<void(Status)> done) {
  // See Note [Server lanes]: each block always goes to its own lane.
  CHECK(!lanes_.empty()) << "ParamServer::PostServe on rank "
                         << comm_->rank() << ", which hosts no shard";
  const size_t lanes = lanes_.size();
  std::vector<std::vector<int>> parts(lanes);
  for (const int id : mine) parts[lane_of_[id]].push_back(id);
  auto pending = std::make_shared<Pending>();
  pending->parts = 1;  // this call's own part: reported below
  pending->done = [done](const Status& s) {
    if (done) done(s);
  };
  auto fail = [this, pending](const Status& s) {
    comm_->Abort(StrCat("parameter server shard of rank ",
                        comm_->JobRank(comm_->rank()), ": ", s.message()));
    pending->Report(s);
  };
  for (size_t k = 0; k < lanes; ++k) {
    if (parts[k].empty()) continue;
    ++pending->parts;
    Lane* lane = lanes_[k].get();
    lane->take.Post([this, iter, part = std::move(parts[k]), lane, pending,
                     fail] {
      const int event_lane =
          timeline_ ? timeline_->Lane(lane->take.name()) : 0;
      for (const int id : part) {
        const int64_t begin = timeline_ ? timeline_->NowMicros() : 0;
        Status s = ServeBlock(iter, id, lane);
        if (timeline_) {
          timeline_->Complete(event_lane, StrCat("block ", id), "sum", begin,
                              timeline_->NowMicros(), {{"iter", iter}});
        }
        if (!s.ok()) {
          fail(s);
          return;
        }
      }
      pending->Report(Status::OK());
    }, fail);
  }
  pending->Report(Status::OK());
}

template <typename Dtype>
void ParamServer<Dtype>::ServeStale(
    const std::vector<std::vector<int>>& schedule, int64_t first_iter,
    std::function<void(Status)> done) {
  CHECK_GE(shard_, 0) << "ParamServer::ServeStale on rank " << comm_->rank()
                      << ", which hosts no shard";
  POSEIDON_REQUIRE(options_.consistency != Consistency::kBsp, ConfigError,
                   "ParamServer::ServeStale under BSP (Exchange and Serve "
                   "serve it)");
  stale_.reset();
  typename StaleShard<Dtype>::Options options;
  options.consistency = options_.consistency;
  options.staleness = options_.staleness;
  options.first_iter = first_iter;
  Counters* counters = counters_.get();
  stale_ = std::make_unique<StaleShard<Dtype>>(
      comm_, partition_, workers_, servers_, shard_, schedule, options,
      update_,
      [counters](int block, size_t bytes) { counters->Add(block, bytes); },
      std::move(done));
}

template <typename Dtype>
Status ParamServer<Dtype>::EndStale(
    const std::vector<std::vector<int>>& schedule, int64_t end) {
  CHECK(is_worker()) << "ParamServer::EndStale on rank " << comm_->rank()
                     << ", which is not a worker";
  return StaleShard<Dtype>::SendEnd(comm_, *partition_, servers_, schedule,
                                    worker_index_, end);
}

template <typename Dtype>
Status ParamServer<Dtype>::ServeBlock(int64_t iter, int block, Lane* lane) {
  // See Note [Server pipeline]; the workers in their order (Note [Roles]).
  const ParamBlock& b = partition_->blocks()[block];
  const int n = static_cast<int>(workers_.size());
  const size_t bytes = MessageBytes<Dtype>(b);
  const int group = static_cast<int>(std::clamp<size_t>(
      kPushBytesInFlight / bytes, 1, static_cast<size_t>(n)));
  char* in = ThreadBuffer(static_cast<size_t>(group) * bytes);
  const int slot = lane->sums.Acquire(bytes);
  char* out = lane->sums.data(slot);
  Dtype* sum = reinterpret_cast<Dtype*>(out + sizeof(BlockHeader));
  std::vector<Communicator::RecvOp> ops;
  for (int first = 0; first < n; first += group) {
    const int last = std::min(n, first + group);
    ops.clear();
    for (int r = first; r < last; ++r) {
      ops.push_back({in + static_cast<size_t>(r - first) * bytes, bytes,
                     workers_[r], PushTag(block)});
    }
    Status s = comm_->RecvAll(ops);
    for (int r = first; r < last; ++r) {
      if (workers_[r] != comm_->rank()) counters_->Add(block, bytes);
    }
    for (int r = first; r < last && s.ok(); ++r) {
      const char* msg = in + static_cast<size_t>(r - first) * bytes;
      BlockHeader header;
      std::memcpy(&header, msg, sizeof(header));
      s = Decode(BlockMessageKind::kPush, workers_[r], iter, block, header,
                 bytes);
      if (!s.ok()) break;
      const Dtype* g =
          reinterpret_cast<const Dtype*>(msg + sizeof(BlockHeader));
      emulation::DilatedCompute dilated;  // Note [Time dilation]
      if (r == 0) {
        std::memcpy(sum, g, b.count * sizeof(Dtype));
      } else {
        for (size_t i = 0; i < b.count; ++i) sum[i] = sum[i] + g[i];
      }
    }
    if (!s.ok()) {
      lane->sums.Release(slot);
      return Status::Failure(StrCat("taking the pushes of block ", block,
                                    " (iteration ", iter, "): ", s.message(),
                                    own_windows_->Note(*this)));
    }
  }
  if (options_.hold_updates) {
    // The update keeps what it needs; SendHeld answers later.
    update_(iter, block, sum);
    lane->sums.Release(slot);
    return Status::OK();
  }
  if (update_) update_(iter, block, sum);
  EncodeBlockMessage({iter, block, comm_->rank()}, sum,
                     b.count * sizeof(Dtype), out);
  lane->send.Post(
      [this, iter, block, lane, slot] { SendSum(iter, block, lane, slot); },
      [this, lane, slot](const Status& s) {
        lane->sums.Release(slot);
        comm_->Abort(StrCat("parameter server shard of rank ",
                            comm_->JobRank(comm_->rank()), ": ", s.message()));
      });
  return Status::OK();
}

template <typename Dtype>
Status ParamServer<Dtype>::SendToWorkers(int64_t iter, int block, Lane* lane,
                                         const void* first, size_t first_bytes,
                                         const void* second,
                                         size_t second_bytes) {
  const int64_t begin = timeline_ ? timeline_->NowMicros() : 0;
  std::vector<Communicator::SendOp> ops;
  for (int r : workers_) {
    ops.push_back({first, first_bytes, r, PullTag(block), second,
                   second_bytes});
  }
  const Status s = comm_->SendAll(ops);
  for (int r : workers_) {
    if (r != comm_->rank()) counters_->Add(block, first_bytes + second_bytes);
  }
  if (timeline_) {
    timeline_->Complete(timeline_->Lane(lane->send.name()),
                        StrCat("block ", block), "send", begin,
                        timeline_->NowMicros(), {{"iter", iter}});
  }
  return s;
}

template <typename Dtype>
void ParamServer<Dtype>::AbortSending(const char* what, int64_t iter,
                                      int block, const Status& s) {
  comm_->Abort(StrCat("parameter server shard of rank ",
                      comm_->JobRank(comm_->rank()), ": sending the ", what,
                      " of block ", block, " (iteration ", iter,
                      "): ", s.message(), own_windows_->Note(*this)));
}

template <typename Dtype>
void ParamServer<Dtype>::SendSum(int64_t iter, int block, Lane* lane,
                                  int slot) {
  const Status s =
      SendToWorkers(iter, block, lane, lane->sums.data(slot),
                    MessageBytes<Dtype>(partition_->blocks()[block]), nullptr,
                    0);
  lane->sums.Release(slot);
  if (!s.ok()) AbortSending("sum", iter, block, s);
}

template <typename Dtype>
void ParamServer<Dtype>::SendHeld(int64_t iter, int block,
                                  const Dtype* params) {
  CHECK(options_.hold_updates) << "ParamServer::SendHeld without hold_updates";
  CHECK(shard_ >= 0 && ServerOf(block) == comm_->rank())
      << "ParamServer::SendHeld of block " << block << " on rank "
      << comm_->rank() << ", which does not hold it";
  Lane* lane = lanes_[lane_of_[block]].get();
  BlockHeader* header = &held_headers_[block];
  *header = {iter, block, comm_->rank()};
  lane->send.Post(
      [this, iter, block, lane, header, params] {
        const Status s = SendToWorkers(
            iter, block, lane, header, sizeof(BlockHeader), params,
            partition_->blocks()[block].count * sizeof(Dtype));
        if (!s.ok()) AbortSending("parameters", iter, block, s);
      },
      [this](const Status& s) {
        comm_->Abort(StrCat("parameter server shard of rank ",
                            comm_->JobRank(comm_->rank()), ": ", s.message()));
      });
}

Status CheckBlockHeader(const Communicator& comm,
                        const BlockPartition& partition,
                        const std::vector<int>& servers, size_t dtype_bytes,
                        BlockMessageKind kind, int peer, int64_t iter,
                        int block, const BlockHeader& header, size_t bytes) {
  BlockExpectation want;
  want.kind = kind;
  want.peer = peer;
  want.peer_job = comm.JobRank(peer);
  want.ranks = comm.size();
  want.iter = iter;
  want.block = block;
  want.partition = &partition;
  want.servers = &servers;
  want.dtype_bytes = dtype_bytes;
  try {
    DecodeBlockHeader(header, bytes, want);
  } catch (const DistributedError& e) {
    return Status::Failure(StrCat("rank ", comm.JobRank(comm.rank()), ": ",
                                  e.what()));
  }
  return Status::OK();
}

template <typename Dtype>
Status ParamServer<Dtype>::Decode(BlockMessageKind kind, int peer,
                                  int64_t iter, int block,
                                  const BlockHeader& header,
                                  size_t bytes) const {
  return CheckBlockHeader(*comm_, *partition_, servers_, sizeof(Dtype), kind,
                          peer, iter, block, header, bytes);
}

template class ParamServer<float>;
template class ParamServer<double>;

}  // namespace dist
}  // namespace poseidon
