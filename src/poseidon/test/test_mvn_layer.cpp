// MVNLayer: forwards against the definition evaluated in double, in every
// mode, with three axes, a constant input and in place; gradient checks and
// the errors; CPU/GPU agreement, in every mode.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gpu_agreement.hpp"
#include "gradient_checker.hpp"
#include "poseidon/layers/mvn_layer.hpp"
#include "test_util.hpp"
#include "utility_layer_test.hpp"

namespace poseidon {
namespace {

using test::ExpectError;
using test::Param;
using test::UtilityLayerTest;

template <typename TypeParam>
class MVNLayerTest : public UtilityLayerTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  MVNLayerTest() {
    test::FillGaussian(&x_, 2.0);
    for (int i = 0; i < x_.count(); ++i) x_.mutable_cpu_data()[i] += i % 7;
  }
  static LayerParameter MVNParam(bool variance, bool across, float eps) {
    LayerParameter p = Param("MVN");
    p.mutable_mvn_param()->set_normalize_variance(variance);
    p.mutable_mvn_param()->set_across_channels(across);
    p.mutable_mvn_param()->set_eps(eps);
    return p;
  }
  // The expected output, computed in double from the definition.
  static vector<double> Reference(const Blob<Dtype>& x, bool variance,
                                  bool across, double eps) {
    const int groups = across ? x.shape(0) : x.shape(0) * x.shape(1);
    const int dim = x.count() / groups;
    vector<double> y(x.count());
    for (int g = 0; g < groups; ++g) {
      double mean = 0, var = 0;
      for (int i = 0; i < dim; ++i) mean += x.cpu_data()[g * dim + i];
      mean /= dim;
      for (int i = 0; i < dim; ++i) {
        const double c = x.cpu_data()[g * dim + i] - mean;
        var += c * c;
      }
      var /= dim;
      for (int i = 0; i < dim; ++i) {
        const double c = x.cpu_data()[g * dim + i] - mean;
        y[g * dim + i] = variance ? c / (std::sqrt(var) + eps) : c;
      }
    }
    return y;
  }
  Blob<Dtype> x_{2, 3, 4, 5};
};
TYPED_TEST_SUITE(MVNLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(MVNLayerTest, MatchesReferenceInEveryMode) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->x_};
  for (bool variance : {true, false}) {
    for (bool across : {false, true}) {
      for (float eps : {1e-9f, 0.5f}) {
        MVNLayer<Dtype> layer(this->MVNParam(variance, across, eps));
        layer.SetUp(bottom, this->top_vec_);
        EXPECT_EQ(this->top_.shape(), this->x_.shape());
        layer.Forward(bottom, this->top_vec_);
        const vector<double> want =
            this->Reference(this->x_, variance, across, eps);
        for (int i = 0; i < this->x_.count(); ++i) {
          ASSERT_NEAR(this->top_.cpu_data()[i], want[i], 1e-4)
              << "variance " << variance << " across " << across << " eps "
              << eps << " element " << i;
        }
      }
    }
  }
  // Spot check of the statistics: each (item, channel) of 20 values ends
  // with mean 0 and (biased) variance 1.
  MVNLayer<Dtype> layer(Param("MVN"));
  layer.SetUp(bottom, this->top_vec_);
  layer.Forward(bottom, this->top_vec_);
  for (int g = 0; g < 6; ++g) {
    double sum = 0, sq = 0;
    for (int i = 0; i < 20; ++i) {
      const double v = this->top_.cpu_data()[g * 20 + i];
      sum += v;
      sq += v * v;
    }
    EXPECT_NEAR(sum / 20, 0, 1e-5);
    EXPECT_NEAR(sq / 20, 1, 1e-4);
  }
}

TYPED_TEST(MVNLayerTest, ThreeAxesAndConstantInput) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> x({2, 3, 4});
  test::FillGaussian(&x);
  vector<Blob<Dtype>*> bottom = {&x};
  MVNLayer<Dtype> layer(Param("MVN"));
  layer.SetUp(bottom, this->top_vec_);
  layer.Forward(bottom, this->top_vec_);
  const vector<double> want = this->Reference(x, true, false, 1e-9);
  for (int i = 0; i < x.count(); ++i) {
    EXPECT_NEAR(this->top_.cpu_data()[i], want[i], 1e-4) << i;
  }
  // A constant group has zero variance: the output is 0, not NaN.
  cpu_set(x.count(), Dtype(3), x.mutable_cpu_data());
  layer.Forward(bottom, this->top_vec_);
  cpu_set(x.count(), Dtype(1), this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true}, bottom);
  for (int i = 0; i < x.count(); ++i) {
    EXPECT_EQ(this->top_.cpu_data()[i], Dtype(0));
    EXPECT_TRUE(std::isfinite(x.cpu_diff()[i]));
  }
}

TYPED_TEST(MVNLayerTest, InPlaceMatchesOutOfPlace) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> dy({2, 3, 4, 5});
  test::FillGaussian(&dy);
  vector<Blob<Dtype>*> bottom = {&this->x_};
  MVNLayer<Dtype> layer(Param("MVN"));
  layer.SetUp(bottom, this->top_vec_);
  layer.Forward(bottom, this->top_vec_);
  cpu_copy(dy.count(), dy.cpu_data(), this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true}, bottom);

  Blob<Dtype> y({2, 3, 4, 5});
  y.CopyFrom(this->x_);
  vector<Blob<Dtype>*> in_place = {&y};
  MVNLayer<Dtype> layer2(Param("MVN"));
  layer2.SetUp(in_place, in_place);
  layer2.Forward(in_place, in_place);
  cpu_copy(dy.count(), dy.cpu_data(), y.mutable_cpu_diff());
  layer2.Backward(in_place, {true}, in_place);
  for (int i = 0; i < y.count(); ++i) {
    EXPECT_NEAR(y.cpu_data()[i], this->top_.cpu_data()[i], 1e-6) << i;
    EXPECT_NEAR(y.cpu_diff()[i], this->x_.cpu_diff()[i], 1e-6) << i;
  }
}

TYPED_TEST(MVNLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> x({2, 3, 2, 3});
  test::FillGaussian(&x);
  vector<Blob<Dtype>*> bottom = {&x};
  for (bool variance : {true, false}) {
    for (bool across : {false, true}) {
      MVNLayer<Dtype> layer(this->MVNParam(variance, across, 1e-9f));
      test::GradientChecker<Dtype> checker(1e-2, 1e-3);
      checker.CheckGradient(&layer, bottom, this->top_vec_);
    }
  }
}

TYPED_TEST(MVNLayerTest, NegativeEps) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->x_};
  MVNLayer<Dtype> layer(this->MVNParam(true, false, -1));
  ExpectError<ConfigError>([&] { layer.SetUp(bottom, this->top_vec_); },
                           {"mvn_param.eps"});
}

// ------------------------------------------------------- GPU bodies

template <typename Dtype>
class MVNLayerGPUTest : public ::testing::Test {};
TYPED_TEST_SUITE(MVNLayerGPUTest, test::TestDtypes);

TYPED_TEST(MVNLayerGPUTest, AgreesWithCpuInEveryMode) {
  using Dtype = TypeParam;
  if (!test::GpuSkipReason().empty()) {
    GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
  }
  Blob<Dtype> x({3, 4, 5, 6});
  test::FillGaussian(&x, 2.0);
  for (int i = 0; i < x.count(); ++i) x.mutable_cpu_data()[i] += i % 7;
  for (bool variance : {true, false}) {
    for (bool across : {false, true}) {
      SCOPED_TRACE(testing::Message() << "normalize_variance " << variance
                                      << " across_channels " << across);
      LayerParameter param;
      param.set_type("MVN");
      param.mutable_mvn_param()->set_normalize_variance(variance);
      param.mutable_mvn_param()->set_across_channels(across);
      param.mutable_mvn_param()->set_eps(1e-6f);
      test::ExpectCpuGpuAgree<Dtype>(param, {&x});
    }
  }
}

}  // namespace
}  // namespace poseidon
