// The parameter-server transport: push, pull and server threads.
#include "poseidon/dist/param_server.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "poseidon/util/emulation.hpp"
#include "poseidon/util/timeline.hpp"

namespace poseidon {
namespace dist {
namespace {

int PushTag(int block) { return kPushTagBase + block % kTagSpan; }

// A message buffer of `bytes` bytes owned by the calling thread, reused
// across blocks and iterations: each push, pull and server thread works on
// one message at a time, and a block is up to block_size (4 MB) large, too
// big to allocate anew for every block of every iteration.
char* ThreadBuffer(size_t bytes) {
  thread_local std::vector<char> buffer;
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}
int PullTag(int block) { return kPullTagBase + block % kTagSpan; }

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
// Matching stays exact: between two ranks there is one push and one sum
// per block, each with its block's tag. Waits form no cycle, by induction
// over rounds: once the blocks of rounds before r are done, every push of
// round r is taken (each shard is at its round-r block and takes all its
// ranks' pushes; with more ranks than fit, the lowest ranks first, and
// they never wait on a higher one), so each shard's sum comes, and every
// pull of round r is served; a shard waiting for a free sum buffer waits
// for sends of earlier rounds only.
constexpr size_t kPushBytesInFlight = size_t{64} << 20;
constexpr int kSumSlots = 2;

template <typename Dtype>
std::vector<typename ParamServer<Dtype>::BlockRef>
ParamServer<Dtype>::StaggeredOrder(const BlockPartition& partition,
                                   const std::vector<BlockRef>& blocks,
                                   int rank) {
  // See Note [Server pipeline]: block b's round is how many blocks of its
  // shard come before it in `blocks`; within a round this rank starts at
  // its own shard.
  const int n = partition.num_shards();
  std::vector<int> seen(n, 0);
  std::vector<std::pair<std::pair<int, int>, size_t>> keys;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int shard = partition.blocks()[blocks[i].id].shard;
    keys.push_back({{seen[shard]++, (shard - rank + n) % n}, i});
  }
  std::sort(keys.begin(), keys.end());
  std::vector<BlockRef> order;
  for (const auto& key : keys) order.push_back(blocks[key.second]);
  return order;
}

template <typename Dtype>
struct ParamServer<Dtype>::SumSlots {
  std::mutex mu;
  std::condition_variable freed;
  std::vector<std::vector<char>> buffers{kSumSlots};
  std::vector<bool> busy =
      std::vector<bool>(kSumSlots, false);  // GUARDED_BY(mu)

  // A free slot of at least `bytes` bytes; waits for `server send` to free
  // one (each send it holds ends, at the latest, at the communicator's
  // deadline).
  int Acquire(size_t bytes) {
    std::unique_lock<std::mutex> lock(mu);
    int slot = -1;
    freed.wait(lock, [&] {
      for (int i = 0; i < kSumSlots; ++i) {
        if (!busy[i]) slot = i;
      }
      return slot >= 0;
    });
    busy[slot] = true;
    if (buffers[slot].size() < bytes) buffers[slot].resize(bytes);
    return slot;
  }
  char* data(int slot) { return buffers[slot].data(); }
  void Release(int slot) {
    {
      std::lock_guard<std::mutex> lock(mu);
      busy[slot] = false;
    }
    freed.notify_one();
  }
};

template <typename Dtype>
struct ParamServer<Dtype>::Counters {
  explicit Counters(size_t blocks) : per_block(blocks) {}
  std::atomic<uint64_t> bytes{0};
  std::vector<std::atomic<uint64_t>> per_block;

  void Add(int block, size_t n) {
    bytes += n;
    per_block[block] += n;
  }
};

// One exchange in flight: the push and pull threads each report once.
template <typename Dtype>
struct ParamServer<Dtype>::Pending {
  std::atomic<int> parts{0};
  std::mutex mu;
  Status first_error;  // GUARDED_BY(mu)
  std::function<void(Status)> done;

  void Report(const Status& s) {
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.ok()) first_error = s;
    }
    if (parts.fetch_sub(1) == 1) {
      Status result;
      {
        std::lock_guard<std::mutex> lock(mu);
        result = first_error;
      }
      done(result);
    }
  }
};

template <typename Dtype>
ParamServer<Dtype>::ParamServer(Communicator* comm,
                                const BlockPartition* partition,
                                int num_push_threads, int num_pull_threads,
                                Timeline* timeline)
    : comm_(comm),
      partition_(partition),
      timeline_(timeline),
      counters_(new Counters(partition->blocks().size())),
      sums_(new SumSlots) {
  POSEIDON_REQUIRE(num_push_threads >= 1 && num_pull_threads >= 1,
                   ConfigError,
                   "distributed num_push_threads and num_pull_threads must "
                   "be >= 1, got ",
                   num_push_threads, " and ", num_pull_threads);
  CHECK_EQ(partition->num_shards(), comm->size());
  for (int i = 0; i < num_push_threads; ++i) {
    push_.push_back(std::make_unique<CommThread>(StrCat("push ", i)));
  }
  for (int i = 0; i < num_pull_threads; ++i) {
    pull_.push_back(std::make_unique<CommThread>(StrCat("pull ", i)));
  }
  server_send_ = std::make_unique<CommThread>("server send");
  server_ = std::make_unique<CommThread>("server");
}

template <typename Dtype>
ParamServer<Dtype>::~ParamServer() {
  // The threads' tasks use counters_ and sums_; join them first, the
  // server before the thread it posts to.
  push_.clear();
  pull_.clear();
  server_.reset();
  server_send_.reset();
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
void ParamServer<Dtype>::Exchange(int64_t iter, std::vector<BlockRef> blocks,
                                  std::function<void(Status)> done) {
  // Every shard takes its blocks in the order posted; this rank pushes and
  // pulls them in a staggered order. See Note [Server pipeline].
  std::vector<BlockRef> mine;
  for (const BlockRef& b : blocks) {
    if (partition_->blocks()[b.id].shard == comm_->rank()) mine.push_back(b);
  }
  auto shared = std::make_shared<std::vector<BlockRef>>(
      StaggeredOrder(*partition_, blocks, comm_->rank()));
  auto pending = std::make_shared<Pending>();
  pending->done = std::move(done);
  const int num_push = static_cast<int>(push_.size());
  const int num_pull = static_cast<int>(pull_.size());
  pending->parts = num_push + num_pull;

  // This shard's part first: its thread may already hold pushes for it.
  server_->Post([this, iter, mine] {
    const int lane = timeline_ ? timeline_->Lane("server") : 0;
    for (const BlockRef& block : mine) {
      const int id = block.id;
      const int64_t begin = timeline_ ? timeline_->NowMicros() : 0;
      Status s = Serve(iter, id);
      if (timeline_) {
        timeline_->Complete(lane, StrCat("block ", id), "sum", begin,
                            timeline_->NowMicros(), {{"iter", iter}});
      }
      if (!s.ok()) {
        comm_->Abort(StrCat("parameter server shard of rank ",
                            comm_->JobRank(comm_->rank()), ": ",
                            s.message()));
        return;
      }
    }
  }, [this](const Status& s) {
    comm_->Abort(StrCat("parameter server shard of rank ",
                        comm_->JobRank(comm_->rank()), ": ", s.message()));
  });
  for (int t = 0; t < num_push; ++t) {
    push_[t]->Post([this, iter, shared, pending, t, num_push] {
      Status status;
      const int lane = timeline_ ? timeline_->Lane(StrCat("push ", t)) : 0;
      for (size_t j = t; j < shared->size() && status.ok(); j += num_push) {
        const int64_t begin = timeline_ ? timeline_->NowMicros() : 0;
        Push(iter, (*shared)[j], &status);
        if (timeline_) {
          timeline_->Complete(
              lane, StrCat("block ", (*shared)[j].id), "push", begin,
              timeline_->NowMicros(),
              {{"iter", iter},
               {"bytes", static_cast<int64_t>(
                             partition_->blocks()[(*shared)[j].id].count *
                             sizeof(Dtype))}});
        }
      }
      pending->Report(status);
    }, [pending](const Status& s) { pending->Report(s); });
  }
  for (int t = 0; t < num_pull; ++t) {
    pull_[t]->Post([this, iter, shared, pending, t, num_pull] {
      Status status;
      const int lane = timeline_ ? timeline_->Lane(StrCat("pull ", t)) : 0;
      for (size_t j = t; j < shared->size() && status.ok(); j += num_pull) {
        const int64_t begin = timeline_ ? timeline_->NowMicros() : 0;
        Pull(iter, (*shared)[j], &status);
        if (timeline_) {
          timeline_->Complete(lane, StrCat("block ", (*shared)[j].id), "pull",
                              begin, timeline_->NowMicros(), {{"iter", iter}});
        }
      }
      pending->Report(status);
    }, [pending](const Status& s) { pending->Report(s); });
  }
}

template <typename Dtype>
void ParamServer<Dtype>::Push(int64_t iter, const BlockRef& block,
                              Status* status) {
  const ParamBlock& b = partition_->blocks()[block.id];
  const size_t bytes = sizeof(BlockHeader) + b.count * sizeof(Dtype);
  char* msg = ThreadBuffer(bytes);
  EncodeBlockMessage({iter, block.id, comm_->rank()}, block.data,
                     b.count * sizeof(Dtype), msg);
  Status s = comm_->Send(msg, bytes, b.shard, PushTag(block.id));
  if (b.shard != comm_->rank()) counters_->Add(block.id, bytes);
  if (!s.ok()) {
    *status = Status::Failure(StrCat("push of block ", block.id,
                                     " (iteration ", iter,
                                     ") to the shard of rank ",
                                     comm_->JobRank(b.shard), ": ",
                                     s.message()));
  }
}

template <typename Dtype>
void ParamServer<Dtype>::Pull(int64_t iter, const BlockRef& block,
                              Status* status) {
  const ParamBlock& b = partition_->blocks()[block.id];
  const size_t bytes = sizeof(BlockHeader) + b.count * sizeof(Dtype);
  char* msg = ThreadBuffer(bytes);
  Status s = comm_->Recv(msg, bytes, b.shard, PullTag(block.id));
  if (b.shard != comm_->rank()) counters_->Add(block.id, bytes);
  if (!s.ok()) {
    *status = Status::Failure(StrCat("pull of block ", block.id,
                                     " (iteration ", iter,
                                     ") from the shard of rank ",
                                     comm_->JobRank(b.shard), ": ",
                                     s.message()));
    return;
  }
  Status decoded = Decode(BlockMessageKind::kSum, b.shard, iter, block.id,
                          msg, bytes);
  if (!decoded.ok()) {
    *status = decoded;
    return;
  }
  std::memcpy(block.data, msg + sizeof(BlockHeader),
              b.count * sizeof(Dtype));
}

template <typename Dtype>
Status ParamServer<Dtype>::Serve(int64_t iter, int block) {
  // See Note [Server pipeline].
  const ParamBlock& b = partition_->blocks()[block];
  const int n = comm_->size();
  const size_t bytes = sizeof(BlockHeader) + b.count * sizeof(Dtype);
  const int group = static_cast<int>(std::clamp<size_t>(
      kPushBytesInFlight / bytes, 1, static_cast<size_t>(n)));
  char* in = ThreadBuffer(static_cast<size_t>(group) * bytes);
  const int slot = sums_->Acquire(bytes);
  char* out = sums_->data(slot);
  Dtype* sum = reinterpret_cast<Dtype*>(out + sizeof(BlockHeader));
  std::vector<Communicator::RecvOp> ops;
  for (int first = 0; first < n; first += group) {
    const int last = std::min(n, first + group);
    ops.clear();
    for (int r = first; r < last; ++r) {
      ops.push_back({in + static_cast<size_t>(r - first) * bytes, bytes, r,
                     PushTag(block)});
    }
    Status s = comm_->RecvAll(ops);
    for (int r = first; r < last; ++r) {
      if (r != comm_->rank()) counters_->Add(block, bytes);
    }
    for (int r = first; r < last && s.ok(); ++r) {
      const char* msg = in + static_cast<size_t>(r - first) * bytes;
      s = Decode(BlockMessageKind::kPush, r, iter, block, msg, bytes);
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
      sums_->Release(slot);
      return Status::Failure(StrCat("taking the pushes of block ", block,
                                    " (iteration ", iter, "): ", s.message()));
    }
  }
  EncodeBlockMessage({iter, block, comm_->rank()}, sum,
                     b.count * sizeof(Dtype), out);
  server_send_->Post(
      [this, iter, block, slot] { SendSum(iter, block, slot); },
      [this, slot](const Status& s) {
        sums_->Release(slot);
        comm_->Abort(StrCat("parameter server shard of rank ",
                            comm_->JobRank(comm_->rank()), ": ", s.message()));
      });
  return Status::OK();
}

template <typename Dtype>
void ParamServer<Dtype>::SendSum(int64_t iter, int block, int slot) {
  const ParamBlock& b = partition_->blocks()[block];
  const int n = comm_->size();
  const size_t bytes = sizeof(BlockHeader) + b.count * sizeof(Dtype);
  const int64_t begin = timeline_ ? timeline_->NowMicros() : 0;
  std::vector<Communicator::SendOp> ops;
  for (int r = 0; r < n; ++r) {
    ops.push_back({sums_->data(slot), bytes, r, PullTag(block)});
  }
  Status s = comm_->SendAll(ops);
  for (int r = 0; r < n; ++r) {
    if (r != comm_->rank()) counters_->Add(block, bytes);
  }
  sums_->Release(slot);
  if (timeline_) {
    timeline_->Complete(timeline_->Lane("server send"), StrCat("block ", block),
                        "send", begin, timeline_->NowMicros(),
                        {{"iter", iter}});
  }
  if (!s.ok()) {
    comm_->Abort(StrCat("parameter server shard of rank ",
                        comm_->JobRank(comm_->rank()),
                        ": sending the sum of "
                        "block ",
                        block, " (iteration ", iter, "): ", s.message()));
  }
}

template <typename Dtype>
Status ParamServer<Dtype>::Decode(BlockMessageKind kind, int peer,
                                  int64_t iter, int block, const char* msg,
                                  size_t bytes) const {
  BlockExpectation want;
  want.kind = kind;
  want.peer = peer;
  want.peer_job = comm_->JobRank(peer);
  want.ranks = comm_->size();
  want.iter = iter;
  want.block = block;
  want.partition = partition_;
  want.dtype_bytes = sizeof(Dtype);
  try {
    DecodeBlockMessage(msg, bytes, want);
  } catch (const DistributedError& e) {
    return Status::Failure(StrCat("rank ", comm_->JobRank(comm_->rank()),
                                  ": ", e.what()));
  }
  return Status::OK();
}

template class ParamServer<float>;
template class ParamServer<double>;

}  // namespace dist
}  // namespace poseidon
