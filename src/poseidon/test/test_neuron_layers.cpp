// Element-wise layers: ReLU, Sigmoid, TanH and Dropout. Forward against the
// formulas, gradients by finite differences, in-place runs against
// out-of-place ones (on the GPU with each engine), Dropout's mask statistics
// and reuse on each device, and the engine rule.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/activation_engine.hpp"
#include "poseidon/layers/dropout_layer.hpp"
#include "poseidon/layers/relu_layer.hpp"
#include "poseidon/layers/sigmoid_layer.hpp"
#include "poseidon/layers/tanh_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class NeuronLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  NeuronLayerTest() : bottom_({2, 3, 4, 5}), top_() {
    test::FillGaussian(&bottom_);
    bottom_vec_ = {&bottom_};
    top_vec_ = {&top_};
  }

  // Runs `layer` out of place and a twin of it in place on a copy of the
  // bottom, with the same top diff and seed; expects equal tops and bottom
  // diffs.
  void ExpectInPlaceMatches(const LayerParameter& param) {
    auto layer = LayerRegistry<Dtype>::CreateLayer(param);
    layer->SetUp(bottom_vec_, top_vec_);
    Poseidon::set_random_seed(7);
    layer->Forward(bottom_vec_, top_vec_);
    Blob<Dtype> top_diff(top_.shape());
    test::FillGaussian(&top_diff);
    cpu_copy(top_.count(), top_diff.cpu_data(), top_.mutable_cpu_diff());
    layer->Backward(top_vec_, {true}, bottom_vec_);

    Blob<Dtype> io;
    io.CopyFrom(bottom_, false, true);
    vector<Blob<Dtype>*> io_vec = {&io};
    auto in_place = LayerRegistry<Dtype>::CreateLayer(param);
    in_place->SetUp(io_vec, io_vec);
    Poseidon::set_random_seed(7);
    in_place->Forward(io_vec, io_vec);
    for (int i = 0; i < io.count(); ++i) {
      ASSERT_EQ(io.cpu_data()[i], top_.cpu_data()[i]) << "top element " << i;
    }
    cpu_copy(io.count(), top_diff.cpu_data(), io.mutable_cpu_diff());
    in_place->Backward(io_vec, {true}, io_vec);
    for (int i = 0; i < io.count(); ++i) {
      EXPECT_EQ(io.cpu_diff()[i], bottom_.cpu_diff()[i])
          << param.type() << " in-place bottom diff element " << i;
    }
  }

  Blob<Dtype> bottom_;
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(NeuronLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

LayerParameter Param(const char* type) {
  LayerParameter param;
  param.set_type(type);
  return param;
}

TYPED_TEST(NeuronLayerTest, ReLUForward) {
  using Dtype = typename TestFixture::Dtype;
  ReLULayer<Dtype> layer(Param("ReLU"));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  ASSERT_EQ(this->top_.shape(), this->bottom_.shape());
  layer.Forward(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < this->bottom_.count(); ++i) {
    const Dtype x = this->bottom_.cpu_data()[i];
    EXPECT_EQ(this->top_.cpu_data()[i], x > 0 ? x : Dtype(0));
  }
}

TYPED_TEST(NeuronLayerTest, ReLUNegativeSlopeForward) {
  using Dtype = typename TestFixture::Dtype;
  LayerParameter param = Param("ReLU");
  param.mutable_relu_param()->set_negative_slope(0.01f);
  ReLULayer<Dtype> layer(param);
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < this->bottom_.count(); ++i) {
    const Dtype x = this->bottom_.cpu_data()[i];
    EXPECT_EQ(this->top_.cpu_data()[i], x > 0 ? x : Dtype(0.01f) * x);
  }
}

TYPED_TEST(NeuronLayerTest, ReLUGradient) {
  using Dtype = typename TestFixture::Dtype;
  ReLULayer<Dtype> layer(Param("ReLU"));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3, 0, 1e-2);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(NeuronLayerTest, ReLUNegativeSlopeGradient) {
  using Dtype = typename TestFixture::Dtype;
  LayerParameter param = Param("ReLU");
  param.mutable_relu_param()->set_negative_slope(0.01f);
  ReLULayer<Dtype> layer(param);
  test::GradientChecker<Dtype> checker(1e-2, 1e-3, 0, 1e-2);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(NeuronLayerTest, ReLUInPlace) {
  for (float slope : {0.0f, 0.1f, -0.5f}) {
    SCOPED_TRACE(slope);
    LayerParameter param = Param("ReLU");
    param.mutable_relu_param()->set_negative_slope(slope);
    this->ExpectInPlaceMatches(param);
  }
}

TYPED_TEST(NeuronLayerTest, SigmoidForward) {
  using Dtype = typename TestFixture::Dtype;
  SigmoidLayer<Dtype> layer(Param("Sigmoid"));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < this->bottom_.count(); ++i) {
    const double x = this->bottom_.cpu_data()[i];
    EXPECT_NEAR(this->top_.cpu_data()[i], 1 / (1 + std::exp(-x)), 1e-6);
  }
}

TYPED_TEST(NeuronLayerTest, SigmoidSaturatesWithoutOverflow) {
  using Dtype = typename TestFixture::Dtype;
  SigmoidLayer<Dtype> layer(Param("Sigmoid"));
  Blob<Dtype> bottom({4});
  const Dtype values[] = {-1000, -50, 50, 1000};
  std::copy(values, values + 4, bottom.mutable_cpu_data());
  vector<Blob<Dtype>*> bottom_vec = {&bottom};
  layer.SetUp(bottom_vec, this->top_vec_);
  layer.Forward(bottom_vec, this->top_vec_);
  EXPECT_NEAR(this->top_.cpu_data()[0], 0, 1e-12);
  EXPECT_NEAR(this->top_.cpu_data()[1], 0, 1e-12);
  EXPECT_EQ(this->top_.cpu_data()[2], 1);
  EXPECT_EQ(this->top_.cpu_data()[3], 1);
}

TYPED_TEST(NeuronLayerTest, SigmoidGradient) {
  using Dtype = typename TestFixture::Dtype;
  SigmoidLayer<Dtype> layer(Param("Sigmoid"));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(NeuronLayerTest, SigmoidInPlace) {
  this->ExpectInPlaceMatches(Param("Sigmoid"));
}

TYPED_TEST(NeuronLayerTest, TanHForward) {
  using Dtype = typename TestFixture::Dtype;
  TanHLayer<Dtype> layer(Param("TanH"));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < this->bottom_.count(); ++i) {
    const double x = this->bottom_.cpu_data()[i];
    const double expected = (std::exp(2 * x) - 1) / (std::exp(2 * x) + 1);
    EXPECT_NEAR(this->top_.cpu_data()[i], expected, 1e-6);
  }
}

TYPED_TEST(NeuronLayerTest, TanHGradient) {
  using Dtype = typename TestFixture::Dtype;
  TanHLayer<Dtype> layer(Param("TanH"));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(NeuronLayerTest, TanHInPlace) {
  this->ExpectInPlaceMatches(Param("TanH"));
}

LayerParameter DropoutParam(Phase phase, float ratio, bool scale_train) {
  LayerParameter param = Param("Dropout");
  param.set_phase(phase);
  param.mutable_dropout_param()->set_dropout_ratio(ratio);
  param.mutable_dropout_param()->set_scale_train(scale_train);
  return param;
}

TYPED_TEST(NeuronLayerTest, DropoutDefaults) {
  const DropoutParameter defaults;
  EXPECT_FLOAT_EQ(defaults.dropout_ratio(), 0.5f);
  EXPECT_TRUE(defaults.scale_train());
}

TYPED_TEST(NeuronLayerTest, DropoutTrainForward) {
  using Dtype = typename TestFixture::Dtype;
  for (float ratio : {0.5f, 0.2f}) {
    SCOPED_TRACE(ratio);
    Blob<Dtype> bottom({1000});
    test::FillUniform(&bottom, 1.0, 2.0);  // never 0, so drops are visible
    vector<Blob<Dtype>*> bottom_vec = {&bottom};
    DropoutLayer<Dtype> layer(DropoutParam(TRAIN, ratio, true));
    layer.SetUp(bottom_vec, this->top_vec_);
    layer.Forward(bottom_vec, this->top_vec_);
    const Dtype scale = Dtype(1) / (Dtype(1) - Dtype(ratio));
    int kept = 0;
    for (int i = 0; i < bottom.count(); ++i) {
      const Dtype y = this->top_.cpu_data()[i];
      if (y != 0) {
        ++kept;
        EXPECT_EQ(y, bottom.cpu_data()[i] * scale);
      }
    }
    // 1000 Bernoulli draws: the kept fraction is within 5 sigma of 1 - p.
    const double sigma = std::sqrt(ratio * (1 - ratio) / 1000.0);
    EXPECT_NEAR(kept / 1000.0, 1 - ratio, 5 * sigma);
  }
}

TYPED_TEST(NeuronLayerTest, DropoutTestIsIdentity) {
  using Dtype = typename TestFixture::Dtype;
  DropoutLayer<Dtype> layer(DropoutParam(TEST, 0.5f, true));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < this->bottom_.count(); ++i) {
    EXPECT_EQ(this->top_.cpu_data()[i], this->bottom_.cpu_data()[i]);
  }
  for (int i = 0; i < this->top_.count(); ++i) {
    this->top_.mutable_cpu_diff()[i] = i;
  }
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);
  for (int i = 0; i < this->bottom_.count(); ++i) {
    EXPECT_EQ(this->bottom_.cpu_diff()[i], i);
  }
}

TYPED_TEST(NeuronLayerTest, DropoutWithoutTrainScaling) {
  using Dtype = typename TestFixture::Dtype;
  DropoutLayer<Dtype> train(DropoutParam(TRAIN, 0.25f, false));
  train.SetUp(this->bottom_vec_, this->top_vec_);
  train.Forward(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < this->bottom_.count(); ++i) {
    const Dtype y = this->top_.cpu_data()[i];
    EXPECT_TRUE(y == 0 || y == this->bottom_.cpu_data()[i]) << "element " << i;
  }
  DropoutLayer<Dtype> test_layer(DropoutParam(TEST, 0.25f, false));
  test_layer.SetUp(this->bottom_vec_, this->top_vec_);
  test_layer.Forward(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < this->bottom_.count(); ++i) {
    EXPECT_EQ(this->top_.cpu_data()[i],
              this->bottom_.cpu_data()[i] * Dtype(0.75f));
  }
}

TYPED_TEST(NeuronLayerTest, DropoutGradient) {
  using Dtype = typename TestFixture::Dtype;
  for (Phase phase : {TRAIN, TEST}) {
    DropoutLayer<Dtype> layer(DropoutParam(phase, 0.5f, true));
    test::GradientChecker<Dtype> checker(1e-2, 1e-3);
    checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
  }
}

TYPED_TEST(NeuronLayerTest, DropoutBackwardUsesForwardMask) {
  using Dtype = typename TestFixture::Dtype;
  DropoutLayer<Dtype> layer(DropoutParam(TRAIN, 0.5f, true));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  test::FillUniform(&this->bottom_, 1.0, 2.0);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  cpu_set(this->top_.count(), Dtype(1), this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);
  for (int i = 0; i < this->bottom_.count(); ++i) {
    const bool kept = this->top_.cpu_data()[i] != 0;
    EXPECT_EQ(this->bottom_.cpu_diff()[i], kept ? Dtype(2) : Dtype(0));
  }
}

TYPED_TEST(NeuronLayerTest, DropoutInPlace) {
  this->ExpectInPlaceMatches(DropoutParam(TRAIN, 0.5f, true));
  this->ExpectInPlaceMatches(DropoutParam(TRAIN, 0.3f, false));
}

TYPED_TEST(NeuronLayerTest, DropoutRejectsBadRatio) {
  using Dtype = typename TestFixture::Dtype;
  for (float ratio : {1.0f, -0.1f, 1.5f}) {
    DropoutLayer<Dtype> layer(DropoutParam(TRAIN, ratio, true));
    EXPECT_THROW(layer.SetUp(this->bottom_vec_, this->top_vec_), ConfigError)
        << "dropout_ratio " << ratio;
  }
}

// Our kernels and cuDNN, each in place against out of place (the typed GPU
// variants exercise both engines; the CPU ignores the engine).
TYPED_TEST(NeuronLayerTest, InPlaceWithEachEngine) {
  for (int engine : {ReLUParameter::CAFFE, ReLUParameter::CUDNN}) {
    SCOPED_TRACE(engine);
    LayerParameter relu = Param("ReLU");
    relu.mutable_relu_param()->set_engine(ReLUParameter::Engine(engine));
    this->ExpectInPlaceMatches(relu);
    LayerParameter sigmoid = Param("Sigmoid");
    sigmoid.mutable_sigmoid_param()->set_engine(
        SigmoidParameter::Engine(engine));
    this->ExpectInPlaceMatches(sigmoid);
    LayerParameter tanh = Param("TanH");
    tanh.mutable_tanh_param()->set_engine(TanHParameter::Engine(engine));
    this->ExpectInPlaceMatches(tanh);
  }
}

// A large blob, so that the keep fraction is tight and the GPU's mask
// (cuRAND bits against a threshold) is checked over many blocks: every kept
// unit is scaled, Backward drops exactly the units Forward dropped.
TYPED_TEST(NeuronLayerTest, DropoutMaskOverALargeBlob) {
  using Dtype = typename TestFixture::Dtype;
  const int count = 1 << 17;
  for (float ratio : {0.5f, 0.1f}) {
    SCOPED_TRACE(ratio);
    Blob<Dtype> bottom({2, count / 2});
    test::FillUniform(&bottom, 1.0, 2.0);  // never 0
    vector<Blob<Dtype>*> bottom_vec = {&bottom};
    DropoutLayer<Dtype> layer(DropoutParam(TRAIN, ratio, true));
    layer.SetUp(bottom_vec, this->top_vec_);
    layer.Forward(bottom_vec, this->top_vec_);
    cpu_set(count, Dtype(1), this->top_.mutable_cpu_diff());
    layer.Backward(this->top_vec_, {true}, bottom_vec);
    const Dtype scale = Dtype(1) / (Dtype(1) - Dtype(ratio));
    int kept = 0;
    int mismatches = 0;
    for (int i = 0; i < count; ++i) {
      const Dtype y = this->top_.cpu_data()[i];
      const Dtype dx = bottom.cpu_diff()[i];
      const bool keep = y != 0;
      kept += keep;
      const bool ok = keep ? (y == bottom.cpu_data()[i] * scale && dx == scale)
                           : dx == 0;
      if (!ok && ++mismatches <= 5) {
        ADD_FAILURE() << "element " << i << ": x " << bottom.cpu_data()[i]
                      << ", y " << y << ", dE/dx " << dx;
      }
    }
    EXPECT_EQ(mismatches, 0);
    const double sigma = std::sqrt(ratio * (1 - ratio) / count);
    EXPECT_NEAR(kept / double(count), 1 - ratio, 5 * sigma);
  }
}

TYPED_TEST(NeuronLayerTest, BlobCountsAreChecked) {
  using Dtype = typename TestFixture::Dtype;
  ReLULayer<Dtype> layer(Param("ReLU"));
  Blob<Dtype> other({2});
  vector<Blob<Dtype>*> two = {&this->bottom_, &other};
  EXPECT_THROW(layer.SetUp(two, this->top_vec_), ConfigError);
}

TYPED_TEST(NeuronLayerTest, Registered) {
  using Dtype = typename TestFixture::Dtype;
  for (const char* type : {"ReLU", "Sigmoid", "TanH", "Dropout"}) {
    auto layer = LayerRegistry<Dtype>::CreateLayer(Param(type));
    EXPECT_STREQ(layer->type(), type);
  }
}

}  // namespace
}  // namespace poseidon
