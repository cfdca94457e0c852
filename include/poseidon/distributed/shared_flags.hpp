// Waiting on flags that other ranks raise in shared memory (SharedMemory in
// communicator.hpp): the shared-memory allreduce's and the host level's
// counters of published, summed and released iterations; and the ordered
// sum over the ranks' parts of that memory.
#ifndef POSEIDON_DISTRIBUTED_SHARED_FLAGS_HPP_
#define POSEIDON_DISTRIBUTED_SHARED_FLAGS_HPP_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "poseidon/distributed/communicator.hpp"

namespace poseidon {
namespace dist {

static_assert(std::atomic<int64_t>::is_always_lock_free,
              "flags in shared memory must be lock-free atomics");

// The i-th int64 counter of a 64-byte control line.
inline std::atomic<int64_t>* SharedFlag(char* line, int i) {
  return reinterpret_cast<std::atomic<int64_t>*>(line) + i;
}

// Whether behind(r) holds for some r in [0, ranks): WaitForRanks' test,
// for callers that check before building its messages.
template <typename Behind>
bool AnyRankBehind(int ranks, const Behind& behind) {
  for (int r = 0; r < ranks; ++r) {
    if (behind(r)) return true;
  }
  return false;
}

// Waits until behind(r) is false for every r in [0, ranks): yields the core
// at first (a peer a few hundred microseconds behind), then sleeps 50 us,
// and after `timeout` throws DistributedError "rank <self>: <what>: timed
// out after <timeout> waiting for rank(s) <late> to <doing>". The late
// ranks are named by `job_ranks[r]` when given (a sub-communicator's ranks
// by their rank in the job), else by r.
void WaitForRanks(int ranks, const std::function<bool(int)>& behind,
                  std::chrono::milliseconds timeout, int self,
                  const std::string& what, const std::string& doing,
                  const std::vector<int>* job_ranks = nullptr);

// out[i] = (parts[0][i] + parts[1][i] + ...) * scale for i < count, added
// in the order of `parts` (the same operations, so the same bits, wherever
// it runs), blockwise so that a block stays in L1 across the parts.
template <typename Dtype>
void SumInOrder(const std::vector<const Dtype*>& parts, size_t count,
                Dtype scale, Dtype* out);

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_SHARED_FLAGS_HPP_
