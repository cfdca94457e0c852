// LoopbackWorld: one mailbox per rank; a message is a copied payload queued
// under (source, tag); collectives are messages on a reserved tag that carry
// their kind and sequence number for cross-rank checks.
#include "poseidon/distributed/loopback_communicator.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <utility>

namespace poseidon {
namespace dist {
namespace {

// Collectives travel on a tag no user can pass (user tags are >= 0).
constexpr int kCollectiveTag = -1;

}  // namespace

// Named, not anonymous: LoopbackWorld::State, which the header declares,
// holds them (an anonymous type there is GCC's -Wsubobject-linkage).
namespace loopback_detail {

struct Message {
  std::vector<char> payload;
  const char* collective = nullptr;  // kind, for collective messages
  uint64_t seq = 0;                  // collective sequence number
  bool taken = false;  // guarded by the destination mailbox's mutex
};

// Messages waiting for rank `owner` to receive them.
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;  // a message arrived, was taken, or abort
  // Keyed by (source, tag), FIFO within a key.
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Message>>> queues;
};

}  // namespace loopback_detail

using loopback_detail::Mailbox;
using loopback_detail::Message;

struct LoopbackWorld::State {
  int size = 0;
  LoopbackOptions options;
  std::vector<std::unique_ptr<Mailbox>> mailboxes;
  std::atomic<bool> aborted{false};
  // MapSharedMemory's blocks by call number: the first rank to make call k
  // allocates it, the others find it.
  std::mutex shared_mu;
  std::map<uint64_t, std::shared_ptr<char>> shared;  // GUARDED_BY(shared_mu)
  mutable std::mutex abort_mu;
  std::string abort_reason;  // guarded by abort_mu; set once
  LoopbackWorld* parent = nullptr;  // see set_parent
  LoopbackWorld* self = nullptr;
  // A world made by Split: its ranks as the parent's job numbers them
  // (Communicator::JobRank); empty for a world of its own. Set once, by
  // the rank that makes the world, before any other rank finds it.
  std::vector<int> job_ranks;
  // A world made by Split: its ranks' host keys (HostKey) in the parent,
  // so that emulated hosts carry over; empty for a world of its own. Set
  // as job_ranks is.
  std::vector<int> host_keys;
  // Sub-worlds made by Split, by (split number, color): the first rank to
  // reach a split makes the world, the others find it.
  std::mutex split_mu;
  std::map<std::pair<uint64_t, int>, std::shared_ptr<LoopbackWorld>>
      splits;  // GUARDED_BY(split_mu)

  std::string reason() const {
    std::lock_guard<std::mutex> lock(abort_mu);
    return abort_reason;
  }
};

class LoopbackCommunicator final : public Communicator {
 public:
  LoopbackCommunicator(LoopbackWorld::State* world, int rank)
      : world_(world), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return world_->size; }
  std::chrono::milliseconds timeout() const override {
    return world_->options.timeout;
  }
  int JobRank(int r) const override {
    const std::vector<int>& job = world_->job_ranks;
    return r >= 0 && r < static_cast<int>(job.size()) ? job[r] : r;
  }

  Status Send(const void* buf, size_t bytes, int dest, int tag) override {
    const std::string what = SendWhat(bytes, dest, tag);
    Status s = CheckPeer(what, dest, tag);
    if (!s.ok()) return s;
    auto msg = std::make_shared<Message>();
    msg->payload.assign(static_cast<const char*>(buf),
                        static_cast<const char*>(buf) + bytes);
    Post(dest, tag, msg);
    if (!world_->options.synchronous_send) return Status::OK();
    return AwaitTaken(what, dest, tag, msg, Deadline());
  }

  Status Recv(void* buf, size_t bytes, int src, int tag) override {
    const std::string what = RecvWhat(bytes, src, tag);
    Status s = CheckPeer(what, src, tag);
    if (!s.ok()) return s;
    std::shared_ptr<Message> msg;
    s = Take(what, src, tag, &msg);
    if (!s.ok()) return s;
    if (msg->payload.size() != bytes) {
      return Fail(what, ": rank ", JobRank(src), " sent ", msg->payload.size(),
                  " bytes, this rank expected ", bytes);
    }
    if (bytes > 0) std::memcpy(buf, msg->payload.data(), bytes);
    return Status::OK();
  }

  // Every message posted before any is awaited, as MPI's non-blocking
  // sends; a synchronous world then waits until each has been taken, all
  // against one deadline.
  Status SendAll(const std::vector<SendOp>& ops) override {
    std::vector<std::string> what;
    for (const SendOp& op : ops) {
      what.push_back(SendWhat(op.bytes + op.bytes2, op.dest, op.tag));
      Status s = CheckPeer(what.back(), op.dest, op.tag);
      if (!s.ok()) return s;
    }
    std::vector<std::shared_ptr<Message>> posted;
    for (const SendOp& op : ops) {
      posted.push_back(std::make_shared<Message>());
      op.JoinInto(&posted.back()->payload);
      Post(op.dest, op.tag, posted.back());
    }
    if (!world_->options.synchronous_send) return Status::OK();
    const auto deadline = Deadline();
    Status first;
    for (size_t i = 0; i < ops.size(); ++i) {
      // Awaits (or withdraws) every message, whatever came before.
      Status s = AwaitTaken(what[i], ops[i].dest, ops[i].tag, posted[i],
                            deadline);
      if (first.ok()) first = s;
    }
    return first;
  }

  // Takes the ops' messages in whatever order they arrive, so that senders
  // that send them one by one, in any order, are served as MPI would serve
  // them; reports the first failure in `ops` order.
  Status RecvAll(const std::vector<RecvOp>& ops) override {
    std::vector<std::string> what;
    for (const RecvOp& op : ops) {
      what.push_back(RecvWhat(op.bytes + op.bytes2, op.src, op.tag));
      Status s = CheckPeer(what.back(), op.src, op.tag);
      if (!s.ok()) return s;
    }
    std::vector<std::shared_ptr<Message>> got(ops.size());
    Mailbox& box = *world_->mailboxes[rank_];
    const auto deadline = Deadline();
    {
      std::unique_lock<std::mutex> lock(box.mu);
      size_t left = ops.size();
      while (left > 0 && !world_->aborted) {
        bool took = false;
        for (size_t i = 0; i < ops.size(); ++i) {
          if (got[i]) continue;
          auto it = box.queues.find({ops[i].src, ops[i].tag});
          if (it == box.queues.end()) continue;
          got[i] = std::move(it->second.front());
          it->second.pop_front();
          if (it->second.empty()) box.queues.erase(it);
          got[i]->taken = true;
          took = true;
          --left;
        }
        if (took) box.cv.notify_all();  // synchronous senders may wait
        if (left == 0 || std::chrono::steady_clock::now() >= deadline) break;
        box.cv.wait_until(lock, deadline);
      }
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!got[i]) {
        return world_->aborted ? Aborted(what[i])
                               : TimedOut(what[i], ops[i].src);
      }
      const RecvOp& op = ops[i];
      const std::vector<char>& payload = got[i]->payload;
      if (payload.size() != op.bytes + op.bytes2) {
        return Fail(what[i], ": rank ", JobRank(op.src), " sent ",
                    payload.size(), " bytes, this rank expected ",
                    op.bytes + op.bytes2);
      }
      op.SplitFrom(payload.data());
    }
    return Status::OK();
  }

  bool OnOneHost() const override {
    const LoopbackOptions& o = world_->options;
    return o.shared_memory ||
           (o.ranks_per_host > 0 && o.ranks_per_host >= size());
  }

  int HostKey() const override {
    const LoopbackOptions& o = world_->options;
    if (!world_->host_keys.empty()) return world_->host_keys[rank_];
    if (o.ranks_per_host > 0) return rank_ / o.ranks_per_host * o.ranks_per_host;
    return o.shared_memory ? 0 : rank_;
  }

  std::unique_ptr<Communicator> Split(
      int color, int key, std::chrono::milliseconds timeout) override;

  std::unique_ptr<SharedMemory> MapSharedMemory(
      size_t bytes_per_rank) override {
    if (!OnOneHost()) return nullptr;
    const size_t stride = SharedMemory::Align(bytes_per_rank);
    const size_t total = stride * size();
    std::shared_ptr<char> block;
    {
      std::lock_guard<std::mutex> lock(world_->shared_mu);
      std::shared_ptr<char>& slot = world_->shared[++shared_seq_];
      if (!slot) {
        char* raw = static_cast<char*>(std::aligned_alloc(64, total));
        CHECK(raw != nullptr) << "aligned_alloc of " << total << " bytes";
        std::memset(raw, 0, total);
        slot = std::shared_ptr<char>(raw, [](char* p) { std::free(p); });
      }
      block = slot;
    }
    return std::make_unique<SharedMemory>(block.get(), stride, size(),
                                          world_->options.timeout,
                                          // Holds the block while mapped.
                                          [block] {});
  }

  Status AllreduceSum(float* buf, size_t count) override {
    return AllreduceSumByAllgather(this, buf, count);
  }
  Status AllreduceSum(double* buf, size_t count) override {
    return AllreduceSumByAllgather(this, buf, count);
  }

  Status Broadcast(void* buf, size_t bytes, int root) override {
    const uint64_t seq = ++collective_seq_;
    const std::string what =
        StrCat("Broadcast #", seq, " of ", bytes, " bytes from root ",
               JobRank(root));
    if (root < 0 || root >= size()) {
      return Fail(what, ": no such rank (world of ", size(), ")");
    }
    if (world_->aborted) return Aborted(what);
    if (rank_ == root) {
      for (int r = 0; r < size(); ++r) {
        if (r != rank_) PostCollective("Broadcast", seq, r, buf, bytes);
      }
      return Status::OK();
    }
    std::shared_ptr<Message> msg;
    Status s = TakeCollective(what, "Broadcast", seq, root, &msg);
    if (!s.ok()) return s;
    if (msg->payload.size() != bytes) {
      return Fail(what, ": root sent ", msg->payload.size(),
                  " bytes, this rank expected ", bytes);
    }
    if (bytes > 0) std::memcpy(buf, msg->payload.data(), bytes);
    return Status::OK();
  }

  Status Allgather(const void* send, size_t bytes, void* recv) override {
    const uint64_t seq = ++collective_seq_;
    return Gather(StrCat("Allgather #", seq, " of ", bytes, " bytes per rank"),
                  "Allgather", seq, send, bytes, recv);
  }

  Status Barrier() override {
    const uint64_t seq = ++collective_seq_;
    return Gather(StrCat("Barrier #", seq), "Barrier", seq, nullptr, 0,
                  nullptr);
  }

  void Abort(const std::string& why) override {
    {
      std::lock_guard<std::mutex> lock(world_->abort_mu);
      if (world_->abort_reason.empty()) {
        world_->abort_reason =
            StrCat("rank ", JobRank(rank_), " aborted: ", why);
      }
    }
    LOG(ERROR) << "rank " << JobRank(rank_) << " aborted: " << why;
    if (!world_->aborted.exchange(true) && world_->parent != nullptr &&
        world_->parent->abort_reason().empty()) {
      // A sub-communicator's failure ends the whole job.
      world_->parent->rank(0)->Abort(why);
    }
    for (auto& box : world_->mailboxes) {
      std::lock_guard<std::mutex> lock(box->mu);
      box->cv.notify_all();
    }
    std::lock_guard<std::mutex> lock(world_->split_mu);
    for (auto& entry : world_->splits) {
      if (entry.second->abort_reason().empty()) {
        entry.second->rank(0)->Abort(why);
      }
    }
  }

 private:
  // For messages: "Send of 8 bytes to rank 1 tag 3", "Recv of ...".
  std::string SendWhat(size_t bytes, int dest, int tag) const {
    return StrCat("Send of ", bytes, " bytes to rank ", JobRank(dest),
                  " tag ", tag);
  }
  std::string RecvWhat(size_t bytes, int src, int tag) const {
    return StrCat("Recv of ", bytes, " bytes from rank ", JobRank(src),
                  " tag ", tag);
  }

  template <typename... Args>
  Status Fail(const std::string& what, Args&&... args) const {
    return Status::Failure(
        StrCat("rank ", JobRank(rank_), ": ", what,
               std::forward<Args>(args)...));
  }

  Status Aborted(const std::string& what) const {
    return Fail(what, ": world aborted (", world_->reason(), ")");
  }

  Status CheckPeer(const std::string& what, int peer, int tag) const {
    if (peer < 0 || peer >= size()) {
      return Fail(what, ": no such rank (world of ", size(), ")");
    }
    if (tag < 0 || tag > kMaxTag) {
      return Fail(what, ": tag is outside 0..", kMaxTag);
    }
    if (world_->aborted) return Aborted(what);
    return Status::OK();
  }

  void Post(int dest, int tag, std::shared_ptr<Message> msg) {
    Mailbox& box = *world_->mailboxes[dest];
    std::lock_guard<std::mutex> lock(box.mu);
    box.queues[{rank_, tag}].push_back(std::move(msg));
    box.cv.notify_all();
  }

  void PostCollective(const char* kind, uint64_t seq, int dest, const void* buf,
                      size_t bytes) {
    auto msg = std::make_shared<Message>();
    msg->payload.assign(static_cast<const char*>(buf),
                        static_cast<const char*>(buf) + bytes);
    msg->collective = kind;
    msg->seq = seq;
    Post(dest, kCollectiveTag, std::move(msg));
  }

  std::chrono::steady_clock::time_point Deadline() const {
    return std::chrono::steady_clock::now() + world_->options.timeout;
  }

  Status TimedOut(const std::string& what, int peer) const {
    return Fail(what, ": timed out after ",
                FormatSeconds(world_->options.timeout), " waiting for rank ",
                JobRank(peer));
  }

  // Waits for the oldest message from `src` with `tag` in this rank's mailbox.
  Status Take(const std::string& what, int src, int tag,
              std::shared_ptr<Message>* out) {
    Mailbox& box = *world_->mailboxes[rank_];
    const auto key = std::make_pair(src, tag);
    std::unique_lock<std::mutex> lock(box.mu);
    const bool ready = box.cv.wait_until(lock, Deadline(), [&] {
      if (world_->aborted) return true;
      auto it = box.queues.find(key);
      return it != box.queues.end() && !it->second.empty();
    });
    if (world_->aborted) return Aborted(what);
    if (!ready) return TimedOut(what, src);
    auto it = box.queues.find(key);
    *out = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) box.queues.erase(it);
    (*out)->taken = true;
    box.cv.notify_all();  // a synchronous sender may be waiting
    return Status::OK();
  }

  Status TakeCollective(const std::string& what, const char* kind, uint64_t seq,
                        int src, std::shared_ptr<Message>* out) {
    Status s = Take(what, src, kCollectiveTag, out);
    if (!s.ok()) return s;
    const Message& msg = **out;
    if (std::strcmp(msg.collective, kind) != 0 || msg.seq != seq) {
      return Fail(what, ": rank ", JobRank(src), " issued ", msg.collective,
                  " #",
                  msg.seq, " instead; every rank must issue the same ",
                  "collectives in the same order");
    }
    return Status::OK();
  }

  // Allgather and Barrier: everyone sends to everyone, receives in rank order.
  Status Gather(const std::string& what, const char* kind, uint64_t seq,
                const void* send, size_t bytes, void* recv) {
    if (world_->aborted) return Aborted(what);
    for (int r = 0; r < size(); ++r) {
      if (r != rank_) PostCollective(kind, seq, r, send, bytes);
    }
    char* out = static_cast<char*>(recv);
    if (bytes > 0) std::memcpy(out + rank_ * bytes, send, bytes);
    for (int r = 0; r < size(); ++r) {
      if (r == rank_) continue;
      std::shared_ptr<Message> msg;
      Status s = TakeCollective(what, kind, seq, r, &msg);
      if (!s.ok()) return s;
      if (msg->payload.size() != bytes) {
        return Fail(what, ": rank ", JobRank(r), " contributed ",
                    msg->payload.size(),
                    " bytes, this rank ", bytes);
      }
      if (bytes > 0) std::memcpy(out + r * bytes, msg->payload.data(), bytes);
    }
    return Status::OK();
  }

  // Synchronous send: waits until the receiver has taken `msg`; on timeout
  // withdraws it, so a late Recv does not see a send that reported failure.
  Status AwaitTaken(const std::string& what, int dest, int tag,
                    const std::shared_ptr<Message>& msg,
                    std::chrono::steady_clock::time_point deadline) {
    Mailbox& box = *world_->mailboxes[dest];
    std::unique_lock<std::mutex> lock(box.mu);
    box.cv.wait_until(lock, deadline,
                      [&] { return msg->taken || world_->aborted; });
    if (msg->taken) return Status::OK();
    auto it = box.queues.find({rank_, tag});
    if (it != box.queues.end()) {
      auto& q = it->second;
      for (auto m = q.begin(); m != q.end(); ++m) {
        if (*m == msg) {
          q.erase(m);
          break;
        }
      }
      if (q.empty()) box.queues.erase(it);
    }
    if (world_->aborted) return Aborted(what);
    return TimedOut(what, dest);
  }

  LoopbackWorld::State* const world_;
  const int rank_;
  std::atomic<uint64_t> collective_seq_{0};
  uint64_t shared_seq_ = 0;  // MapSharedMemory calls (collective: one thread)
  uint64_t split_seq_ = 0;   // Split calls (collective: one thread)
};

// A rank of a world made by Split: forwards to that world's communicator,
// which it keeps alive.
class SplitCommunicator final : public Communicator {
 public:
  SplitCommunicator(std::shared_ptr<LoopbackWorld> world, int rank)
      : world_(std::move(world)), comm_(world_->rank(rank)) {}
  int rank() const override { return comm_->rank(); }
  int size() const override { return comm_->size(); }
  std::chrono::milliseconds timeout() const override {
    return comm_->timeout();
  }
  Status Send(const void* buf, size_t bytes, int dest, int tag) override {
    return comm_->Send(buf, bytes, dest, tag);
  }
  Status Recv(void* buf, size_t bytes, int src, int tag) override {
    return comm_->Recv(buf, bytes, src, tag);
  }
  Status SendRecv(const void* send, size_t send_bytes, int dest, void* recv,
                  size_t recv_bytes, int src, int tag) override {
    return comm_->SendRecv(send, send_bytes, dest, recv, recv_bytes, src,
                           tag);
  }
  Status AllreduceSum(float* buf, size_t count) override {
    return comm_->AllreduceSum(buf, count);
  }
  Status AllreduceSum(double* buf, size_t count) override {
    return comm_->AllreduceSum(buf, count);
  }
  Status Broadcast(void* buf, size_t bytes, int root) override {
    return comm_->Broadcast(buf, bytes, root);
  }
  Status Allgather(const void* send, size_t bytes, void* recv) override {
    return comm_->Allgather(send, bytes, recv);
  }
  Status Barrier() override { return comm_->Barrier(); }
  bool OnOneHost() const override { return comm_->OnOneHost(); }
  int HostKey() const override { return comm_->HostKey(); }
  std::unique_ptr<SharedMemory> MapSharedMemory(
      size_t bytes_per_rank) override {
    return comm_->MapSharedMemory(bytes_per_rank);
  }
  int JobRank(int r) const override { return comm_->JobRank(r); }
  std::unique_ptr<Communicator> Split(
      int color, int key, std::chrono::milliseconds timeout) override {
    return comm_->Split(color, key, timeout);
  }
  void Abort(const std::string& why) override { comm_->Abort(why); }

 private:
  std::shared_ptr<LoopbackWorld> world_;
  Communicator* comm_;
};

std::unique_ptr<Communicator> LoopbackCommunicator::Split(
    int color, int key, std::chrono::milliseconds timeout) {
  const uint64_t seq = ++split_seq_;
  const int32_t mine[3] = {color, key, HostKey()};
  std::vector<int32_t> all(3 * static_cast<size_t>(size()));
  const Status s = Allgather(mine, sizeof(mine), all.data());
  POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", JobRank(rank_),
                   ": splitting the communicator: ", s.message());
  // The members, ranked by (key, rank), and whether they share a host.
  std::vector<std::pair<int, int>> members;  // (key, old rank)
  bool one_host = true;
  int host = -1;
  for (int r = 0; r < size(); ++r) {
    if (all[3 * r] != color) continue;
    members.emplace_back(all[3 * r + 1], r);
    if (host >= 0 && all[3 * r + 2] != host) one_host = false;
    host = all[3 * r + 2];
  }
  std::sort(members.begin(), members.end());
  const int new_rank = static_cast<int>(
      std::find(members.begin(), members.end(), std::make_pair(key, rank_)) -
      members.begin());
  std::shared_ptr<LoopbackWorld> sub;
  {
    std::lock_guard<std::mutex> lock(world_->split_mu);
    std::shared_ptr<LoopbackWorld>& slot = world_->splits[{seq, color}];
    if (!slot) {
      LoopbackOptions options = world_->options;
      options.shared_memory = one_host;
      options.ranks_per_host = 0;
      options.timeout = timeout;
      slot = std::make_shared<LoopbackWorld>(
          static_cast<int>(members.size()), options);
      slot->set_parent(world_->self);
      for (const auto& member : members) {
        slot->state_->job_ranks.push_back(JobRank(member.second));
        slot->state_->host_keys.push_back(all[3 * member.second + 2]);
      }
    }
    sub = slot;
  }
  return std::make_unique<SplitCommunicator>(sub, new_rank);
}

LoopbackWorld::LoopbackWorld(int size, LoopbackOptions options)
    : state_(std::make_unique<State>()) {
  POSEIDON_REQUIRE(size >= 1, ConfigError,
                   "LoopbackWorld needs at least one rank, got ", size);
  POSEIDON_REQUIRE(options.timeout.count() > 0, ConfigError,
                   "LoopbackOptions.timeout must be positive, got ",
                   options.timeout.count(), " ms");
  state_->size = size;
  state_->options = options;
  state_->self = this;
  for (int i = 0; i < size; ++i) {
    state_->mailboxes.push_back(std::make_unique<Mailbox>());
    ranks_.push_back(std::make_unique<LoopbackCommunicator>(state_.get(), i));
  }
}

LoopbackWorld::~LoopbackWorld() = default;

int LoopbackWorld::size() const { return state_->size; }

Communicator* LoopbackWorld::rank(int i) {
  CHECK(i >= 0 && i < size()) << "rank " << i << " of a world of " << size();
  return ranks_[i].get();
}

std::string LoopbackWorld::abort_reason() const { return state_->reason(); }

void LoopbackWorld::set_parent(LoopbackWorld* parent) {
  state_->parent = parent;
}

}  // namespace dist
}  // namespace poseidon
