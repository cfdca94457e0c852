// The partial-sum bodies of kernels/norm_kernels.hpp (Note [Blocked sums])
// against sums in double computed here: awkward row lengths around the
// block and lane sizes, one part per row (the CPU) and several (the GPU's
// strided parts, run here on the CPU), float and double; the accuracy of a
// long float row; bitwise determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "poseidon/kernels/norm_kernels.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using kernels::RowPartialShiftedMoments;
using kernels::RowPartialSquaredDeviations;
using kernels::RowPartialSums;

template <typename Dtype>
class NormKernelsTest : public ::testing::Test {
 protected:
  using Rows = std::vector<Dtype>;

  static Rows Random(int n, double mean, double stddev, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<double> dist(mean, stddev);
    Rows v(n);
    for (Dtype& e : v) e = static_cast<Dtype>(dist(gen));
    return v;
  }

  // The tolerance for a sum whose terms have magnitudes adding to `mass`:
  // 20 roundings of Dtype on the way, plus the result's own.
  static double Tolerance(double mass, double value) {
    const double u = sizeof(Dtype) == 4 ? 6e-8 : 1.2e-16;
    return 24 * u * mass + u * std::abs(value) + 1e-30;
  }
};
TYPED_TEST_SUITE(NormKernelsTest, test::TestDtypes);

// Row lengths around kSumLanes and kSumBlock, with 1 part (the CPU) and
// several (the GPU's split, run here on the CPU).
const int kRowLens[] = {1, 2, 7, 15, 16, 17, 31, 255, 256, 257, 769, 3136};
const int kParts[] = {1, 2, 3, 17, 1024};

TYPED_TEST(NormKernelsTest, RowPartialSumsMatchDouble) {
  using Dtype = TypeParam;
  const int rows = 3;
  for (int row_len : kRowLens) {
    for (int parts : kParts) {
      if (parts > row_len) continue;
      for (bool with_y : {false, true}) {
        SCOPED_TRACE(testing::Message() << "row_len " << row_len << " parts "
                                        << parts << " with y " << with_y);
        const auto x = this->Random(rows * row_len, 0.5, 2.0, row_len);
        const auto y = this->Random(rows * row_len, -1.0, 1.5, parts);
        std::vector<Dtype> sx(rows * parts, Dtype(-7)), sxy(rows * parts);
        const RowPartialSums<Dtype> f{x.data(),  with_y ? y.data() : nullptr,
                                      sx.data(), sxy.data(),
                                      row_len,   parts};
        for (int i = 0; i < rows * parts; ++i) f(i);
        for (int r = 0; r < rows; ++r) {
          for (int p = 0; p < parts; ++p) {
            double ex = 0, exy = 0, mx = 0, mxy = 0;
            for (int k = p; k < row_len; k += parts) {
              const double a = x[r * row_len + k], b = y[r * row_len + k];
              ex += a;
              exy += a * b;
              mx += std::abs(a);
              mxy += std::abs(a * b);
            }
            const int i = r * parts + p;
            EXPECT_NEAR(sx[i], ex, this->Tolerance(mx, ex))
                << "row " << r << " part " << p;
            if (with_y) {
              EXPECT_NEAR(sxy[i], exy, this->Tolerance(mxy, exy))
                  << "row " << r << " part " << p;
            }
          }
        }
      }
    }
  }
}

TYPED_TEST(NormKernelsTest, RowPartialSquaredDeviationsMatchDouble) {
  using Dtype = TypeParam;
  const int rows = 4;
  const int center_mod = 2;  // BatchNorm-like: a centre per "channel"
  const std::vector<Dtype> center = {Dtype(0.25), Dtype(-3)};
  for (int row_len : kRowLens) {
    for (int parts : kParts) {
      if (parts > row_len) continue;
      SCOPED_TRACE(testing::Message()
                   << "row_len " << row_len << " parts " << parts);
      const auto x = this->Random(rows * row_len, -1.0, 3.0, row_len + parts);
      std::vector<Dtype> out(rows * parts, Dtype(-7));
      const RowPartialSquaredDeviations<Dtype> f{
          x.data(), center.data(), out.data(), row_len, parts, center_mod};
      for (int i = 0; i < rows * parts; ++i) f(i);
      for (int r = 0; r < rows; ++r) {
        for (int p = 0; p < parts; ++p) {
          double e = 0;
          for (int k = p; k < row_len; k += parts) {
            // The difference rounds to Dtype as the kernel's does.
            const double d =
                static_cast<Dtype>(x[r * row_len + k] - center[r % center_mod]);
            e += d * d;
          }
          EXPECT_NEAR(out[r * parts + p], e, this->Tolerance(e, e))
              << "row " << r << " part " << p;
        }
      }
    }
  }
}

// BatchNorm's moments about the first value of each "channel" (rows r and
// r + 2 share one).
TYPED_TEST(NormKernelsTest, RowPartialShiftedMomentsMatchDouble) {
  using Dtype = TypeParam;
  const int rows = 4, shift_mod = 2;
  for (int row_len : kRowLens) {
    for (int parts : kParts) {
      if (parts > row_len) continue;
      SCOPED_TRACE(testing::Message()
                   << "row_len " << row_len << " parts " << parts);
      const auto x = this->Random(rows * row_len, 100.0, 3.0, row_len * parts);
      std::vector<Dtype> sd(rows * parts, Dtype(-7)), sd2(rows * parts);
      const RowPartialShiftedMoments<Dtype> f{x.data(), sd.data(), sd2.data(),
                                              row_len,  parts,     shift_mod};
      for (int i = 0; i < rows * parts; ++i) f(i);
      for (int r = 0; r < rows; ++r) {
        const Dtype shift = x[(r % shift_mod) * row_len];
        for (int p = 0; p < parts; ++p) {
          double e1 = 0, e2 = 0, m1 = 0;
          for (int k = p; k < row_len; k += parts) {
            const double d = static_cast<Dtype>(x[r * row_len + k] - shift);
            e1 += d;
            e2 += d * d;
            m1 += std::abs(d);
          }
          EXPECT_NEAR(sd[r * parts + p], e1, this->Tolerance(m1, e1))
              << "row " << r << " part " << p;
          EXPECT_NEAR(sd2[r * parts + p], e2, this->Tolerance(e2, e2))
              << "row " << r << " part " << p;
        }
      }
    }
  }
}

// A long float row: a plain float sum of 2^20 values near 0.1 is off by
// ~1e-4 of the total; the blocked sum stays within a few float ulps.
TEST(NormKernelsAccuracy, LongFloatRowStaysAccurate) {
  const int n = 1 << 20;
  std::vector<float> x(n);
  std::mt19937 gen(5);
  std::uniform_real_distribution<double> dist(0.05, 0.15);
  double exact = 0;
  float naive = 0;
  for (float& v : x) {
    v = static_cast<float>(dist(gen));
    exact += v;
    naive += v;
  }
  float sum = -1;
  const RowPartialSums<float> f{x.data(), nullptr, &sum, nullptr, n, 1};
  f(0);
  EXPECT_NEAR(sum, exact, 4e-7 * exact);
  // The bound means something: a plain float sum misses it by far.
  EXPECT_GT(std::abs(naive - exact), 1e-5 * exact);
}

}  // namespace
}  // namespace poseidon
