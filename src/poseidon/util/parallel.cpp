// The thread pool behind ParallelFor.
//
// Threads: the pool owns Poseidon::num_threads() - 1 long-lived threads,
// started on the first parallel loop (more are added if the setting grows)
// and joined when the pool, a function-local static, is destroyed at exit.
// They exist because starting threads per loop costs more than the
// millisecond-scale loops they run. Between loops they spin for a short
// while, then sleep on work_cv_ (Note [Spinning before sleeping]). While a
// loop runs they touch only the loop's fn and its own range of [0, n); all
// shared state (the job description, the pending count, the generation
// number) is written under mu_. One loop runs at a time (busy_).
//
// Note [Spinning before sleeping]
// A net's iteration issues hundreds of parallel loops (Inception-V3's
// about a thousand), many shorter than a millisecond, with the caller's
// serial work between them. Had the pool threads gone to sleep after each
// loop, every loop would wait for a futex wake-up, twice (the workers' start
// and the caller's end), and in a virtual machine waking an idle virtual CPU
// takes as long as the host pleases: on a 2-core Xeon VM, Inception-V3 at
// 2 threads ran 1510 to 2060 ms an iteration, with 14% of both cores idle,
// while each core alone was steady. So a pool thread, after its range,
// watches the generation number for kSpin before it sleeps, and the caller
// watches the pending count for as long before it waits on done_cv_; both
// are atomics, read without the lock (written under it, so the condition
// variables' protocol is unchanged). OpenMP runtimes spin too (Intel's
// KMP_BLOCKTIME is 200 ms). Here the spin is short and yields the CPU
// between rounds, for the case where the cores are oversubscribed (two
// ranks of 2 threads each on 2 cores, as mpirun starts them by default
// there, or the communication threads of a distributed run): 1 ms of
// spinning without the yield made two such CIFAR-10 quick runs 2.1 times
// slower (58 -> 123 ms); 200 us with it, 0-6% slower (3 pairs); and one
// process of 2 threads bound to one core (Open MPI binds each rank of a
// two-rank job to a core) even, 55.7 against 56.6 ms (3 runs). Measured
// on that VM, not oversubscribed (compare_builds.py, 2 threads, medians
// of 5 interleaved runs, every pair faster): Inception-V3 at batch 8
// 1881 -> 1702 ms, CIFAR-10 quick 44.0 -> 38.3.
#include "poseidon/util/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
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

// How long a pool thread or the caller spins before it sleeps (Note
// [Spinning before sleeping]).
constexpr std::chrono::microseconds kSpin(200);

// One step of a spin-wait: the CPU's pause hint where there is one.
inline void SpinPause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() is true or kSpin has passed, yielding the CPU after
// every 64 pauses; returns done().
template <typename Done>
bool SpinFor(const Done& done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      SpinPause();
    }
    if (std::chrono::steady_clock::now() >= until) return done();
    std::this_thread::yield();
  }
}

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
      pending_.store(parts - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    work_cv_.notify_all();
    t_in_parallel_region = true;
    RunRange(fn, n, parts, 0, errors);
    t_in_parallel_region = false;
    SpinFor([this] { return pending_.load(std::memory_order_acquire) == 0; });
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
      SpinFor(
          [&] { return generation_.load(std::memory_order_acquire) != seen; });
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
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        done_cv_.notify_one();
      }
    }
  }

  std::mutex busy_;  // held by the caller for a whole loop
  std::mutex mu_;
  std::condition_variable work_cv_;  // a new loop, or stop
  std::condition_variable done_cv_;  // pending_ reached 0
  std::vector<std::thread> threads_;
  bool stop_ = false;
  // Written under mu_, also read without it by spinning threads.
  std::atomic<uint64_t> generation_{0};  // counts loops; a change: new work
  const LoopBody* fn_ = nullptr;
  int n_ = 0;
  int parts_ = 0;
  std::atomic<int> pending_{0};  // pool-thread ranges not yet finished
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
