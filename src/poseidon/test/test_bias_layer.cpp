// Bias: forward against a broadcast computed here for learned, bottom-given
// and scalar biases; gradients; in place; parameter and shape errors; CPU/GPU
// agreement (skipped without a GPU).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpu_agreement.hpp"
#include "gradient_checker.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/bias_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class BiasLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  BiasLayerTest() : bottom_({2, 3, 4, 5}) {
    test::FillGaussian(&bottom_);
    bottom_vec_ = {&bottom_};
    top_vec_ = {&top_};
  }

  static LayerParameter Param(int axis, int num_axes) {
    LayerParameter param;
    param.set_type("Bias");
    param.mutable_bias_param()->set_axis(axis);
    param.mutable_bias_param()->set_num_axes(num_axes);
    param.mutable_bias_param()->mutable_filler()->set_type("gaussian");
    return param;
  }

  // Expects top[n, c, h, w] == bottom[...] + bias[index(n, c, h, w)].
  template <typename Index>
  void ExpectBiased(const Blob<Dtype>& bias, Index index) {
    for (int n = 0; n < 2; ++n)
      for (int c = 0; c < 3; ++c)
        for (int h = 0; h < 4; ++h)
          for (int w = 0; w < 5; ++w) {
            const Dtype expected = this->bottom_.data_at(n, c, h, w) +
                                   bias.cpu_data()[index(n, c, h, w)];
            EXPECT_NEAR(this->top_.data_at(n, c, h, w), expected, 1e-6)
                << "at " << n << "," << c << "," << h << "," << w;
          }
  }

  Blob<Dtype> bottom_;
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(BiasLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(BiasLayerTest, DefaultsAndZeroFiller) {
  using Dtype = typename TestFixture::Dtype;
  const BiasParameter defaults;
  EXPECT_EQ(defaults.axis(), 1);
  EXPECT_EQ(defaults.num_axes(), 1);
  LayerParameter param;
  param.set_type("Bias");
  BiasLayer<Dtype> layer(param);
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  ASSERT_EQ(layer.blobs().size(), 1u);
  EXPECT_EQ(layer.blobs()[0]->shape(), vector<int>{3});
  EXPECT_EQ(layer.blobs()[0]->asum_data(), 0);
  EXPECT_TRUE(layer.param_propagate_down(0));
}

TYPED_TEST(BiasLayerTest, LearnedPerChannel) {
  using Dtype = typename TestFixture::Dtype;
  BiasLayer<Dtype> layer(this->Param(1, 1));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  this->ExpectBiased(*layer.blobs()[0],
                     [](int n, int c, int h, int w) { return c; });
}

TYPED_TEST(BiasLayerTest, LearnedToTheEnd) {
  using Dtype = typename TestFixture::Dtype;
  BiasLayer<Dtype> layer(this->Param(-2, -1));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(layer.blobs()[0]->shape(), (vector<int>{4, 5}));
  layer.Forward(this->bottom_vec_, this->top_vec_);
  this->ExpectBiased(*layer.blobs()[0],
                     [](int n, int c, int h, int w) { return h * 5 + w; });
}

TYPED_TEST(BiasLayerTest, LearnedScalar) {
  using Dtype = typename TestFixture::Dtype;
  BiasLayer<Dtype> layer(this->Param(1, 0));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(layer.blobs()[0]->num_axes(), 0);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  this->ExpectBiased(*layer.blobs()[0],
                     [](int n, int c, int h, int w) { return 0; });
}

TYPED_TEST(BiasLayerTest, FromBottom) {
  using Dtype = typename TestFixture::Dtype;
  Blob<Dtype> bias({3, 4});
  test::FillGaussian(&bias);
  vector<Blob<Dtype>*> bottom_vec = {&this->bottom_, &bias};
  BiasLayer<Dtype> layer(this->Param(1, 1));
  layer.SetUp(bottom_vec, this->top_vec_);
  EXPECT_TRUE(layer.blobs().empty());
  layer.Forward(bottom_vec, this->top_vec_);
  this->ExpectBiased(bias,
                     [](int n, int c, int h, int w) { return c * 4 + h; });
}

TYPED_TEST(BiasLayerTest, FromBottomAtAxisZero) {
  using Dtype = typename TestFixture::Dtype;
  Blob<Dtype> bias({2});
  test::FillGaussian(&bias);
  vector<Blob<Dtype>*> bottom_vec = {&this->bottom_, &bias};
  BiasLayer<Dtype> layer(this->Param(0, 1));
  layer.SetUp(bottom_vec, this->top_vec_);
  layer.Forward(bottom_vec, this->top_vec_);
  this->ExpectBiased(bias, [](int n, int c, int h, int w) { return n; });
}

TYPED_TEST(BiasLayerTest, GradientLearned) {
  using Dtype = typename TestFixture::Dtype;
  for (int num_axes : {1, 0, -1}) {
    SCOPED_TRACE(num_axes);
    BiasLayer<Dtype> layer(this->Param(1, num_axes));
    test::GradientChecker<Dtype> checker(1e-2, 1e-3);
    checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
  }
}

TYPED_TEST(BiasLayerTest, GradientFromBottom) {
  using Dtype = typename TestFixture::Dtype;
  Blob<Dtype> bias({3, 4});
  test::FillGaussian(&bias);
  vector<Blob<Dtype>*> bottom_vec = {&this->bottom_, &bias};
  BiasLayer<Dtype> layer(this->Param(1, 1));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, bottom_vec, this->top_vec_);
}

TYPED_TEST(BiasLayerTest, ParamDiffAccumulatesBottomDiffOverwrites) {
  using Dtype = typename TestFixture::Dtype;
  BiasLayer<Dtype> layer(this->Param(1, 1));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  cpu_set(this->top_.count(), Dtype(1), this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(layer.blobs()[0]->cpu_diff()[c], 2 * 2 * 4 * 5);
  }
  EXPECT_EQ(this->bottom_.asum_diff(), this->bottom_.count());
}

TYPED_TEST(BiasLayerTest, InPlace) {
  using Dtype = typename TestFixture::Dtype;
  BiasLayer<Dtype> layer(this->Param(1, 1));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  Blob<Dtype> top_diff(this->top_.shape());  // values in data
  test::FillGaussian(&top_diff);
  cpu_copy(top_diff.count(), top_diff.cpu_data(),
           this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);

  LayerParameter param = this->Param(1, 1);
  layer.blobs()[0]->ToProto(param.add_blobs());
  BiasLayer<Dtype> in_place(param);
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
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(in_place.blobs()[0]->cpu_diff()[c],
                layer.blobs()[0]->cpu_diff()[c], 1e-5);
  }
}

TYPED_TEST(BiasLayerTest, RejectsMismatchedBottomBias) {
  using Dtype = typename TestFixture::Dtype;
  Blob<Dtype> bias({3, 5});
  vector<Blob<Dtype>*> bottom_vec = {&this->bottom_, &bias};
  BiasLayer<Dtype> layer(this->Param(1, 1));
  try {
    layer.SetUp(bottom_vec, this->top_vec_);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("3 5 (15)"), std::string::npos) << what;
    EXPECT_NE(what.find("2 3 4 5 (120)"), std::string::npos) << what;
  }
}

TYPED_TEST(BiasLayerTest, RejectsBadAxes) {
  using Dtype = typename TestFixture::Dtype;
  BiasLayer<Dtype> past_end(this->Param(2, 3));
  EXPECT_THROW(past_end.SetUp(this->bottom_vec_, this->top_vec_), ShapeError);
  BiasLayer<Dtype> bad_axis(this->Param(4, 1));
  EXPECT_THROW(bad_axis.SetUp(this->bottom_vec_, this->top_vec_), ShapeError);
  BiasLayer<Dtype> bad_num_axes(this->Param(1, -2));
  EXPECT_THROW(bad_num_axes.SetUp(this->bottom_vec_, this->top_vec_),
               ConfigError);
}

TYPED_TEST(BiasLayerTest, RejectsStoredBlobWithBottomBias) {
  using Dtype = typename TestFixture::Dtype;
  LayerParameter param = this->Param(1, 1);
  Blob<Dtype> stored({3});
  stored.ToProto(param.add_blobs());
  Blob<Dtype> bias({3});
  vector<Blob<Dtype>*> bottom_vec = {&this->bottom_, &bias};
  BiasLayer<Dtype> layer(param);
  EXPECT_THROW(layer.SetUp(bottom_vec, this->top_vec_), ConfigError);
}

TYPED_TEST(BiasLayerTest, Registered) {
  using Dtype = typename TestFixture::Dtype;
  auto layer = LayerRegistry<Dtype>::CreateLayer(this->Param(1, 1));
  EXPECT_STREQ(layer->type(), "Bias");
}

// ---- CPU/GPU agreement ------------------------------------------------------

template <typename Dtype>
class BiasLayerGPUTest : public ::testing::Test {};

TYPED_TEST_SUITE(BiasLayerGPUTest, test::TestDtypes);

LayerParameter LearnedBias(int axis, int num_axes) {
  LayerParameter param;
  param.set_type("Bias");
  param.mutable_bias_param()->set_axis(axis);
  param.mutable_bias_param()->set_num_axes(num_axes);
  param.mutable_bias_param()->mutable_filler()->set_type("gaussian");
  return param;
}

// `shapes[0]` is the bottom, `shapes[1]` (if any) the bias as a bottom.
template <typename Dtype>
void ExpectBiasAgrees(const LayerParameter& param,
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

TYPED_TEST(BiasLayerGPUTest, PerChannelAgreesWithCpu) {
  ExpectBiasAgrees<TypeParam>(LearnedBias(1, 1), {{2, 3, 4, 5}});
}

TYPED_TEST(BiasLayerGPUTest, LargerPerChannelAgreesWithCpu) {
  ExpectBiasAgrees<TypeParam>(LearnedBias(1, 1), {{6, 16, 12, 13}});
}

TYPED_TEST(BiasLayerGPUTest, ToTheEndAgreesWithCpu) {
  ExpectBiasAgrees<TypeParam>(LearnedBias(1, -1), {{2, 3, 4, 5}});
}

TYPED_TEST(BiasLayerGPUTest, ScalarAgreesWithCpu) {
  ExpectBiasAgrees<TypeParam>(LearnedBias(1, 0), {{2, 3, 4, 5}});
}

TYPED_TEST(BiasLayerGPUTest, InnerAxesAgreeWithCpu) {
  ExpectBiasAgrees<TypeParam>(LearnedBias(2, 2), {{2, 3, 4, 5}});
}

TYPED_TEST(BiasLayerGPUTest, FromBottomAgreesWithCpu) {
  LayerParameter param;
  param.set_type("Bias");
  ExpectBiasAgrees<TypeParam>(param, {{2, 3, 4, 5}, {3, 4}});
}

TYPED_TEST(BiasLayerGPUTest, FromBottomAtAxisZeroAgreesWithCpu) {
  LayerParameter param;
  param.set_type("Bias");
  param.mutable_bias_param()->set_axis(0);
  ExpectBiasAgrees<TypeParam>(param, {{2, 3, 4, 5}, {2, 3}});
}

}  // namespace
}  // namespace poseidon
