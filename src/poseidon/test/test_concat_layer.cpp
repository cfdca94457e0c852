// ConcatLayer: shapes, values along different axes, gradients, errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layers/concat_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class ConcatLayerTest : public test::MultiDeviceTest<TypeParam> {
  using Dtype = typename TypeParam::Dtype;

 protected:
  ConcatLayerTest() {
    test::FillGaussian(&a_);
    test::FillGaussian(&b_);
    test::FillGaussian(&c_);
    top_vec_ = {&top_};
  }

  static LayerParameter Param() {
    LayerParameter p;
    p.set_type("Concat");
    return p;
  }
  static LayerParameter AxisParam(int axis) {
    LayerParameter p = Param();
    p.mutable_concat_param()->set_axis(axis);
    return p;
  }

  // Checks top against the concatenation of `bottoms` along `axis`, indexing
  // every element of every bottom independently of the layer.
  void ExpectConcatenated(const vector<Blob<Dtype>*>& bottoms, int axis) {
    int offset = 0;
    for (const Blob<Dtype>* b : bottoms) {
      vector<int> index(b->num_axes(), 0);
      for (int i = 0; i < b->count(); ++i) {
        // Unravel i into index (row-major).
        int rest = i;
        for (int d = b->num_axes() - 1; d >= 0; --d) {
          index[d] = rest % b->shape(d);
          rest /= b->shape(d);
        }
        vector<int> top_index = index;
        top_index[axis] += offset;
        ASSERT_EQ(top_.data_at(top_index), b->data_at(index))
            << "element " << i;
      }
      offset += b->shape(axis);
    }
  }

  Blob<Dtype> a_{2, 3, 4, 5};
  Blob<Dtype> b_{2, 5, 4, 5};
  Blob<Dtype> c_{2, 1, 4, 5};
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(ConcatLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(ConcatLayerTest, ChannelsByDefault) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->a_, &this->b_, &this->c_};
  ConcatLayer<Dtype> layer(this->Param());
  layer.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 9, 4, 5}));
  layer.Forward(bottom, this->top_vec_);
  this->ExpectConcatenated(bottom, 1);
}

TYPED_TEST(ConcatLayerTest, NumAxisAndNegativeAxis) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> d({3, 3, 4, 5});
  test::FillGaussian(&d);
  vector<Blob<Dtype>*> bottom = {&this->a_, &d};
  ConcatLayer<Dtype> layer(this->AxisParam(0));
  layer.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{5, 3, 4, 5}));
  layer.Forward(bottom, this->top_vec_);
  this->ExpectConcatenated(bottom, 0);

  Blob<Dtype> e({2, 3, 4, 2});
  test::FillGaussian(&e);
  bottom = {&this->a_, &e};
  ConcatLayer<Dtype> last(this->AxisParam(-1));
  last.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 3, 4, 7}));
  last.Forward(bottom, this->top_vec_);
  this->ExpectConcatenated(bottom, 3);
}

TYPED_TEST(ConcatLayerTest, LegacyConcatDim) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> e({2, 3, 6, 5});
  test::FillGaussian(&e);
  vector<Blob<Dtype>*> bottom = {&this->a_, &e};
  LayerParameter p = this->Param();
  p.mutable_concat_param()->set_concat_dim(2);
  ConcatLayer<Dtype> layer(p);
  layer.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 3, 10, 5}));
  layer.Forward(bottom, this->top_vec_);
  this->ExpectConcatenated(bottom, 2);

  p.mutable_concat_param()->set_axis(1);
  ConcatLayer<Dtype> both(p);
  EXPECT_THROW(both.SetUp(bottom, this->top_vec_), ConfigError);
  p.clear_concat_param();
  p.mutable_concat_param()->set_concat_dim(4);
  ConcatLayer<Dtype> too_far(p);
  EXPECT_THROW(too_far.SetUp(bottom, this->top_vec_), ConfigError);
}

TYPED_TEST(ConcatLayerTest, SingleBottomAliases) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->a_};
  ConcatLayer<Dtype> layer(this->Param());
  layer.SetUp(bottom, this->top_vec_);
  layer.Forward(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), this->a_.shape());
  EXPECT_EQ(this->top_.cpu_data(), this->a_.cpu_data());
  EXPECT_EQ(this->top_.cpu_diff(), this->a_.cpu_diff());
}

TYPED_TEST(ConcatLayerTest, BackwardSlicesAndRespectsPropagateDown) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->a_, &this->b_};
  ConcatLayer<Dtype> layer(this->Param());
  layer.SetUp(bottom, this->top_vec_);
  layer.Forward(bottom, this->top_vec_);
  // Top diff = top data, so each bottom diff must equal its own data.
  cpu_copy(this->top_.count(), this->top_.cpu_data(),
           this->top_.mutable_cpu_diff());
  cpu_set(this->b_.count(), Dtype(7), this->b_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true, false}, bottom);
  for (int i = 0; i < this->a_.count(); ++i) {
    EXPECT_EQ(this->a_.cpu_diff()[i], this->a_.cpu_data()[i]);
  }
  for (int i = 0; i < this->b_.count(); ++i) {
    EXPECT_EQ(this->b_.cpu_diff()[i], Dtype(7));
  }
}

TYPED_TEST(ConcatLayerTest, GradientChannels) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->a_, &this->b_, &this->c_};
  ConcatLayer<Dtype> layer(this->Param());
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, bottom, this->top_vec_);
}

TYPED_TEST(ConcatLayerTest, GradientNum) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> d({1, 3, 4, 5});
  test::FillGaussian(&d);
  vector<Blob<Dtype>*> bottom = {&this->a_, &d};
  ConcatLayer<Dtype> layer(this->AxisParam(0));
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, bottom, this->top_vec_);
}

TYPED_TEST(ConcatLayerTest, MismatchedShapesNameTheShapes) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> wrong({2, 3, 4, 6});
  vector<Blob<Dtype>*> bottom = {&this->a_, &wrong};
  ConcatLayer<Dtype> layer(this->Param());
  try {
    layer.SetUp(bottom, this->top_vec_);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("2 3 4 6 (144)"), std::string::npos) << what;
    EXPECT_NE(what.find("2 3 4 5 (120)"), std::string::npos) << what;
    EXPECT_NE(what.find("axis 1"), std::string::npos) << what;
  }
  Blob<Dtype> fewer_axes({2, 3, 4});
  bottom = {&this->a_, &fewer_axes};
  ConcatLayer<Dtype> layer2(this->Param());
  EXPECT_THROW(layer2.SetUp(bottom, this->top_vec_), ShapeError);
}

TYPED_TEST(ConcatLayerTest, AxisOutOfRangeNamesAxisAndNumAxes) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->a_, &this->b_};
  for (int axis : {4, -5}) {
    ConcatLayer<Dtype> layer(this->AxisParam(axis));
    try {
      layer.SetUp(bottom, this->top_vec_);
      FAIL() << "expected ConfigError for axis " << axis;
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("axis " + std::to_string(axis)), std::string::npos)
          << what;
      EXPECT_NE(what.find("num_axes 4"), std::string::npos) << what;
    }
  }
}

TYPED_TEST(ConcatLayerTest, InPlaceIsRejected) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->a_, &this->top_};
  this->top_.Reshape({2, 3, 4, 5});
  ConcatLayer<Dtype> layer(this->Param());
  EXPECT_THROW(layer.SetUp(bottom, this->top_vec_), ConfigError);
}

}  // namespace
}  // namespace poseidon
