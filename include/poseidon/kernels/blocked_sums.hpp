// Row sums at memory speed for code shared by the CPU and the GPU
// (util/hd.hpp): BlockedSums adds kSums terms per element over a strided
// run of elements in vectorizable Dtype blocks whose totals accumulate in
// double. Used by the partial sums of kernels/norm_kernels.hpp (MVN,
// BatchNorm) and by Scale's fused backward pass on the CPU.
#ifndef POSEIDON_KERNELS_BLOCKED_SUMS_HPP_
#define POSEIDON_KERNELS_BLOCKED_SUMS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// Note [Blocked sums]
// A row sum that converts every element to double and adds it to one of a
// few double chains is bound by the conversions and the latency of those
// chains, not by memory. BlockedSums adds the elements in blocks of
// kSumBlock: within a block, kSumLanes independent sums in Dtype (lane l
// takes the block's elements l, l + kSumLanes, ...), a loop the compiler
// keeps in vector registers; at the end of the block the lanes are folded
// pairwise (still Dtype; the block's last len % kSumLanes elements go to
// one more sum) and the block's total is added to a double. So a
// float value goes through at most kSumBlock / kSumLanes + log2(kSumLanes)
// = 20 float roundings, each relative to part of one block's sum of
// magnitudes, instead of one per element of the row as a plain float sum
// would; blocks add up in double. The order of the additions depends only
// on the number of elements: the result is the same on every run and for
// every thread count.
//
// The elements summed are first, first + step, first + 2 step, ... (step
// 1 on the CPU; on the GPU, one of a row's parts: RowParts in
// kernels/norm_kernels.hpp); the step-1 loop is compiled separately so
// that it vectorizes.

// GCC's loop vectorizer, given the lane loop of a term with two sums,
// vectorizes across the block loop with shuffles and runs several times
// slower than the straight-line (SLP) vectorization of the lanes that the
// loop is written for; so it is off for this function in GCC host builds.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define POSEIDON_LANES_NO_LOOP_VECTORIZE \
  __attribute__((optimize("no-tree-loop-vectorize")))
#else
#define POSEIDON_LANES_NO_LOOP_VECTORIZE
#endif

constexpr int kSumLanes = 16;
constexpr int kSumBlock = 256;

// Note [Short sums]
// Folding kSumLanes lanes costs a fixed number of dependent shuffles and
// additions per sum; on short runs (BatchNorm on 7x7 maps sums 49 elements
// per row) that is a large share of the work. Runs shorter than kShortSum
// use kShortLanes lanes, a shorter fold; which width a run gets depends
// on n alone, so the order of additions is still fixed by n.
constexpr int kShortSum = 64;
constexpr int kShortLanes = 8;

// out[q] += the sum over the n elements k of the kSums values
// term(k, v) writes to v[0 .. kSums).
template <int kSums, bool kUnitStep, int kLanes, typename Dtype,
          typename Term>
POSEIDON_HD_INLINE POSEIDON_LANES_NO_LOOP_VECTORIZE void BlockedSumsWithStep(
    const Term& term, int first, int n, int step_arg, double* out) {
  const int step = kUnitStep ? 1 : step_arg;
  for (int b = 0; b < n; b += kSumBlock) {
    const int len = hd::min(kSumBlock, n - b);
    const int base = first + b * step;
    Dtype acc[kSums][kLanes];
    for (int q = 0; q < kSums; ++q) {
      for (int l = 0; l < kLanes; ++l) acc[q][l] = Dtype(0);
    }
    int j = 0;
    for (; j + kLanes <= len; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        Dtype v[kSums];
        term(base + (j + l) * step, v);
        for (int q = 0; q < kSums; ++q) acc[q][l] += v[q];
      }
    }
    for (int w = kLanes / 2; w >= 1; w /= 2) {
      for (int q = 0; q < kSums; ++q) {
        for (int l = 0; l < w; ++l) acc[q][l] += acc[q][l + w];
      }
    }
    // The last len % kSumLanes elements in one more sum each: indexing the
    // lanes by a variable here would keep them in memory, not registers.
    Dtype tail[kSums];
    for (int q = 0; q < kSums; ++q) tail[q] = Dtype(0);
    for (; j < len; ++j) {
      Dtype v[kSums];
      term(base + j * step, v);
      for (int q = 0; q < kSums; ++q) tail[q] += v[q];
    }
    for (int q = 0; q < kSums; ++q) {
      out[q] += static_cast<double>(acc[q][0]) + static_cast<double>(tail[q]);
    }
  }
}

template <int kSums, typename Dtype, typename Term>
POSEIDON_HD_INLINE void BlockedSums(const Term& term, int first, int n,
                                    int step, double* out) {
  // See Note [Short sums].
  if (n < kShortSum) {
    if (step == 1) {
      BlockedSumsWithStep<kSums, true, kShortLanes, Dtype>(term, first, n, 1,
                                                           out);
    } else {
      BlockedSumsWithStep<kSums, false, kShortLanes, Dtype>(term, first, n,
                                                            step, out);
    }
  } else if (step == 1) {
    BlockedSumsWithStep<kSums, true, kSumLanes, Dtype>(term, first, n, 1, out);
  } else {
    BlockedSumsWithStep<kSums, false, kSumLanes, Dtype>(term, first, n, step,
                                                        out);
  }
}

// Terms: v = {x[k]}; {x[k], x[k] * y[k]}; {x[k] * y[k]}.
template <typename Dtype>
struct TermX {
  const Dtype* x;
  POSEIDON_HD_INLINE void operator()(int k, Dtype* v) const { v[0] = x[k]; }
};
template <typename Dtype>
struct TermXAndXY {
  const Dtype* x;
  const Dtype* y;
  POSEIDON_HD_INLINE void operator()(int k, Dtype* v) const {
    v[0] = x[k];
    v[1] = x[k] * y[k];
  }
};
template <typename Dtype>
struct TermXY {
  const Dtype* x;
  const Dtype* y;
  POSEIDON_HD_INLINE void operator()(int k, Dtype* v) const {
    v[0] = x[k] * y[k];
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_BLOCKED_SUMS_HPP_
