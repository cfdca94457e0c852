// What the parameter server's two sides share (param_server.cpp: the
// shard's side and the life of the object; param_server_worker.cpp: the
// pushes and pulls): the private parts of ParamServer and the message
// sizes.
#ifndef POSEIDON_DISTRIBUTED_PARAM_SERVER_IMPL_HPP_
#define POSEIDON_DISTRIBUTED_PARAM_SERVER_IMPL_HPP_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "poseidon/distributed/param_server.hpp"

namespace poseidon {
namespace dist {

// Bytes of a push or a sum of block `b`: the header, then the elements.
template <typename Dtype>
size_t MessageBytes(const ParamBlock& b) {
  return sizeof(BlockHeader) + b.count * sizeof(Dtype);
}

constexpr size_t kPushBytesInFlight = size_t{64} << 20;
constexpr int kSumSlots = 2;

template <typename Dtype>
struct ParamServer<Dtype>::Queued {
  int64_t iter = 0;
  std::shared_ptr<const std::vector<BlockRef>> order;  // staggered
  std::shared_ptr<Pending> pending;
};

template <typename Dtype>
struct ParamServer<Dtype>::Feed {
  std::mutex mu;
  std::deque<Queued> queue;  // GUARDED_BY(mu)
};


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

// One lane of a shard (Note [Server lanes]). `take` posts to `send`, so it
// is declared after it and joined first.
template <typename Dtype>
struct ParamServer<Dtype>::Lane {
  explicit Lane(int index)
      : send(StrCat("server send ", index)), take(StrCat("server ", index)) {}
  SumSlots sums;
  CommThread send;
  CommThread take;
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

// Note [Own worker's windows]
// A shard's messages to and from its own rank go through MPI like any
// other, so a shard can wait on its own rank's worker side: a block's sum
// goes unreceived while this rank's pull thread is still stuck on an
// earlier window whose shard sits across a cut link. The communicator can
// only say "waiting for rank 0 to receive", naming the rank itself (the
// link-fault matrix's "link down for good" case ended so when the shard's
// deadline ran out before the pull's). So each push and pull thread
// records how far its run has come (the window from there, WindowAt, is
// what it has in flight; Note [Sliding windows]), and a shard's failure
// adds what its own rank's worker side was then waiting on ("this rank's own
// pull of blocks 4 and 6 (iteration 55) from the shards of ranks 2 and 3 was in
// flight"), which names the ranks behind the stall.
template <typename Dtype>
struct ParamServer<Dtype>::OwnWindows {
  // A thread's run: its blocks from `from` on are not done yet. Described
  // only when a shard fails.
  struct InFlight {
    const std::vector<BlockRef>* blocks = nullptr;  // null when idle
    size_t from = 0;
    int64_t iter = 0;
  };
  std::mutex mu;
  std::vector<InFlight> push, pull;  // GUARDED_BY(mu), per thread

  void Set(bool is_push, int thread, const std::vector<BlockRef>* blocks,
           size_t from, int64_t iter) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<InFlight>& v = is_push ? push : pull;
    if (v.size() <= static_cast<size_t>(thread)) v.resize(thread + 1);
    v[thread] = {blocks, from, iter};
  }
  // "; this rank's own pull of ... was in flight", or "" when none is.
  std::string Note(const ParamServer& server) {
    std::vector<std::string> busy;
    std::lock_guard<std::mutex> lock(mu);  // the windows live until cleared
    for (const bool is_push : {true, false}) {
      for (const InFlight& f : is_push ? push : pull) {
        if (!f.blocks || f.from >= f.blocks->size()) continue;
        busy.push_back(server.Describe(is_push, f.iter,
                                       server.WindowAt(*f.blocks, f.from)));
      }
    }
    if (busy.empty()) return "";
    return StrCat("; this rank's own ", ListForMessage(busy, 3),
                  busy.size() == 1 ? " was" : " were", " in flight");
  }
};

// One exchange in flight: the push and pull threads each report once (or,
// in PostServe, each lane given blocks and the posting call).
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


}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_PARAM_SERVER_IMPL_HPP_
