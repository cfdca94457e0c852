// ReshapeLayer: 0 / -1 resolution, axis and num_axes, aliasing, errors.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layers/reshape_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class ReshapeLayerTest : public test::MultiDeviceTest<TypeParam> {
  using Dtype = typename TypeParam::Dtype;

 protected:
  ReshapeLayerTest() {
    test::FillGaussian(&bottom_);
    bottom_vec_ = {&bottom_};
    top_vec_ = {&top_};
  }

  static LayerParameter Param(std::initializer_list<int64_t> dims, int axis = 0,
                              int num_axes = -1) {
    LayerParameter p;
    p.set_type("Reshape");
    ReshapeParameter* r = p.mutable_reshape_param();
    r->mutable_shape();  // an empty shape is still a shape
    for (int64_t d : dims) r->mutable_shape()->add_dim(d);
    r->set_axis(axis);
    r->set_num_axes(num_axes);
    return p;
  }

  // The top shape for the given parameters; throws what SetUp throws.
  vector<int> ShapeFor(std::initializer_list<int64_t> dims, int axis = 0,
                       int num_axes = -1) {
    ReshapeLayer<Dtype> layer(Param(dims, axis, num_axes));
    layer.SetUp(bottom_vec_, top_vec_);
    return top_.shape();
  }

  Blob<Dtype> bottom_{2, 3, 6, 5};
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(ReshapeLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(ReshapeLayerTest, CopyAndInfer) {
  EXPECT_EQ(this->ShapeFor({0, -1}), (vector<int>{2, 90}));
  EXPECT_EQ(this->ShapeFor({6, 0, -1}), (vector<int>{6, 3, 10}));
  EXPECT_EQ(this->ShapeFor({-1, 0, 0, 0}), (vector<int>{2, 3, 6, 5}));
  EXPECT_EQ(this->ShapeFor({5, 36}), (vector<int>{5, 36}));
  EXPECT_EQ(this->ShapeFor({-1}), (vector<int>{180}));
  EXPECT_EQ(this->ShapeFor({0, 0, 30}), (vector<int>{2, 3, 30}));
}

TYPED_TEST(ReshapeLayerTest, AxisAndNumAxes) {
  EXPECT_EQ(this->ShapeFor({18}, 1, 2), (vector<int>{2, 18, 5}));
  EXPECT_EQ(this->ShapeFor({-1}, 1, 2), (vector<int>{2, 18, 5}));
  EXPECT_EQ(this->ShapeFor({1}, -1, 0), (vector<int>{2, 3, 6, 5, 1}));
  EXPECT_EQ(this->ShapeFor({1}, 0, 0), (vector<int>{1, 2, 3, 6, 5}));
  // Negative axes count as in Caffe: -1 is after the last axis.
  EXPECT_EQ(this->ShapeFor({2, 3}, -3, 1), (vector<int>{2, 3, 2, 3, 5}));
  EXPECT_EQ(this->ShapeFor({5, 1}, -2, 1), (vector<int>{2, 3, 6, 5, 1}));
  EXPECT_EQ(this->ShapeFor({1, 1}, 1, 0), (vector<int>{2, 1, 1, 3, 6, 5}));
  EXPECT_EQ(this->ShapeFor({0, -1}, 2), (vector<int>{2, 3, 6, 5}));
  EXPECT_EQ(this->ShapeFor({-1, 2}, 1), (vector<int>{2, 45, 2}));
}

TYPED_TEST(ReshapeLayerTest, EmptyShapeRemovesUnitAxis) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom({2, 1, 6});
  vector<Blob<Dtype>*> bottom_vec = {&bottom};
  ReshapeLayer<Dtype> layer(this->Param({}, 1, 1));
  layer.SetUp(bottom_vec, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 6}));
}

TYPED_TEST(ReshapeLayerTest, SharesDataAndDiffAndFollowsBottom) {
  using Dtype = typename TypeParam::Dtype;
  ReshapeLayer<Dtype> layer(this->Param({0, -1}));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(this->top_.cpu_data(), this->bottom_.cpu_data());
  EXPECT_EQ(this->top_.cpu_diff(), this->bottom_.cpu_diff());
  for (int i = 0; i < 180; ++i) {
    EXPECT_EQ(this->top_.cpu_data()[i], this->bottom_.cpu_data()[i]);
  }
  // A new batch size re-infers the -1 and follows the new memory.
  this->bottom_.Reshape({4, 3, 6, 5});
  layer.Forward(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{4, 90}));
  EXPECT_EQ(this->top_.cpu_data(), this->bottom_.cpu_data());
}

TYPED_TEST(ReshapeLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom({2, 3, 4});
  test::FillGaussian(&bottom);
  vector<Blob<Dtype>*> bottom_vec = {&bottom};
  ReshapeLayer<Dtype> layer(this->Param({4, -1, 2}));
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, bottom_vec, this->top_vec_);
}

TYPED_TEST(ReshapeLayerTest, TwoInferredDimsRejected) {
  try {
    this->ShapeFor({-1, 6, -1});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("{-1 6 -1}"), std::string::npos) << what;
    EXPECT_NE(what.find("more than one -1"), std::string::npos) << what;
  }
}

TYPED_TEST(ReshapeLayerTest, CountMismatchNamesBothShapes) {
  try {
    this->ShapeFor({4, 4});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("2 3 6 5 (180)"), std::string::npos) << what;
    EXPECT_NE(what.find("{4 4}"), std::string::npos) << what;
    EXPECT_NE(what.find("4 4 (16)"), std::string::npos) << what;
  }
  try {
    this->ShapeFor({7, -1});
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("2 3 6 5 (180)"), std::string::npos) << what;
    EXPECT_NE(what.find("{7 -1}"), std::string::npos) << what;
  }
}

TYPED_TEST(ReshapeLayerTest, BadParameters) {
  using Dtype = typename TypeParam::Dtype;
  EXPECT_THROW(this->ShapeFor({2, -2, 45}), ConfigError);
  EXPECT_THROW(this->ShapeFor({0, 0, 0, 0, 0}), ConfigError);
  EXPECT_THROW(this->ShapeFor({1}, 5, 0), ConfigError);
  EXPECT_THROW(this->ShapeFor({1}, -6, 0), ConfigError);
  EXPECT_THROW(this->ShapeFor({1}, 2, 3), ConfigError);
  EXPECT_THROW(this->ShapeFor({1}, 0, -2), ConfigError);
  ReshapeLayer<Dtype> in_place(this->Param({0, -1}));
  EXPECT_THROW(in_place.SetUp(this->bottom_vec_, this->bottom_vec_),
               ConfigError);
}

}  // namespace
}  // namespace poseidon
