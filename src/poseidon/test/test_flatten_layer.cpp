// FlattenLayer: merged shapes, aliasing of data and diff, errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layers/flatten_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class FlattenLayerTest : public test::MultiDeviceTest<TypeParam> {
  using Dtype = typename TypeParam::Dtype;

 protected:
  FlattenLayerTest() {
    test::FillGaussian(&bottom_);
    bottom_vec_ = {&bottom_};
    top_vec_ = {&top_};
  }

  static LayerParameter Param(int axis, int end_axis) {
    LayerParameter p;
    p.set_type("Flatten");
    p.mutable_flatten_param()->set_axis(axis);
    p.mutable_flatten_param()->set_end_axis(end_axis);
    return p;
  }

  // The top shape for the given flatten_param, or ConfigError.
  vector<int> ShapeFor(int axis, int end_axis) {
    FlattenLayer<Dtype> layer(Param(axis, end_axis));
    layer.SetUp(bottom_vec_, top_vec_);
    return top_.shape();
  }

  Blob<Dtype> bottom_{2, 3, 4, 5};
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(FlattenLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(FlattenLayerTest, DefaultMergesAllButFirst) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p;
  p.set_type("Flatten");
  FlattenLayer<Dtype> layer(p);
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 60}));
  layer.Forward(this->bottom_vec_, this->top_vec_);
  // Row-major order is unchanged: element (n, c, h, w) is (n, c*20 + h*5 + w).
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 3; ++c) {
      for (int h = 0; h < 4; ++h) {
        for (int w = 0; w < 5; ++w) {
          EXPECT_EQ(this->top_.data_at({n, c * 20 + h * 5 + w}),
                    this->bottom_.data_at(n, c, h, w));
        }
      }
    }
  }
}

TYPED_TEST(FlattenLayerTest, AxisRanges) {
  EXPECT_EQ(this->ShapeFor(2, -1), (vector<int>{2, 3, 20}));
  EXPECT_EQ(this->ShapeFor(1, -2), (vector<int>{2, 12, 5}));
  EXPECT_EQ(this->ShapeFor(0, -1), (vector<int>{120}));
  EXPECT_EQ(this->ShapeFor(-3, 2), (vector<int>{2, 12, 5}));
  EXPECT_EQ(this->ShapeFor(1, 1), (vector<int>{2, 3, 4, 5}));
}

TYPED_TEST(FlattenLayerTest, SharesDataAndDiff) {
  using Dtype = typename TypeParam::Dtype;
  FlattenLayer<Dtype> layer(this->Param(1, -1));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(this->top_.cpu_data(), this->bottom_.cpu_data());
  this->top_.mutable_cpu_diff()[7] = 3;
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);
  EXPECT_EQ(this->bottom_.cpu_diff()[7], Dtype(3));

  // A bottom that grows gets new memory; the next Forward follows it.
  this->bottom_.Reshape({4, 3, 4, 5});
  test::FillGaussian(&this->bottom_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{4, 60}));
  EXPECT_EQ(this->top_.cpu_data(), this->bottom_.cpu_data());
  EXPECT_EQ(this->top_.cpu_diff(), this->bottom_.cpu_diff());
}

TYPED_TEST(FlattenLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  FlattenLayer<Dtype> layer(this->Param(1, 2));
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(FlattenLayerTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  EXPECT_THROW(this->ShapeFor(4, -1), ConfigError);
  EXPECT_THROW(this->ShapeFor(1, -5), ConfigError);
  EXPECT_THROW(this->ShapeFor(2, 1), ConfigError);
  try {
    this->ShapeFor(1, 7);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("end_axis 7"), std::string::npos) << what;
    EXPECT_NE(what.find("num_axes 4"), std::string::npos) << what;
  }
  FlattenLayer<Dtype> in_place(this->Param(1, -1));
  EXPECT_THROW(in_place.SetUp(this->bottom_vec_, this->bottom_vec_),
               ConfigError);
}

}  // namespace
}  // namespace poseidon
