// Poseidon's own single-precision GEMM for CPUs with AVX2 and FMA but no
// AVX-512: one of the float GEMM backends of util/sgemm.hpp
// (SgemmBackend::kAvx2).
//
// The blocking, the order of the sums (deterministic: C's bits depend on K
// only, summed in the AVX-512 kernel's order) and the thread safety are
// those of Note [Blocked GEMM] (util/sgemm_blocked.hpp). The tile is 6 rows
// x 16 columns: 12 ymm accumulators, 2 for B, 1 for the broadcast A, of the
// 16 registers. The inner block is the fixed 256 steps (part of the
// summation order; a B panel is then 16 KiB, within any AVX2 CPU's L1d);
// the row block mc is sized so the packed A block fills half of the L2
// cache the CPU reports, and the column block nc so the packed B block
// takes at most a quarter of L3 (4 MiB at most), both read once per
// process (Avx2SgemmBlocking says what was found and chosen).
#ifndef POSEIDON_UTIL_SGEMM_AVX2_HPP_
#define POSEIDON_UTIL_SGEMM_AVX2_HPP_

#include <cblas.h>

#include <cstddef>
#include <string>

namespace poseidon {

// Row-major C = alpha * op(A) * op(B) + beta * C, as cblas_sgemm with
// CblasRowMajor: op(A) is M x K, op(B) K x N, leading dimensions as there.
// With beta == 0, C is not read; with alpha == 0 or K == 0, C = beta * C
// (A and B unread). Needs Avx2KernelsAvailable() (CHECKed).
void Avx2Sgemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N,
               int K, float alpha, const float* A, int lda, const float* B,
               int ldb, float beta, float* C, int ldc);

// The im2col matrix of one zero-padded image, never written (an "implicit
// GEMM"; DirectConv's AVX2 path, util/direct_conv.hpp): row k (a channel
// and kernel tap) of column p (an output position) is padded[row_offset[k]
// + position_offset[p]]. Offsets must fit an int (the gathers' indices).
struct ImplicitColumns {
  const float* padded;
  const ptrdiff_t* row_offset;  // per row: channel * plane + tap offset
  const int* position_offset;   // per column, increasing
};

// C (M x S, row stride ldc) = A (M x K, row stride lda) * col (K x S) +
// beta * C (beta == 0: C unread): a convolution's forward, the column
// panels packed straight from the image. Needs Avx2KernelsAvailable().
void Avx2ImplicitForward(int M, int S, int K, const float* A, int lda,
                         const ImplicitColumns& col, float beta, float* C,
                         int ldc);

// C (K x N, row stride ldc) = col (K x S) * B^T + beta * C, B (N x S, row
// stride ldb): a convolution's weight gradient, transposed. Needs
// Avx2KernelsAvailable().
void Avx2ImplicitColumnsTimesBt(int K, int N, int S, const ImplicitColumns& col,
                                const float* B, int ldb, float beta, float* C,
                                int ldc);

// The blocks chosen and the caches they were chosen from, for logs, e.g.
// "6 x 16 tile, blocks 252 x 256 x 4096 (L2 512 KiB, L3 32768 KiB)".
std::string Avx2SgemmBlocking();

}  // namespace poseidon

#endif  // POSEIDON_UTIL_SGEMM_AVX2_HPP_
