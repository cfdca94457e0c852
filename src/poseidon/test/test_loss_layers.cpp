// ContrastiveLoss, HingeLoss, InfogainLoss, MultinomialLogisticLoss and
// SigmoidCrossEntropyLoss: losses and gradients against hand-computed values
// and naive references, finite-difference gradients, normalisation and
// ignore_label handling, and the error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layers/contrastive_loss_layer.hpp"
#include "poseidon/layers/hinge_loss_layer.hpp"
#include "poseidon/layers/infogain_loss_layer.hpp"
#include "poseidon/layers/multinomial_logistic_loss_layer.hpp"
#include "poseidon/layers/sigmoid_cross_entropy_loss_layer.hpp"
#include "poseidon/layers/softmax_with_loss_layer.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename Dtype>
void SetData(Blob<Dtype>* blob, const vector<double>& values) {
  ASSERT_EQ(blob->count(), static_cast<int>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    blob->mutable_cpu_data()[i] = static_cast<Dtype>(values[i]);
  }
}

template <typename Dtype>
double Tol() {
  return sizeof(Dtype) == 4 ? 2e-5 : 1e-10;
}

template <typename TypeParam>
class LossExtraTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  static LayerParameter Param(const char* type) {
    LayerParameter p;
    p.set_type(type);
    return p;
  }
  Blob<Dtype> loss_;
  vector<Blob<Dtype>*> top_{&loss_};
};

TYPED_TEST_SUITE(LossExtraTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

// ---------------------------------------------------------------------------
// MultinomialLogisticLoss

TYPED_TEST(LossExtraTest, MultinomialHandComputed) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> prob({2, 3});
  Blob<Dtype> label({2});
  SetData(&prob, {0.2, 0.3, 0.5, 0.1, 0.6, 0.3});
  SetData(&label, {2, 1});
  vector<Blob<Dtype>*> bottom = {&prob, &label};
  MultinomialLogisticLossLayer<Dtype> layer(this->Param(""));
  layer.SetUp(bottom, this->top_);
  EXPECT_EQ(this->loss_.num_axes(), 0);
  EXPECT_EQ(layer.loss(0), Dtype(1));
  layer.Forward(bottom, this->top_);
  EXPECT_NEAR(this->loss_.cpu_data()[0], -(std::log(0.5) + std::log(0.6)) / 2,
              1e-6);
  layer.Backward(this->top_, {true, false}, bottom);
  const double expected[] = {0, 0, -1, 0, -0.5 / 0.6, 0};
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(prob.cpu_diff()[i], expected[i], 1e-6) << i;
  }
}

TYPED_TEST(LossExtraTest, MultinomialClampsAtLogThreshold) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> prob({1, 2});
  Blob<Dtype> label({1, 1, 1, 1});
  SetData(&prob, {1, 0});
  SetData(&label, {1});
  vector<Blob<Dtype>*> bottom = {&prob, &label};
  MultinomialLogisticLossLayer<Dtype> layer(this->Param(""));
  layer.SetUp(bottom, this->top_);
  layer.Forward(bottom, this->top_);
  EXPECT_NEAR(this->loss_.cpu_data()[0], -std::log(1e-20), 1e-4);
  EXPECT_TRUE(std::isfinite(this->loss_.cpu_data()[0]));
}

TYPED_TEST(LossExtraTest, MultinomialGradient) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> prob({4, 5, 1, 1});
  Blob<Dtype> label({4, 1, 1, 1});
  test::FillUniform(&prob, 0.3, 1.0);
  SetData(&label, {0, 4, 2, 3});
  vector<Blob<Dtype>*> bottom = {&prob, &label};
  MultinomialLogisticLossLayer<Dtype> layer(this->Param(""));
  test::GradientChecker<Dtype> checker(1e-3, 2e-2);
  checker.CheckGradient(&layer, bottom, this->top_, 0);
}

TYPED_TEST(LossExtraTest, MultinomialErrors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> prob({2, 3});
  Blob<Dtype> label({2});
  SetData(&prob, {0.2, 0.3, 0.5, 0.1, 0.6, 0.3});
  SetData(&label, {3, 0});
  vector<Blob<Dtype>*> bottom = {&prob, &label};
  MultinomialLogisticLossLayer<Dtype> layer(this->Param(""));
  layer.SetUp(bottom, this->top_);
  EXPECT_THROW(layer.Forward(bottom, this->top_), ConfigError);
  Blob<Dtype> wide_label({2, 3});
  bottom = {&prob, &wide_label};
  MultinomialLogisticLossLayer<Dtype> layer2(this->Param(""));
  EXPECT_THROW(layer2.SetUp(bottom, this->top_), ShapeError);
  SetData(&label, {0, 0});
  bottom = {&prob, &label};
  MultinomialLogisticLossLayer<Dtype> layer3(this->Param(""));
  layer3.SetUp(bottom, this->top_);
  layer3.Forward(bottom, this->top_);
  EXPECT_FALSE(layer3.AllowForceBackward(1));
  EXPECT_THROW(layer3.Backward(this->top_, {true, true}, bottom), ConfigError);
}

// ---------------------------------------------------------------------------
// HingeLoss

TYPED_TEST(LossExtraTest, HingeHandComputedL1AndL2) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> scores({2, 3});
  Blob<Dtype> label({2});
  SetData(&scores, {1, -0.5, 2, 0.2, 0.3, -2});
  SetData(&label, {2, 0});
  vector<Blob<Dtype>*> bottom = {&scores, &label};
  // Margins: sample 0 (label 2): 2, 0.5, 0; sample 1 (label 0): 0.8, 1.3, 0.
  {
    HingeLossLayer<Dtype> layer(this->Param("HingeLoss"));
    layer.SetUp(bottom, this->top_);
    layer.Forward(bottom, this->top_);
    EXPECT_NEAR(this->loss_.cpu_data()[0], (2.5 + 2.1) / 2, 1e-6);
    layer.Backward(this->top_, {true, false}, bottom);
    const double expected[] = {0.5, 0.5, 0, -0.5, 0.5, 0};
    for (int i = 0; i < 6; ++i) {
      EXPECT_NEAR(scores.cpu_diff()[i], expected[i], 1e-6) << i;
    }
  }
  {
    LayerParameter p = this->Param("HingeLoss");
    p.mutable_hinge_loss_param()->set_norm(HingeLossParameter::L2);
    HingeLossLayer<Dtype> layer(p);
    layer.SetUp(bottom, this->top_);
    layer.Forward(bottom, this->top_);
    EXPECT_NEAR(this->loss_.cpu_data()[0], (4.25 + 2.33) / 2, 1e-5);
    layer.Backward(this->top_, {true, false}, bottom);
    const double expected[] = {2, 0.5, 0, -0.8, 1.3, 0};
    for (int i = 0; i < 6; ++i) {
      EXPECT_NEAR(scores.cpu_diff()[i], expected[i], 1e-5) << i;
    }
  }
}

TYPED_TEST(LossExtraTest, HingeGradientL1AndL2) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> scores({4, 5, 1, 1});
  Blob<Dtype> label({4});
  test::FillGaussian(&scores, 1.0);
  SetData(&label, {1, 0, 4, 2});
  vector<Blob<Dtype>*> bottom = {&scores, &label};
  for (auto norm : {HingeLossParameter::L1, HingeLossParameter::L2}) {
    SCOPED_TRACE(HingeLossParameter::Norm_Name(norm));
    LayerParameter p = this->Param("HingeLoss");
    p.mutable_hinge_loss_param()->set_norm(norm);
    HingeLossLayer<Dtype> layer(p);
    test::GradientChecker<Dtype> checker(1e-3, 2e-2);
    checker.CheckGradient(&layer, bottom, this->top_, 0);
  }
}

TYPED_TEST(LossExtraTest, HingeErrors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> scores({2, 3});
  Blob<Dtype> label({2});
  SetData(&label, {0, -1});
  vector<Blob<Dtype>*> bottom = {&scores, &label};
  HingeLossLayer<Dtype> layer(this->Param("HingeLoss"));
  layer.SetUp(bottom, this->top_);
  EXPECT_THROW(layer.Forward(bottom, this->top_), ConfigError);
  Blob<Dtype> bad_label({3});
  bottom = {&scores, &bad_label};
  HingeLossLayer<Dtype> layer2(this->Param("HingeLoss"));
  EXPECT_THROW(layer2.SetUp(bottom, this->top_), ShapeError);
}

// ---------------------------------------------------------------------------
// ContrastiveLoss

// The loss from the definition, in double precision.
template <typename Dtype>
double NaiveContrastive(const Blob<Dtype>& a, const Blob<Dtype>& b,
                        const Blob<Dtype>& y, double margin, bool legacy) {
  const int num = a.shape(0);
  const int dim = a.count() / num;
  double loss = 0;
  for (int n = 0; n < num; ++n) {
    double d2 = 0;
    for (int k = 0; k < dim; ++k) {
      const double d = a.cpu_data()[n * dim + k] - b.cpu_data()[n * dim + k];
      d2 += d * d;
    }
    if (y.cpu_data()[n] != 0) {
      loss += d2;
    } else if (legacy) {
      loss += std::max(margin - d2, 0.0);
    } else {
      const double gap = std::max(margin - std::sqrt(d2), 0.0);
      loss += gap * gap;
    }
  }
  return loss / (2 * num);
}

template <typename TypeParam>
class ContrastiveLossTest : public LossExtraTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  ContrastiveLossTest() {
    test::FillGaussian(&a_, 0.5);
    test::FillGaussian(&b_, 0.5);
    SetData(&y_, {1, 0, 0, 1, 0, 0});
  }
  Blob<Dtype> a_{6, 3, 1, 1};
  Blob<Dtype> b_{6, 3, 1, 1};
  Blob<Dtype> y_{6, 1, 1, 1};
  vector<Blob<Dtype>*> bottom_{&a_, &b_, &y_};
};

TYPED_TEST_SUITE(ContrastiveLossTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(ContrastiveLossTest, HandComputed) {
  using Dtype = typename TypeParam::Dtype;
  // Pairs at distance 5 (similar), 0.5 (dissimilar) and 3 (dissimilar).
  Blob<Dtype> a({3, 2});
  Blob<Dtype> b({3, 2});
  Blob<Dtype> y({3});
  SetData(&a, {0, 0, 0.3, 0.4, 1, 1});
  SetData(&b, {3, 4, 0, 0, 1, 4});
  SetData(&y, {1, 0, 0});
  vector<Blob<Dtype>*> bottom = {&a, &b, &y};
  LayerParameter p = this->Param("ContrastiveLoss");
  p.mutable_contrastive_loss_param()->set_margin(2);
  ContrastiveLossLayer<Dtype> layer(p);
  layer.SetUp(bottom, this->top_);
  layer.Forward(bottom, this->top_);
  // (25 + (2 - 0.5)^2 + 0) / 6
  EXPECT_NEAR(this->loss_.cpu_data()[0], (25 + 2.25) / 6, 1e-5);
  p.mutable_contrastive_loss_param()->set_legacy_version(true);
  ContrastiveLossLayer<Dtype> legacy(p);
  legacy.SetUp(bottom, this->top_);
  legacy.Forward(bottom, this->top_);
  // (25 + (2 - 0.25) + 0) / 6
  EXPECT_NEAR(this->loss_.cpu_data()[0], (25 + 1.75) / 6, 1e-5);
  legacy.Backward(this->top_, {true, true, false}, bottom);
  // Similar pair: (a - b) / N; legacy dissimilar inside the margin:
  // -(a - b) / N; outside: 0.
  const double da[] = {-1, -4.0 / 3, -0.1, -0.4 / 3, 0, 0};
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(a.cpu_diff()[i], da[i], 1e-5) << i;
    EXPECT_NEAR(b.cpu_diff()[i], -da[i], 1e-5) << i;
  }
}

TYPED_TEST(ContrastiveLossTest, ForwardMatchesReference) {
  using Dtype = typename TypeParam::Dtype;
  for (bool legacy : {false, true}) {
    for (double margin : {1.0, 0.3}) {
      LayerParameter p = this->Param("ContrastiveLoss");
      p.mutable_contrastive_loss_param()->set_margin(margin);
      p.mutable_contrastive_loss_param()->set_legacy_version(legacy);
      ContrastiveLossLayer<Dtype> layer(p);
      layer.SetUp(this->bottom_, this->top_);
      const Dtype loss = layer.Forward(this->bottom_, this->top_);
      const double expected =
          NaiveContrastive(this->a_, this->b_, this->y_, margin, legacy);
      EXPECT_NEAR(loss, expected, 1e-5) << legacy << " " << margin;
    }
  }
}

TYPED_TEST(ContrastiveLossTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  for (bool legacy : {false, true}) {
    SCOPED_TRACE(legacy ? "legacy" : "default");
    LayerParameter p = this->Param("ContrastiveLoss");
    p.mutable_contrastive_loss_param()->set_legacy_version(legacy);
    ContrastiveLossLayer<Dtype> layer(p);
    test::GradientChecker<Dtype> checker(1e-3, 2e-2);
    checker.CheckGradient(&layer, this->bottom_, this->top_, 0);
    checker.CheckGradient(&layer, this->bottom_, this->top_, 1);
  }
}

TYPED_TEST(ContrastiveLossTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  ContrastiveLossLayer<Dtype> layer(this->Param("ContrastiveLoss"));
  EXPECT_TRUE(layer.AllowForceBackward(0));
  EXPECT_TRUE(layer.AllowForceBackward(1));
  EXPECT_FALSE(layer.AllowForceBackward(2));
  layer.SetUp(this->bottom_, this->top_);
  layer.Forward(this->bottom_, this->top_);
  EXPECT_THROW(layer.Backward(this->top_, {true, true, true}, this->bottom_),
               ConfigError);
  Blob<Dtype> other({6, 4, 1, 1});
  vector<Blob<Dtype>*> bottom = {&this->a_, &other, &this->y_};
  ContrastiveLossLayer<Dtype> layer2(this->Param("ContrastiveLoss"));
  EXPECT_THROW(layer2.SetUp(bottom, this->top_), ShapeError);
  Blob<Dtype> y({6, 2});
  bottom = {&this->a_, &this->b_, &y};
  ContrastiveLossLayer<Dtype> layer3(this->Param("ContrastiveLoss"));
  try {
    layer3.SetUp(bottom, this->top_);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("6 2"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------
// SigmoidCrossEntropyLoss

template <typename TypeParam>
class SigmoidCrossEntropyTest : public LossExtraTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  SigmoidCrossEntropyTest() {
    test::FillGaussian(&x_, 3.0);
    test::FillUniform(&t_, 0.0, 1.0);
    // Every fourth target is the ignore value -1 in the ignore tests.
    for (int i = 0; i < t_.count(); i += 4) t_.mutable_cpu_data()[i] = -1;
  }

  // The loss sum and number of valid elements, from the textbook formula.
  void Naive(bool ignore, double* sum, int* valid) const {
    *sum = 0;
    *valid = 0;
    for (int i = 0; i < x_.count(); ++i) {
      const double t = t_.cpu_data()[i];
      if (ignore && t == -1) continue;
      const double s = 1 / (1 + std::exp(-double(x_.cpu_data()[i])));
      *sum -= t * std::log(s) + (1 - t) * std::log(1 - s);
      ++*valid;
    }
  }

  Blob<Dtype> x_{2, 3, 2, 2};
  Blob<Dtype> t_{2, 3, 2, 2};
  vector<Blob<Dtype>*> bottom_{&x_, &t_};
};

TYPED_TEST_SUITE(SigmoidCrossEntropyTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(SigmoidCrossEntropyTest, NormalizationModesAndIgnore) {
  using Dtype = typename TypeParam::Dtype;
  for (bool ignore : {false, true}) {
    double sum = 0;
    int valid = 0;
    // Without ignore_label the -1 targets are ordinary (odd) values.
    this->Naive(ignore, &sum, &valid);
    EXPECT_EQ(valid, ignore ? 18 : 24);
    const struct {
      int mode;  // -1: no normalization field (Caffe's default BATCH_SIZE)
      double z;
    } cases[] = {{-1, 2},
                 {LossParameter::FULL, 24},
                 {LossParameter::VALID, double(valid)},
                 {LossParameter::BATCH_SIZE, 2},
                 {LossParameter::NONE, 1}};
    for (const auto& c : cases) {
      SCOPED_TRACE(std::to_string(ignore) + " mode " + std::to_string(c.mode));
      LayerParameter p = this->Param("SigmoidCrossEntropyLoss");
      if (ignore) p.mutable_loss_param()->set_ignore_label(-1);
      if (c.mode >= 0) {
        p.mutable_loss_param()->set_normalization(
            static_cast<LossParameter::NormalizationMode>(c.mode));
      }
      SigmoidCrossEntropyLossLayer<Dtype> layer(p);
      layer.SetUp(this->bottom_, this->top_);
      layer.Forward(this->bottom_, this->top_);
      EXPECT_NEAR(this->loss_.cpu_data()[0], sum / c.z, 1e-4 * (1 + sum / c.z));
      layer.Backward(this->top_, {true, false}, this->bottom_);
      for (int i = 0; i < this->x_.count(); ++i) {
        const double t = this->t_.cpu_data()[i];
        const double s = 1 / (1 + std::exp(-double(this->x_.cpu_data()[i])));
        const double g = (ignore && t == -1) ? 0 : (s - t) / c.z;
        ASSERT_NEAR(this->x_.cpu_diff()[i], g, 1e-6) << i;
      }
    }
  }
}

TYPED_TEST(SigmoidCrossEntropyTest, LegacyNormalizeFlag) {
  using Dtype = typename TypeParam::Dtype;
  double sum = 0;
  int valid = 0;
  this->Naive(true, &sum, &valid);
  for (bool normalize : {true, false}) {
    LayerParameter p = this->Param("SigmoidCrossEntropyLoss");
    p.mutable_loss_param()->set_ignore_label(-1);
    p.mutable_loss_param()->set_normalize(normalize);
    SigmoidCrossEntropyLossLayer<Dtype> layer(p);
    layer.SetUp(this->bottom_, this->top_);
    layer.Forward(this->bottom_, this->top_);
    EXPECT_NEAR(this->loss_.cpu_data()[0], sum / (normalize ? valid : 2),
                1e-4 * (1 + sum));
  }
}

TYPED_TEST(SigmoidCrossEntropyTest, StableForLargeScores) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> x({1, 4});
  Blob<Dtype> t({1, 4});
  SetData(&x, {100, -100, 100, -100});
  SetData(&t, {0, 1, 1, 0});
  vector<Blob<Dtype>*> bottom = {&x, &t};
  SigmoidCrossEntropyLossLayer<Dtype> layer(
      this->Param("SigmoidCrossEntropyLoss"));
  layer.SetUp(bottom, this->top_);
  layer.Forward(bottom, this->top_);
  EXPECT_NEAR(this->loss_.cpu_data()[0], 200, 1e-3);
  layer.Backward(this->top_, {true, false}, bottom);
  const double expected[] = {1, -1, 0, 0};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(x.cpu_diff()[i], expected[i], 1e-6) << i;
  }
}

TYPED_TEST(SigmoidCrossEntropyTest, AllIgnoredGivesZeroNotNaN) {
  using Dtype = typename TypeParam::Dtype;
  cpu_set(this->t_.count(), Dtype(-1), this->t_.mutable_cpu_data());
  for (auto mode : {LossParameter::VALID, LossParameter::FULL}) {
    LayerParameter p = this->Param("SigmoidCrossEntropyLoss");
    p.mutable_loss_param()->set_ignore_label(-1);
    p.mutable_loss_param()->set_normalization(mode);
    SigmoidCrossEntropyLossLayer<Dtype> layer(p);
    layer.SetUp(this->bottom_, this->top_);
    EXPECT_EQ(layer.Forward(this->bottom_, this->top_), Dtype(0));
    layer.Backward(this->top_, {true, false}, this->bottom_);
    for (int i = 0; i < this->x_.count(); ++i) {
      ASSERT_EQ(this->x_.cpu_diff()[i], Dtype(0)) << i;
    }
  }
}

TYPED_TEST(SigmoidCrossEntropyTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  for (bool ignore : {false, true}) {
    LayerParameter p = this->Param("SigmoidCrossEntropyLoss");
    if (ignore) {
      p.mutable_loss_param()->set_ignore_label(-1);
      p.mutable_loss_param()->set_normalization(LossParameter::VALID);
    }
    SigmoidCrossEntropyLossLayer<Dtype> layer(p);
    test::GradientChecker<Dtype> checker(1e-2, 1e-2);
    checker.CheckGradient(&layer, this->bottom_, this->top_, 0);
  }
}

TYPED_TEST(SigmoidCrossEntropyTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> t({2, 5});
  vector<Blob<Dtype>*> bottom = {&this->x_, &t};
  SigmoidCrossEntropyLossLayer<Dtype> layer(
      this->Param("SigmoidCrossEntropyLoss"));
  EXPECT_THROW(layer.SetUp(bottom, this->top_), ShapeError);
  SigmoidCrossEntropyLossLayer<Dtype> layer2(
      this->Param("SigmoidCrossEntropyLoss"));
  layer2.SetUp(this->bottom_, this->top_);
  layer2.Forward(this->bottom_, this->top_);
  EXPECT_THROW(layer2.Backward(this->top_, {true, true}, this->bottom_),
               ConfigError);
}

// ---------------------------------------------------------------------------
// InfogainLoss

template <typename TypeParam>
class InfogainLossTest : public LossExtraTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  InfogainLossTest() {
    test::FillGaussian(&scores_, 2.0);
    test::FillUniform(&h_, 0.0, 1.0);
    for (int i = 0; i < labels_.count(); ++i) {
      labels_.mutable_cpu_data()[i] = (i * 3 + 1) % 4;
    }
  }

  // Unnormalised loss sum, valid count and gradient for classes on `axis`.
  void Naive(const Blob<Dtype>& scores, const Blob<Dtype>& labels, int axis,
             bool has_ignore, int ignore, double* sum, int* valid,
             vector<double>* grad) const {
    const int outer = scores.count(0, axis);
    const int classes = scores.shape(axis);
    const int inner = scores.count(axis + 1);
    const Dtype* h = h_.cpu_data();
    *sum = 0;
    *valid = 0;
    grad->assign(scores.count(), 0);
    for (int o = 0; o < outer; ++o) {
      for (int j = 0; j < inner; ++j) {
        const int l = static_cast<int>(labels.cpu_data()[o * inner + j]);
        if (has_ignore && l == ignore) continue;
        auto at = [&](int c) { return (o * classes + c) * inner + j; };
        double z = 0;
        for (int c = 0; c < classes; ++c)
          z += std::exp(scores.cpu_data()[at(c)]);
        double row = 0;
        for (int c = 0; c < classes; ++c) row += h[l * classes + c];
        for (int c = 0; c < classes; ++c) {
          const double p = std::exp(scores.cpu_data()[at(c)]) / z;
          *sum -= h[l * classes + c] * std::log(p);
          (*grad)[at(c)] = p * row - h[l * classes + c];
        }
        ++*valid;
      }
    }
  }

  Blob<Dtype> scores_{2, 4, 3};
  Blob<Dtype> labels_{2, 1, 3};
  Blob<Dtype> h_{4, 4};
  vector<Blob<Dtype>*> bottom_{&scores_, &labels_, &h_};
};

TYPED_TEST_SUITE(InfogainLossTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(InfogainLossTest, HandComputed) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> scores({1, 3});
  Blob<Dtype> label({1});
  Blob<Dtype> h({1, 1, 3, 3});
  SetData(&scores, {0, std::log(2.0), std::log(5.0)});  // p = 1/8, 2/8, 5/8
  SetData(&label, {1});
  SetData(&h, {1, 0, 0, 0.5, 1, 0.2, 0, 0, 1});
  vector<Blob<Dtype>*> bottom = {&scores, &label, &h};
  InfogainLossLayer<Dtype> layer(this->Param("InfogainLoss"));
  layer.SetUp(bottom, this->top_);
  layer.Forward(bottom, this->top_);
  EXPECT_NEAR(this->loss_.cpu_data()[0],
              -(0.5 * std::log(0.125) + std::log(0.25) + 0.2 * std::log(0.625)),
              1e-5);
  layer.Backward(this->top_, {true, false, false}, bottom);
  // p * 1.7 - H[1]
  EXPECT_NEAR(scores.cpu_diff()[0], 0.125 * 1.7 - 0.5, 1e-6);
  EXPECT_NEAR(scores.cpu_diff()[1], 0.25 * 1.7 - 1, 1e-6);
  EXPECT_NEAR(scores.cpu_diff()[2], 0.625 * 1.7 - 0.2, 1e-6);
}

TYPED_TEST(InfogainLossTest, IdentityMatrixEqualsSoftmaxWithLoss) {
  using Dtype = typename TypeParam::Dtype;
  cpu_set(16, Dtype(0), this->h_.mutable_cpu_data());
  for (int i = 0; i < 4; ++i) this->h_.mutable_cpu_data()[i * 5] = 1;
  InfogainLossLayer<Dtype> infogain(this->Param("InfogainLoss"));
  infogain.SetUp(this->bottom_, this->top_);
  const Dtype a = infogain.Forward(this->bottom_, this->top_);
  infogain.Backward(this->top_, {true, false, false}, this->bottom_);
  vector<Dtype> grad(this->scores_.cpu_diff(),
                     this->scores_.cpu_diff() + this->scores_.count());
  vector<Blob<Dtype>*> two = {&this->scores_, &this->labels_};
  SoftmaxWithLossLayer<Dtype> softmax(this->Param("SoftmaxWithLoss"));
  softmax.SetUp(two, this->top_);
  const Dtype b = softmax.Forward(two, this->top_);
  softmax.Backward(this->top_, {true, false}, two);
  EXPECT_NEAR(a, b, 1e-5);
  for (int i = 0; i < this->scores_.count(); ++i) {
    EXPECT_NEAR(grad[i], this->scores_.cpu_diff()[i], 1e-6) << i;
  }
}

TYPED_TEST(InfogainLossTest, MatchesReferenceAcrossModes) {
  using Dtype = typename TypeParam::Dtype;
  // Labels (i * 3 + 1) % 4: label 3 occurs at i = 2; 5 of 6 valid.
  for (bool ignore : {false, true}) {
    double sum = 0;
    int valid = 0;
    vector<double> grad;
    this->Naive(this->scores_, this->labels_, 1, ignore, 3, &sum, &valid,
                &grad);
    const struct {
      LossParameter::NormalizationMode mode;
      double z;
    } cases[] = {{LossParameter::FULL, 6},
                 {LossParameter::VALID, double(valid)},
                 {LossParameter::BATCH_SIZE, 2},
                 {LossParameter::NONE, 1}};
    for (const auto& c : cases) {
      SCOPED_TRACE(std::to_string(ignore) + " " +
                   LossParameter::NormalizationMode_Name(c.mode));
      LayerParameter p = this->Param("InfogainLoss");
      if (ignore) p.mutable_loss_param()->set_ignore_label(3);
      p.mutable_loss_param()->set_normalization(c.mode);
      InfogainLossLayer<Dtype> layer(p);
      layer.SetUp(this->bottom_, this->top_);
      layer.Forward(this->bottom_, this->top_);
      EXPECT_NEAR(this->loss_.cpu_data()[0], sum / c.z, 1e-5 * (1 + sum));
      layer.Backward(this->top_, {true, false, false}, this->bottom_);
      for (int i = 0; i < this->scores_.count(); ++i) {
        ASSERT_NEAR(this->scores_.cpu_diff()[i], grad[i] / c.z, 1e-5) << i;
      }
    }
  }
}

TYPED_TEST(InfogainLossTest, LastAxisAndProbabilityTop) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> scores({2, 3, 4});
  Blob<Dtype> labels({2, 3});
  test::FillGaussian(&scores, 1.5);
  for (int i = 0; i < 6; ++i) labels.mutable_cpu_data()[i] = (5 - i) % 4;
  double sum = 0;
  int valid = 0;
  vector<double> grad;
  this->Naive(scores, labels, 2, false, 0, &sum, &valid, &grad);
  Blob<Dtype> prob;
  vector<Blob<Dtype>*> bottom = {&scores, &labels, &this->h_};
  vector<Blob<Dtype>*> top = {&this->loss_, &prob};
  LayerParameter p = this->Param("InfogainLoss");
  p.mutable_infogain_loss_param()->set_axis(-1);
  InfogainLossLayer<Dtype> layer(p);
  layer.SetUp(bottom, top);
  EXPECT_EQ(layer.loss(1), Dtype(0));
  EXPECT_EQ(prob.shape(), scores.shape());
  layer.Forward(bottom, top);
  EXPECT_NEAR(this->loss_.cpu_data()[0], sum / 6, 1e-5 * (1 + sum));
  for (int r = 0; r < 6; ++r) {
    double s = 0;
    for (int c = 0; c < 4; ++c) s += prob.cpu_data()[r * 4 + c];
    EXPECT_NEAR(s, 1, 1e-5);
  }
  InfogainLossLayer<Dtype> single_top(p);
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&single_top, bottom, this->top_, 0);
}

TYPED_TEST(InfogainLossTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p = this->Param("InfogainLoss");
  p.mutable_loss_param()->set_ignore_label(3);
  InfogainLossLayer<Dtype> layer(p);
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, this->bottom_, this->top_, 0);
}

TYPED_TEST(InfogainLossTest, AllIgnoredGivesZeroNotNaN) {
  using Dtype = typename TypeParam::Dtype;
  cpu_set(this->labels_.count(), Dtype(255), this->labels_.mutable_cpu_data());
  LayerParameter p = this->Param("InfogainLoss");
  p.mutable_loss_param()->set_ignore_label(255);
  InfogainLossLayer<Dtype> layer(p);
  layer.SetUp(this->bottom_, this->top_);
  EXPECT_EQ(layer.Forward(this->bottom_, this->top_), Dtype(0));
  layer.Backward(this->top_, {true, false, false}, this->bottom_);
  for (int i = 0; i < this->scores_.count(); ++i) {
    ASSERT_EQ(this->scores_.cpu_diff()[i], Dtype(0)) << i;
  }
}

TYPED_TEST(InfogainLossTest, MatrixFromSourceFile) {
  using Dtype = typename TypeParam::Dtype;
  InfogainLossLayer<Dtype> with_bottom(this->Param("InfogainLoss"));
  with_bottom.SetUp(this->bottom_, this->top_);
  const Dtype expected = with_bottom.Forward(this->bottom_, this->top_);

  BlobProto proto;
  this->h_.ToProto(&proto);
  const string file = test::MakeTempDir() + "/infogain.binaryproto";
  WriteProtoToBinaryFile(proto, file);
  LayerParameter p = this->Param("InfogainLoss");
  p.mutable_infogain_loss_param()->set_source(file);
  vector<Blob<Dtype>*> two = {&this->scores_, &this->labels_};
  InfogainLossLayer<Dtype> from_file(p);
  from_file.SetUp(two, this->top_);
  EXPECT_NEAR(from_file.Forward(two, this->top_), expected, 1e-6);
  from_file.Backward(this->top_, {true, false}, two);

  p.mutable_infogain_loss_param()->set_source(file + ".missing");
  InfogainLossLayer<Dtype> missing(p);
  EXPECT_THROW(missing.SetUp(two, this->top_), IOError);
  InfogainLossLayer<Dtype> no_source(this->Param("InfogainLoss"));
  EXPECT_THROW(no_source.SetUp(two, this->top_), ConfigError);
}

TYPED_TEST(InfogainLossTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> small_h({3, 3});
  vector<Blob<Dtype>*> bottom = {&this->scores_, &this->labels_, &small_h};
  InfogainLossLayer<Dtype> layer(this->Param("InfogainLoss"));
  try {
    layer.SetUp(bottom, this->top_);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("4 x 4"), std::string::npos)
        << e.what();
  }
  Blob<Dtype> labels({2, 4});
  bottom = {&this->scores_, &labels, &this->h_};
  InfogainLossLayer<Dtype> layer2(this->Param("InfogainLoss"));
  EXPECT_THROW(layer2.SetUp(bottom, this->top_), ShapeError);

  this->labels_.mutable_cpu_data()[1] = 4;
  InfogainLossLayer<Dtype> layer3(this->Param("InfogainLoss"));
  layer3.SetUp(this->bottom_, this->top_);
  EXPECT_THROW(layer3.Forward(this->bottom_, this->top_), ConfigError);
  this->labels_.mutable_cpu_data()[1] = 0;
  layer3.Forward(this->bottom_, this->top_);
  EXPECT_FALSE(layer3.AllowForceBackward(1));
  EXPECT_FALSE(layer3.AllowForceBackward(2));
  EXPECT_THROW(layer3.Backward(this->top_, {true, false, true}, this->bottom_),
               ConfigError);
}

}  // namespace
}  // namespace poseidon
