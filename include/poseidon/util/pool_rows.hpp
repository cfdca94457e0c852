// AVX-512 and AVX2 kernels for PoolingLayer's fast path (Note [Pooling fast
// path] in pooling_layer.cpp): the interior windows of one output row, 16
// (AVX-512) or 8 (AVX2) outputs per vector, for float and a horizontal
// stride of 1 or 2. Each computes exactly what the layer's plain loops
// compute, in the same order, so the results are bitwise the same. They
// need PoolRowKernelsAvailable() (see Note [AVX-512 isolation] in
// util/avx512.hpp).
#ifndef POSEIDON_UTIL_POOL_ROWS_HPP_
#define POSEIDON_UTIL_POOL_ROWS_HPP_

#include "poseidon/util/avx512.hpp"

namespace poseidon {

// n windows of one output row over a channel plane: window q covers plane
// rows [h0, h1) and columns [first + q * stride, first + q * stride +
// kernel_w), all inside the plane.
struct PoolRow {
  const float* plane;
  int width;  // of the plane
  int h0, h1;
  int kernel_w;
  int first;
  int stride;  // 1 or 2
  int n;
};

// True when the CPU has AVX-512 or AVX2 (and POSEIDON_KERNELS is not
// blas): the functions below run.
bool PoolRowKernelsAvailable();

// The fewest windows of a row worth these kernels: 1 with AVX-512 (its
// masks cost nothing), 8 with AVX2, a whole vector (its masked loads, slow
// on AMD, made rows of 3 windows 1.5-1.9 times slower than the plain loops
// on a Zen 1 EPYC: docs/performance.md).
int PoolRowMinWindows();

// MAX: top[q] and index[q] (h * width + w in the plane) of the first
// maximum in row-major window order (an element replaces the best so far
// only if strictly greater, so a NaN wins only as the first element).
void MaxPoolRow(const PoolRow& row, float* top, int* index);

// sums[q] = the sum of window q, added in row-major order from 0.
void SumPoolRow(const PoolRow& row, float* sums);

// Adds share[q] to every element of window q of the plane `diff` (laid out
// like row.plane, which is not read); each element receives its shares in
// increasing q.
void SpreadPoolRow(const PoolRow& row, const float* share, float* diff);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_POOL_ROWS_HPP_
