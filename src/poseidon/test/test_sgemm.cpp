// The float GEMM dispatch (util/sgemm.hpp): which backend a process gets,
// and Poseidon's AVX-512 and AVX2 kernels and oneDNN against the OpenBLAS
// reference
// on awkward shapes, every transpose, alpha/beta values (beta = 0 must not
// read C, so NaN there must not propagate), padded leading dimensions,
// empty products, the pool-split product, the own kernels' bit-for-bit
// determinism (Note [Blocked GEMM]) and oneDNN's thread count under
// Poseidon's pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/sgemm.hpp"

namespace poseidon {
namespace {

const CBLAS_TRANSPOSE kTrans[] = {CblasNoTrans, CblasTrans};

// What the backend should be (Note [Float GEMM]): OpenBLAS when
// POSEIDON_SGEMM=openblas asks for it, oneDNN when POSEIDON_SGEMM=onednn
// does and the build has it, otherwise the AVX-512 kernel where the CPU has
// AVX-512 (and POSEIDON_KERNELS is not blas), else the AVX2 kernel where
// it has AVX2 and FMA, else OpenBLAS.
SgemmBackend ExpectedBackend() {
  const char* sgemm = std::getenv("POSEIDON_SGEMM");
  const std::string asked = sgemm != nullptr ? sgemm : "";
  if (asked == "openblas") return SgemmBackend::kOpenBlas;
  if (asked == "onednn" && SgemmBackendAvailable(SgemmBackend::kOneDnn)) {
    return SgemmBackend::kOneDnn;
  }
  if (asked == "avx2" && SgemmBackendAvailable(SgemmBackend::kAvx2)) {
    return SgemmBackend::kAvx2;
  }
  return SgemmBackendAvailable(SgemmBackend::kAvx512) ? SgemmBackend::kAvx512
         : SgemmBackendAvailable(SgemmBackend::kAvx2) ? SgemmBackend::kAvx2
                                                      : SgemmBackend::kOpenBlas;
}

const char* Name(SgemmBackend backend) {
  switch (backend) {
    case SgemmBackend::kOneDnn:
      return "oneDNN";
    case SgemmBackend::kAvx512:
      return "AVX-512";
    case SgemmBackend::kAvx2:
      return "AVX2";
    case SgemmBackend::kOpenBlas:
      break;
  }
  return "OpenBLAS";
}

TEST(SgemmTest, BackendFollowsTheBuildAndTheEnvironment) {
  const SgemmBackend want = ExpectedBackend();
  EXPECT_EQ(ActiveSgemmBackend(), want)
      << "expected " << Name(want) << "; " << SgemmDescription();
  const std::string text = SgemmDescription();
  EXPECT_NE(text.find(Name(want)), std::string::npos) << text;
}

// POSEIDON_KERNELS (util/avx512.hpp) as the process was started: unset or
// auto lets the CPU decide, avx2 holds the AVX-512 kernels off (the ctest
// entry avx2_paths runs the kernels' tests so), blas holds both off.
TEST(SgemmTest, KernelFamiliesFollowTheCpuAndPoseidonKernels) {
  __builtin_cpu_init();
  const bool cpu_avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  const bool cpu_avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const char* env = std::getenv("POSEIDON_KERNELS");
  const std::string kernels = env != nullptr ? env : "";
  const bool avx2_only = kernels == "avx2", none = kernels == "blas";
  EXPECT_EQ(Avx512KernelsAvailable(), cpu_avx512 && !avx2_only && !none)
      << "POSEIDON_KERNELS='" << kernels << "'";
  EXPECT_EQ(Avx2KernelsAvailable(), cpu_avx2 && !none)
      << "POSEIDON_KERNELS='" << kernels << "'";
  if (avx2_only && cpu_avx512 && std::getenv("POSEIDON_SGEMM") == nullptr) {
    EXPECT_EQ(ActiveSgemmBackend(), SgemmBackend::kAvx2);
    EXPECT_NE(std::string(SgemmDescription()).find("POSEIDON_KERNELS=avx2"),
              std::string::npos)
        << SgemmDescription();
  }
}

struct Case {
  CBLAS_TRANSPOSE ta, tb;
  int M, N, K, pad;
  float alpha, beta;
  std::string Describe() const {
    std::ostringstream s;
    s << (ta == CblasTrans ? 'T' : 'N') << (tb == CblasTrans ? 'T' : 'N')
      << " M=" << M << " N=" << N << " K=" << K << " pad=" << pad
      << " alpha=" << alpha << " beta=" << beta;
    return s.str();
  }
};

// Runs `c` through `gemm` and through OpenBLAS and compares. With beta = 0,
// C starts as NaN (BLAS does not read it); otherwise as random values.
template <typename Gemm>
void ExpectAgreesWithOpenBlas(const Case& c, Gemm gemm, std::mt19937* gen) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  const int a_rows = c.ta == CblasNoTrans ? c.M : c.K;
  const int a_cols = c.ta == CblasNoTrans ? c.K : c.M;
  const int b_rows = c.tb == CblasNoTrans ? c.K : c.N;
  const int b_cols = c.tb == CblasNoTrans ? c.N : c.K;
  const int lda = a_cols + c.pad, ldb = b_cols + c.pad, ldc = c.N + c.pad;
  std::vector<float> A(static_cast<size_t>(a_rows) * lda + 1);
  std::vector<float> B(static_cast<size_t>(b_rows) * ldb + 1);
  std::vector<float> C0(static_cast<size_t>(c.M) * ldc + 1);
  for (float& x : A) x = dist(*gen);
  for (float& x : B) x = dist(*gen);
  for (float& x : C0) {
    x = c.beta == 0 ? std::numeric_limits<float>::quiet_NaN() : dist(*gen);
  }
  std::vector<float> want = C0, got = C0;
  SgemmWith(SgemmBackend::kOpenBlas, c.ta, c.tb, c.M, c.N, c.K, c.alpha,
            A.data(), lda, B.data(), ldb, c.beta, want.data(), ldc);
  gemm(c, A.data(), lda, B.data(), ldb, got.data(), ldc);
  for (int i = 0; i < c.M; ++i) {
    for (int j = 0; j < c.N; ++j) {
      const size_t at = static_cast<size_t>(i) * ldc + j;
      ASSERT_FALSE(std::isnan(got[at]))
          << c.Describe() << ": C(" << i << ", " << j << ") is NaN";
      // Each entry sums K products of magnitude <= |alpha| (mostly far
      // less), plus beta C. The two sums differ only in rounding, which for
      // these random terms stays near sqrt(K) 2^-24 |alpha| and well below
      // the tolerance, whereas a term missing or counted twice (typical
      // magnitude |alpha| / 4) exceeds it for K up to several thousand.
      const float tol = 1e-5f * (c.K * std::abs(c.alpha) + 1);
      ASSERT_NEAR(got[at], want[at], tol)
          << c.Describe() << ": C(" << i << ", " << j << ")";
    }
    // Padding between rows is not written.
    for (int j = c.N; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(i) * ldc + j;
      if (!std::isnan(C0[at])) {
        ASSERT_EQ(got[at], C0[at]) << c.Describe() << ": padding written";
      }
    }
  }
}

std::vector<Case> AwkwardCases() {
  std::vector<Case> cases;
  const int sizes[] = {1, 15, 17, 33};
  const float ab[][2] = {{1.f, 0.f}, {0.5f, 1.f}, {-2.f, 0.25f}, {1.f, 1.f}};
  for (CBLAS_TRANSPOSE ta : kTrans) {
    for (CBLAS_TRANSPOSE tb : kTrans) {
      for (int M : sizes) {
        for (int N : sizes) {
          for (int K : sizes) {
            const int i = (M + 2 * N + 3 * K) % 4;  // vary alpha/beta
            cases.push_back({ta, tb, M, N, K, 0, ab[i][0], ab[i][1]});
          }
        }
      }
      for (const auto& v : ab) {  // every alpha/beta on one shape, and
        cases.push_back({ta, tb, 17, 33, 15, 0, v[0], v[1]});
        cases.push_back({ta, tb, 15, 17, 33, 3, v[0], v[1]});  // padded
      }
    }
  }
  return cases;
}

// cpu_gemm<float>: whatever backend the process chose.
TEST(SgemmTest, CpuGemmAgreesWithOpenBlas) {
  std::mt19937 gen(7);
  for (const Case& c : AwkwardCases()) {
    if (c.pad != 0) continue;  // cpu_gemm has tight leading dimensions
    ExpectAgreesWithOpenBlas(
        c,
        [](const Case& c, const float* A, int, const float* B, int, float* C,
           int) {
          cpu_gemm<float>(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, B, c.beta, C);
        },
        &gen);
    if (HasFatalFailure()) return;
  }
}

// oneDNN itself, also when the process chose OpenBLAS (POSEIDON_KERNELS=blas
// or no AVX-512), so both paths are tested on every machine with oneDNN.
TEST(SgemmTest, OneDnnAgreesWithOpenBlas) {
  if (!SgemmBackendAvailable(SgemmBackend::kOneDnn)) {
    GTEST_SKIP() << "built without oneDNN (USE_DNNL=OFF)";
  }
  std::mt19937 gen(11);
  for (const Case& c : AwkwardCases()) {
    ExpectAgreesWithOpenBlas(
        c,
        [](const Case& c, const float* A, int lda, const float* B, int ldb,
           float* C, int ldc) {
          SgemmWith(SgemmBackend::kOneDnn, c.ta, c.tb, c.M, c.N, c.K, c.alpha,
                    A, lda, B, ldb, c.beta, C, ldc);
        },
        &gen);
    if (HasFatalFailure()) return;
  }
}

// Poseidon's own kernels (AVX-512, AVX2) themselves, also when the process
// chose another backend; skipped where the CPU lacks the instructions.
class SgemmKernelTest : public ::testing::TestWithParam<SgemmBackend> {
 protected:
  void SetUp() override {
    if (!SgemmBackendAvailable(GetParam())) {
      GTEST_SKIP() << "no " << Name(GetParam())
                   << " on this CPU, or POSEIDON_KERNELS holds it off";
    }
  }
  // The product `c` through the kernel under test.
  void Run(const Case& c, const float* A, int lda, const float* B, int ldb,
           float* C, int ldc) const {
    SgemmWith(GetParam(), c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, lda, B, ldb,
              c.beta, C, ldc);
  }
  auto Kernel() const {
    return
        [this](const Case& c, const float* A, int lda, const float* B, int ldb,
               float* C, int ldc) { Run(c, A, lda, B, ldb, C, ldc); };
  }
};

TEST_P(SgemmKernelTest, AgreesWithOpenBlasOnAwkwardShapes) {
  std::mt19937 gen(13);
  for (const Case& c : AwkwardCases()) {
    ExpectAgreesWithOpenBlas(c, Kernel(), &gen);
    if (HasFatalFailure()) return;
  }
  // Sizes around the micro-tiles (8 x 48, 6 x 16) and vector (16, 8)
  // edges, every
  // transpose, leading dimensions 0 or 5 past the minimum; 257 (past the
  // 256 steps of an inner block) in a few shapes only, to keep the
  // sanitizer builds quick.
  const int sizes[] = {1, 2, 13, 31, 49, 100};
  const float ab[][2] = {{1.f, 0.f}, {0.75f, 1.f}, {-1.5f, -0.5f}};
  int n = 0;
  for (CBLAS_TRANSPOSE ta : kTrans) {
    for (CBLAS_TRANSPOSE tb : kTrans) {
      for (int M : sizes) {
        for (int N : sizes) {
          for (int K : sizes) {
            const int pad = ++n % 2 ? 0 : 5;
            const auto& v = ab[n % 3];
            ExpectAgreesWithOpenBlas({ta, tb, M, N, K, pad, v[0], v[1]},
                                     Kernel(), &gen);
            if (HasFatalFailure()) return;
          }
        }
      }
      for (const Case& c : {Case{ta, tb, 257, 257, 257, 5, 1.f, 0.f},
                            Case{ta, tb, 257, 100, 31, 0, 0.75f, 1.f},
                            Case{ta, tb, 13, 257, 257, 5, -1.5f, -0.5f}}) {
        ExpectAgreesWithOpenBlas(c, Kernel(), &gen);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Past every cache block: K in 2 or 3 blocks of at most 256 (beta applied
// once, the later blocks accumulated), M past a block of 480 rows (the
// AVX2 kernel's row block is at most 600: 601 rows; B then packed a block
// ahead), N past a block of 3072 (AVX-512) or at most 4096 (AVX2)
// columns; alpha = 0 (C = beta C only).
TEST_P(SgemmKernelTest, AgreesWithOpenBlasAcrossCacheBlocks) {
  std::mt19937 gen(17);
  for (CBLAS_TRANSPOSE ta : kTrans) {
    for (CBLAS_TRANSPOSE tb : kTrans) {
      for (const Case& c : {Case{ta, tb, 37, 45, 401, 3, 1.f, 0.f},
                            Case{ta, tb, 9, 50, 700, 0, 1.f, 0.5f},
                            Case{ta, tb, 493, 20, 200, 0, 0.5f, 1.f},
                            Case{ta, tb, 601, 20, 100, 0, 1.f, 0.f},
                            Case{ta, tb, 3, 3100, 193, 1, -1.f, 0.5f},
                            Case{ta, tb, 2, 4133, 70, 0, 1.f, 1.f},
                            Case{ta, tb, 20, 20, 20, 2, 0.f, 0.5f},
                            Case{ta, tb, 20, 20, 20, 2, 0.f, 0.f}}) {
        ExpectAgreesWithOpenBlas(c, Kernel(), &gen);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Note [Blocked GEMM]: C's bits depend on K only. The same product from
// four threads at once, with A, B and C at different offsets (1..15 floats
// past 64-byte alignment), computed whole or in row and column pieces,
// gives the bits of the first call.
TEST_P(SgemmKernelTest, BitForBitWhateverTheThreadsAndAlignment) {
  std::mt19937 gen(19);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (CBLAS_TRANSPOSE ta : kTrans) {
    for (CBLAS_TRANSPOSE tb : kTrans) {
      const int M = 61, N = 147, K = 450;
      const int lda = ta == CblasNoTrans ? K : M;
      const int ldb = tb == CblasNoTrans ? N : K;
      std::vector<float> A(static_cast<size_t>(M) * K);
      std::vector<float> B(static_cast<size_t>(K) * N);
      std::vector<float> C0(static_cast<size_t>(M) * N);
      for (float& x : A) x = dist(gen);
      for (float& x : B) x = dist(gen);
      for (float& x : C0) x = dist(gen);
      std::vector<float> want = C0;
      SgemmWith(GetParam(), ta, tb, M, N, K, 0.75f, A.data(), lda, B.data(),
                ldb, 0.5f, want.data(), N);
      // Thread t copies the operands to offset t * 4 + 1 floats (mod 16)
      // and computes the product whole (t even) or in pieces (t odd: rows
      // 0..29, 30..M across column pieces 0..16, 17..N).
      constexpr int kThreads = 4;
      std::vector<std::vector<float>> got(kThreads);
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          const size_t off = (4 * t + 1) % 16;
          std::vector<float> a(A.size() + 16), b(B.size() + 16),
              c(C0.size() + 16);
          std::copy(A.begin(), A.end(), a.begin() + off);
          std::copy(B.begin(), B.end(), b.begin() + off);
          std::copy(C0.begin(), C0.end(), c.begin() + off);
          const float* pa = a.data() + off;
          const float* pb = b.data() + off;
          float* pc = c.data() + off;
          if (t % 2 == 0) {
            SgemmWith(GetParam(), ta, tb, M, N, K, 0.75f, pa, lda, pb, ldb,
                      0.5f, pc, N);
          } else {
            for (const int r0 : {0, 30}) {
              const int r1 = r0 == 0 ? 30 : M;
              for (const int c0 : {0, 17}) {
                const int c1 = c0 == 0 ? 17 : N;
                const float* a0 = ta == CblasNoTrans
                                      ? pa + static_cast<size_t>(r0) * lda
                                      : pa + r0;
                const float* b0 = tb == CblasNoTrans
                                      ? pb + c0
                                      : pb + static_cast<size_t>(c0) * ldb;
                SgemmWith(GetParam(), ta, tb, r1 - r0, c1 - c0, K, 0.75f, a0,
                          lda, b0, ldb, 0.5f,
                          pc + static_cast<size_t>(r0) * N + c0, N);
              }
            }
          }
          got[t].assign(pc, pc + C0.size());
        });
      }
      for (std::thread& t : threads) t.join();
      for (int t = 0; t < kThreads; ++t) {
        ASSERT_EQ(std::memcmp(got[t].data(), want.data(),
                              want.size() * sizeof(float)),
                  0)
            << (ta == CblasTrans ? 'T' : 'N') << (tb == CblasTrans ? 'T' : 'N')
            << ": thread " << t << " got other bits";
      }
      std::vector<float> again = C0;  // the same call once more
      SgemmWith(GetParam(), ta, tb, M, N, K, 0.75f, A.data(), lda, B.data(),
                ldb, 0.5f, again.data(), N);
      ASSERT_EQ(
          std::memcmp(again.data(), want.data(), want.size() * sizeof(float)),
          0);
    }
  }
}

// Note [Blocked GEMM]: both kernels sum in the same order, so where a CPU
// has both they give the same bits.
TEST(SgemmTest, TheTwoKernelsGiveTheSameBits) {
  if (!SgemmBackendAvailable(SgemmBackend::kAvx512) ||
      !SgemmBackendAvailable(SgemmBackend::kAvx2)) {
    GTEST_SKIP()
        << "needs a CPU with AVX-512 (and POSEIDON_KERNELS unset or auto)";
  }
  std::mt19937 gen(23);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (CBLAS_TRANSPOSE ta : kTrans) {
    for (CBLAS_TRANSPOSE tb : kTrans) {
      const int M = 53, N = 131, K = 517;
      std::vector<float> A(static_cast<size_t>(M) * K);
      std::vector<float> B(static_cast<size_t>(K) * N);
      std::vector<float> C(static_cast<size_t>(M) * N);
      for (float& x : A) x = dist(gen);
      for (float& x : B) x = dist(gen);
      for (float& x : C) x = dist(gen);
      std::vector<float> c512 = C, c2 = C;
      const int lda = ta == CblasNoTrans ? K : M;
      const int ldb = tb == CblasNoTrans ? N : K;
      SgemmWith(SgemmBackend::kAvx512, ta, tb, M, N, K, 0.5f, A.data(), lda,
                B.data(), ldb, 0.25f, c512.data(), N);
      SgemmWith(SgemmBackend::kAvx2, ta, tb, M, N, K, 0.5f, A.data(), lda,
                B.data(), ldb, 0.25f, c2.data(), N);
      ASSERT_EQ(std::memcmp(c512.data(), c2.data(), C.size() * sizeof(float)),
                0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    OwnKernels, SgemmKernelTest,
    ::testing::Values(SgemmBackend::kAvx512, SgemmBackend::kAvx2),
    [](const ::testing::TestParamInfo<SgemmBackend>& info) {
      return info.param == SgemmBackend::kAvx512 ? std::string("Avx512")
                                                 : std::string("Avx2");
    });

// Empty products: nothing to do for M or N = 0; K = 0 leaves beta * C.
TEST(SgemmTest, EmptyProducts) {
  for (SgemmBackend backend : {SgemmBackend::kOpenBlas, SgemmBackend::kOneDnn,
                               SgemmBackend::kAvx512, SgemmBackend::kAvx2}) {
    if (!SgemmBackendAvailable(backend)) continue;
    std::vector<float> A(4, 1.f), B(4, 1.f), C = {1.f, 2.f, 3.f, 4.f};
    SgemmWith(backend, CblasNoTrans, CblasNoTrans, 2, 2, 0, 1.f, A.data(), 1,
              B.data(), 2, 0.5f, C.data(), 2);
    EXPECT_EQ(C, (std::vector<float>{0.5f, 1.f, 1.5f, 2.f}));
    SgemmWith(backend, CblasNoTrans, CblasNoTrans, 0, 2, 2, 1.f, A.data(), 2,
              B.data(), 2, 0.f, C.data(), 2);
    EXPECT_EQ(C, (std::vector<float>{0.5f, 1.f, 1.5f, 2.f}));
  }
}

class SgemmPoolTest : public ::testing::Test {
 protected:
  SgemmPoolTest() : saved_threads_(Poseidon::num_threads()) {}
  ~SgemmPoolTest() override { Poseidon::set_num_threads(saved_threads_); }

 private:
  const int saved_threads_;
};

// The column split over the pool (each slice one call of the chosen
// backend, with the full matrix's leading dimensions) against OpenBLAS.
TEST_F(SgemmPoolTest, ParallelGemmAgreesWithOpenBlas) {
  Poseidon::set_num_threads(2);
  std::mt19937 gen(3);
  for (CBLAS_TRANSPOSE ta : kTrans) {
    for (CBLAS_TRANSPOSE tb : kTrans) {
      for (float beta : {0.f, 0.75f}) {
        // 2 M N K above the parallel threshold; N not a multiple of 16.
        const Case c{ta, tb, 65, 333, 129, 0, 1.25f, beta};
        ExpectAgreesWithOpenBlas(
            c,
            [](const Case& c, const float* A, int, const float* B, int,
               float* C, int) {
              cpu_gemm_parallel<float>(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, B,
                                       c.beta, C);
            },
            &gen);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Note [Float GEMM]: a thread that calls oneDNN runs it on one OpenMP
// thread, whatever the pool's size, so no OpenMP team ever starts.
TEST_F(SgemmPoolTest, OneDnnIsSingleThreadedPerCaller) {
  if (!SgemmBackendAvailable(SgemmBackend::kOneDnn)) {
    GTEST_SKIP() << "built without oneDNN (USE_DNNL=OFF)";
  }
  std::vector<float> A(64, 1.f), B(64, 1.f), C(64, 0.f);
  auto call = [&] {
    SgemmWith(SgemmBackend::kOneDnn, CblasNoTrans, CblasNoTrans, 8, 8, 8, 1.f,
              A.data(), 8, B.data(), 8, 0.f, C.data(), 8);
  };
  for (int threads : {1, 2}) {
    int after = 0;
    std::thread caller([&] {
      Poseidon::set_num_threads(threads);
      call();
      after = OneDnnThreadsOfThisThread();
    });
    caller.join();
    EXPECT_EQ(after, 1) << "oneDNN could start an OpenMP team (pool of "
                        << threads << ")";
  }
  EXPECT_EQ(C[0], 8.f);
}

}  // namespace
}  // namespace poseidon
