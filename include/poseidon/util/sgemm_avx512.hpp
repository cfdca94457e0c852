// Poseidon's own single-precision GEMM for CPUs with AVX-512: one of the
// float GEMM backends of util/sgemm.hpp (SgemmBackend::kAvx512).
//
// Note [AVX-512 GEMM]
// The classic Goto/BLIS structure. For each block of at most kNC columns
// of C and each block of at most kKC steps of the inner dimension, op(B)
// is packed into panels of kNR columns (zero-padded to kNR; the packing
// does the transposing), and for each block of at most kMC rows, op(A)
// into panels of kMR rows; a register-blocked micro-kernel then multiplies
// an A panel by a B panel into kMR x kNR accumulators (zmm registers, A
// broadcast, B loaded as vectors) and adds the result into C: rows past M
// are not computed (a kernel per row count), columns past N are masked.
// The blocks are sized for one core: a B panel (kKC x kNR floats) is read
// from L1, the packed A block (kMC x kKC) from L2. When M fits one block
// of rows (most convolutions), each B panel is packed just before its
// kernels run; otherwise a block of kNC columns ahead, for all row blocks.
// K is split into blocks of equal size (at most kKC), so no block is much
// shorter than the others. The sizes and kernel shape are in the .cpp.
//
// Deterministic by construction: element C(i, j) is, for each block of
// the inner dimension in turn, one sequence of fused multiply-adds over
// its steps (k ascending) starting from zero, then added to C as
// alpha * sum + C (the first block: alpha * sum + beta * C, or alpha * sum
// when beta is 0, C unread). That order depends on K (and the constant
// kKC) only: not on M, N, the element's position in its tile, the tile's
// edges, the alignment of the operands, the thread or what ran before. So
// a product split by columns or rows over threads (cpu_gemm_parallel)
// gives the same bits as the whole product, and the same call gives the
// same bits in any process on the same CPU.
//
// Thread safety: any number of threads may call at once; each call runs on
// the calling thread, and the only state is that thread's pack buffers
// (thread_local, 64-byte aligned, grown on demand and kept).
#ifndef POSEIDON_UTIL_SGEMM_AVX512_HPP_
#define POSEIDON_UTIL_SGEMM_AVX512_HPP_

#include <cblas.h>

namespace poseidon {

// Row-major C = alpha * op(A) * op(B) + beta * C, as cblas_sgemm with
// CblasRowMajor: op(A) is M x K, op(B) K x N, leading dimensions as there.
// With beta == 0, C is not read; with alpha == 0 or K == 0, C = beta * C
// (A and B unread). Needs Avx512KernelsAvailable() (CHECKed).
void Avx512Sgemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M,
                 int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_SGEMM_AVX512_HPP_
