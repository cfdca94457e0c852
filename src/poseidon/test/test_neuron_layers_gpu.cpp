// CPU/GPU agreement of the element-wise layers: every neuron layer run on
// both devices from the same inputs, parameters and top diffs
// (test::ExpectCpuGpuAgree), ReLU, Sigmoid and TanH once per engine (our
// kernels and cuDNN), Dropout in TEST phase (TRAIN draws different masks on
// the two devices; its GPU mask is checked by the typed GPU variants in
// test_neuron_layers.cpp). All skip without a usable GPU.
#include <gtest/gtest.h>

#include <vector>

#include "gpu_agreement.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename Dtype>
class NeuronLayerGPUTest : public ::testing::Test {};

TYPED_TEST_SUITE(NeuronLayerGPUTest, test::TestDtypes);

LayerParameter Param(const char* type) {
  LayerParameter param;
  param.set_type(type);
  return param;
}

// Runs `param` on both devices on a (2, 3, 4, 5) bottom: Gaussian, or
// uniform in [lo, hi] when lo < hi (for inputs that must be positive).
template <typename Dtype>
void ExpectAgree(const LayerParameter& param, double lo = 0, double hi = 0,
                 vector<int> shape = {2, 3, 4, 5}) {
  Blob<Dtype> bottom(shape);
  if (lo < hi) {
    test::FillUniform(&bottom, lo, hi);
  } else {
    test::FillGaussian(&bottom);
  }
  test::ExpectCpuGpuAgree<Dtype>(param, {&bottom});
}

LayerParameter ReLUParam(float slope, ReLUParameter::Engine engine) {
  LayerParameter param = Param("ReLU");
  param.mutable_relu_param()->set_negative_slope(slope);
  param.mutable_relu_param()->set_engine(engine);
  return param;
}

LayerParameter SigmoidParam(SigmoidParameter::Engine engine) {
  LayerParameter param = Param("Sigmoid");
  param.mutable_sigmoid_param()->set_engine(engine);
  return param;
}

LayerParameter TanHParam(TanHParameter::Engine engine) {
  LayerParameter param = Param("TanH");
  param.mutable_tanh_param()->set_engine(engine);
  return param;
}

LayerParameter PowerParam(float power, float scale, float shift) {
  LayerParameter param = Param("Power");
  param.mutable_power_param()->set_power(power);
  param.mutable_power_param()->set_scale(scale);
  param.mutable_power_param()->set_shift(shift);
  return param;
}

LayerParameter PReLUParam(bool channel_shared) {
  LayerParameter param = Param("PReLU");
  param.mutable_prelu_param()->set_channel_shared(channel_shared);
  param.mutable_prelu_param()->mutable_filler()->set_type("gaussian");
  return param;
}

LayerParameter DropoutTestParam(bool scale_train) {
  LayerParameter param = Param("Dropout");
  param.set_phase(TEST);
  param.mutable_dropout_param()->set_dropout_ratio(0.3f);
  param.mutable_dropout_param()->set_scale_train(scale_train);
  return param;
}

// ---- the activations with a cuDNN engine, once per engine -------------------

TYPED_TEST(NeuronLayerGPUTest, ReLUCaffeEngineAgreesWithCpu) {
  ExpectAgree<TypeParam>(ReLUParam(0, ReLUParameter::CAFFE));
}

TYPED_TEST(NeuronLayerGPUTest, ReLUCudnnEngineAgreesWithCpu) {
  ExpectAgree<TypeParam>(ReLUParam(0, ReLUParameter::CUDNN));
}

TYPED_TEST(NeuronLayerGPUTest, ReLUDefaultEngineAgreesWithCpu) {
  ExpectAgree<TypeParam>(ReLUParam(0, ReLUParameter::DEFAULT));
}

// cuDNN has no leaky ReLU: CUDNN falls back to our kernels.
TYPED_TEST(NeuronLayerGPUTest, LeakyReLUCudnnEngineAgreesWithCpu) {
  ExpectAgree<TypeParam>(ReLUParam(-0.2f, ReLUParameter::CUDNN));
}

TYPED_TEST(NeuronLayerGPUTest, LeakyReLUCaffeEngineAgreesWithCpu) {
  ExpectAgree<TypeParam>(ReLUParam(0.1f, ReLUParameter::CAFFE));
}

TYPED_TEST(NeuronLayerGPUTest, SigmoidCaffeEngineAgreesWithCpu) {
  ExpectAgree<TypeParam>(SigmoidParam(SigmoidParameter::CAFFE));
}

TYPED_TEST(NeuronLayerGPUTest, SigmoidCudnnEngineAgreesWithCpu) {
  ExpectAgree<TypeParam>(SigmoidParam(SigmoidParameter::CUDNN));
}

TYPED_TEST(NeuronLayerGPUTest, TanHCaffeEngineAgreesWithCpu) {
  ExpectAgree<TypeParam>(TanHParam(TanHParameter::CAFFE));
}

TYPED_TEST(NeuronLayerGPUTest, TanHCudnnEngineAgreesWithCpu) {
  ExpectAgree<TypeParam>(TanHParam(TanHParameter::CUDNN));
}

// ---- the rest ---------------------------------------------------------------

TYPED_TEST(NeuronLayerGPUTest, AbsValAgreesWithCpu) {
  ExpectAgree<TypeParam>(Param("AbsVal"));
}

TYPED_TEST(NeuronLayerGPUTest, BNLLAgreesWithCpu) {
  ExpectAgree<TypeParam>(Param("BNLL"), -30, 30);
}

TYPED_TEST(NeuronLayerGPUTest, ClipAgreesWithCpu) {
  LayerParameter param = Param("Clip");
  param.mutable_clip_param()->set_min(-0.5f);
  param.mutable_clip_param()->set_max(0.7f);
  ExpectAgree<TypeParam>(param);
}

TYPED_TEST(NeuronLayerGPUTest, ELUAgreesWithCpu) {
  LayerParameter param = Param("ELU");
  param.mutable_elu_param()->set_alpha(0.8f);
  ExpectAgree<TypeParam>(param);
}

TYPED_TEST(NeuronLayerGPUTest, ELUNegativeAlphaAgreesWithCpu) {
  LayerParameter param = Param("ELU");
  param.mutable_elu_param()->set_alpha(-0.4f);
  ExpectAgree<TypeParam>(param);
}

TYPED_TEST(NeuronLayerGPUTest, ExpAgreesWithCpu) {
  LayerParameter param = Param("Exp");
  param.mutable_exp_param()->set_base(2);
  param.mutable_exp_param()->set_scale(0.5f);
  param.mutable_exp_param()->set_shift(0.1f);
  ExpectAgree<TypeParam>(param);
}

TYPED_TEST(NeuronLayerGPUTest, LogAgreesWithCpu) {
  LayerParameter param = Param("Log");
  param.mutable_log_param()->set_base(3);
  param.mutable_log_param()->set_scale(0.3f);
  param.mutable_log_param()->set_shift(2);
  ExpectAgree<TypeParam>(param, 0.5, 3);
}

TYPED_TEST(NeuronLayerGPUTest, PowerAgreesWithCpu) {
  ExpectAgree<TypeParam>(PowerParam(2.5f, 0.2f, 3), -2, 2);
}

TYPED_TEST(NeuronLayerGPUTest, PowerSquareAgreesWithCpu) {
  ExpectAgree<TypeParam>(PowerParam(2, 0.7f, 1));
}

TYPED_TEST(NeuronLayerGPUTest, PowerLinearAgreesWithCpu) {
  ExpectAgree<TypeParam>(PowerParam(1, 0.7f, 1));
}

TYPED_TEST(NeuronLayerGPUTest, PowerConstantAgreesWithCpu) {
  ExpectAgree<TypeParam>(PowerParam(3, 0, 2));
}

TYPED_TEST(NeuronLayerGPUTest, PReLUAgreesWithCpu) {
  ExpectAgree<TypeParam>(PReLUParam(false));
}

TYPED_TEST(NeuronLayerGPUTest, PReLUChannelSharedAgreesWithCpu) {
  ExpectAgree<TypeParam>(PReLUParam(true));
}

// No spatial axes (inner 1), and more samples than positions.
TYPED_TEST(NeuronLayerGPUTest, PReLUOnMatrixAgreesWithCpu) {
  ExpectAgree<TypeParam>(PReLUParam(false), 0, 0, {40, 3});
}

TYPED_TEST(NeuronLayerGPUTest, ThresholdAgreesWithCpu) {
  LayerParameter param = Param("Threshold");
  param.mutable_threshold_param()->set_threshold(0.3f);
  ExpectAgree<TypeParam>(param);
}

TYPED_TEST(NeuronLayerGPUTest, SwishAgreesWithCpu) {
  LayerParameter param = Param("Swish");
  param.mutable_swish_param()->set_beta(1.3f);
  ExpectAgree<TypeParam>(param);
}

TYPED_TEST(NeuronLayerGPUTest, DropoutTestPhaseAgreesWithCpu) {
  ExpectAgree<TypeParam>(DropoutTestParam(true));
}

TYPED_TEST(NeuronLayerGPUTest, DropoutTestPhaseUnscaledAgreesWithCpu) {
  ExpectAgree<TypeParam>(DropoutTestParam(false));
}

}  // namespace
}  // namespace poseidon
