// The thread pool behind ParallelFor.
//
// Threads: the pool owns Poseidon::num_threads() - 1 long-lived threads,
// started on the first parallel loop (more are added if the setting grows)
// and joined when the pool, a function-local static, is destroyed at exit.
// They exist because starting threads per loop costs more than the
// millisecond-scale loops they run. Between loops they sleep on work_cv_.
// While a loop runs they touch only the loop's fn and its own range of
// [0, n); all shared state (the job description, the pending count, the
// generation number) is guarded by mu_. One loop runs at a time (busy_).
#include "poseidon/util/parallel.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "poseidon/common.hpp"

namespace poseidon {
namespace {

using LoopBody = std::function<void(int, int, int)>;

// True on pool threads, and on a caller while its loop runs: a ParallelFor
// issued there runs serially instead of waiting on the busy pool.
thread_local bool t_in_parallel_region = false;

// Range w of [0, n) split into `parts` ranges (see parallel.hpp).
void RangeOf(int n, int parts, int w, int* begin, int* end) {
  const int base = n / parts;
  const int extra = n % parts;
  *begin = w * base + std::min(w, extra);
  *end = *begin + base + (w < extra ? 1 : 0);
}

// Runs range w, recording what it throws in errors[w].
void RunRange(const LoopBody& fn, int n, int parts, int w,
              std::vector<std::exception_ptr>* errors) {
  int begin = 0;
  int end = 0;
  RangeOf(n, parts, w, &begin, &end);
  try {
    fn(begin, end, w);
  } catch (...) {
    (*errors)[w] = std::current_exception();
  }
}

class Pool {
 public:
  Pool() = default;
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Pool);

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // Runs the `parts` ranges of [0, n), range 0 on the calling thread.
  // Returns false, running nothing, if another loop holds the pool.
  bool TryRun(int n, int parts, const LoopBody& fn,
              std::vector<std::exception_ptr>* errors) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (static_cast<int>(threads_.size()) < parts - 1) {
        const int id = static_cast<int>(threads_.size()) + 1;
        threads_.emplace_back([this, id] { WorkerLoop(id); });
      }
      fn_ = &fn;
      n_ = n;
      parts_ = parts;
      errors_ = errors;
      pending_ = parts - 1;
      ++generation_;
    }
    work_cv_.notify_all();
    t_in_parallel_region = true;
    RunRange(fn, n, parts, 0, errors);
    t_in_parallel_region = false;
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    fn_ = nullptr;
    errors_ = nullptr;
    return true;
  }

 private:
  // Pool thread `id` (1-based; the caller is worker 0) runs range `id` of
  // each loop that has that many ranges, and sleeps otherwise.
  void WorkerLoop(int id) {
    t_in_parallel_region = true;
    uint64_t seen = 0;
    for (;;) {
      const LoopBody* fn = nullptr;
      int n = 0;
      int parts = 0;
      std::vector<std::exception_ptr>* errors = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        if (id >= parts_) continue;
        fn = fn_;
        n = n_;
        parts = parts_;
        errors = errors_;
      }
      RunRange(*fn, n, parts, id, errors);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }

  std::mutex busy_;  // held by the caller for a whole loop
  std::mutex mu_;
  std::condition_variable work_cv_;  // a new loop, or stop
  std::condition_variable done_cv_;  // pending_ reached 0
  std::vector<std::thread> threads_;
  bool stop_ = false;
  uint64_t generation_ = 0;  // counts loops; a change means new work
  const LoopBody* fn_ = nullptr;
  int n_ = 0;
  int parts_ = 0;
  int pending_ = 0;  // pool-thread ranges of this loop not yet finished
  std::vector<std::exception_ptr>* errors_ = nullptr;
};

Pool& ThePool() {
  static Pool pool;
  return pool;
}

}  // namespace

int ParallelForWorkers(int n) {
  if (n <= 0) return 0;
  return std::min(n, Poseidon::num_threads());
}

void ParallelFor(int n, const LoopBody& fn) {
  const int parts = ParallelForWorkers(n);
  if (parts == 0) return;
  std::vector<std::exception_ptr> errors(parts);
  const bool ran = parts > 1 && !t_in_parallel_region &&
                   ThePool().TryRun(n, parts, fn, &errors);
  if (!ran) {
    for (int w = 0; w < parts; ++w) RunRange(fn, n, parts, w, &errors);
  }
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace poseidon
