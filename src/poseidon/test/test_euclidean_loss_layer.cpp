// EuclideanLossLayer: loss against hand-computed and naive values, gradients
// for both inputs, loss weights, shape errors; CPU/GPU agreement.
#include <gtest/gtest.h>

#include <vector>

#include "gpu_agreement.hpp"
#include "gradient_checker.hpp"
#include "poseidon/layers/euclidean_loss_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class EuclideanLossLayerTest : public test::MultiDeviceTest<TypeParam> {
  using Dtype = typename TypeParam::Dtype;

 protected:
  EuclideanLossLayerTest() {
    test::FillGaussian(&a_);
    test::FillGaussian(&b_);
    bottom_vec_ = {&a_, &b_};
    top_vec_ = {&loss_};
  }

  static LayerParameter Param() {
    LayerParameter p;
    p.set_type("EuclideanLoss");
    return p;
  }

  Blob<Dtype> a_{4, 3, 2, 1};
  Blob<Dtype> b_{4, 3, 2, 1};
  Blob<Dtype> loss_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(EuclideanLossLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(EuclideanLossLayerTest, HandComputed) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> a({2, 2});
  Blob<Dtype> b({2, 2});
  const Dtype av[] = {1, 2, 3, 4};
  const Dtype bv[] = {0, 4, 3, 1};
  std::copy(av, av + 4, a.mutable_cpu_data());
  std::copy(bv, bv + 4, b.mutable_cpu_data());
  vector<Blob<Dtype>*> bottom = {&a, &b};
  EuclideanLossLayer<Dtype> layer(this->Param());
  layer.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->loss_.num_axes(), 0);
  // (1 + 4 + 0 + 9) / (2 * 2) = 3.5
  EXPECT_NEAR(layer.Forward(bottom, this->top_vec_), 3.5, 1e-6);
  EXPECT_NEAR(this->loss_.cpu_data()[0], 3.5, 1e-6);
  layer.Backward(this->top_vec_, {true, true}, bottom);
  const Dtype grad_a[] = {0.5, -1, 0, 1.5};  // (a - b) / N
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(a.cpu_diff()[i], grad_a[i], 1e-6) << i;
    EXPECT_NEAR(b.cpu_diff()[i], -grad_a[i], 1e-6) << i;
  }
}

TYPED_TEST(EuclideanLossLayerTest, ForwardMatchesNaiveAndLossWeight) {
  using Dtype = typename TypeParam::Dtype;
  double sum = 0;
  for (int i = 0; i < this->a_.count(); ++i) {
    const double d = double(this->a_.cpu_data()[i]) - this->b_.cpu_data()[i];
    sum += d * d;
  }
  const double expected = sum / (2 * 4);
  EuclideanLossLayer<Dtype> layer(this->Param());
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_NEAR(layer.Forward(this->bottom_vec_, this->top_vec_), expected, 1e-5);
  LayerParameter p = this->Param();
  p.add_loss_weight(0.5);
  EuclideanLossLayer<Dtype> half(p);
  half.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_NEAR(half.Forward(this->bottom_vec_, this->top_vec_), 0.5 * expected,
              1e-5);
  EXPECT_NEAR(this->loss_.cpu_data()[0], expected, 1e-5);
}

TYPED_TEST(EuclideanLossLayerTest, GradientBothBottoms) {
  using Dtype = typename TypeParam::Dtype;
  EuclideanLossLayer<Dtype> layer(this->Param());
  EXPECT_TRUE(layer.AllowForceBackward(0));
  EXPECT_TRUE(layer.AllowForceBackward(1));
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(EuclideanLossLayerTest, PropagateDownPerBottom) {
  using Dtype = typename TypeParam::Dtype;
  EuclideanLossLayer<Dtype> layer(this->Param());
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  cpu_set(this->b_.count(), Dtype(9), this->b_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true, false}, this->bottom_vec_);
  for (int i = 0; i < this->a_.count(); ++i) {
    const double expected =
        (double(this->a_.cpu_data()[i]) - this->b_.cpu_data()[i]) / 4;
    EXPECT_NEAR(this->a_.cpu_diff()[i], expected, 1e-6);
    EXPECT_EQ(this->b_.cpu_diff()[i], Dtype(9));
  }
}

TYPED_TEST(EuclideanLossLayerTest, DifferentShapesSameCount) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> b({4, 6});
  test::FillGaussian(&b);
  vector<Blob<Dtype>*> bottom = {&this->a_, &b};
  EuclideanLossLayer<Dtype> layer(this->Param());
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, bottom, this->top_vec_);
}

TYPED_TEST(EuclideanLossLayerTest, ShapeErrors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> wrong_count({4, 5});
  vector<Blob<Dtype>*> bottom = {&this->a_, &wrong_count};
  EuclideanLossLayer<Dtype> layer(this->Param());
  EXPECT_THROW(layer.SetUp(bottom, this->top_vec_), ShapeError);
  Blob<Dtype> wrong_first({3, 3, 2, 1});
  bottom = {&this->a_, &wrong_first};
  EuclideanLossLayer<Dtype> layer2(this->Param());
  EXPECT_THROW(layer2.SetUp(bottom, this->top_vec_), ShapeError);
  vector<Blob<Dtype>*> one = {&this->a_};
  EuclideanLossLayer<Dtype> layer3(this->Param());
  EXPECT_THROW(layer3.SetUp(one, this->top_vec_), ConfigError);
}

template <typename Dtype>
class EuclideanLossLayerGPUTest : public ::testing::Test {};
TYPED_TEST_SUITE(EuclideanLossLayerGPUTest, test::TestDtypes);

TYPED_TEST(EuclideanLossLayerGPUTest, AgreesWithCpu) {
  using Dtype = TypeParam;
  if (!test::GpuSkipReason().empty()) {
    GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
  }
  Blob<Dtype> a({6, 5, 3}), b({6, 15});
  test::FillGaussian(&a);
  test::FillGaussian(&b);
  LayerParameter param;
  param.set_type("EuclideanLoss");
  param.add_loss_weight(0.5);
  test::ExpectCpuGpuAgree<Dtype>(param, {&a, &b});
  test::ExpectCpuGpuAgree<Dtype>(param, {&a, &b}, {false, true});
}

}  // namespace
}  // namespace poseidon
