// The BLAS-level and element-wise kernels layers and solvers are written
// against. CPU versions (cpu_*) call OpenBLAS (cblas) where a BLAS routine
// exists and the shared element-wise bodies of kernels/math_kernels.hpp
// elsewhere; GPU versions (gpu_*, CUDA builds only) call cuBLAS, cuRAND and
// the same bodies on the calling thread's stream (util/gpu_context.hpp).
// Matrices are row-major, as in Caffe: C = alpha * op(A) * op(B) + beta * C.
//
// math::X(dev, ...) runs X where `dev` says, so a layer whose CPU and GPU
// passes are the same sequence of calls writes that sequence once against
// the device it is given (see Blob::data_on and friends). GPU functions that
// return a scalar (dot, asum) wait for the stream; the others do not.
#ifndef POSEIDON_UTIL_MATH_FUNCTIONS_HPP_
#define POSEIDON_UTIL_MATH_FUNCTIONS_HPP_

#include <cblas.h>

#include <cmath>
#include <cstring>

#include "poseidon/common.hpp"

namespace poseidon {

template <typename Dtype>
void cpu_gemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N,
              int K, Dtype alpha, const Dtype* A, const Dtype* B, Dtype beta,
              Dtype* C);

// cpu_gemm with the columns of C split over Poseidon's thread pool
// (util/parallel.hpp) when the product is large enough to pay for it, each
// slice one OpenBLAS call; see Note [One thread pool] in common.cpp.
// Deterministic for a given thread count. Inside a parallel region, or with
// one thread, it is cpu_gemm.
template <typename Dtype>
void cpu_gemm_parallel(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M,
                       int N, int K, Dtype alpha, const Dtype* A,
                       const Dtype* B, Dtype beta, Dtype* C);

// y = alpha * op(A) * x + beta * y, A is M x N.
template <typename Dtype>
void cpu_gemv(CBLAS_TRANSPOSE trans_a, int M, int N, Dtype alpha,
              const Dtype* A, const Dtype* x, Dtype beta, Dtype* y);

// y += alpha * x
template <typename Dtype>
void cpu_axpy(int N, Dtype alpha, const Dtype* x, Dtype* y);

// y = alpha * x + beta * y
template <typename Dtype>
void cpu_axpby(int N, Dtype alpha, const Dtype* x, Dtype beta, Dtype* y);

template <typename Dtype>
void cpu_copy(int N, const Dtype* x, Dtype* y);

template <typename Dtype>
void cpu_set(int N, Dtype alpha, Dtype* y);

// x *= alpha
template <typename Dtype>
void cpu_scal(int N, Dtype alpha, Dtype* x);

// y = alpha * x
template <typename Dtype>
void cpu_scale(int N, Dtype alpha, const Dtype* x, Dtype* y);

template <typename Dtype>
void cpu_add_scalar(int N, Dtype alpha, Dtype* y);

// Element-wise y = a (op) b.
template <typename Dtype>
void cpu_add(int N, const Dtype* a, const Dtype* b, Dtype* y);
template <typename Dtype>
void cpu_sub(int N, const Dtype* a, const Dtype* b, Dtype* y);
template <typename Dtype>
void cpu_mul(int N, const Dtype* a, const Dtype* b, Dtype* y);
template <typename Dtype>
void cpu_div(int N, const Dtype* a, const Dtype* b, Dtype* y);

// Element-wise y = f(a).
template <typename Dtype>
void cpu_sqr(int N, const Dtype* a, Dtype* y);
template <typename Dtype>
void cpu_sqrt(int N, const Dtype* a, Dtype* y);
template <typename Dtype>
void cpu_powx(int N, const Dtype* a, Dtype b, Dtype* y);
template <typename Dtype>
void cpu_exp(int N, const Dtype* a, Dtype* y);
template <typename Dtype>
void cpu_log(int N, const Dtype* a, Dtype* y);
template <typename Dtype>
void cpu_abs(int N, const Dtype* a, Dtype* y);
template <typename Dtype>
void cpu_sign(int N, const Dtype* a, Dtype* y);

template <typename Dtype>
Dtype cpu_dot(int N, const Dtype* x, const Dtype* y);
template <typename Dtype>
Dtype cpu_strided_dot(int N, const Dtype* x, int incx, const Dtype* y,
                      int incy);
// Sum of absolute values.
template <typename Dtype>
Dtype cpu_asum(int N, const Dtype* x);

// Random numbers from the calling thread's generator (Poseidon::rng()).
// Uniform in [a, b]; Gaussian N(mu, sigma^2); Bernoulli(p) as 0/1 ints.
template <typename Dtype>
void rng_uniform(int N, Dtype a, Dtype b, Dtype* r);
template <typename Dtype>
void rng_gaussian(int N, Dtype mu, Dtype sigma, Dtype* r);
template <typename Dtype>
void rng_bernoulli(int N, Dtype p, int* r);
template <typename Dtype>
void rng_bernoulli(int N, Dtype p, unsigned int* r);

// True when every element is finite.
template <typename Dtype>
bool cpu_all_finite(int N, const Dtype* x);

#ifndef CPU_ONLY
// GPU versions of the above, same arguments; pointers are device memory.
template <typename Dtype>
void gpu_gemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N,
              int K, Dtype alpha, const Dtype* A, const Dtype* B, Dtype beta,
              Dtype* C);
template <typename Dtype>
void gpu_gemv(CBLAS_TRANSPOSE trans_a, int M, int N, Dtype alpha,
              const Dtype* A, const Dtype* x, Dtype beta, Dtype* y);
template <typename Dtype>
void gpu_axpy(int N, Dtype alpha, const Dtype* x, Dtype* y);
template <typename Dtype>
void gpu_axpby(int N, Dtype alpha, const Dtype* x, Dtype beta, Dtype* y);
template <typename Dtype>
void gpu_copy(int N, const Dtype* x, Dtype* y);
template <typename Dtype>
void gpu_set(int N, Dtype alpha, Dtype* y);
template <typename Dtype>
void gpu_scal(int N, Dtype alpha, Dtype* x);
template <typename Dtype>
void gpu_scale(int N, Dtype alpha, const Dtype* x, Dtype* y);
template <typename Dtype>
void gpu_add_scalar(int N, Dtype alpha, Dtype* y);
template <typename Dtype>
void gpu_add(int N, const Dtype* a, const Dtype* b, Dtype* y);
template <typename Dtype>
void gpu_sub(int N, const Dtype* a, const Dtype* b, Dtype* y);
template <typename Dtype>
void gpu_mul(int N, const Dtype* a, const Dtype* b, Dtype* y);
template <typename Dtype>
void gpu_div(int N, const Dtype* a, const Dtype* b, Dtype* y);
template <typename Dtype>
void gpu_sqr(int N, const Dtype* a, Dtype* y);
template <typename Dtype>
void gpu_sqrt(int N, const Dtype* a, Dtype* y);
template <typename Dtype>
void gpu_powx(int N, const Dtype* a, Dtype b, Dtype* y);
template <typename Dtype>
void gpu_exp(int N, const Dtype* a, Dtype* y);
template <typename Dtype>
void gpu_log(int N, const Dtype* a, Dtype* y);
template <typename Dtype>
void gpu_abs(int N, const Dtype* a, Dtype* y);
template <typename Dtype>
void gpu_sign(int N, const Dtype* a, Dtype* y);
template <typename Dtype>
Dtype gpu_dot(int N, const Dtype* x, const Dtype* y);
template <typename Dtype>
Dtype gpu_asum(int N, const Dtype* x);
// Random numbers from the calling thread's cuRAND generator.
template <typename Dtype>
void gpu_rng_uniform(int N, Dtype a, Dtype b, Dtype* r);
template <typename Dtype>
void gpu_rng_gaussian(int N, Dtype mu, Dtype sigma, Dtype* r);
template <typename Dtype>
void gpu_rng_bernoulli(int N, Dtype p, int* r);
template <typename Dtype>
void gpu_rng_bernoulli(int N, Dtype p, unsigned int* r);
template <typename Dtype>
bool gpu_all_finite(int N, const Dtype* x);
#endif  // CPU_ONLY

// Runs cpu_call or gpu_call as `dev` says (a CPU-only build throws for GPU).
#ifdef CPU_ONLY
#define POSEIDON_ON_DEVICE(dev, cpu_call, gpu_call) \
  do {                                              \
    if ((dev) == ::poseidon::Poseidon::GPU) NO_GPU; \
    cpu_call;                                       \
  } while (0)
#else
#define POSEIDON_ON_DEVICE(dev, cpu_call, gpu_call) \
  do {                                              \
    if ((dev) == ::poseidon::Poseidon::GPU) {       \
      gpu_call;                                     \
    } else {                                        \
      cpu_call;                                     \
    }                                               \
  } while (0)
#endif

namespace math {

using Brew = Poseidon::Brew;

// C = alpha op(A) op(B) + beta C; on the CPU split over the thread pool
// (cpu_gemm_parallel), on the GPU one cuBLAS call.
template <typename Dtype>
inline void gemm(Brew dev, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M,
                 int N, int K, Dtype alpha, const Dtype* A, const Dtype* B,
                 Dtype beta, Dtype* C) {
  POSEIDON_ON_DEVICE(
      dev, cpu_gemm_parallel<Dtype>(ta, tb, M, N, K, alpha, A, B, beta, C),
      gpu_gemm<Dtype>(ta, tb, M, N, K, alpha, A, B, beta, C));
}

// gemm on one CPU thread (cpu_gemm): for callers already inside a
// parallel region, or whose results must not depend on the thread count.
template <typename Dtype>
inline void gemm_serial(Brew dev, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb,
                        int M, int N, int K, Dtype alpha, const Dtype* A,
                        const Dtype* B, Dtype beta, Dtype* C) {
  POSEIDON_ON_DEVICE(dev, cpu_gemm<Dtype>(ta, tb, M, N, K, alpha, A, B, beta, C),
                     gpu_gemm<Dtype>(ta, tb, M, N, K, alpha, A, B, beta, C));
}

template <typename Dtype>
inline void gemv(Brew dev, CBLAS_TRANSPOSE ta, int M, int N, Dtype alpha,
                 const Dtype* A, const Dtype* x, Dtype beta, Dtype* y) {
  POSEIDON_ON_DEVICE(dev, cpu_gemv<Dtype>(ta, M, N, alpha, A, x, beta, y),
                     gpu_gemv<Dtype>(ta, M, N, alpha, A, x, beta, y));
}

#define POSEIDON_MATH_DISPATCH(name, params, args)              \
  template <typename Dtype>                                     \
  inline void name params {                                     \
    POSEIDON_ON_DEVICE(dev, cpu_##name<Dtype> args, gpu_##name<Dtype> args); \
  }
POSEIDON_MATH_DISPATCH(axpy, (Brew dev, int N, Dtype alpha, const Dtype* x, Dtype* y), (N, alpha, x, y))
POSEIDON_MATH_DISPATCH(axpby, (Brew dev, int N, Dtype alpha, const Dtype* x, Dtype beta, Dtype* y), (N, alpha, x, beta, y))
POSEIDON_MATH_DISPATCH(copy, (Brew dev, int N, const Dtype* x, Dtype* y), (N, x, y))
POSEIDON_MATH_DISPATCH(set, (Brew dev, int N, Dtype alpha, Dtype* y), (N, alpha, y))
POSEIDON_MATH_DISPATCH(scal, (Brew dev, int N, Dtype alpha, Dtype* x), (N, alpha, x))
POSEIDON_MATH_DISPATCH(scale, (Brew dev, int N, Dtype alpha, const Dtype* x, Dtype* y), (N, alpha, x, y))
POSEIDON_MATH_DISPATCH(add_scalar, (Brew dev, int N, Dtype alpha, Dtype* y), (N, alpha, y))
POSEIDON_MATH_DISPATCH(add, (Brew dev, int N, const Dtype* a, const Dtype* b, Dtype* y), (N, a, b, y))
POSEIDON_MATH_DISPATCH(sub, (Brew dev, int N, const Dtype* a, const Dtype* b, Dtype* y), (N, a, b, y))
POSEIDON_MATH_DISPATCH(mul, (Brew dev, int N, const Dtype* a, const Dtype* b, Dtype* y), (N, a, b, y))
POSEIDON_MATH_DISPATCH(div, (Brew dev, int N, const Dtype* a, const Dtype* b, Dtype* y), (N, a, b, y))
POSEIDON_MATH_DISPATCH(sqr, (Brew dev, int N, const Dtype* a, Dtype* y), (N, a, y))
POSEIDON_MATH_DISPATCH(sqrt, (Brew dev, int N, const Dtype* a, Dtype* y), (N, a, y))
POSEIDON_MATH_DISPATCH(powx, (Brew dev, int N, const Dtype* a, Dtype b, Dtype* y), (N, a, b, y))
POSEIDON_MATH_DISPATCH(exp, (Brew dev, int N, const Dtype* a, Dtype* y), (N, a, y))
POSEIDON_MATH_DISPATCH(log, (Brew dev, int N, const Dtype* a, Dtype* y), (N, a, y))
POSEIDON_MATH_DISPATCH(abs, (Brew dev, int N, const Dtype* a, Dtype* y), (N, a, y))
POSEIDON_MATH_DISPATCH(sign, (Brew dev, int N, const Dtype* a, Dtype* y), (N, a, y))
#undef POSEIDON_MATH_DISPATCH

template <typename Dtype>
inline Dtype dot(Brew dev, int N, const Dtype* x, const Dtype* y) {
  Dtype result = 0;
  POSEIDON_ON_DEVICE(dev, result = cpu_dot<Dtype>(N, x, y),
                     result = gpu_dot<Dtype>(N, x, y));
  return result;
}

template <typename Dtype>
inline Dtype asum(Brew dev, int N, const Dtype* x) {
  Dtype result = 0;
  POSEIDON_ON_DEVICE(dev, result = cpu_asum<Dtype>(N, x),
                     result = gpu_asum<Dtype>(N, x));
  return result;
}

// Random numbers: from the thread's mt19937 on the CPU, from its cuRAND
// generator on the GPU (so the two devices draw different numbers).
template <typename Dtype>
inline void rng_uniform(Brew dev, int N, Dtype a, Dtype b, Dtype* r) {
  POSEIDON_ON_DEVICE(dev, ::poseidon::rng_uniform<Dtype>(N, a, b, r),
                     gpu_rng_uniform<Dtype>(N, a, b, r));
}
template <typename Dtype>
inline void rng_gaussian(Brew dev, int N, Dtype mu, Dtype sigma, Dtype* r) {
  POSEIDON_ON_DEVICE(dev, ::poseidon::rng_gaussian<Dtype>(N, mu, sigma, r),
                     gpu_rng_gaussian<Dtype>(N, mu, sigma, r));
}
template <typename Dtype, typename Int>
inline void rng_bernoulli(Brew dev, int N, Dtype p, Int* r) {
  POSEIDON_ON_DEVICE(dev, ::poseidon::rng_bernoulli<Dtype>(N, p, r),
                     gpu_rng_bernoulli<Dtype>(N, p, r));
}

template <typename Dtype>
inline bool all_finite(Brew dev, int N, const Dtype* x) {
  bool result = true;
  POSEIDON_ON_DEVICE(dev, result = cpu_all_finite<Dtype>(N, x),
                     result = gpu_all_finite<Dtype>(N, x));
  return result;
}

}  // namespace math
}  // namespace poseidon

#endif  // POSEIDON_UTIL_MATH_FUNCTIONS_HPP_
