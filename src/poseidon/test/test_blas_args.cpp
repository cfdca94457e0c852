// The row-major to column-major translation of the cuBLAS GEMM and GEMV
// calls (util/blas_args.hpp), checked on the CPU: the translated arguments
// and the row-major buffers go to a naive column-major BLAS written here,
// and the result must be the row-major product, by a naive row-major loop
// and by Poseidon's own cpu_gemm/cpu_gemv.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "poseidon/util/blas_args.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {
namespace {

using blas::Op;

const CBLAS_TRANSPOSE kTrans[] = {CblasNoTrans, CblasTrans};

const char* Name(CBLAS_TRANSPOSE t) { return t == CblasNoTrans ? "N" : "T"; }

// Reads and writes of the column-major references, bounds-checked: a wrong
// leading dimension sends them outside a buffer, as it would on the GPU.
// Such an access is counted (the first one described) and reads NaN.
struct Bounds {
  int outside = 0;
  std::string first;

  template <typename Dtype>
  Dtype* At(std::vector<Dtype>& buf, long i, const char* what) {
    static Dtype nan_slot;
    if (i >= 0 && i < static_cast<long>(buf.size())) return &buf[i];
    if (outside++ == 0) {
      first = std::string(what) + ": element " + std::to_string(i) +
              " of a buffer of " + std::to_string(buf.size());
    }
    nan_slot = std::numeric_limits<Dtype>::quiet_NaN();
    return &nan_slot;
  }
};

// BLAS's column-major xGEMM, naively: C = alpha op(A) op(B) + beta C with
// C m x n, op(A) m x k, op(B) k x n, element (i, j) of X at i + j * ldx.
template <typename Dtype>
void NaiveColumnMajorGemm(Op op_a, Op op_b, int m, int n, int k, Dtype alpha,
                          std::vector<Dtype>& a, int lda, std::vector<Dtype>& b,
                          int ldb, Dtype beta, std::vector<Dtype>& c, int ldc,
                          Bounds* bounds) {
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      Dtype sum = 0;
      for (int p = 0; p < k; ++p) {
        const long ai =
            op_a == Op::kNoTrans ? i + long{p} * lda : p + long{i} * lda;
        const long bi =
            op_b == Op::kNoTrans ? p + long{j} * ldb : j + long{p} * ldb;
        sum += *bounds->At(a, ai, "first operand") *
               *bounds->At(b, bi, "second operand");
      }
      Dtype* cij = bounds->At(c, i + long{j} * ldc, "C");
      *cij = alpha * sum + beta * *cij;
    }
  }
}

// BLAS's column-major xGEMV, naively: y = alpha op(A) x + beta y, A m x n.
template <typename Dtype>
void NaiveColumnMajorGemv(Op op, int m, int n, Dtype alpha,
                          std::vector<Dtype>& a, int lda, std::vector<Dtype>& x,
                          Dtype beta, std::vector<Dtype>& y, Bounds* bounds) {
  const int rows = op == Op::kNoTrans ? m : n;  // of op(A)
  const int cols = op == Op::kNoTrans ? n : m;
  for (int i = 0; i < rows; ++i) {
    Dtype sum = 0;
    for (int j = 0; j < cols; ++j) {
      const long ai =
          op == Op::kNoTrans ? i + long{j} * lda : j + long{i} * lda;
      sum += *bounds->At(a, ai, "A") * *bounds->At(x, j, "x");
    }
    Dtype* yi = bounds->At(y, i, "y");
    *yi = alpha * sum + beta * *yi;
  }
}

// The row-major GEMM of math_functions.hpp, naively: C (M x N) =
// alpha op(A) op(B) + beta C, A stored M x K (K x M transposed), B K x N
// (N x K transposed).
template <typename Dtype>
std::vector<Dtype> NaiveRowMajorGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb,
                                     int M, int N, int K, Dtype alpha,
                                     const std::vector<Dtype>& a,
                                     const std::vector<Dtype>& b, Dtype beta,
                                     std::vector<Dtype> c) {
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      Dtype sum = 0;
      for (int p = 0; p < K; ++p) {
        const Dtype aip = ta == CblasNoTrans ? a[i * K + p] : a[p * M + i];
        const Dtype bpj = tb == CblasNoTrans ? b[p * N + j] : b[j * K + p];
        sum += aip * bpj;
      }
      c[i * N + j] = alpha * sum + beta * c[i * N + j];
    }
  }
  return c;
}

// Values that are multiples of 1/4 between -1 and 1: with the alpha and
// beta below every product and sum is exact in float, so all three
// computations must agree bit for bit whatever their summation order.
template <typename Dtype>
std::vector<Dtype> Filled(int count, int seed) {
  std::vector<Dtype> v(count);
  for (int i = 0; i < count; ++i) {
    v[i] = Dtype((i * 5 + seed * 3) % 9 - 4) / 4;
  }
  return v;
}

// "" when `got` is `expected`, else where and how they first differ and in
// how many elements (row-major, `cols` columns).
template <typename Dtype>
std::string Difference(const std::vector<Dtype>& got,
                       const std::vector<Dtype>& expected, int cols) {
  int differ = 0, first = -1;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (got[i] != expected[i] && differ++ == 0) first = static_cast<int>(i);
  }
  if (differ == 0) return "";
  std::ostringstream os;
  os << differ << " of " << expected.size() << " elements differ; first ("
     << first / cols << ", " << first % cols << "): " << got[first]
     << " instead of " << expected[first];
  return os.str();
}

template <typename Dtype>
class BlasArgsTest : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(BlasArgsTest, Dtypes);

struct GemmShape {
  int M, N, K;
};
// Non-square throughout (a square product hides a forgotten swap), with
// each of M, N and K equal to 1 somewhere.
const GemmShape kGemmShapes[] = {{2, 3, 4}, {4, 3, 2}, {3, 5, 2}, {1, 4, 3},
                                 {4, 1, 3}, {3, 4, 1}, {1, 1, 5}, {5, 2, 1},
                                 {1, 3, 1}, {6, 7, 5}};

TYPED_TEST(BlasArgsTest, GemmThroughColumnMajorBlasIsTheRowMajorProduct) {
  using Dtype = TypeParam;
  const Dtype alpha = Dtype(1.5), beta = Dtype(-0.75);
  for (const GemmShape& s : kGemmShapes) {
    for (CBLAS_TRANSPOSE ta : kTrans) {
      for (CBLAS_TRANSPOSE tb : kTrans) {
        std::ostringstream what;
        what << "gemm " << Name(ta) << Name(tb) << " M " << s.M << " N " << s.N
             << " K " << s.K;
        SCOPED_TRACE(what.str());
        std::vector<Dtype> a = Filled<Dtype>(s.M * s.K, 1);
        std::vector<Dtype> b = Filled<Dtype>(s.K * s.N, 2);
        const std::vector<Dtype> c0 = Filled<Dtype>(s.M * s.N, 3);
        const std::vector<Dtype> expected =
            NaiveRowMajorGemm(ta, tb, s.M, s.N, s.K, alpha, a, b, beta, c0);

        const blas::ColumnMajorGemm g =
            blas::ToColumnMajorGemm(ta, tb, s.M, s.N, s.K);
        // What cuBLAS refuses (CUBLAS_STATUS_INVALID_VALUE): a leading
        // dimension below the rows of the matrix as stored.
        const int first_rows = g.op_first == Op::kNoTrans ? g.m : g.k;
        const int second_rows = g.op_second == Op::kNoTrans ? g.k : g.n;
        EXPECT_GE(g.ld_first, std::max(1, first_rows));
        EXPECT_GE(g.ld_second, std::max(1, second_rows));
        EXPECT_GE(g.ldc, std::max(1, g.m));

        std::vector<Dtype> c = c0;
        std::vector<Dtype>& first = g.first == blas::Operand::kA ? a : b;
        std::vector<Dtype>& second = g.first == blas::Operand::kA ? b : a;
        Bounds bounds;
        NaiveColumnMajorGemm(g.op_first, g.op_second, g.m, g.n, g.k, alpha,
                             first, g.ld_first, second, g.ld_second, beta, c,
                             g.ldc, &bounds);
        EXPECT_EQ(bounds.outside, 0) << "out of bounds, first " << bounds.first;
        EXPECT_EQ(Difference(c, expected, s.N), "") << "the column-major call";

        std::vector<Dtype> cpu = c0;
        cpu_gemm<Dtype>(ta, tb, s.M, s.N, s.K, alpha, a.data(), b.data(), beta,
                        cpu.data());
        EXPECT_EQ(Difference(cpu, expected, s.N), "") << "cpu_gemm";
      }
    }
  }
}

struct GemvShape {
  int M, N;
};
const GemvShape kGemvShapes[] = {{2, 3}, {3, 2}, {1, 4}, {4, 1},
                                 {1, 1}, {5, 3}, {3, 3}};

TYPED_TEST(BlasArgsTest, GemvThroughColumnMajorBlasIsTheRowMajorProduct) {
  using Dtype = TypeParam;
  const Dtype alpha = Dtype(-1.25), beta = Dtype(0.5);
  for (const GemvShape& s : kGemvShapes) {
    for (CBLAS_TRANSPOSE ta : kTrans) {
      std::ostringstream what;
      what << "gemv " << Name(ta) << " M " << s.M << " N " << s.N;
      SCOPED_TRACE(what.str());
      const int x_len = ta == CblasNoTrans ? s.N : s.M;
      const int y_len = ta == CblasNoTrans ? s.M : s.N;
      std::vector<Dtype> a = Filled<Dtype>(s.M * s.N, 4);
      std::vector<Dtype> x = Filled<Dtype>(x_len, 5);
      const std::vector<Dtype> y0 = Filled<Dtype>(y_len, 6);
      // The row-major product as a GEMM with a one-column B.
      const std::vector<Dtype> expected = NaiveRowMajorGemm(
          ta, CblasNoTrans, y_len, 1, x_len, alpha, a, x, beta, y0);

      const blas::ColumnMajorGemv g = blas::ToColumnMajorGemv(ta, s.M, s.N);
      EXPECT_GE(g.lda, std::max(1, g.m));  // cuBLAS's rule
      std::vector<Dtype> y = y0;
      Bounds bounds;
      NaiveColumnMajorGemv(g.op, g.m, g.n, alpha, a, g.lda, x, beta, y,
                           &bounds);
      EXPECT_EQ(bounds.outside, 0) << "out of bounds, first " << bounds.first;
      EXPECT_EQ(Difference(y, expected, 1), "") << "the column-major call";

      std::vector<Dtype> cpu = y0;
      cpu_gemv<Dtype>(ta, s.M, s.N, alpha, a.data(), x.data(), beta,
                      cpu.data());
      EXPECT_EQ(Difference(cpu, expected, 1), "") << "cpu_gemv";
    }
  }
}

}  // namespace
}  // namespace poseidon
