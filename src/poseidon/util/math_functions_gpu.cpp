// GPU math functions: cuBLAS for the BLAS routines, cuRAND for random
// numbers, and the element-wise bodies shared with the CPU
// (kernels/math_kernels.hpp, instantiated in kernels/math_kernels.cu), all on
// the calling thread's stream. CUDA builds only.
#ifndef CPU_ONLY
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>

#include <cmath>

#include "poseidon/kernels/math_kernels.hpp"
#include "poseidon/syncedmem.hpp"
#include "poseidon/util/blas_args.hpp"
#include "poseidon/util/device_check.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/gpu_context.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {
namespace {

// The one place Poseidon's op enum becomes cuBLAS's.
cublasOperation_t ToCublas(blas::Op op) {
  return op == blas::Op::kNoTrans ? CUBLAS_OP_N : CUBLAS_OP_T;
}

// The row-major operands in the order the column-major call takes them.
template <typename Dtype>
struct GemmOperands {
  const Dtype* first;
  const Dtype* second;
};
template <typename Dtype>
GemmOperands<Dtype> Order(const blas::ColumnMajorGemm& g, const Dtype* A,
                          const Dtype* B) {
  return g.first == blas::Operand::kA ? GemmOperands<Dtype>{A, B}
                                      : GemmOperands<Dtype>{B, A};
}

}  // namespace

// cuBLAS is column-major: the row-major GEMM and GEMV become the calls
// util/blas_args.hpp computes (tested on the CPU in test_blas_args.cpp).
template <>
void gpu_gemm<float>(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M,
                     int N, int K, float alpha, const float* A, const float* B,
                     float beta, float* C) {
  const blas::ColumnMajorGemm g =
      blas::ToColumnMajorGemm(trans_a, trans_b, M, N, K);
  const GemmOperands<float> o = Order(g, A, B);
  POSEIDON_CUBLAS_CHECK(cublasSgemm(
      gpu::Cublas(), ToCublas(g.op_first), ToCublas(g.op_second), g.m, g.n, g.k,
      &alpha, o.first, g.ld_first, o.second, g.ld_second, &beta, C, g.ldc));
}

template <>
void gpu_gemm<double>(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M,
                      int N, int K, double alpha, const double* A,
                      const double* B, double beta, double* C) {
  const blas::ColumnMajorGemm g =
      blas::ToColumnMajorGemm(trans_a, trans_b, M, N, K);
  const GemmOperands<double> o = Order(g, A, B);
  POSEIDON_CUBLAS_CHECK(cublasDgemm(
      gpu::Cublas(), ToCublas(g.op_first), ToCublas(g.op_second), g.m, g.n, g.k,
      &alpha, o.first, g.ld_first, o.second, g.ld_second, &beta, C, g.ldc));
}

template <>
void gpu_gemv<float>(CBLAS_TRANSPOSE trans_a, int M, int N, float alpha,
                     const float* A, const float* x, float beta, float* y) {
  const blas::ColumnMajorGemv g = blas::ToColumnMajorGemv(trans_a, M, N);
  POSEIDON_CUBLAS_CHECK(cublasSgemv(gpu::Cublas(), ToCublas(g.op), g.m, g.n,
                                    &alpha, A, g.lda, x, 1, &beta, y, 1));
}

template <>
void gpu_gemv<double>(CBLAS_TRANSPOSE trans_a, int M, int N, double alpha,
                      const double* A, const double* x, double beta,
                      double* y) {
  const blas::ColumnMajorGemv g = blas::ToColumnMajorGemv(trans_a, M, N);
  POSEIDON_CUBLAS_CHECK(cublasDgemv(gpu::Cublas(), ToCublas(g.op), g.m, g.n,
                                    &alpha, A, g.lda, x, 1, &beta, y, 1));
}

// axpy, dot and asum need no translation: a contiguous vector is the same
// in row- and column-major order, so they take n and unit increments.
template <>
void gpu_axpy<float>(int N, float alpha, const float* x, float* y) {
  POSEIDON_CUBLAS_CHECK(cublasSaxpy(gpu::Cublas(), N, &alpha, x, 1, y, 1));
}
template <>
void gpu_axpy<double>(int N, double alpha, const double* x, double* y) {
  POSEIDON_CUBLAS_CHECK(cublasDaxpy(gpu::Cublas(), N, &alpha, x, 1, y, 1));
}

template <>
float gpu_dot<float>(int N, const float* x, const float* y) {
  float result = 0;
  POSEIDON_CUBLAS_CHECK(cublasSdot(gpu::Cublas(), N, x, 1, y, 1, &result));
  return result;
}
template <>
double gpu_dot<double>(int N, const double* x, const double* y) {
  double result = 0;
  POSEIDON_CUBLAS_CHECK(cublasDdot(gpu::Cublas(), N, x, 1, y, 1, &result));
  return result;
}

template <>
float gpu_asum<float>(int N, const float* x) {
  float result = 0;
  POSEIDON_CUBLAS_CHECK(cublasSasum(gpu::Cublas(), N, x, 1, &result));
  return result;
}
template <>
double gpu_asum<double>(int N, const double* x) {
  double result = 0;
  POSEIDON_CUBLAS_CHECK(cublasDasum(gpu::Cublas(), N, x, 1, &result));
  return result;
}

template <typename Dtype>
void gpu_axpby(int N, Dtype alpha, const Dtype* x, Dtype beta, Dtype* y) {
  gpu_for_each(N, kernels::AxpbyKernel<Dtype>{alpha, x, beta, y});
}

template <typename Dtype>
void gpu_copy(int N, const Dtype* x, Dtype* y) {
  if (x == y || N <= 0) return;
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(y, x, sizeof(Dtype) * N,
                                      cudaMemcpyDefault, gpu::Stream()));
}

template <typename Dtype>
void gpu_set(int N, Dtype alpha, Dtype* y) {
  if (N <= 0) return;
  if (alpha == Dtype(0)) {
    POSEIDON_CUDA_CHECK(
        cudaMemsetAsync(y, 0, sizeof(Dtype) * N, gpu::Stream()));
    return;
  }
  gpu_for_each(N, kernels::SetKernel<Dtype>{alpha, y});
}

template <typename Dtype>
void gpu_scal(int N, Dtype alpha, Dtype* x) {
  gpu_for_each(N, kernels::ScaleKernel<Dtype>{alpha, x, x});
}

template <typename Dtype>
void gpu_scale(int N, Dtype alpha, const Dtype* x, Dtype* y) {
  gpu_for_each(N, kernels::ScaleKernel<Dtype>{alpha, x, y});
}

template <typename Dtype>
void gpu_add_scalar(int N, Dtype alpha, Dtype* y) {
  gpu_for_each(N, kernels::AddScalarKernel<Dtype>{alpha, y});
}

#define POSEIDON_GPU_BINARY_OP(name, Kernel)                    \
  template <typename Dtype>                                     \
  void name(int N, const Dtype* a, const Dtype* b, Dtype* y) {  \
    gpu_for_each(N, kernels::Kernel<Dtype>{a, b, y});           \
  }
POSEIDON_GPU_BINARY_OP(gpu_add, AddKernel)
POSEIDON_GPU_BINARY_OP(gpu_sub, SubKernel)
POSEIDON_GPU_BINARY_OP(gpu_mul, MulKernel)
POSEIDON_GPU_BINARY_OP(gpu_div, DivKernel)
#undef POSEIDON_GPU_BINARY_OP

#define POSEIDON_GPU_UNARY_OP(name, Kernel)          \
  template <typename Dtype>                          \
  void name(int N, const Dtype* a, Dtype* y) {       \
    gpu_for_each(N, kernels::Kernel<Dtype>{a, y});   \
  }
POSEIDON_GPU_UNARY_OP(gpu_sqr, SqrKernel)
POSEIDON_GPU_UNARY_OP(gpu_sqrt, SqrtKernel)
POSEIDON_GPU_UNARY_OP(gpu_exp, ExpKernel)
POSEIDON_GPU_UNARY_OP(gpu_log, LogKernel)
POSEIDON_GPU_UNARY_OP(gpu_abs, AbsKernel)
POSEIDON_GPU_UNARY_OP(gpu_sign, SignKernel)
#undef POSEIDON_GPU_UNARY_OP

template <typename Dtype>
void gpu_powx(int N, const Dtype* a, Dtype b, Dtype* y) {
  gpu_for_each(N, kernels::PowxKernel<Dtype>{a, b, y});
}

namespace {

void GenerateUniform(int N, float* r) {
  POSEIDON_CURAND_CHECK(curandGenerateUniform(gpu::Curand(), r, N));
}
void GenerateUniform(int N, double* r) {
  POSEIDON_CURAND_CHECK(curandGenerateUniformDouble(gpu::Curand(), r, N));
}
void GenerateNormal(int N, float mu, float sigma, float* r) {
  POSEIDON_CURAND_CHECK(curandGenerateNormal(gpu::Curand(), r, N, mu, sigma));
}
void GenerateNormal(int N, double mu, double sigma, double* r) {
  POSEIDON_CURAND_CHECK(
      curandGenerateNormalDouble(gpu::Curand(), r, N, mu, sigma));
}

}  // namespace

template <typename Dtype>
void gpu_rng_uniform(int N, Dtype a, Dtype b, Dtype* r) {
  CHECK_LE(a, b) << "rng_uniform: empty range [" << a << ", " << b << "]";
  if (N <= 0) return;
  GenerateUniform(N, r);  // in (0, 1]
  if (a != Dtype(0) || b != Dtype(1)) {
    gpu_for_each(N, kernels::MapUniformKernel<Dtype>{a, b, r});
  }
}

template <typename Dtype>
void gpu_rng_gaussian(int N, Dtype mu, Dtype sigma, Dtype* r) {
  CHECK_GT(sigma, 0) << "rng_gaussian: sigma must be positive";
  if (N <= 0) return;
  // cuRAND's normal generators make pairs (Box-Muller): an odd count gets
  // its last number from a two-element scratch buffer.
  const int even = N - N % 2;
  if (even > 0) GenerateNormal(even, mu, sigma, r);
  if (even != N) {
    SyncedMemory scratch(2 * sizeof(Dtype));
    Dtype* pair = static_cast<Dtype*>(scratch.mutable_gpu_data());
    GenerateNormal(2, mu, sigma, pair);
    gpu_copy(1, pair, r + even);
    gpu::Synchronize();  // before the scratch buffer goes back to the cache
  }
}

template <typename Dtype, typename Int>
static void GpuBernoulli(int N, Dtype p, Int* r) {
  CHECK(p >= 0 && p <= 1) << "rng_bernoulli: p = " << p;
  if (N <= 0) return;
  static_assert(sizeof(Int) == sizeof(unsigned int), "32-bit draws");
  auto* bits = reinterpret_cast<unsigned int*>(r);
  POSEIDON_CURAND_CHECK(curandGenerate(gpu::Curand(), bits, N));
  gpu_for_each(N, kernels::BernoulliBitsKernel<Int>{
                      bits, static_cast<double>(p) * 4294967296.0, r});
}

template <typename Dtype>
void gpu_rng_bernoulli(int N, Dtype p, int* r) {
  GpuBernoulli(N, p, r);
}
template <typename Dtype>
void gpu_rng_bernoulli(int N, Dtype p, unsigned int* r) {
  GpuBernoulli(N, p, r);
}

// asum of a vector with a NaN is NaN and with an infinity is infinite (a
// finite sum that overflows also reads as non-finite: a diverged net).
template <typename Dtype>
bool gpu_all_finite(int N, const Dtype* x) {
  if (N <= 0) return true;
  return std::isfinite(gpu_asum(N, x));
}

#define POSEIDON_INSTANTIATE_GPU_MATH(Dtype)                                  \
  template void gpu_axpby<Dtype>(int, Dtype, const Dtype*, Dtype, Dtype*);    \
  template void gpu_copy<Dtype>(int, const Dtype*, Dtype*);                   \
  template void gpu_set<Dtype>(int, Dtype, Dtype*);                           \
  template void gpu_scal<Dtype>(int, Dtype, Dtype*);                          \
  template void gpu_scale<Dtype>(int, Dtype, const Dtype*, Dtype*);           \
  template void gpu_add_scalar<Dtype>(int, Dtype, Dtype*);                    \
  template void gpu_add<Dtype>(int, const Dtype*, const Dtype*, Dtype*);      \
  template void gpu_sub<Dtype>(int, const Dtype*, const Dtype*, Dtype*);      \
  template void gpu_mul<Dtype>(int, const Dtype*, const Dtype*, Dtype*);      \
  template void gpu_div<Dtype>(int, const Dtype*, const Dtype*, Dtype*);      \
  template void gpu_sqr<Dtype>(int, const Dtype*, Dtype*);                    \
  template void gpu_sqrt<Dtype>(int, const Dtype*, Dtype*);                   \
  template void gpu_exp<Dtype>(int, const Dtype*, Dtype*);                    \
  template void gpu_log<Dtype>(int, const Dtype*, Dtype*);                    \
  template void gpu_abs<Dtype>(int, const Dtype*, Dtype*);                    \
  template void gpu_sign<Dtype>(int, const Dtype*, Dtype*);                   \
  template void gpu_powx<Dtype>(int, const Dtype*, Dtype, Dtype*);            \
  template void gpu_rng_uniform<Dtype>(int, Dtype, Dtype, Dtype*);            \
  template void gpu_rng_gaussian<Dtype>(int, Dtype, Dtype, Dtype*);           \
  template void gpu_rng_bernoulli<Dtype>(int, Dtype, int*);                   \
  template void gpu_rng_bernoulli<Dtype>(int, Dtype, unsigned int*);          \
  template bool gpu_all_finite<Dtype>(int, const Dtype*);
POSEIDON_INSTANTIATE_GPU_MATH(float)
POSEIDON_INSTANTIATE_GPU_MATH(double)
#undef POSEIDON_INSTANTIATE_GPU_MATH

}  // namespace poseidon

#endif  // CPU_ONLY
