// The element-wise layers of the Caffe catalogue beyond ReLU/Sigmoid/TanH:
// AbsVal, Power, Exp, Log, BNLL, Threshold, ELU, Swish, Clip and PReLU.
// Forward and backward against closed forms evaluated in double (or long
// double) on hand-picked inputs including the edge cases, gradients by finite
// differences, in-place runs against out-of-place ones, and the parameter
// errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/absval_layer.hpp"
#include "poseidon/layers/bnll_layer.hpp"
#include "poseidon/layers/clip_layer.hpp"
#include "poseidon/layers/elu_layer.hpp"
#include "poseidon/layers/exp_layer.hpp"
#include "poseidon/layers/log_layer.hpp"
#include "poseidon/layers/power_layer.hpp"
#include "poseidon/layers/prelu_layer.hpp"
#include "poseidon/layers/swish_layer.hpp"
#include "poseidon/layers/threshold_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

LayerParameter Param(const char* type) {
  LayerParameter param;
  param.set_type(type);
  return param;
}

LayerParameter PowerParam(float power, float scale, float shift) {
  LayerParameter param = Param("Power");
  param.mutable_power_param()->set_power(power);
  param.mutable_power_param()->set_scale(scale);
  param.mutable_power_param()->set_shift(shift);
  return param;
}

LayerParameter ExpParam(float base, float scale, float shift) {
  LayerParameter param = Param("Exp");
  param.mutable_exp_param()->set_base(base);
  param.mutable_exp_param()->set_scale(scale);
  param.mutable_exp_param()->set_shift(shift);
  return param;
}

LayerParameter LogParam(float base, float scale, float shift) {
  LayerParameter param = Param("Log");
  param.mutable_log_param()->set_base(base);
  param.mutable_log_param()->set_scale(scale);
  param.mutable_log_param()->set_shift(shift);
  return param;
}

LayerParameter ClipParam(float min, float max) {
  LayerParameter param = Param("Clip");
  param.mutable_clip_param()->set_min(min);
  param.mutable_clip_param()->set_max(max);
  return param;
}

LayerParameter EluParam(float alpha) {
  LayerParameter param = Param("ELU");
  param.mutable_elu_param()->set_alpha(alpha);
  return param;
}

LayerParameter SwishParam(float beta) {
  LayerParameter param = Param("Swish");
  param.mutable_swish_param()->set_beta(beta);
  return param;
}

LayerParameter ThresholdParam(float threshold) {
  LayerParameter param = Param("Threshold");
  param.mutable_threshold_param()->set_threshold(threshold);
  return param;
}

LayerParameter PReLUParam(bool channel_shared) {
  LayerParameter param = Param("PReLU");
  param.mutable_prelu_param()->set_channel_shared(channel_shared);
  return param;
}

template <typename Dtype>
void SetValues(Blob<Dtype>* blob, const vector<double>& values) {
  ASSERT_EQ(blob->count(), static_cast<int>(values.size()));
  for (int i = 0; i < blob->count(); ++i) {
    blob->mutable_cpu_data()[i] = static_cast<Dtype>(values[i]);
  }
}

template <typename TypeParam>
class NeuronExtraTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  NeuronExtraTest() : bottom_({2, 3, 4, 5}), top_() {
    test::FillGaussian(&bottom_);
    bottom_vec_ = {&bottom_};
    top_vec_ = {&top_};
  }

  // Runs a fresh layer of `param` on `x` (shape (1, n)) forward, then
  // backward with top diff `dy` (all ones if empty). Fills y and dx.
  void Run(const LayerParameter& param, const vector<double>& x,
           vector<double>* y, vector<double>* dx,
           const vector<double>& dy = {}) {
    Blob<Dtype> bottom({1, static_cast<int>(x.size())});
    SetValues(&bottom, x);
    Blob<Dtype> top;
    vector<Blob<Dtype>*> bottom_vec = {&bottom};
    vector<Blob<Dtype>*> top_vec = {&top};
    auto layer = LayerRegistry<Dtype>::CreateLayer(param);
    layer->SetUp(bottom_vec, top_vec);
    ASSERT_EQ(top.shape(), bottom.shape());
    layer->Forward(bottom_vec, top_vec);
    for (int i = 0; i < top.count(); ++i) {
      top.mutable_cpu_diff()[i] = dy.empty() ? Dtype(1) : Dtype(dy[i]);
    }
    layer->Backward(top_vec, {true}, bottom_vec);
    y->assign(top.cpu_data(), top.cpu_data() + top.count());
    dx->assign(bottom.cpu_diff(), bottom.cpu_diff() + bottom.count());
  }

  // Expects Run(param, x) to give y and dx within a relative tolerance.
  void ExpectValues(const LayerParameter& param, const vector<double>& x,
                    const vector<double>& y_expected,
                    const vector<double>& dx_expected) {
    vector<double> y, dx;
    Run(param, x, &y, &dx);
    const double tol = sizeof(Dtype) == 4 ? 2e-6 : 1e-12;
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_NEAR(y[i], y_expected[i], tol * std::max(1.0, std::fabs(y[i])))
          << param.type() << " y at x = " << x[i];
      EXPECT_NEAR(dx[i], dx_expected[i], tol * std::max(1.0, std::fabs(dx[i])))
          << param.type() << " dE/dx at x = " << x[i];
    }
  }

  // Runs `param` out of place on `bottom` and a twin in place on a copy of
  // it, with the same seed, top diff and parameter values; expects equal tops,
  // bottom diffs and parameter diffs.
  void ExpectInPlaceMatches(const LayerParameter& param, Blob<Dtype>* bottom) {
    Blob<Dtype> top;
    vector<Blob<Dtype>*> bottom_vec = {bottom};
    vector<Blob<Dtype>*> top_vec = {&top};
    Poseidon::set_random_seed(7);
    auto layer = LayerRegistry<Dtype>::CreateLayer(param);
    layer->SetUp(bottom_vec, top_vec);
    layer->Forward(bottom_vec, top_vec);
    Blob<Dtype> top_diff(top.shape());
    test::FillGaussian(&top_diff);
    cpu_copy(top.count(), top_diff.cpu_data(), top.mutable_cpu_diff());
    for (auto& p : layer->blobs()) {
      cpu_set(p->count(), Dtype(0), p->mutable_cpu_diff());
    }
    layer->Backward(top_vec, {true}, bottom_vec);

    Blob<Dtype> io;
    io.CopyFrom(*bottom, false, true);
    vector<Blob<Dtype>*> io_vec = {&io};
    Poseidon::set_random_seed(7);
    auto in_place = LayerRegistry<Dtype>::CreateLayer(param);
    in_place->SetUp(io_vec, io_vec);
    in_place->Forward(io_vec, io_vec);
    for (int i = 0; i < io.count(); ++i) {
      ASSERT_EQ(io.cpu_data()[i], top.cpu_data()[i])
          << param.type() << " in-place top element " << i;
    }
    cpu_copy(io.count(), top_diff.cpu_data(), io.mutable_cpu_diff());
    for (auto& p : in_place->blobs()) {
      cpu_set(p->count(), Dtype(0), p->mutable_cpu_diff());
    }
    in_place->Backward(io_vec, {true}, io_vec);
    for (int i = 0; i < io.count(); ++i) {
      EXPECT_EQ(io.cpu_diff()[i], bottom->cpu_diff()[i])
          << param.type() << " in-place bottom diff element " << i;
    }
    ASSERT_EQ(in_place->blobs().size(), layer->blobs().size());
    for (size_t b = 0; b < layer->blobs().size(); ++b) {
      for (int i = 0; i < layer->blobs()[b]->count(); ++i) {
        EXPECT_EQ(in_place->blobs()[b]->cpu_diff()[i],
                  layer->blobs()[b]->cpu_diff()[i])
            << param.type() << " in-place param " << b << " diff " << i;
      }
    }
  }

  void ExpectInPlaceMatches(const LayerParameter& param) {
    ExpectInPlaceMatches(param, &bottom_);
  }

  void CheckGradient(const LayerParameter& param, Dtype kink = 0,
                     Dtype kink_range = -1) {
    auto layer = LayerRegistry<Dtype>::CreateLayer(param);
    test::GradientChecker<Dtype> checker(1e-2, 1e-3, kink, kink_range);
    checker.CheckGradient(layer.get(), bottom_vec_, top_vec_);
  }

  void ExpectSetUpThrows(const LayerParameter& param) {
    auto layer = LayerRegistry<Dtype>::CreateLayer(param);
    EXPECT_THROW(layer->SetUp(bottom_vec_, top_vec_), ConfigError)
        << param.DebugString();
  }

  Blob<Dtype> bottom_;
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(NeuronExtraTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(NeuronExtraTest, Registered) {
  using Dtype = typename TestFixture::Dtype;
  for (const char* type : {"AbsVal", "Power", "Exp", "Log", "BNLL", "Threshold",
                           "ELU", "Swish", "Clip", "PReLU"}) {
    ASSERT_TRUE(LayerRegistry<Dtype>::Has(type)) << type;
    LayerParameter param = Param(type);
    if (std::string(type) == "Clip") param = ClipParam(-1, 1);
    auto layer = LayerRegistry<Dtype>::CreateLayer(param);
    EXPECT_STREQ(layer->type(), type);
  }
}

TYPED_TEST(NeuronExtraTest, ParameterDefaults) {
  const PowerParameter power_param;
  EXPECT_EQ(power_param.power(), 1.0f);
  EXPECT_EQ(power_param.scale(), 1.0f);
  EXPECT_EQ(power_param.shift(), 0.0f);
  const ExpParameter exp_param;
  EXPECT_EQ(exp_param.base(), -1.0f);
  EXPECT_EQ(exp_param.scale(), 1.0f);
  EXPECT_EQ(exp_param.shift(), 0.0f);
  const LogParameter log_param;
  EXPECT_EQ(log_param.base(), -1.0f);
  EXPECT_EQ(log_param.scale(), 1.0f);
  EXPECT_EQ(log_param.shift(), 0.0f);
  EXPECT_EQ(ThresholdParameter().threshold(), 0.0f);
  EXPECT_EQ(ELUParameter().alpha(), 1.0f);
  EXPECT_EQ(SwishParameter().beta(), 1.0f);
  EXPECT_FALSE(PReLUParameter().channel_shared());
}

TYPED_TEST(NeuronExtraTest, OneBottomOneTop) {
  using Dtype = typename TestFixture::Dtype;
  Blob<Dtype> other({2});
  vector<Blob<Dtype>*> two = {&this->bottom_, &other};
  for (const char* type : {"AbsVal", "Exp", "BNLL", "Swish"}) {
    auto layer = LayerRegistry<Dtype>::CreateLayer(Param(type));
    EXPECT_THROW(layer->SetUp(two, this->top_vec_), ConfigError) << type;
  }
}

// ---------------------------------------------------------------- AbsVal

TYPED_TEST(NeuronExtraTest, AbsValValues) {
  // sign(0) = 0: no gradient flows at the kink.
  this->ExpectValues(Param("AbsVal"), {-2.5, -0.5, 0, 0.25, 3},
                     {2.5, 0.5, 0, 0.25, 3}, {-1, -1, 0, 1, 1});
}

TYPED_TEST(NeuronExtraTest, AbsValGradient) {
  this->CheckGradient(Param("AbsVal"), 0, 1e-2);
}

TYPED_TEST(NeuronExtraTest, AbsValInPlace) {
  this->ExpectInPlaceMatches(Param("AbsVal"));
}

// ---------------------------------------------------------------- Power

TYPED_TEST(NeuronExtraTest, PowerValues) {
  const vector<double> x = {-1.5, -0.5, 0, 0.5, 2};
  struct Case {
    double power, scale, shift;
  };
  for (const Case& c : {Case{2, 0.5, 1}, Case{0.375, 0.75, 2.5},
                        Case{-1.5, -0.5, 3}, Case{3, 2, -0.5}}) {
    SCOPED_TRACE(testing::Message() << "power " << c.power << " scale "
                                    << c.scale << " shift " << c.shift);
    vector<double> y, dx;
    for (double v : x) {
      const double base = c.shift + c.scale * v;
      y.push_back(std::pow(base, c.power));
      dx.push_back(c.power * c.scale * std::pow(base, c.power - 1));
    }
    this->ExpectValues(PowerParam(c.power, c.scale, c.shift), x, y, dx);
  }
}

TYPED_TEST(NeuronExtraTest, PowerSpecialCases) {
  const vector<double> x = {-2, -0.5, 0, 0.5, 2};
  // power 0: y == 1 even where the base is 0 (0^0 = 1), no gradient.
  this->ExpectValues(PowerParam(0, 1, 0), x, {1, 1, 1, 1, 1}, {0, 0, 0, 0, 0});
  this->ExpectValues(PowerParam(0, 2, 1), x, {1, 1, 1, 1, 1}, {0, 0, 0, 0, 0});
  // scale 0: y == shift^power, no gradient.
  this->ExpectValues(PowerParam(3, 0, 2), x, {8, 8, 8, 8, 8}, {0, 0, 0, 0, 0});
  // power 1: an affine map with the constant gradient scale.
  this->ExpectValues(PowerParam(1, -3, 0.5), x, {6.5, 2, 0.5, -1, -5.5},
                     {-3, -3, -3, -3, -3});
  // The defaults are the identity.
  this->ExpectValues(Param("Power"), x, x, {1, 1, 1, 1, 1});
  // power 2 at a zero base: y = 0 and the gradient is 0 (not NaN).
  this->ExpectValues(PowerParam(2, 1, 0), x, {4, 0.25, 0, 0.25, 4},
                     {-4, -1, 0, 1, 4});
}

TYPED_TEST(NeuronExtraTest, PowerTopDiffIsScaled) {
  vector<double> y, dx;
  this->Run(PowerParam(2, 3, 1), {1, -1}, &y, &dx, {0.5, -2});
  // dy/dx = 2 * 3 * (1 + 3x): 24 at x = 1, -12 at x = -1.
  EXPECT_NEAR(dx[0], 12, 1e-5);
  EXPECT_NEAR(dx[1], 24, 1e-5);
}

TYPED_TEST(NeuronExtraTest, PowerGradient) {
  // Inputs in [-1, 1] keep every base below positive.
  test::FillUniform(&this->bottom_, -1.0, 1.0);
  struct Case {
    float power, scale, shift;
  };
  for (const Case& c :
       {Case{0.37f, 0.83f, 2.4f}, Case{2, 0.34f, -2.4f}, Case{-1, 0.5f, 2},
        Case{3, 1.5f, 0.2f}, Case{1, 0.7f, -1}, Case{0, 0.7f, 2},
        Case{2.5f, 0, 1.5f}}) {
    SCOPED_TRACE(testing::Message() << "power " << c.power << " scale "
                                    << c.scale << " shift " << c.shift);
    this->CheckGradient(PowerParam(c.power, c.scale, c.shift));
  }
}

TYPED_TEST(NeuronExtraTest, PowerInPlace) {
  test::FillUniform(&this->bottom_, -1.0, 1.0);
  for (const LayerParameter& param :
       {PowerParam(0.37f, 0.83f, 2.4f), PowerParam(2, 0.34f, -2.4f),
        PowerParam(1, 2, 1), PowerParam(0, 2, 1), PowerParam(3, 0, 2)}) {
    this->ExpectInPlaceMatches(param);
  }
}

// ---------------------------------------------------------------- Exp

TYPED_TEST(NeuronExtraTest, ExpValues) {
  const vector<double> x = {-3, -0.5, 0, 0.75, 2};
  struct Case {
    double base, scale, shift;
  };
  for (const Case& c : {Case{-1, 1, 0}, Case{-1, 0.5, -1}, Case{2, 3, 1},
                        Case{0.5, -1, 2}, Case{1, 2, 3}, Case{10, 0.25, 0}}) {
    SCOPED_TRACE(testing::Message() << "base " << c.base << " scale " << c.scale
                                    << " shift " << c.shift);
    const double base = c.base == -1 ? std::exp(1.0) : c.base;
    vector<double> y, dx;
    for (double v : x) {
      const double value = std::pow(base, c.shift + c.scale * v);
      y.push_back(value);
      dx.push_back(value * std::log(base) * c.scale);
    }
    this->ExpectValues(ExpParam(c.base, c.scale, c.shift), x, y, dx);
  }
  // The defaults: y = e^x.
  this->ExpectValues(Param("Exp"), {0, 1}, {1, std::exp(1.0)},
                     {1, std::exp(1.0)});
}

TYPED_TEST(NeuronExtraTest, ExpGradient) {
  for (const LayerParameter& param :
       {Param("Exp"), ExpParam(-1, 0.5f, -0.3f), ExpParam(2, 0.7f, 1),
        ExpParam(0.4f, -1.2f, 0.1f)}) {
    this->CheckGradient(param);
  }
}

TYPED_TEST(NeuronExtraTest, ExpInPlace) {
  this->ExpectInPlaceMatches(Param("Exp"));
  this->ExpectInPlaceMatches(ExpParam(2, 0.7f, 1));
}

TYPED_TEST(NeuronExtraTest, ExpRejectsBadBase) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float base : {0.0f, -2.0f, -0.5f, inf}) {
    this->ExpectSetUpThrows(ExpParam(base, 1, 0));
  }
}

// ---------------------------------------------------------------- Log

TYPED_TEST(NeuronExtraTest, LogValues) {
  const vector<double> x = {0.125, 0.5, 1, 3, 20};
  struct Case {
    double base, scale, shift;
  };
  for (const Case& c : {Case{-1, 1, 0}, Case{2, 2, 1}, Case{10, 0.5, 0.25},
                        Case{0.5, 1, 0}, Case{-1, -1, 25}}) {
    SCOPED_TRACE(testing::Message() << "base " << c.base << " scale " << c.scale
                                    << " shift " << c.shift);
    const double ln_base = c.base == -1 ? 1.0 : std::log(c.base);
    vector<double> y, dx;
    for (double v : x) {
      const double arg = c.shift + c.scale * v;
      y.push_back(std::log(arg) / ln_base);
      dx.push_back(c.scale / (arg * ln_base));
    }
    this->ExpectValues(LogParam(c.base, c.scale, c.shift), x, y, dx);
  }
  // log2 of powers of two is exact.
  this->ExpectValues(
      LogParam(2, 1, 0), {0.25, 1, 8}, {-2, 0, 3},
      {4 / std::log(2.0), 1 / std::log(2.0), 0.125 / std::log(2.0)});
}

TYPED_TEST(NeuronExtraTest, LogOfZeroIsMinusInfinity) {
  vector<double> y, dx;
  this->Run(Param("Log"), {0, 1}, &y, &dx);
  EXPECT_TRUE(std::isinf(y[0]) && y[0] < 0) << y[0];
  EXPECT_EQ(y[1], 0);
}

TYPED_TEST(NeuronExtraTest, LogGradient) {
  test::FillUniform(&this->bottom_, 0.5, 2.0);
  for (const LayerParameter& param :
       {Param("Log"), LogParam(-1, 0.5f, 0.3f), LogParam(2, 1.5f, 1),
        LogParam(0.3f, -0.8f, 2)}) {
    this->CheckGradient(param);
  }
}

TYPED_TEST(NeuronExtraTest, LogInPlace) {
  test::FillUniform(&this->bottom_, 0.5, 2.0);
  this->ExpectInPlaceMatches(Param("Log"));
  this->ExpectInPlaceMatches(LogParam(10, 2, 0.5f));
}

TYPED_TEST(NeuronExtraTest, LogRejectsBadBase) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float base : {0.0f, -2.0f, -0.5f, 1.0f, inf}) {
    this->ExpectSetUpThrows(LogParam(base, 1, 0));
  }
}

// ---------------------------------------------------------------- BNLL

TYPED_TEST(NeuronExtraTest, BNLLValues) {
  const vector<double> x = {-30, -5, -1, -1e-3, 0, 0.5, 2, 12};
  vector<double> y, dx;
  for (double v : x) {
    const long double e = std::exp(static_cast<long double>(v));
    y.push_back(static_cast<double>(std::log(1 + e)));
    dx.push_back(static_cast<double>(e / (1 + e)));
  }
  this->ExpectValues(Param("BNLL"), x, y, dx);
}

TYPED_TEST(NeuronExtraTest, BNLLLargeInputsStayFinite) {
  vector<double> y, dx;
  this->Run(Param("BNLL"), {-1000, -100, 100, 1000}, &y, &dx);
  EXPECT_EQ(y[0], 0);
  EXPECT_NEAR(y[1], 0, 1e-40);
  EXPECT_EQ(y[2], 100);
  EXPECT_EQ(y[3], 1000);
  EXPECT_EQ(dx[0], 0);
  EXPECT_NEAR(dx[1], 0, 1e-40);
  EXPECT_EQ(dx[2], 1);
  EXPECT_EQ(dx[3], 1);
}

TYPED_TEST(NeuronExtraTest, BNLLGradient) {
  this->CheckGradient(Param("BNLL"));
}

TYPED_TEST(NeuronExtraTest, BNLLInPlace) {
  this->ExpectInPlaceMatches(Param("BNLL"));
}

// ---------------------------------------------------------------- Threshold

TYPED_TEST(NeuronExtraTest, ThresholdValues) {
  vector<double> y, dx;
  // Strictly greater: the threshold itself maps to 0.
  this->Run(ThresholdParam(0.5f), {-1, 0.5, 0.5001, 2}, &y, &dx);
  EXPECT_EQ(y, (vector<double>{0, 0, 1, 1}));
  // The step's derivative is 0 wherever it exists.
  EXPECT_EQ(dx, (vector<double>{0, 0, 0, 0}));
  this->Run(Param("Threshold"), {-0.5, 0, 1e-6}, &y, &dx);
  EXPECT_EQ(y, (vector<double>{0, 0, 1}));
}

TYPED_TEST(NeuronExtraTest, ThresholdBackwardRespectsPropagateDown) {
  using Dtype = typename TestFixture::Dtype;
  ThresholdLayer<Dtype> layer(ThresholdParam(0.1f));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  cpu_set(this->top_.count(), Dtype(1), this->top_.mutable_cpu_diff());
  cpu_set(this->bottom_.count(), Dtype(7), this->bottom_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {false}, this->bottom_vec_);
  EXPECT_EQ(this->bottom_.cpu_diff()[0], 7);
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);
  EXPECT_EQ(this->bottom_.asum_diff(), 0);
}

TYPED_TEST(NeuronExtraTest, ThresholdInPlace) {
  this->ExpectInPlaceMatches(ThresholdParam(0.3f));
}

// ---------------------------------------------------------------- ELU

TYPED_TEST(NeuronExtraTest, ELUValues) {
  const vector<double> x = {-4, -1, -0.01, 0, 0.5, 3};
  for (double alpha : {1.0, 0.5, 2.0, 0.0}) {
    SCOPED_TRACE(alpha);
    vector<double> y, dx;
    for (double v : x) {
      y.push_back(v > 0 ? v : alpha * (std::exp(v) - 1));
      // At x = 0 the left derivative alpha is used, as in Caffe.
      dx.push_back(v > 0 ? 1 : alpha * std::exp(v));
    }
    this->ExpectValues(EluParam(alpha), x, y, dx);
  }
  // The default alpha is 1.
  this->ExpectValues(Param("ELU"), {-1}, {std::exp(-1.0) - 1},
                     {std::exp(-1.0)});
}

TYPED_TEST(NeuronExtraTest, ELUGradient) {
  for (float alpha : {1.0f, 0.3f, -0.5f}) {
    SCOPED_TRACE(alpha);
    this->CheckGradient(EluParam(alpha), 0, 1e-2);
  }
}

TYPED_TEST(NeuronExtraTest, ELUInPlace) {
  for (float alpha : {1.0f, 0.5f, 0.0f, -0.5f}) {
    SCOPED_TRACE(alpha);
    this->ExpectInPlaceMatches(EluParam(alpha));
  }
}

// ---------------------------------------------------------------- Swish

TYPED_TEST(NeuronExtraTest, SwishValues) {
  const vector<double> x = {-40, -3, -0.5, 0, 0.5, 2, 40};
  for (double beta : {1.0, 0.5, 2.0, 0.0}) {
    SCOPED_TRACE(beta);
    vector<double> y, dx;
    for (double v : x) {
      const double s = 1 / (1 + std::exp(-beta * v));
      y.push_back(v * s);
      dx.push_back(s + beta * v * s * (1 - s));
    }
    this->ExpectValues(SwishParam(beta), x, y, dx);
  }
}

TYPED_TEST(NeuronExtraTest, SwishGradient) {
  for (float beta : {1.0f, 0.5f, 2.5f}) {
    SCOPED_TRACE(beta);
    this->CheckGradient(SwishParam(beta));
  }
}

TYPED_TEST(NeuronExtraTest, SwishInPlace) {
  this->ExpectInPlaceMatches(Param("Swish"));
  this->ExpectInPlaceMatches(SwishParam(1.7f));
}

// ---------------------------------------------------------------- Clip

TYPED_TEST(NeuronExtraTest, ClipValues) {
  // The gradient passes where min <= x <= max, bounds included.
  this->ExpectValues(ClipParam(-1, 2), {-3, -1, -0.999, 0, 2, 2.001, 5},
                     {-1, -1, -0.999, 0, 2, 2, 2}, {0, 1, 1, 1, 1, 0, 0});
  // min == max is allowed: a constant.
  this->ExpectValues(ClipParam(0.5f, 0.5f), {0, 0.5, 1}, {0.5, 0.5, 0.5},
                     {0, 1, 0});
}

TYPED_TEST(NeuronExtraTest, ClipGradient) {
  using Dtype = typename TestFixture::Dtype;
  const Dtype min = -0.5, max = 0.7;
  // Keep the inputs away from both kinks.
  Dtype* x = this->bottom_.mutable_cpu_data();
  for (int i = 0; i < this->bottom_.count(); ++i) {
    if (std::fabs(x[i] - min) < 0.02) x[i] = min - 0.05;
    if (std::fabs(x[i] - max) < 0.02) x[i] = max + 0.05;
  }
  this->CheckGradient(ClipParam(min, max));
}

TYPED_TEST(NeuronExtraTest, ClipInPlace) {
  this->ExpectInPlaceMatches(ClipParam(-0.5f, 0.7f));
}

TYPED_TEST(NeuronExtraTest, ClipRejectsBadBounds) {
  this->ExpectSetUpThrows(ClipParam(1, -1));
  LayerParameter no_max = Param("Clip");
  no_max.mutable_clip_param()->set_min(0);
  this->ExpectSetUpThrows(no_max);
  LayerParameter no_min = Param("Clip");
  no_min.mutable_clip_param()->set_max(1);
  this->ExpectSetUpThrows(no_min);
  this->ExpectSetUpThrows(Param("Clip"));
}

// ---------------------------------------------------------------- PReLU

TYPED_TEST(NeuronExtraTest, PReLUDefaultSlopes) {
  using Dtype = typename TestFixture::Dtype;
  PReLULayer<Dtype> layer(Param("PReLU"));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  ASSERT_EQ(layer.blobs().size(), 1u);
  EXPECT_EQ(layer.blobs()[0]->shape(), (vector<int>{3}));
  for (int c = 0; c < 3; ++c) EXPECT_EQ(layer.blobs()[0]->cpu_data()[c], 0.25);
  EXPECT_TRUE(layer.param_propagate_down(0));

  PReLULayer<Dtype> shared(PReLUParam(true));
  shared.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(shared.blobs()[0]->num_axes(), 0);
  EXPECT_EQ(shared.blobs()[0]->count(), 1);
  EXPECT_EQ(shared.blobs()[0]->cpu_data()[0], 0.25);
}

TYPED_TEST(NeuronExtraTest, PReLUForwardBackward) {
  using Dtype = typename TestFixture::Dtype;
  const double slopes[] = {0.1, -0.2, 0.5};
  for (const vector<int>& shape :
       {vector<int>{2, 3, 4, 5}, vector<int>{4, 3}, vector<int>{1, 3, 2}}) {
    SCOPED_TRACE(Blob<Dtype>(shape).shape_string());
    Blob<Dtype> bottom(shape);
    test::FillGaussian(&bottom);
    vector<Blob<Dtype>*> bottom_vec = {&bottom};
    PReLULayer<Dtype> layer(Param("PReLU"));
    layer.SetUp(bottom_vec, this->top_vec_);
    for (int c = 0; c < 3; ++c) {
      layer.blobs()[0]->mutable_cpu_data()[c] = Dtype(slopes[c]);
    }
    layer.Forward(bottom_vec, this->top_vec_);
    Blob<Dtype> top_diff(shape);
    test::FillGaussian(&top_diff);
    cpu_copy(top_diff.count(), top_diff.cpu_data(),
             this->top_.mutable_cpu_diff());
    cpu_set(3, Dtype(0), layer.blobs()[0]->mutable_cpu_diff());
    // Two backward passes: the slope diff accumulates.
    layer.Backward(this->top_vec_, {true}, bottom_vec);
    layer.Backward(this->top_vec_, {true}, bottom_vec);

    const int inner = bottom.count(2);
    double slope_diff[3] = {0, 0, 0};
    for (int i = 0; i < bottom.count(); ++i) {
      const int c = (i / inner) % 3;
      const double x = bottom.cpu_data()[i];
      const double dy = top_diff.cpu_data()[i];
      EXPECT_NEAR(this->top_.cpu_data()[i], x > 0 ? x : slopes[c] * x, 1e-6);
      EXPECT_NEAR(bottom.cpu_diff()[i], x > 0 ? dy : slopes[c] * dy, 1e-6);
      if (x <= 0) slope_diff[c] += dy * x;
    }
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(layer.blobs()[0]->cpu_diff()[c], 2 * slope_diff[c], 1e-4)
          << "slope " << c;
    }
  }
}

TYPED_TEST(NeuronExtraTest, PReLUChannelSharedForwardBackward) {
  using Dtype = typename TestFixture::Dtype;
  LayerParameter param = PReLUParam(true);
  param.mutable_prelu_param()->mutable_filler()->set_type("constant");
  param.mutable_prelu_param()->mutable_filler()->set_value(-0.3f);
  PReLULayer<Dtype> layer(param);
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  cpu_set(this->top_.count(), Dtype(1), this->top_.mutable_cpu_diff());
  cpu_set(1, Dtype(0), layer.blobs()[0]->mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);
  double slope_diff = 0;
  for (int i = 0; i < this->bottom_.count(); ++i) {
    const double x = this->bottom_.cpu_data()[i];
    EXPECT_NEAR(this->top_.cpu_data()[i], x > 0 ? x : -0.3 * x, 1e-6);
    EXPECT_NEAR(this->bottom_.cpu_diff()[i], x > 0 ? 1 : -0.3, 1e-6);
    if (x <= 0) slope_diff += x;
  }
  EXPECT_NEAR(layer.blobs()[0]->cpu_diff()[0], slope_diff, 1e-4);
}

TYPED_TEST(NeuronExtraTest, PReLUGivenSlopes) {
  using Dtype = typename TestFixture::Dtype;
  LayerParameter param = Param("PReLU");
  BlobProto* blob = param.add_blobs();
  blob->mutable_shape()->add_dim(3);
  for (float a : {0.5f, 0.0f, -1.0f}) blob->add_data(a);
  PReLULayer<Dtype> layer(param);
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  const double slopes[] = {0.5, 0, -1};
  for (int i = 0; i < this->bottom_.count(); ++i) {
    const double x = this->bottom_.cpu_data()[i];
    const int c = (i / 20) % 3;
    EXPECT_NEAR(this->top_.cpu_data()[i], x > 0 ? x : slopes[c] * x, 1e-6);
  }
}

TYPED_TEST(NeuronExtraTest, PReLUGradient) {
  using Dtype = typename TestFixture::Dtype;
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared);
    LayerParameter param = PReLUParam(shared);
    param.mutable_prelu_param()->mutable_filler()->set_type("gaussian");
    PReLULayer<Dtype> layer(param);
    test::GradientChecker<Dtype> checker(1e-2, 1e-3, 0, 1e-2);
    checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
  }
}

TYPED_TEST(NeuronExtraTest, PReLUInPlace) {
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared);
    LayerParameter param = PReLUParam(shared);
    param.mutable_prelu_param()->mutable_filler()->set_type("gaussian");
    this->ExpectInPlaceMatches(param);
  }
}

TYPED_TEST(NeuronExtraTest, PReLUPropagateDownFlags) {
  using Dtype = typename TestFixture::Dtype;
  PReLULayer<Dtype> layer(Param("PReLU"));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  cpu_set(this->top_.count(), Dtype(1), this->top_.mutable_cpu_diff());
  cpu_set(this->bottom_.count(), Dtype(7), this->bottom_.mutable_cpu_diff());
  cpu_set(3, Dtype(5), layer.blobs()[0]->mutable_cpu_diff());
  layer.set_param_propagate_down(0, false);
  layer.Backward(this->top_vec_, {false}, this->bottom_vec_);
  EXPECT_EQ(this->bottom_.cpu_diff()[0], 7);
  EXPECT_EQ(layer.blobs()[0]->cpu_diff()[0], 5);
}

TYPED_TEST(NeuronExtraTest, PReLURejectsBadSlopesAndShapes) {
  using Dtype = typename TestFixture::Dtype;
  // Two slopes for three channels.
  LayerParameter wrong_count = Param("PReLU");
  BlobProto* blob = wrong_count.add_blobs();
  blob->mutable_shape()->add_dim(2);
  blob->add_data(0.1f);
  blob->add_data(0.2f);
  this->ExpectSetUpThrows(wrong_count);
  // Three slopes where channel_shared wants one.
  LayerParameter shared = PReLUParam(true);
  blob = shared.add_blobs();
  blob->mutable_shape()->add_dim(3);
  for (int i = 0; i < 3; ++i) blob->add_data(0.1f);
  this->ExpectSetUpThrows(shared);
  // Two parameter blobs.
  LayerParameter two = Param("PReLU");
  for (int b = 0; b < 2; ++b) {
    blob = two.add_blobs();
    blob->mutable_shape()->add_dim(3);
    for (int i = 0; i < 3; ++i) blob->add_data(0.1f);
  }
  this->ExpectSetUpThrows(two);

  // A bottom without a channel axis.
  Blob<Dtype> flat({6});
  vector<Blob<Dtype>*> flat_vec = {&flat};
  PReLULayer<Dtype> layer(Param("PReLU"));
  EXPECT_THROW(layer.SetUp(flat_vec, this->top_vec_), ShapeError);
  // A later bottom with another channel count.
  PReLULayer<Dtype> ok(Param("PReLU"));
  ok.SetUp(this->bottom_vec_, this->top_vec_);
  Blob<Dtype> four({2, 4, 3});
  vector<Blob<Dtype>*> four_vec = {&four};
  EXPECT_THROW(ok.Forward(four_vec, this->top_vec_), ShapeError);
  // channel_shared accepts any channel count.
  PReLULayer<Dtype> any(PReLUParam(true));
  any.SetUp(this->bottom_vec_, this->top_vec_);
  any.Forward(four_vec, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), four.shape());
}

}  // namespace
}  // namespace poseidon
