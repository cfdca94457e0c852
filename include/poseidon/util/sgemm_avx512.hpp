// Poseidon's own single-precision GEMM for CPUs with AVX-512: one of the
// float GEMM backends of util/sgemm.hpp (SgemmBackend::kAvx512).
//
// The blocking, the order of the sums (deterministic: C's bits depend on K
// only) and the thread safety are those of Note [Blocked GEMM]
// (util/sgemm_blocked.hpp); this kernel's tile is 8 rows x 48 columns (zmm
// accumulators), its blocks fixed constants measured on an AVX-512 Xeon
// (sizes in the .cpp).
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
