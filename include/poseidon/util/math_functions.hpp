// The BLAS-level and element-wise kernels layers and solvers are written
// against. CPU versions call OpenBLAS (cblas) where a BLAS routine exists and
// plain loops elsewhere; GPU versions (gpu_*) exist in CUDA builds.
// Matrices are row-major, as in Caffe: C = alpha * op(A) * op(B) + beta * C.
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

}  // namespace poseidon

#endif  // POSEIDON_UTIL_MATH_FUNCTIONS_HPP_
