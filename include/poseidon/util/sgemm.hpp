// The single-precision GEMM behind cpu_gemm<float> and
// cpu_gemm_parallel<float> (util/math_functions.hpp), chosen once per
// process: OpenBLAS's cblas_sgemm (the reference), or oneDNN's dnnl_sgemm
// when the build has oneDNN (USE_DNNL) and the environment variable
// POSEIDON_SGEMM=onednn asks for it (POSEIDON_SGEMM=openblas names the
// default). Double precision always uses OpenBLAS. Thread-safe.
//
// Note [Float GEMM]
// The OpenBLAS that Debian ships chooses its kernels by CPU, but machines
// set up with OPENBLAS_CORETYPE=Haswell (as the development machines are)
// pin it to its AVX2 kernels, and other users have other BLAS builds.
// oneDNN picks its JIT kernels from CPUID and ignores that variable; on the
// products convolutions produce it was 1.1-1.9x OpenBLAS single-threaded
// (scripts/bench/bench_gemm.cpp; figures in README's CPU section). BLIS
// 0.9.0 as Debian builds it has no AVX-512 sub-configuration and ran at
// 0.6-1.2x OpenBLAS-on-AVX2, so it is not used.
// Why oneDNN is not the default (yet): its single-threaded dnnl_sgemm is
// not reproducible within a process. matcaffe's test that trains LeNet in
// Octave and with poseidon_train and compares the weights bit for bit
// failed with oneDNN whenever certain other tests had run first in the
// same Octave process (test_errors then test_io: different weights;
// test_io then test_errors: the same), and passed with OpenBLAS in every
// order. Some state of the process (heap layout, the alignment of
// oneDNN's own buffers, or floating-point control bits) changes its
// summation order; until that is found and pinned, a user's CPU results
// would depend on what the process did before, which Caffe's do not.
// Threads: Debian's oneDNN runs on OpenMP. Every thread that calls oneDNN
// first sets its own OpenMP thread count to 1, so oneDNN runs one
// single-threaded product per calling thread and never starts an OpenMP
// team; the parallelism is Poseidon's pool's (util/parallel.hpp: the
// convolutions split the batch, cpu_gemm_parallel splits columns). Two
// reasons. Beside the pool, an OpenMP team's spinning threads take turns
// with the pool's on the same cores (the reason OpenBLAS runs
// single-threaded then; Note [One thread pool] in common.cpp). And with
// one pool thread (POSEIDON_NUM_THREADS=1, as psd_run sets for several
// ranks per host), letting oneDNN start teams of every core's size
// oversubscribed the cores, and in one CI run of the link-fault matrix
// (4 ranks on 2 cores) two ranks hung inside GOMP_parallel's first team
// start-up and died in malloc with a corrupted heap; we did not find the
// cause and keep OpenMP teams out of the process instead. So one pool
// thread means one thread for the float GEMM too (OpenBLAS, the
// reference, keeps its own setting then).
#ifndef POSEIDON_UTIL_SGEMM_HPP_
#define POSEIDON_UTIL_SGEMM_HPP_

#include <cblas.h>

namespace poseidon {

enum class SgemmBackend {
  kOpenBlas,  // OpenBLAS's cblas_sgemm: the reference
  kOneDnn,    // oneDNN's dnnl_sgemm (USE_DNNL builds)
  kAvx512,    // Poseidon's AVX-512 kernel (util/sgemm_avx512.hpp)
};

// The backend this process uses (decided on the first call).
SgemmBackend ActiveSgemmBackend();

// A line for start-up logs: the backend, its version and why it was chosen.
const char* SgemmDescription();

// Row-major C = alpha * op(A) * op(B) + beta * C with leading dimensions, as
// cblas_sgemm with CblasRowMajor. With beta == 0, C is not read (NaN in C
// does not propagate), as in BLAS.
void Sgemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N,
           int K, float alpha, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc);

// The same product through a given backend: for tests and comparisons.
// The backend must be available (SgemmBackendAvailable).
void SgemmWith(SgemmBackend backend, CBLAS_TRANSPOSE trans_a,
               CBLAS_TRANSPOSE trans_b, int M, int N, int K, float alpha,
               const float* A, int lda, const float* B, int ldb, float beta,
               float* C, int ldc);

// True when this build and CPU have the backend (oneDNN: built with
// USE_DNNL; the AVX-512 kernel: Avx512KernelsAvailable()).
bool SgemmBackendAvailable(SgemmBackend backend);

// The number of OpenMP threads a oneDNN product called from this thread
// runs on (1 once it has called oneDNN: Note [Float GEMM]); 0 without
// oneDNN. For tests.
int OneDnnThreadsOfThisThread();

}  // namespace poseidon

#endif  // POSEIDON_UTIL_SGEMM_HPP_
