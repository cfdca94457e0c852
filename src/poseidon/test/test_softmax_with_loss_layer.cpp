// SoftmaxWithLossLayer: loss and gradient against a naive reference for every
// normalisation mode, ignore_label, other axes, the probability top, loss
// weights, and the error paths; CPU/GPU agreement.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "gpu_agreement.hpp"
#include "gradient_checker.hpp"
#include "poseidon/layers/softmax_with_loss_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// The unnormalised loss sum, the number of non-ignored labels, and the
// unnormalised gradient (p - onehot, 0 at ignored positions), computed
// directly from the definition in double precision.
struct Reference {
  double loss_sum = 0;
  int valid = 0;
  vector<double> grad;
};

template <typename Dtype>
Reference NaiveSoftmaxLoss(const Blob<Dtype>& scores, const Blob<Dtype>& labels,
                           int axis, bool has_ignore, int ignore) {
  const int outer = scores.count(0, axis);
  const int channels = scores.shape(axis);
  const int inner = scores.count(axis + 1);
  Reference r;
  r.grad.assign(scores.count(), 0);
  const Dtype* x = scores.cpu_data();
  for (int o = 0; o < outer; ++o) {
    for (int j = 0; j < inner; ++j) {
      const int label = static_cast<int>(labels.cpu_data()[o * inner + j]);
      if (has_ignore && label == ignore) continue;
      auto at = [&](int c) { return (o * channels + c) * inner + j; };
      double max = -INFINITY;
      for (int c = 0; c < channels; ++c) max = std::fmax(max, x[at(c)]);
      double sum = 0;
      for (int c = 0; c < channels; ++c) sum += std::exp(x[at(c)] - max);
      for (int c = 0; c < channels; ++c) {
        const double p = std::exp(x[at(c)] - max) / sum;
        r.grad[at(c)] = p - (c == label ? 1 : 0);
        if (c == label) r.loss_sum -= std::log(std::max(p, double(FLT_MIN)));
      }
      ++r.valid;
    }
  }
  return r;
}

template <typename TypeParam>
class SoftmaxWithLossLayerTest : public test::MultiDeviceTest<TypeParam> {
  using Dtype = typename TypeParam::Dtype;

 protected:
  SoftmaxWithLossLayerTest() {
    test::FillGaussian(&scores_, 2.0);
    // Labels cycle through 0..4, so every class (including the ignored one
    // in the tests that set ignore_label: 3) occurs.
    for (int i = 0; i < labels_.count(); ++i) {
      labels_.mutable_cpu_data()[i] = (i * 3 + 1) % 5;
    }
    bottom_vec_ = {&scores_, &labels_};
    top_vec_ = {&loss_};
  }

  static LayerParameter Param() {
    LayerParameter p;
    p.set_type("SoftmaxWithLoss");
    return p;
  }

  // Runs Forward and Backward (loss weight 1) and compares both with the
  // reference, normalised by `z` (before the max(1, .) guard).
  void ExpectMatchesReference(const LayerParameter& p, int axis,
                              bool has_ignore, int ignore, double z) {
    SoftmaxWithLossLayer<Dtype> layer(p);
    layer.SetUp(bottom_vec_, top_vec_);
    const Dtype weighted = layer.Forward(bottom_vec_, top_vec_);
    const Reference r =
        NaiveSoftmaxLoss(scores_, labels_, axis, has_ignore, ignore);
    const double norm = std::max(1.0, z);
    const double tol = sizeof(Dtype) == 4 ? 1e-5 : 1e-12;
    EXPECT_NEAR(loss_.cpu_data()[0], r.loss_sum / norm, tol * (1 + r.loss_sum));
    EXPECT_NEAR(weighted, r.loss_sum / norm, tol * (1 + r.loss_sum));
    layer.Backward(top_vec_, {true, false}, bottom_vec_);
    for (int i = 0; i < scores_.count(); ++i) {
      ASSERT_NEAR(scores_.cpu_diff()[i], r.grad[i] / norm, tol) << i;
    }
  }

  Blob<Dtype> scores_{2, 5, 2, 3};
  Blob<Dtype> labels_{2, 1, 2, 3};
  Blob<Dtype> loss_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(SoftmaxWithLossLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(SoftmaxWithLossLayerTest, HandComputedLoss) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> scores({1, 3});
  Blob<Dtype> labels({1});
  scores.mutable_cpu_data()[0] = 0;
  scores.mutable_cpu_data()[1] = std::log(2.0);
  scores.mutable_cpu_data()[2] = std::log(5.0);
  labels.mutable_cpu_data()[0] = 2;
  vector<Blob<Dtype>*> bottom = {&scores, &labels};
  SoftmaxWithLossLayer<Dtype> layer(this->Param());
  layer.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->loss_.num_axes(), 0);
  EXPECT_EQ(this->loss_.count(), 1);
  layer.Forward(bottom, this->top_vec_);
  EXPECT_NEAR(this->loss_.cpu_data()[0], -std::log(0.625), 1e-6);
  layer.Backward(this->top_vec_, {true, false}, bottom);
  EXPECT_NEAR(scores.cpu_diff()[0], 0.125, 1e-6);
  EXPECT_NEAR(scores.cpu_diff()[1], 0.25, 1e-6);
  EXPECT_NEAR(scores.cpu_diff()[2], 0.625 - 1, 1e-6);
}

TYPED_TEST(SoftmaxWithLossLayerTest, TinyProbabilityIsClampedAtFltMin) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> scores({1, 2});
  Blob<Dtype> labels({1});
  scores.mutable_cpu_data()[0] = 0;
  scores.mutable_cpu_data()[1] = -200;  // p = e^-200 < FLT_MIN
  labels.mutable_cpu_data()[0] = 1;
  vector<Blob<Dtype>*> bottom = {&scores, &labels};
  SoftmaxWithLossLayer<Dtype> layer(this->Param());
  layer.SetUp(bottom, this->top_vec_);
  layer.Forward(bottom, this->top_vec_);
  EXPECT_NEAR(this->loss_.cpu_data()[0], -std::log(double(FLT_MIN)), 1e-4);
}

TYPED_TEST(SoftmaxWithLossLayerTest, NormalizationModes) {
  // 2 x 6 positions, 12 labels, none ignored.
  LayerParameter p = this->Param();
  const struct {
    LossParameter::NormalizationMode mode;
    double z;
  } cases[] = {{LossParameter::FULL, 12},
               {LossParameter::VALID, 12},
               {LossParameter::BATCH_SIZE, 2},
               {LossParameter::NONE, 1}};
  for (const auto& c : cases) {
    SCOPED_TRACE(LossParameter::NormalizationMode_Name(c.mode));
    p.mutable_loss_param()->set_normalization(c.mode);
    this->ExpectMatchesReference(p, 1, false, 0, c.z);
  }
}

TYPED_TEST(SoftmaxWithLossLayerTest, NormalizationModesWithIgnoreLabel) {
  // Labels (i * 3 + 1) % 5 for i = 0..11: label 3 occurs at i = 4 and 9, so
  // 10 of the 12 positions are valid.
  LayerParameter p = this->Param();
  p.mutable_loss_param()->set_ignore_label(3);
  const struct {
    LossParameter::NormalizationMode mode;
    double z;
  } cases[] = {{LossParameter::FULL, 12},
               {LossParameter::VALID, 10},
               {LossParameter::BATCH_SIZE, 2},
               {LossParameter::NONE, 1}};
  for (const auto& c : cases) {
    SCOPED_TRACE(LossParameter::NormalizationMode_Name(c.mode));
    p.mutable_loss_param()->set_normalization(c.mode);
    this->ExpectMatchesReference(p, 1, true, 3, c.z);
  }
}

TYPED_TEST(SoftmaxWithLossLayerTest, LegacyNormalizeFlag) {
  LayerParameter p = this->Param();
  p.mutable_loss_param()->set_ignore_label(3);
  p.mutable_loss_param()->set_normalize(false);
  {
    SCOPED_TRACE("normalize: false means BATCH_SIZE");
    this->ExpectMatchesReference(p, 1, true, 3, 2);
  }
  p.mutable_loss_param()->set_normalize(true);
  {
    SCOPED_TRACE("normalize: true means VALID");
    this->ExpectMatchesReference(p, 1, true, 3, 10);
  }
  p.mutable_loss_param()->set_normalize(false);
  p.mutable_loss_param()->set_normalization(LossParameter::NONE);
  {
    SCOPED_TRACE("normalization wins over normalize");
    this->ExpectMatchesReference(p, 1, true, 3, 1);
  }
}

TYPED_TEST(SoftmaxWithLossLayerTest, AllIgnoredGivesZeroNotNaN) {
  using Dtype = typename TypeParam::Dtype;
  cpu_set(this->labels_.count(), Dtype(-1), this->labels_.mutable_cpu_data());
  for (auto mode : {LossParameter::VALID, LossParameter::FULL}) {
    LayerParameter p = this->Param();
    p.mutable_loss_param()->set_ignore_label(-1);
    p.mutable_loss_param()->set_normalization(mode);
    SoftmaxWithLossLayer<Dtype> layer(p);
    layer.SetUp(this->bottom_vec_, this->top_vec_);
    const Dtype loss = layer.Forward(this->bottom_vec_, this->top_vec_);
    EXPECT_EQ(loss, Dtype(0));
    EXPECT_EQ(this->loss_.cpu_data()[0], Dtype(0));
    layer.Backward(this->top_vec_, {true, false}, this->bottom_vec_);
    for (int i = 0; i < this->scores_.count(); ++i) {
      ASSERT_EQ(this->scores_.cpu_diff()[i], Dtype(0)) << i;
    }
  }
}

TYPED_TEST(SoftmaxWithLossLayerTest, OtherAxis) {
  using Dtype = typename TypeParam::Dtype;
  // Scores N x T x C with classes on the last axis; labels N x T.
  this->scores_.Reshape({2, 3, 4});
  test::FillGaussian(&this->scores_, 2.0);
  this->labels_.Reshape({2, 3});
  for (int i = 0; i < 6; ++i) this->labels_.mutable_cpu_data()[i] = i % 4;
  for (int axis : {2, -1}) {
    SCOPED_TRACE(axis);
    LayerParameter p = this->Param();
    p.mutable_softmax_param()->set_axis(axis);
    this->ExpectMatchesReference(p, 2, false, 0, 6);
  }
  LayerParameter p = this->Param();
  p.mutable_softmax_param()->set_axis(-1);
  SoftmaxWithLossLayer<Dtype> layer(p);
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_, 0);
}

TYPED_TEST(SoftmaxWithLossLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  SoftmaxWithLossLayer<Dtype> layer(this->Param());
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_, 0);
}

TYPED_TEST(SoftmaxWithLossLayerTest, GradientIgnoreLabelFull) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p = this->Param();
  p.mutable_loss_param()->set_ignore_label(3);
  p.mutable_loss_param()->set_normalization(LossParameter::FULL);
  SoftmaxWithLossLayer<Dtype> layer(p);
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_, 0);
}

TYPED_TEST(SoftmaxWithLossLayerTest, LossWeightScalesLossAndGradient) {
  using Dtype = typename TypeParam::Dtype;
  SoftmaxWithLossLayer<Dtype> plain(this->Param());
  plain.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(plain.loss(0), Dtype(1));
  ASSERT_EQ(plain.layer_param().loss_weight_size(), 1);
  const Dtype loss = plain.Forward(this->bottom_vec_, this->top_vec_);
  plain.Backward(this->top_vec_, {true, false}, this->bottom_vec_);
  vector<Dtype> grad(this->scores_.cpu_diff(),
                     this->scores_.cpu_diff() + this->scores_.count());

  LayerParameter p = this->Param();
  p.add_loss_weight(3);
  SoftmaxWithLossLayer<Dtype> weighted(p);
  weighted.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_NEAR(weighted.Forward(this->bottom_vec_, this->top_vec_), 3 * loss,
              1e-5);
  EXPECT_NEAR(this->loss_.cpu_data()[0], loss, 1e-6);
  weighted.Backward(this->top_vec_, {true, false}, this->bottom_vec_);
  for (int i = 0; i < this->scores_.count(); ++i) {
    EXPECT_NEAR(this->scores_.cpu_diff()[i], 3 * grad[i], 1e-6) << i;
  }
}

TYPED_TEST(SoftmaxWithLossLayerTest, ProbabilityTop) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> prob;
  vector<Blob<Dtype>*> top = {&this->loss_, &prob};
  SoftmaxWithLossLayer<Dtype> layer(this->Param());
  layer.SetUp(this->bottom_vec_, top);
  EXPECT_EQ(layer.loss(0), Dtype(1));
  EXPECT_EQ(layer.loss(1), Dtype(0));
  EXPECT_EQ(prob.shape(), this->scores_.shape());
  const Dtype loss = layer.Forward(this->bottom_vec_, top);
  EXPECT_EQ(loss, this->loss_.cpu_data()[0]);
  // Each (n, h, w) column sums to 1 and p[label] matches the loss.
  double loss_sum = 0;
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 6; ++j) {
      double sum = 0;
      for (int c = 0; c < 5; ++c) sum += prob.cpu_data()[(n * 5 + c) * 6 + j];
      EXPECT_NEAR(sum, 1, 1e-5);
      const int label = static_cast<int>(this->labels_.cpu_data()[n * 6 + j]);
      loss_sum -= std::log(prob.cpu_data()[(n * 5 + label) * 6 + j]);
    }
  }
  EXPECT_NEAR(this->loss_.cpu_data()[0], loss_sum / 12, 1e-5);
  // The probabilities carry no gradient; Backward ignores their diff.
  layer.Backward(top, {true, false}, this->bottom_vec_);
}

TYPED_TEST(SoftmaxWithLossLayerTest, LabelOutOfRange) {
  using Dtype = typename TypeParam::Dtype;
  for (Dtype bad : {Dtype(5), Dtype(-1), Dtype(17)}) {
    this->labels_.mutable_cpu_data()[4] = bad;
    SoftmaxWithLossLayer<Dtype> layer(this->Param());
    layer.SetUp(this->bottom_vec_, this->top_vec_);
    try {
      layer.Forward(this->bottom_vec_, this->top_vec_);
      FAIL() << "expected ConfigError for label " << bad;
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("label value " + std::to_string(int(bad))),
                std::string::npos)
          << what;
      EXPECT_NE(what.find("5 classes"), std::string::npos) << what;
    }
  }
  // An ignore_label outside [0, C) is fine.
  this->labels_.mutable_cpu_data()[4] = 255;
  LayerParameter p = this->Param();
  p.mutable_loss_param()->set_ignore_label(255);
  SoftmaxWithLossLayer<Dtype> layer(p);
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_NO_THROW(layer.Forward(this->bottom_vec_, this->top_vec_));
}

TYPED_TEST(SoftmaxWithLossLayerTest, NoGradientToLabels) {
  using Dtype = typename TypeParam::Dtype;
  SoftmaxWithLossLayer<Dtype> layer(this->Param());
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_TRUE(layer.AllowForceBackward(0));
  EXPECT_FALSE(layer.AllowForceBackward(1));
  layer.Forward(this->bottom_vec_, this->top_vec_);
  EXPECT_THROW(layer.Backward(this->top_vec_, {true, true}, this->bottom_vec_),
               ConfigError);
}

TYPED_TEST(SoftmaxWithLossLayerTest, ShapeErrors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> wrong_count({2, 5});
  vector<Blob<Dtype>*> bottom = {&this->scores_, &wrong_count};
  SoftmaxWithLossLayer<Dtype> layer(this->Param());
  EXPECT_THROW(layer.SetUp(bottom, this->top_vec_), ShapeError);
  Blob<Dtype> wrong_first({3, 4});
  bottom = {&this->scores_, &wrong_first};
  SoftmaxWithLossLayer<Dtype> layer2(this->Param());
  EXPECT_THROW(layer2.SetUp(bottom, this->top_vec_), ShapeError);
  LayerParameter p = this->Param();
  p.mutable_softmax_param()->set_axis(4);
  SoftmaxWithLossLayer<Dtype> layer3(p);
  EXPECT_THROW(layer3.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
}

template <typename Dtype>
class SoftmaxWithLossLayerGPUTest : public ::testing::Test {};
TYPED_TEST_SUITE(SoftmaxWithLossLayerGPUTest, test::TestDtypes);

// Every normalization (and the legacy flag), with and without an ignored
// label, both softmax engines, the class axis in the middle and last, and
// the probability top.
TYPED_TEST(SoftmaxWithLossLayerGPUTest, AgreesWithCpu) {
  using Dtype = TypeParam;
  if (!test::GpuSkipReason().empty()) {
    GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
  }
  Blob<Dtype> scores({3, 5, 2, 4});
  test::FillGaussian(&scores, 2.0);
  Blob<Dtype> labels({3, 1, 2, 4});  // axis 1: labels in [0, 5)
  for (int i = 0; i < labels.count(); ++i) {
    labels.mutable_cpu_data()[i] = (i * 3 + 1) % 5;
  }
  Blob<Dtype> last_labels({3, 5, 2});  // axis 3: labels in [0, 4)
  for (int i = 0; i < last_labels.count(); ++i) {
    last_labels.mutable_cpu_data()[i] = (i * 7 + 2) % 4;
  }
  using Mode = LossParameter::NormalizationMode;
  const Mode modes[] = {LossParameter::FULL, LossParameter::VALID,
                        LossParameter::BATCH_SIZE, LossParameter::NONE};
  for (auto engine : {SoftmaxParameter::CAFFE, SoftmaxParameter::CUDNN}) {
    for (int variant = 0; variant < 7; ++variant) {
      SCOPED_TRACE(testing::Message()
                   << "engine " << engine << " variant " << variant);
      LayerParameter param;
      param.set_type("SoftmaxWithLoss");
      param.add_top("loss");
      param.add_top("prob");
      param.mutable_softmax_param()->set_engine(engine);
      LossParameter* loss = param.mutable_loss_param();
      if (variant < 4) loss->set_normalization(modes[variant]);
      if (variant == 4) loss->set_normalize(false);
      if (variant % 2 == 1) loss->set_ignore_label(3);
      Blob<Dtype>* label_blob = &labels;
      if (variant == 6) {
        param.mutable_softmax_param()->set_axis(-1);
        label_blob = &last_labels;
      }
      test::ExpectCpuGpuAgree<Dtype>(param, {&scores, label_blob},
                                     {true, false});
    }
  }
}

}  // namespace
}  // namespace poseidon
