// The float GEMM dispatch (util/sgemm.hpp): which backend a process gets,
// and oneDNN against the OpenBLAS reference on awkward shapes, every
// transpose, alpha/beta values (beta = 0 must not read C, so NaN there must
// not propagate), padded leading dimensions, empty products, the
// pool-split product, and oneDNN's thread count under Poseidon's pool.
#include <gtest/gtest.h>

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
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/sgemm.hpp"

namespace poseidon {
namespace {

const CBLAS_TRANSPOSE kTrans[] = {CblasNoTrans, CblasTrans};

// What the backend should be (Note [Float GEMM]): oneDNN only when
// POSEIDON_SGEMM=onednn asks for it and the build has it.
SgemmBackend ExpectedBackend() {
  const char* sgemm = std::getenv("POSEIDON_SGEMM");
  if (sgemm != nullptr && std::strcmp(sgemm, "onednn") == 0 &&
      SgemmBackendAvailable(SgemmBackend::kOneDnn)) {
    return SgemmBackend::kOneDnn;
  }
  return SgemmBackend::kOpenBlas;
}

TEST(SgemmTest, BackendFollowsTheBuildAndTheEnvironment) {
  const SgemmBackend want = ExpectedBackend();
  EXPECT_EQ(ActiveSgemmBackend(), want)
      << "expected " << (want == SgemmBackend::kOneDnn ? "oneDNN" : "OpenBLAS")
      << "; " << SgemmDescription();
  const std::string text = SgemmDescription();
  EXPECT_NE(text.find(want == SgemmBackend::kOneDnn ? "oneDNN" : "OpenBLAS"),
            std::string::npos)
      << text;
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
      // Each entry sums K products of magnitude <= |alpha|, plus beta C.
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
          SgemmWith(SgemmBackend::kOneDnn, c.ta, c.tb, c.M, c.N, c.K,
                    c.alpha, A, lda, B, ldb, c.beta, C, ldc);
        },
        &gen);
    if (HasFatalFailure()) return;
  }
}

// Empty products: nothing to do for M or N = 0; K = 0 leaves beta * C.
TEST(SgemmTest, EmptyProducts) {
  for (SgemmBackend backend :
       {SgemmBackend::kOpenBlas, SgemmBackend::kOneDnn}) {
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
              cpu_gemm_parallel<float>(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A,
                                       B, c.beta, C);
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
