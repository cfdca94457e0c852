// Fillers: value ranges and moments of each initialiser, checked on blobs
// large enough for the statistics to be tight.
#include <gtest/gtest.h>

#include <cmath>

#include "poseidon/filler.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename Dtype>
class FillerTest : public ::testing::Test {
 protected:
  FillerTest() : blob_({64, 32, 5, 5}) { Poseidon::set_random_seed(1701); }

  void Fill(const FillerParameter& p) { GetFiller<Dtype>(p)->Fill(&blob_); }
  double Mean() const {
    double s = 0;
    for (int i = 0; i < blob_.count(); ++i) s += blob_.cpu_data()[i];
    return s / blob_.count();
  }
  double Variance() const {
    const double m = Mean();
    double s = 0;
    for (int i = 0; i < blob_.count(); ++i) {
      const double d = blob_.cpu_data()[i] - m;
      s += d * d;
    }
    return s / blob_.count();
  }

  Blob<Dtype> blob_;
};
TYPED_TEST_SUITE(FillerTest, test::TestDtypes);

TYPED_TEST(FillerTest, Constant) {
  FillerParameter p;
  p.set_type("constant");
  p.set_value(3.5);
  this->Fill(p);
  for (int i = 0; i < this->blob_.count(); ++i) {
    EXPECT_EQ(this->blob_.cpu_data()[i], TypeParam(3.5));
  }
}

TYPED_TEST(FillerTest, UniformStaysInRange) {
  FillerParameter p;
  p.set_type("uniform");
  p.set_min(-2);
  p.set_max(3);
  this->Fill(p);
  for (int i = 0; i < this->blob_.count(); ++i) {
    EXPECT_GE(this->blob_.cpu_data()[i], -2);
    EXPECT_LE(this->blob_.cpu_data()[i], 3);
  }
  EXPECT_NEAR(this->Mean(), 0.5, 0.05);
  EXPECT_NEAR(this->Variance(), 25.0 / 12, 0.1);
}

TYPED_TEST(FillerTest, GaussianMoments) {
  FillerParameter p;
  p.set_type("gaussian");
  p.set_mean(1);
  p.set_std(0.5);
  this->Fill(p);
  EXPECT_NEAR(this->Mean(), 1.0, 0.01);
  EXPECT_NEAR(this->Variance(), 0.25, 0.01);
}

TYPED_TEST(FillerTest, SparseGaussianKeepsAboutSparsePerOutput) {
  FillerParameter p;
  p.set_type("gaussian");
  p.set_std(1);
  p.set_sparse(50);  // of 800 inputs per output unit
  this->Fill(p);
  int nonzero = 0;
  for (int i = 0; i < this->blob_.count(); ++i) {
    nonzero += this->blob_.cpu_data()[i] != 0;
  }
  EXPECT_NEAR(nonzero / 64.0, 50, 5);
}

TYPED_TEST(FillerTest, XavierVarianceIsOneOverFanIn) {
  FillerParameter p;
  p.set_type("xavier");
  this->Fill(p);
  const double fan_in = 32 * 25;
  const double limit = std::sqrt(3 / fan_in);
  for (int i = 0; i < this->blob_.count(); ++i) {
    EXPECT_LE(std::fabs(this->blob_.cpu_data()[i]), limit + 1e-6);
  }
  EXPECT_NEAR(this->Variance(), 1 / fan_in, 0.05 / fan_in);
  p.set_variance_norm(FillerParameter::AVERAGE);
  this->Fill(p);
  EXPECT_NEAR(this->Variance(), 2 / (fan_in + 64 * 25), 0.1 / fan_in);
}

TYPED_TEST(FillerTest, MsraVarianceIsTwoOverFan) {
  FillerParameter p;
  p.set_type("msra");
  p.set_variance_norm(FillerParameter::FAN_OUT);
  this->Fill(p);
  const double fan_out = 64 * 25;
  EXPECT_NEAR(this->Mean(), 0, 0.01);
  EXPECT_NEAR(this->Variance(), 2 / fan_out, 0.05 * 2 / fan_out);
}

TYPED_TEST(FillerTest, PositiveUnitballRowsSumToOne) {
  FillerParameter p;
  p.set_type("positive_unitball");
  this->Fill(p);
  const int dim = this->blob_.count() / 64;
  for (int n = 0; n < 64; ++n) {
    double sum = 0;
    for (int j = 0; j < dim; ++j) {
      const TypeParam v = this->blob_.cpu_data()[n * dim + j];
      EXPECT_GE(v, 0);
      sum += v;
    }
    EXPECT_NEAR(sum, 1, 1e-5);
  }
}

TYPED_TEST(FillerTest, BilinearMatchesInterpolationWeights) {
  Blob<TypeParam> kernel({1, 1, 4, 4});
  FillerParameter p;
  p.set_type("bilinear");
  GetFiller<TypeParam>(p)->Fill(&kernel);
  // Factor-2 upsampling kernel: 1-D weights (0.25, 0.75, 0.75, 0.25).
  const double w[4] = {0.25, 0.75, 0.75, 0.25};
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 4; ++x) {
      EXPECT_NEAR(kernel.cpu_data()[y * 4 + x], w[y] * w[x], 1e-6);
    }
  }
  Blob<TypeParam> not_square({1, 1, 3, 4});
  EXPECT_THROW(GetFiller<TypeParam>(p)->Fill(&not_square), ConfigError);
}

TEST(FillerErrorTest, UnknownTypeNamesIt) {
  FillerParameter p;
  p.set_type("gausian");
  try {
    GetFiller<float>(p);
    FAIL() << "unknown filler accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'gausian'"), std::string::npos);
  }
}

}  // namespace
}  // namespace poseidon
