// CPU kernels: OpenBLAS where a routine exists (float GEMM through
// util/sgemm.hpp, Poseidon's AVX-512 kernel on CPUs with AVX-512), the
// element-wise bodies of kernels/math_kernels.hpp (shared with the GPU)
// otherwise.
#include "poseidon/util/math_functions.hpp"

#include <algorithm>
#include <random>

#include "poseidon/kernels/math_kernels.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/parallel.hpp"
#include "poseidon/util/sgemm.hpp"

namespace poseidon {

template <>
void cpu_gemm<float>(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M,
                     int N, int K, float alpha, const float* A, const float* B,
                     float beta, float* C) {
  int lda = (trans_a == CblasNoTrans) ? K : M;
  int ldb = (trans_b == CblasNoTrans) ? N : K;
  Sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
}

template <>
void cpu_gemm<double>(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M,
                      int N, int K, double alpha, const double* A,
                      const double* B, double beta, double* C) {
  int lda = (trans_a == CblasNoTrans) ? K : M;
  int ldb = (trans_b == CblasNoTrans) ? N : K;
  cblas_dgemm(CblasRowMajor, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
              beta, C, N);
}

namespace {

void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
          float alpha, const float* A, int lda, const float* B, int ldb,
          float beta, float* C, int ldc) {
  Sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
          double alpha, const double* A, int lda, const double* B, int ldb,
          double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C,
              ldc);
}

// Columns per slice are a multiple of this (one AVX-512 vector of floats).
constexpr int kGemmColumnQuantum = 16;
// Below this many flops (2 M N K) a product runs on one thread.
constexpr double kParallelGemmMinFlops = 4e6;

}  // namespace

template <typename Dtype>
void cpu_gemm_parallel(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M,
                       int N, int K, Dtype alpha, const Dtype* A,
                       const Dtype* B, Dtype beta, Dtype* C) {
  // In 64 bits: N may be as large as an int allows.
  const int blocks = static_cast<int>(
      (static_cast<int64_t>(N) + kGemmColumnQuantum - 1) / kGemmColumnQuantum);
  if (2.0 * M * N * K < kParallelGemmMinFlops || ParallelForWorkers(blocks) < 2) {
    cpu_gemm<Dtype>(trans_a, trans_b, M, N, K, alpha, A, B, beta, C);
    return;
  }
  const int lda = trans_a == CblasNoTrans ? K : M;
  const int ldb = trans_b == CblasNoTrans ? N : K;
  ParallelFor(blocks, [&](int begin, int end, int) {
    const int n0 = begin * kGemmColumnQuantum;
    const int n1 = static_cast<int>(std::min<int64_t>(
        N, static_cast<int64_t>(end) * kGemmColumnQuantum));
    const Dtype* b = trans_b == CblasNoTrans ? B + n0
                                             : B + static_cast<size_t>(n0) * K;
    Gemm(trans_a, trans_b, M, n1 - n0, K, alpha, A, lda, b, ldb, beta, C + n0,
         N);
  });
}

template void cpu_gemm_parallel<float>(CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, int,
                                       int, int, float, const float*,
                                       const float*, float, float*);
template void cpu_gemm_parallel<double>(CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, int,
                                        int, int, double, const double*,
                                        const double*, double, double*);

template <>
void cpu_gemv<float>(CBLAS_TRANSPOSE trans_a, int M, int N, float alpha,
                     const float* A, const float* x, float beta, float* y) {
  cblas_sgemv(CblasRowMajor, trans_a, M, N, alpha, A, N, x, 1, beta, y, 1);
}

template <>
void cpu_gemv<double>(CBLAS_TRANSPOSE trans_a, int M, int N, double alpha,
                      const double* A, const double* x, double beta,
                      double* y) {
  cblas_dgemv(CblasRowMajor, trans_a, M, N, alpha, A, N, x, 1, beta, y, 1);
}

template <>
void cpu_axpy<float>(int N, float alpha, const float* x, float* y) {
  cblas_saxpy(N, alpha, x, 1, y, 1);
}
template <>
void cpu_axpy<double>(int N, double alpha, const double* x, double* y) {
  cblas_daxpy(N, alpha, x, 1, y, 1);
}

template <typename Dtype>
void cpu_axpby(int N, Dtype alpha, const Dtype* x, Dtype beta, Dtype* y) {
  cpu_for_each(N, kernels::AxpbyKernel<Dtype>{alpha, x, beta, y});
}

template <typename Dtype>
void cpu_copy(int N, const Dtype* x, Dtype* y) {
  if (x != y && N > 0) std::memcpy(y, x, sizeof(Dtype) * N);
}

template <typename Dtype>
void cpu_set(int N, Dtype alpha, Dtype* y) {
  if (alpha == Dtype(0)) {
    if (N > 0) std::memset(y, 0, sizeof(Dtype) * N);
    return;
  }
  cpu_for_each(N, kernels::SetKernel<Dtype>{alpha, y});
}

template <typename Dtype>
void cpu_scal(int N, Dtype alpha, Dtype* x) {
  cpu_for_each(N, kernels::ScaleKernel<Dtype>{alpha, x, x});
}

template <typename Dtype>
void cpu_scale(int N, Dtype alpha, const Dtype* x, Dtype* y) {
  cpu_for_each(N, kernels::ScaleKernel<Dtype>{alpha, x, y});
}

template <typename Dtype>
void cpu_add_scalar(int N, Dtype alpha, Dtype* y) {
  cpu_for_each(N, kernels::AddScalarKernel<Dtype>{alpha, y});
}

#define POSEIDON_BINARY_OP(name, Kernel)                        \
  template <typename Dtype>                                     \
  void name(int N, const Dtype* a, const Dtype* b, Dtype* y) {  \
    cpu_for_each(N, kernels::Kernel<Dtype>{a, b, y});           \
  }
POSEIDON_BINARY_OP(cpu_add, AddKernel)
POSEIDON_BINARY_OP(cpu_sub, SubKernel)
POSEIDON_BINARY_OP(cpu_mul, MulKernel)
POSEIDON_BINARY_OP(cpu_div, DivKernel)
#undef POSEIDON_BINARY_OP

#define POSEIDON_UNARY_OP(name, Kernel)               \
  template <typename Dtype>                           \
  void name(int N, const Dtype* a, Dtype* y) {        \
    cpu_for_each(N, kernels::Kernel<Dtype>{a, y});    \
  }
POSEIDON_UNARY_OP(cpu_sqr, SqrKernel)
POSEIDON_UNARY_OP(cpu_sqrt, SqrtKernel)
POSEIDON_UNARY_OP(cpu_exp, ExpKernel)
POSEIDON_UNARY_OP(cpu_log, LogKernel)
POSEIDON_UNARY_OP(cpu_abs, AbsKernel)
POSEIDON_UNARY_OP(cpu_sign, SignKernel)
#undef POSEIDON_UNARY_OP

template <typename Dtype>
void cpu_powx(int N, const Dtype* a, Dtype b, Dtype* y) {
  cpu_for_each(N, kernels::PowxKernel<Dtype>{a, b, y});
}

template <>
float cpu_strided_dot<float>(int N, const float* x, int incx, const float* y,
                             int incy) {
  return cblas_sdot(N, x, incx, y, incy);
}
template <>
double cpu_strided_dot<double>(int N, const double* x, int incx,
                               const double* y, int incy) {
  return cblas_ddot(N, x, incx, y, incy);
}

template <typename Dtype>
Dtype cpu_dot(int N, const Dtype* x, const Dtype* y) {
  return cpu_strided_dot(N, x, 1, y, 1);
}

template <>
float cpu_asum<float>(int N, const float* x) {
  return cblas_sasum(N, x, 1);
}
template <>
double cpu_asum<double>(int N, const double* x) {
  return cblas_dasum(N, x, 1);
}

template <typename Dtype>
void rng_uniform(int N, Dtype a, Dtype b, Dtype* r) {
  CHECK_LE(a, b) << "rng_uniform: empty range [" << a << ", " << b << "]";
  std::uniform_real_distribution<Dtype> dist(a, b);
  auto& gen = Poseidon::rng();
  for (int i = 0; i < N; ++i) r[i] = dist(gen);
}

template <typename Dtype>
void rng_gaussian(int N, Dtype mu, Dtype sigma, Dtype* r) {
  CHECK_GT(sigma, 0) << "rng_gaussian: sigma must be positive";
  std::normal_distribution<Dtype> dist(mu, sigma);
  auto& gen = Poseidon::rng();
  for (int i = 0; i < N; ++i) r[i] = dist(gen);
}

template <typename Dtype, typename Int>
static void BernoulliImpl(int N, Dtype p, Int* r) {
  CHECK(p >= 0 && p <= 1) << "rng_bernoulli: p = " << p;
  std::bernoulli_distribution dist(static_cast<double>(p));
  auto& gen = Poseidon::rng();
  for (int i = 0; i < N; ++i) r[i] = dist(gen) ? 1 : 0;
}

template <typename Dtype>
void rng_bernoulli(int N, Dtype p, int* r) {
  BernoulliImpl(N, p, r);
}
template <typename Dtype>
void rng_bernoulli(int N, Dtype p, unsigned int* r) {
  BernoulliImpl(N, p, r);
}

template <typename Dtype>
bool cpu_all_finite(int N, const Dtype* x) {
  for (int i = 0; i < N; ++i) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

#define POSEIDON_INSTANTIATE_MATH(Dtype)                                     \
  template void cpu_axpby<Dtype>(int, Dtype, const Dtype*, Dtype, Dtype*);   \
  template void cpu_copy<Dtype>(int, const Dtype*, Dtype*);                  \
  template void cpu_set<Dtype>(int, Dtype, Dtype*);                          \
  template void cpu_scal<Dtype>(int, Dtype, Dtype*);                         \
  template void cpu_scale<Dtype>(int, Dtype, const Dtype*, Dtype*);          \
  template void cpu_add_scalar<Dtype>(int, Dtype, Dtype*);                   \
  template void cpu_add<Dtype>(int, const Dtype*, const Dtype*, Dtype*);     \
  template void cpu_sub<Dtype>(int, const Dtype*, const Dtype*, Dtype*);     \
  template void cpu_mul<Dtype>(int, const Dtype*, const Dtype*, Dtype*);     \
  template void cpu_div<Dtype>(int, const Dtype*, const Dtype*, Dtype*);     \
  template void cpu_sqr<Dtype>(int, const Dtype*, Dtype*);                   \
  template void cpu_sqrt<Dtype>(int, const Dtype*, Dtype*);                  \
  template void cpu_exp<Dtype>(int, const Dtype*, Dtype*);                   \
  template void cpu_log<Dtype>(int, const Dtype*, Dtype*);                   \
  template void cpu_abs<Dtype>(int, const Dtype*, Dtype*);                   \
  template void cpu_sign<Dtype>(int, const Dtype*, Dtype*);                  \
  template void cpu_powx<Dtype>(int, const Dtype*, Dtype, Dtype*);           \
  template Dtype cpu_dot<Dtype>(int, const Dtype*, const Dtype*);            \
  template void rng_uniform<Dtype>(int, Dtype, Dtype, Dtype*);               \
  template void rng_gaussian<Dtype>(int, Dtype, Dtype, Dtype*);              \
  template void rng_bernoulli<Dtype>(int, Dtype, int*);                      \
  template void rng_bernoulli<Dtype>(int, Dtype, unsigned int*);             \
  template bool cpu_all_finite<Dtype>(int, const Dtype*);
POSEIDON_INSTANTIATE_MATH(float)
POSEIDON_INSTANTIATE_MATH(double)
#undef POSEIDON_INSTANTIATE_MATH

}  // namespace poseidon
