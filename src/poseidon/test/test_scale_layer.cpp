// Scale: forward against a broadcast computed here (learned, bottom-given and
// scalar scales, with and without bias), gradients for data, scale and bias,
// in place, and parameter and shape errors; CPU/GPU agreement (skipped
// without a GPU).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpu_agreement.hpp"
#include "gradient_checker.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/scale_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class ScaleLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  ScaleLayerTest() : bottom_({2, 3, 4, 5}) {
    test::FillGaussian(&bottom_);
    bottom_vec_ = {&bottom_};
    top_vec_ = {&top_};
  }

  static LayerParameter Param(int axis, int num_axes, bool bias_term) {
    LayerParameter param;
    param.set_type("Scale");
    ScaleParameter* p = param.mutable_scale_param();
    p->set_axis(axis);
    p->set_num_axes(num_axes);
    p->mutable_filler()->set_type("gaussian");
    p->set_bias_term(bias_term);
    if (bias_term) p->mutable_bias_filler()->set_type("gaussian");
    return param;
  }

  // Expects top == bottom * scale[index] (+ bias[index]).
  template <typename Index>
  void ExpectScaled(const Blob<Dtype>& scale, const Blob<Dtype>* bias,
                    Index index) {
    for (int n = 0; n < 2; ++n)
      for (int c = 0; c < 3; ++c)
        for (int h = 0; h < 4; ++h)
          for (int w = 0; w < 5; ++w) {
            const int k = index(n, c, h, w);
            Dtype expected =
                this->bottom_.data_at(n, c, h, w) * scale.cpu_data()[k];
            if (bias != nullptr) expected += bias->cpu_data()[k];
            EXPECT_NEAR(this->top_.data_at(n, c, h, w), expected, 1e-5)
                << "at " << n << "," << c << "," << h << "," << w;
          }
  }

  Blob<Dtype> bottom_;
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(ScaleLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(ScaleLayerTest, DefaultsAreIdentity) {
  using Dtype = typename TestFixture::Dtype;
  const ScaleParameter defaults;
  EXPECT_EQ(defaults.axis(), 1);
  EXPECT_EQ(defaults.num_axes(), 1);
  EXPECT_FALSE(defaults.bias_term());
  LayerParameter param;
  param.set_type("Scale");
  param.mutable_scale_param()->set_bias_term(true);
  ScaleLayer<Dtype> layer(param);
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  ASSERT_EQ(layer.blobs().size(), 2u);
  EXPECT_EQ(layer.blobs()[0]->shape(), vector<int>{3});
  EXPECT_EQ(layer.blobs()[1]->shape(), vector<int>{3});
  EXPECT_TRUE(layer.param_propagate_down(0));
  EXPECT_TRUE(layer.param_propagate_down(1));
  layer.Forward(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < this->bottom_.count(); ++i) {
    EXPECT_EQ(this->top_.cpu_data()[i], this->bottom_.cpu_data()[i]);
  }
}

TYPED_TEST(ScaleLayerTest, LearnedPerChannel) {
  using Dtype = typename TestFixture::Dtype;
  ScaleLayer<Dtype> layer(this->Param(1, 1, false));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  ASSERT_EQ(layer.blobs().size(), 1u);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  this->ExpectScaled(*layer.blobs()[0], nullptr,
                     [](int n, int c, int h, int w) { return c; });
}

TYPED_TEST(ScaleLayerTest, LearnedWithBias) {
  using Dtype = typename TestFixture::Dtype;
  ScaleLayer<Dtype> layer(this->Param(1, 2, true));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  ASSERT_EQ(layer.blobs().size(), 2u);
  EXPECT_EQ(layer.blobs()[1]->shape(), (vector<int>{3, 4}));
  layer.Forward(this->bottom_vec_, this->top_vec_);
  this->ExpectScaled(*layer.blobs()[0], layer.blobs()[1].get(),
                     [](int n, int c, int h, int w) { return c * 4 + h; });
}

TYPED_TEST(ScaleLayerTest, LearnedScalarAndToTheEnd) {
  using Dtype = typename TestFixture::Dtype;
  ScaleLayer<Dtype> scalar(this->Param(1, 0, false));
  scalar.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(scalar.blobs()[0]->count(), 1);
  scalar.Forward(this->bottom_vec_, this->top_vec_);
  this->ExpectScaled(*scalar.blobs()[0], nullptr,
                     [](int n, int c, int h, int w) { return 0; });

  ScaleLayer<Dtype> tail(this->Param(2, -1, false));
  tail.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(tail.blobs()[0]->shape(), (vector<int>{4, 5}));
  tail.Forward(this->bottom_vec_, this->top_vec_);
  this->ExpectScaled(*tail.blobs()[0], nullptr,
                     [](int n, int c, int h, int w) { return h * 5 + w; });
}

TYPED_TEST(ScaleLayerTest, FromBottomWithBias) {
  using Dtype = typename TestFixture::Dtype;
  Blob<Dtype> scale({3});
  test::FillGaussian(&scale);
  vector<Blob<Dtype>*> bottom_vec = {&this->bottom_, &scale};
  ScaleLayer<Dtype> layer(this->Param(1, 1, true));
  layer.SetUp(bottom_vec, this->top_vec_);
  ASSERT_EQ(layer.blobs().size(), 1u);  // only the bias
  layer.Forward(bottom_vec, this->top_vec_);
  this->ExpectScaled(scale, layer.blobs()[0].get(),
                     [](int n, int c, int h, int w) { return c; });
}

TYPED_TEST(ScaleLayerTest, FromBottomAtAxisZero) {
  using Dtype = typename TestFixture::Dtype;
  Blob<Dtype> scale({2, 3});
  test::FillGaussian(&scale);
  vector<Blob<Dtype>*> bottom_vec = {&this->bottom_, &scale};
  ScaleLayer<Dtype> layer(this->Param(0, 1, false));
  layer.SetUp(bottom_vec, this->top_vec_);
  layer.Forward(bottom_vec, this->top_vec_);
  this->ExpectScaled(scale, nullptr,
                     [](int n, int c, int h, int w) { return n * 3 + c; });
}

TYPED_TEST(ScaleLayerTest, GradientLearned) {
  using Dtype = typename TestFixture::Dtype;
  for (int num_axes : {1, 0, -1}) {
    SCOPED_TRACE(num_axes);
    ScaleLayer<Dtype> layer(this->Param(1, num_axes, false));
    test::GradientChecker<Dtype> checker(1e-2, 1e-3);
    checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
  }
}

TYPED_TEST(ScaleLayerTest, GradientLearnedWithBias) {
  using Dtype = typename TestFixture::Dtype;
  ScaleLayer<Dtype> layer(this->Param(1, 2, true));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(ScaleLayerTest, GradientFromBottom) {
  using Dtype = typename TestFixture::Dtype;
  for (bool bias_term : {false, true}) {
    SCOPED_TRACE(bias_term);
    Blob<Dtype> scale({3, 4});
    test::FillGaussian(&scale);
    vector<Blob<Dtype>*> bottom_vec = {&this->bottom_, &scale};
    ScaleLayer<Dtype> layer(this->Param(1, 2, bias_term));
    test::GradientChecker<Dtype> checker(1e-2, 1e-3);
    checker.CheckGradient(&layer, bottom_vec, this->top_vec_);
  }
}

TYPED_TEST(ScaleLayerTest, ParamDiffsAccumulateAndRespectPropagateDown) {
  using Dtype = typename TestFixture::Dtype;
  ScaleLayer<Dtype> layer(this->Param(1, 1, true));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  cpu_set(this->top_.count(), Dtype(1), this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);
  vector<Dtype> once(layer.blobs()[0]->cpu_diff(),
                     layer.blobs()[0]->cpu_diff() + 3);
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(layer.blobs()[0]->cpu_diff()[c], 2 * once[c], 1e-5);
    EXPECT_EQ(layer.blobs()[1]->cpu_diff()[c], 2 * 2 * 4 * 5);
  }
  // With param_propagate_down off, the param diffs stay as they are.
  layer.set_param_propagate_down(0, false);
  layer.set_param_propagate_down(1, false);
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(layer.blobs()[0]->cpu_diff()[c], 2 * once[c], 1e-5);
    EXPECT_EQ(layer.blobs()[1]->cpu_diff()[c], 2 * 2 * 4 * 5);
  }
}

TYPED_TEST(ScaleLayerTest, InPlaceMatchesOutOfPlace) {
  using Dtype = typename TestFixture::Dtype;
  ScaleLayer<Dtype> layer(this->Param(1, 1, true));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  Blob<Dtype> top_diff(this->top_.shape());  // values in data
  test::FillGaussian(&top_diff);
  cpu_copy(top_diff.count(), top_diff.cpu_data(),
           this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);

  // The same weights, given as stored blobs.
  LayerParameter param = this->Param(1, 1, true);
  for (const auto& blob : layer.blobs()) blob->ToProto(param.add_blobs());
  ScaleLayer<Dtype> in_place(param);
  Blob<Dtype> io;
  io.CopyFrom(this->bottom_, false, true);
  vector<Blob<Dtype>*> io_vec = {&io};
  in_place.SetUp(io_vec, io_vec);
  in_place.Forward(io_vec, io_vec);
  cpu_copy(top_diff.count(), top_diff.cpu_data(), io.mutable_cpu_diff());
  in_place.Backward(io_vec, {true}, io_vec);
  for (int i = 0; i < io.count(); ++i) {
    EXPECT_EQ(io.cpu_data()[i], this->top_.cpu_data()[i]);
    EXPECT_EQ(io.cpu_diff()[i], this->bottom_.cpu_diff()[i]);
  }
  for (int b = 0; b < 2; ++b) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(in_place.blobs()[b]->cpu_diff()[c],
                  layer.blobs()[b]->cpu_diff()[c], 1e-5)
          << "blob " << b << " channel " << c;
    }
  }
}

TYPED_TEST(ScaleLayerTest, StoredBlobsReplaceFillers) {
  using Dtype = typename TestFixture::Dtype;
  LayerParameter param = this->Param(1, 1, true);
  Blob<Dtype> scale({3}), bias({3});
  for (int c = 0; c < 3; ++c) {
    scale.mutable_cpu_data()[c] = c + 1;
    bias.mutable_cpu_data()[c] = -c;
  }
  scale.ToProto(param.add_blobs());
  bias.ToProto(param.add_blobs());
  ScaleLayer<Dtype> layer(param);
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  this->ExpectScaled(scale, &bias,
                     [](int n, int c, int h, int w) { return c; });
}

TYPED_TEST(ScaleLayerTest, RejectsMismatchedShapes) {
  using Dtype = typename TestFixture::Dtype;
  Blob<Dtype> scale({4});
  vector<Blob<Dtype>*> bottom_vec = {&this->bottom_, &scale};
  ScaleLayer<Dtype> layer(this->Param(1, 1, false));
  try {
    layer.SetUp(bottom_vec, this->top_vec_);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("4 (4)"), std::string::npos) << what;
    EXPECT_NE(what.find("2 3 4 5 (120)"), std::string::npos) << what;
  }

  ScaleLayer<Dtype> past_end(this->Param(3, 2, false));
  EXPECT_THROW(past_end.SetUp(this->bottom_vec_, this->top_vec_), ShapeError);
  ScaleLayer<Dtype> bad_num_axes(this->Param(1, -3, false));
  EXPECT_THROW(bad_num_axes.SetUp(this->bottom_vec_, this->top_vec_),
               ConfigError);

  // A later bottom whose shape no longer fits the learned scale.
  ScaleLayer<Dtype> learned(this->Param(1, 1, false));
  learned.SetUp(this->bottom_vec_, this->top_vec_);
  Blob<Dtype> other({2, 5});
  vector<Blob<Dtype>*> other_vec = {&other};
  EXPECT_THROW(learned.Forward(other_vec, this->top_vec_), ShapeError);
}

TYPED_TEST(ScaleLayerTest, RejectsWrongNumberOfStoredBlobs) {
  using Dtype = typename TestFixture::Dtype;
  LayerParameter param = this->Param(1, 1, true);
  Blob<Dtype> scale({3});
  scale.ToProto(param.add_blobs());
  ScaleLayer<Dtype> layer(param);
  EXPECT_THROW(layer.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
}

TYPED_TEST(ScaleLayerTest, Registered) {
  using Dtype = typename TestFixture::Dtype;
  auto layer = LayerRegistry<Dtype>::CreateLayer(this->Param(1, 1, false));
  EXPECT_STREQ(layer->type(), "Scale");
}

// ---- CPU/GPU agreement ------------------------------------------------------

template <typename Dtype>
class ScaleLayerGPUTest : public ::testing::Test {};

TYPED_TEST_SUITE(ScaleLayerGPUTest, test::TestDtypes);

LayerParameter ScaleParam(int axis, int num_axes, bool bias_term) {
  LayerParameter param;
  param.set_type("Scale");
  ScaleParameter* p = param.mutable_scale_param();
  p->set_axis(axis);
  p->set_num_axes(num_axes);
  p->mutable_filler()->set_type("gaussian");
  p->set_bias_term(bias_term);
  if (bias_term) p->mutable_bias_filler()->set_type("gaussian");
  return param;
}

// `shapes[0]` is the bottom, `shapes[1]` (if any) the scale as a bottom.
template <typename Dtype>
void ExpectScaleAgrees(const LayerParameter& param,
                       const vector<vector<int>>& shapes) {
  vector<std::unique_ptr<Blob<Dtype>>> blobs;
  vector<Blob<Dtype>*> bottoms;
  for (const vector<int>& shape : shapes) {
    blobs.emplace_back(new Blob<Dtype>(shape));
    test::FillGaussian(blobs.back().get());
    bottoms.push_back(blobs.back().get());
  }
  test::ExpectCpuGpuAgree<Dtype>(param, bottoms);
}

TYPED_TEST(ScaleLayerGPUTest, PerChannelAgreesWithCpu) {
  ExpectScaleAgrees<TypeParam>(ScaleParam(1, 1, false), {{2, 3, 4, 5}});
}

TYPED_TEST(ScaleLayerGPUTest, PerChannelWithBiasAgreesWithCpu) {
  ExpectScaleAgrees<TypeParam>(ScaleParam(1, 1, true), {{2, 3, 4, 5}});
}

// The shape of BatchNorm + Scale in a ResNet, smaller.
TYPED_TEST(ScaleLayerGPUTest, LargerWithBiasAgreesWithCpu) {
  ExpectScaleAgrees<TypeParam>(ScaleParam(1, 1, true), {{6, 16, 12, 13}});
}

TYPED_TEST(ScaleLayerGPUTest, ScalarWithBiasAgreesWithCpu) {
  ExpectScaleAgrees<TypeParam>(ScaleParam(1, 0, true), {{2, 3, 4, 5}});
}

TYPED_TEST(ScaleLayerGPUTest, ToTheEndWithBiasAgreesWithCpu) {
  ExpectScaleAgrees<TypeParam>(ScaleParam(1, -1, true), {{2, 3, 4, 5}});
}

TYPED_TEST(ScaleLayerGPUTest, FromBottomAgreesWithCpu) {
  LayerParameter param;
  param.set_type("Scale");
  ExpectScaleAgrees<TypeParam>(param, {{2, 3, 4, 5}, {3, 4}});
}

// The bias covers axis 1 only while the scale from bottom[1] covers axes
// 1 and 2: the bias is added in a pass of its own.
TYPED_TEST(ScaleLayerGPUTest, FromBottomWithBiasAgreesWithCpu) {
  LayerParameter param = ScaleParam(1, 1, true);
  param.mutable_scale_param()->clear_filler();
  ExpectScaleAgrees<TypeParam>(param, {{2, 3, 4, 5}, {3, 4}});
}

TYPED_TEST(ScaleLayerGPUTest, FromBottomAtAxisZeroAgreesWithCpu) {
  LayerParameter param;
  param.set_type("Scale");
  param.mutable_scale_param()->set_axis(0);
  ExpectScaleAgrees<TypeParam>(param, {{2, 3, 4, 5}, {2, 3}});
}

}  // namespace
}  // namespace poseidon
