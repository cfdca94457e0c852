// The single-precision GEMM behind cpu_gemm<float> and
// cpu_gemm_parallel<float> (util/math_functions.hpp), chosen once per
// process by the environment variable POSEIDON_SGEMM: Poseidon's AVX-512
// kernel (util/sgemm_avx512.hpp; the default on CPUs with AVX-512 unless
// POSEIDON_KERNELS=blas), Poseidon's AVX2 kernel (util/sgemm_avx2.hpp; the
// default on CPUs with AVX2 and FMA but no AVX-512), OpenBLAS's
// cblas_sgemm (the reference; the default elsewhere and with
// POSEIDON_KERNELS=blas; POSEIDON_SGEMM=openblas), or oneDNN's dnnl_sgemm
// (POSEIDON_SGEMM=onednn, in builds with USE_DNNL). A backend the CPU or
// build lacks is refused with a warning. Double precision always uses
// OpenBLAS. Thread-safe.
//
// Note [Float GEMM]
// The OpenBLAS that Debian ships chooses its kernels by CPU, but machines
// set up with OPENBLAS_CORETYPE=Haswell pin it to its AVX2 kernels (about
// half the AVX-512 peak of the development machine's Xeon: 130 against
// 240 GFLOP/s of pure FMAs on one core), and other users have other BLAS
// builds. Hence a kernel of our own, chosen by CPUID. On the 45 products
// of scripts/bench/bench_gemm.cpp (ResNet-50, VGG-16 and GoogLeNet
// convolutions: forward, weight and input gradients; square 512-2048),
// single-threaded, medians of 5 interleaved repeats on the shared 2-core
// machine (load average 2.4-2.6), it ran at 1.54x OpenBLAS-on-AVX2 in
// geometric mean (per product 1.04-2.20; 1.53 over the 42 convolution
// products), oneDNN at 1.63x (0.98-2.15). Against OpenBLAS's own AVX-512
// kernels (OPENBLAS_CORETYPE unset; load 2.6-2.8) 1.12x (0.62-1.67),
// oneDNN 1.17x. End to end (poseidon_train time, 3 interleaved runs each,
// load 2.1-3.8), VGG-16 at batch 2 took 1990 instead of 2328 ms per
// forward-backward (median; its stride-1 convolutions run the direct
// kernels, util/direct_conv.hpp, not GEMM), ResNet-50 at batch 32 9953
// instead of 11593 ms.
// Why ours by default and not oneDNN, a little faster still: the
// AVX-512 kernel is deterministic by construction (Note [Blocked GEMM]:
// an element's bits depend on K only, not on threads, alignment, the split
// of the product over the pool or what the process did before), which
// Caffe's CPU results are and Poseidon's golden and bit-for-bit tests
// expect. oneDNN's single-threaded dnnl_sgemm is not reproducible within a
// process: matcaffe's test that trains LeNet in Octave and with
// poseidon_train and compares the weights bit for bit failed with oneDNN
// whenever certain other tests had run first in the same Octave process
// (test_errors then test_io: different weights; test_io then test_errors:
// the same), and passed with OpenBLAS in every order; some state of the
// process (heap layout, the alignment of oneDNN's own buffers, or
// floating-point control bits) changes its summation order. BLIS 0.9.0 as
// Debian builds it has no AVX-512 sub-configuration and ran at 0.76-1.20x
// OpenBLAS-on-AVX2, so it is not used.
// On CPUs with AVX2 and FMA but no AVX-512 the same reasons hold (a BLAS
// build or OPENBLAS_CORETYPE may not match the CPU, and only our order is
// fixed), so the AVX2 kernel is the default there; on an AMD EPYC with
// OpenBLAS on its own Zen kernels it ran the 45 products at 1.03x OpenBLAS
// (docs/performance.md, "The float GEMM"), LeNet's at 1.12x.
// The AVX-512 kernel sums in another order than OpenBLAS, so float results
// differ from an OpenBLAS run in the last bits; the test suite passes with
// either (its golden values carry tolerances, and its bit-for-bit checks
// compare runs that use the same backend).
// oneDNN and threads: Debian's oneDNN runs on OpenMP. Every thread that calls
// oneDNN first sets its own OpenMP thread count to 1, so oneDNN runs one
// single-threaded product per calling thread and never starts an OpenMP team;
// the parallelism is Poseidon's pool's (util/parallel.hpp: the convolutions
// split the batch, cpu_gemm_parallel splits columns). Two reasons. Beside the
// pool, an OpenMP team's spinning threads take turns with the pool's on the
// same cores (the reason OpenBLAS runs single-threaded then; Note [One thread
// pool] in common.cpp). And with one pool thread (POSEIDON_NUM_THREADS=1, as
// psd_run sets for several ranks per host), letting oneDNN start teams of
// every core's size oversubscribed the cores, and in one CI run of the
// link-fault matrix (4 ranks on 2 cores) two ranks hung inside GOMP_parallel's
// first team start-up and died in malloc with a corrupted heap; we did not
// find the cause and keep OpenMP teams out of the process instead. So one pool
// thread means one thread for the float GEMM too (OpenBLAS, the reference,
// keeps its own setting then).
#ifndef POSEIDON_UTIL_SGEMM_HPP_
#define POSEIDON_UTIL_SGEMM_HPP_

#include <cblas.h>

namespace poseidon {

enum class SgemmBackend {
  kOpenBlas,  // OpenBLAS's cblas_sgemm: the reference
  kOneDnn,    // oneDNN's dnnl_sgemm (USE_DNNL builds)
  kAvx512,    // Poseidon's AVX-512 kernel (util/sgemm_avx512.hpp)
  kAvx2,      // Poseidon's AVX2 kernel (util/sgemm_avx2.hpp)
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
// USE_DNNL; the AVX-512 kernel: Avx512KernelsAvailable(); the AVX2 kernel:
// Avx2KernelsAvailable()).
bool SgemmBackendAvailable(SgemmBackend backend);

// The number of OpenMP threads a oneDNN product called from this thread
// runs on (1 once it has called oneDNN: Note [Float GEMM]); 0 without
// oneDNN. For tests.
int OneDnnThreadsOfThisThread();

}  // namespace poseidon

#endif  // POSEIDON_UTIL_SGEMM_HPP_
