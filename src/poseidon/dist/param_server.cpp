// The parameter-server transport: push, pull and server threads.
#include "poseidon/dist/param_server.hpp"

#include <atomic>
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
      counters_(new Counters(partition->blocks().size())) {
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
  server_ = std::make_unique<CommThread>("server");
}

template <typename Dtype>
ParamServer<Dtype>::~ParamServer() {
  // The threads' tasks use counters_; join them first.
  push_.clear();
  pull_.clear();
  server_.reset();
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
  auto shared = std::make_shared<std::vector<BlockRef>>(std::move(blocks));
  auto pending = std::make_shared<Pending>();
  pending->done = std::move(done);
  const int num_push = static_cast<int>(push_.size());
  const int num_pull = static_cast<int>(pull_.size());
  pending->parts = num_push + num_pull;

  // This shard's part first: its thread may already hold pushes for it.
  std::vector<int> mine;
  for (const BlockRef& b : *shared) {
    if (partition_->blocks()[b.id].shard == comm_->rank()) {
      mine.push_back(b.id);
    }
  }
  server_->Post([this, iter, mine] {
    const int lane = timeline_ ? timeline_->Lane("server") : 0;
    for (int id : mine) {
      const int64_t begin = timeline_ ? timeline_->NowMicros() : 0;
      Status s = Serve(iter, id);
      if (timeline_) {
        timeline_->Complete(lane, StrCat("block ", id), "serve", begin,
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
  const ParamBlock& b = partition_->blocks()[block];
  const int n = comm_->size();
  const size_t bytes = sizeof(BlockHeader) + b.count * sizeof(Dtype);
  // One thread buffer: a push as it arrives, then the outgoing message,
  // whose payload accumulates the sum.
  char* msg = ThreadBuffer(2 * bytes);
  char* out = msg + bytes;
  Dtype* sum = reinterpret_cast<Dtype*>(out + sizeof(BlockHeader));
  for (int r = 0; r < n; ++r) {
    Status s = comm_->Recv(msg, bytes, r, PushTag(block));
    if (r != comm_->rank()) counters_->Add(block, bytes);
    if (!s.ok()) {
      return Status::Failure(StrCat("waiting for rank ", comm_->JobRank(r),
                                    "'s push of block ",
                                    block, " (iteration ", iter,
                                    "): ", s.message()));
    }
    Status decoded = Decode(BlockMessageKind::kPush, r, iter, block, msg,
                            bytes);
    if (!decoded.ok()) return decoded;
    const Dtype* g =
        reinterpret_cast<const Dtype*>(msg + sizeof(BlockHeader));
    emulation::DilatedCompute dilated;  // Note [Time dilation]
    if (r == 0) {
      std::memcpy(sum, g, b.count * sizeof(Dtype));
    } else {
      for (size_t i = 0; i < b.count; ++i) sum[i] = sum[i] + g[i];
    }
  }
  EncodeBlockMessage({iter, block, comm_->rank()}, sum,
                     b.count * sizeof(Dtype), out);
  for (int r = 0; r < n; ++r) {
    Status s = comm_->Send(out, bytes, r, PullTag(block));
    if (r != comm_->rank()) counters_->Add(block, bytes);
    if (!s.ok()) {
      return Status::Failure(StrCat("sending the sum of block ", block,
                                    " (iteration ", iter, ") to rank ",
                                    comm_->JobRank(r),
                                    ": ", s.message()));
    }
  }
  return Status::OK();
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
