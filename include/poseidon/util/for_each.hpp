// for_each(dev, n, f): calls f(i) for every i in [0, n) on the CPU or the
// GPU. This is how element-wise arithmetic is written once for both devices:
// `f` is a small copyable struct of pointers and scalars whose
// operator()(int) const is POSEIDON_HD
// (util/hd.hpp); the CPU runs it in a loop, split over Poseidon's thread pool
// when large, and the GPU in a grid-stride kernel on the calling thread's
// stream. So every CPU test of a layer built this way also tests the body the
// GPU runs; only the launch differs.
//
// Contract for f:
//   - f(i) for different i may run concurrently and in any order: each index
//     writes only its own outputs (read-modify-write of a shared location
//     needs hd::AtomicAdd below and `static constexpr bool kSerialOnHost =
//     true`, which keeps the CPU loop on one thread);
//   - trivially copyable (it is passed by value to the kernel), holding raw
//     pointers into memory of the device it runs on;
//   - optionally `static constexpr int kCostPerIndex` (default 1), a rough
//     count of elements one call touches, so that a functor that loops over
//     a channel axis still gets parallelised on the CPU.
//
// GPU side: gpu_for_each<F> is only declared here. Each functor used on the
// GPU is instantiated once in a .cu file under src/poseidon/kernels/ with
// POSEIDON_INSTANTIATE_GPU_FOR_EACH (util/gpu_for_each.cuh); a missing one
// is a link error of the CUDA build, never a runtime surprise.
#ifndef POSEIDON_UTIL_FOR_EACH_HPP_
#define POSEIDON_UTIL_FOR_EACH_HPP_

#include <type_traits>

#include "poseidon/common.hpp"
#include "poseidon/util/hd.hpp"
#include "poseidon/util/parallel.hpp"

namespace poseidon {

namespace for_each_detail {

// Loops shorter than this many touched elements stay on the calling thread.
constexpr long kMinParallelWork = 1L << 16;

template <typename F, typename = void>
struct CostPerIndex : std::integral_constant<int, 1> {};
template <typename F>
struct CostPerIndex<F, std::void_t<decltype(F::kCostPerIndex)>>
    : std::integral_constant<int, F::kCostPerIndex> {};

template <typename F, typename = void>
struct SerialOnHost : std::false_type {};
template <typename F>
struct SerialOnHost<F, std::void_t<decltype(F::kSerialOnHost)>>
    : std::integral_constant<bool, F::kSerialOnHost> {};

}  // namespace for_each_detail

// run(begin, end) over [0, n): on the calling thread when `work` (the
// elements the whole range touches) is small or the pool has one worker,
// else in contiguous pieces over the thread pool. The CPU schedules of the
// portable bodies (rows, blocks of positions) split their ranges so.
template <typename Run>
void cpu_for_ranges(int n, long work, const Run& run) {
  if (n <= 0) return;
  if (work < for_each_detail::kMinParallelWork || ParallelForWorkers(n) <= 1) {
    run(0, n);
    return;
  }
  ParallelFor(n, [&run](int begin, int end, int) { run(begin, end); });
}

// f(i) for i in [0, n) on the host.
template <typename F>
void cpu_for_each(int n, const F& f) {
  if (n <= 0) return;
  const long work =
      static_cast<long>(n) * for_each_detail::CostPerIndex<F>::value;
  if (for_each_detail::SerialOnHost<F>::value ||
      work < for_each_detail::kMinParallelWork || ParallelForWorkers(n) <= 1) {
    for (int i = 0; i < n; ++i) f(i);
    return;
  }
  ParallelFor(n, [&f](int begin, int end, int) {
    for (int i = begin; i < end; ++i) f(i);
  });
}

// f(i) for i in [0, n) on the calling thread's GPU stream (asynchronous to
// the host). Defined in util/gpu_for_each.cuh; see the header comment.
template <typename F>
void gpu_for_each(int n, const F& f);

// f(i) for i in [0, n) where `dev` says.
template <typename F>
void for_each(Poseidon::Brew dev, int n, const F& f) {
  if (dev == Poseidon::GPU) {
#ifdef CPU_ONLY
    NO_GPU;
#else
    gpu_for_each(n, f);
#endif
  } else {
    cpu_for_each(n, f);
  }
}

}  // namespace poseidon

#endif  // POSEIDON_UTIL_FOR_EACH_HPP_
