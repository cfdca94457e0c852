// Eltwise: SUM (with coefficients), PROD (stable and quotient gradients) and
// MAX against element-wise formulas; gradients; in place; more bottoms than
// one kernel launch takes; errors for mismatched shapes and bad
// coefficients; CPU/GPU agreement (skipped without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gpu_agreement.hpp"
#include "gradient_checker.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/kernels/eltwise_kernels.hpp"
#include "poseidon/layers/eltwise_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class EltwiseLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  EltwiseLayerTest() : a_({2, 3, 4, 5}), b_({2, 3, 4, 5}), c_({2, 3, 4, 5}) {
    test::FillUniform(&a_, -1.5, 1.5);
    test::FillUniform(&b_, -1.5, 1.5);
    test::FillUniform(&c_, -1.5, 1.5);
    bottom_vec_ = {&a_, &b_, &c_};
    top_vec_ = {&top_};
  }

  static LayerParameter Param(EltwiseParameter::EltwiseOp op) {
    LayerParameter param;
    param.set_type("Eltwise");
    param.mutable_eltwise_param()->set_operation(op);
    return param;
  }

  // Makes the three bottoms differ by at least 0.2 at every element, so MAX
  // has no ties within the finite-difference step.
  void SeparateForMax() {
    const int count = a_.count();
    vector<Dtype> base(count);
    Blob<Dtype> noise({count});
    test::FillUniform(&noise, -1.0, 1.0);
    Blob<Dtype>* blobs[] = {&a_, &b_, &c_};
    for (int i = 0; i < count; ++i) {
      const int shift = i % 3;  // a different winner pattern per element
      for (int k = 0; k < 3; ++k) {
        blobs[k]->mutable_cpu_data()[i] =
            noise.cpu_data()[i] + Dtype(0.2) * ((k + shift) % 3);
      }
    }
  }

  Blob<Dtype> a_, b_, c_;
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(EltwiseLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(EltwiseLayerTest, Defaults) {
  const EltwiseParameter defaults;
  EXPECT_EQ(defaults.operation(), EltwiseParameter::SUM);
  EXPECT_TRUE(defaults.stable_prod_grad());
  EXPECT_EQ(defaults.coeff_size(), 0);
}

TYPED_TEST(EltwiseLayerTest, SumForward) {
  using Dtype = typename TestFixture::Dtype;
  EltwiseLayer<Dtype> layer(this->Param(EltwiseParameter::SUM));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), this->a_.shape());
  layer.Forward(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < this->top_.count(); ++i) {
    EXPECT_NEAR(this->top_.cpu_data()[i],
                this->a_.cpu_data()[i] + this->b_.cpu_data()[i] +
                    this->c_.cpu_data()[i],
                1e-5);
  }
}

TYPED_TEST(EltwiseLayerTest, SumWithCoefficients) {
  using Dtype = typename TestFixture::Dtype;
  LayerParameter param = this->Param(EltwiseParameter::SUM);
  for (float coeff : {1.0f, -0.5f, 2.0f}) {
    param.mutable_eltwise_param()->add_coeff(coeff);
  }
  EltwiseLayer<Dtype> layer(param);
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < this->top_.count(); ++i) {
    EXPECT_NEAR(this->top_.cpu_data()[i],
                this->a_.cpu_data()[i] - 0.5 * this->b_.cpu_data()[i] +
                    2 * this->c_.cpu_data()[i],
                1e-5);
  }
}

TYPED_TEST(EltwiseLayerTest, ProdForward) {
  using Dtype = typename TestFixture::Dtype;
  EltwiseLayer<Dtype> layer(this->Param(EltwiseParameter::PROD));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < this->top_.count(); ++i) {
    EXPECT_NEAR(this->top_.cpu_data()[i],
                this->a_.cpu_data()[i] * this->b_.cpu_data()[i] *
                    this->c_.cpu_data()[i],
                1e-5);
  }
}

TYPED_TEST(EltwiseLayerTest, MaxForwardAndBackwardRouting) {
  using Dtype = typename TestFixture::Dtype;
  EltwiseLayer<Dtype> layer(this->Param(EltwiseParameter::MAX));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < this->top_.count(); ++i) {
    this->top_.mutable_cpu_diff()[i] = i + 1;
  }
  layer.Backward(this->top_vec_, {true, true, true}, this->bottom_vec_);
  Blob<Dtype>* blobs[] = {&this->a_, &this->b_, &this->c_};
  for (int i = 0; i < this->top_.count(); ++i) {
    const Dtype values[] = {this->a_.cpu_data()[i], this->b_.cpu_data()[i],
                            this->c_.cpu_data()[i]};
    const int winner =
        static_cast<int>(std::max_element(values, values + 3) - values);
    EXPECT_EQ(this->top_.cpu_data()[i], values[winner]);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(blobs[k]->cpu_diff()[i], k == winner ? Dtype(i + 1) : 0)
          << "bottom " << k << " element " << i;
    }
  }
}

TYPED_TEST(EltwiseLayerTest, MaxTiesGoToTheFirstBottom) {
  using Dtype = typename TestFixture::Dtype;
  this->b_.CopyFrom(this->a_);
  this->c_.CopyFrom(this->a_);
  EltwiseLayer<Dtype> layer(this->Param(EltwiseParameter::MAX));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  cpu_set(this->top_.count(), Dtype(1), this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true, true, true}, this->bottom_vec_);
  EXPECT_EQ(this->a_.asum_diff(), this->a_.count());
  EXPECT_EQ(this->b_.asum_diff(), 0);
  EXPECT_EQ(this->c_.asum_diff(), 0);
}

TYPED_TEST(EltwiseLayerTest, SumGradient) {
  using Dtype = typename TestFixture::Dtype;
  LayerParameter param = this->Param(EltwiseParameter::SUM);
  for (float coeff : {1.0f, -0.5f, 2.0f}) {
    param.mutable_eltwise_param()->add_coeff(coeff);
  }
  EltwiseLayer<Dtype> layer(param);
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(EltwiseLayerTest, ProdGradient) {
  using Dtype = typename TestFixture::Dtype;
  for (bool stable : {true, false}) {
    SCOPED_TRACE(stable);
    LayerParameter param = this->Param(EltwiseParameter::PROD);
    param.mutable_eltwise_param()->set_stable_prod_grad(stable);
    EltwiseLayer<Dtype> layer(param);
    test::GradientChecker<Dtype> checker(1e-2, 1e-3);
    checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
  }
}

TYPED_TEST(EltwiseLayerTest, StableProdGradientWithZeros) {
  using Dtype = typename TestFixture::Dtype;
  this->a_.mutable_cpu_data()[0] = 0;
  EltwiseLayer<Dtype> layer(this->Param(EltwiseParameter::PROD));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  cpu_set(this->top_.count(), Dtype(1), this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true, true, true}, this->bottom_vec_);
  EXPECT_NEAR(this->a_.cpu_diff()[0],
              this->b_.cpu_data()[0] * this->c_.cpu_data()[0], 1e-6);
  EXPECT_EQ(this->b_.cpu_diff()[0], 0);
}

TYPED_TEST(EltwiseLayerTest, MaxGradient) {
  using Dtype = typename TestFixture::Dtype;
  this->SeparateForMax();
  EltwiseLayer<Dtype> layer(this->Param(EltwiseParameter::MAX));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(EltwiseLayerTest, TwoBottomsAndPropagateDown) {
  using Dtype = typename TestFixture::Dtype;
  vector<Blob<Dtype>*> two = {&this->a_, &this->b_};
  EltwiseLayer<Dtype> layer(this->Param(EltwiseParameter::PROD));
  layer.SetUp(two, this->top_vec_);
  layer.Forward(two, this->top_vec_);
  cpu_set(this->top_.count(), Dtype(1), this->top_.mutable_cpu_diff());
  cpu_set(this->a_.count(), Dtype(9), this->a_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {false, true}, two);
  for (int i = 0; i < this->a_.count(); ++i) {
    EXPECT_EQ(this->a_.cpu_diff()[i], 9);
    EXPECT_NEAR(this->b_.cpu_diff()[i], this->a_.cpu_data()[i], 1e-6);
  }
}

// SUM and MAX may write their top into a bottom; results must match the
// out-of-place run.
TYPED_TEST(EltwiseLayerTest, InPlaceSumAndMax) {
  using Dtype = typename TestFixture::Dtype;
  this->SeparateForMax();
  for (auto op : {EltwiseParameter::SUM, EltwiseParameter::MAX}) {
    for (int alias = 0; alias < 3; ++alias) {
      SCOPED_TRACE(std::to_string(op) + " aliasing bottom " +
                   std::to_string(alias));
      LayerParameter param = this->Param(op);
      if (op == EltwiseParameter::SUM) {
        for (float coeff : {1.0f, -0.5f, 2.0f}) {
          param.mutable_eltwise_param()->add_coeff(coeff);
        }
      }
      EltwiseLayer<Dtype> layer(param);
      layer.SetUp(this->bottom_vec_, this->top_vec_);
      layer.Forward(this->bottom_vec_, this->top_vec_);
      Blob<Dtype> top_diff(this->top_.shape());  // values in data
      test::FillGaussian(&top_diff);
      cpu_copy(top_diff.count(), top_diff.cpu_data(),
               this->top_.mutable_cpu_diff());
      layer.Backward(this->top_vec_, {true, true, true}, this->bottom_vec_);

      Blob<Dtype> copies[3];
      vector<Blob<Dtype>*> io_vec;
      for (int k = 0; k < 3; ++k) {
        copies[k].CopyFrom(*this->bottom_vec_[k], false, true);
        io_vec.push_back(&copies[k]);
      }
      vector<Blob<Dtype>*> io_top = {&copies[alias]};
      EltwiseLayer<Dtype> in_place(param);
      in_place.SetUp(io_vec, io_top);
      in_place.Forward(io_vec, io_top);
      for (int i = 0; i < this->top_.count(); ++i) {
        ASSERT_EQ(copies[alias].cpu_data()[i], this->top_.cpu_data()[i]);
      }
      cpu_copy(top_diff.count(), top_diff.cpu_data(),
               copies[alias].mutable_cpu_diff());
      in_place.Backward(io_top, {true, true, true}, io_vec);
      for (int k = 0; k < 3; ++k) {
        for (int i = 0; i < this->top_.count(); ++i) {
          ASSERT_EQ(copies[k].cpu_diff()[i],
                    this->bottom_vec_[k]->cpu_diff()[i])
              << "bottom " << k << " element " << i;
        }
      }
    }
  }
}

TYPED_TEST(EltwiseLayerTest, MismatchedShapesNameBoth) {
  using Dtype = typename TestFixture::Dtype;
  Blob<Dtype> odd({2, 3, 5, 4});
  vector<Blob<Dtype>*> bottom_vec = {&this->a_, &odd};
  EltwiseLayer<Dtype> layer(this->Param(EltwiseParameter::SUM));
  try {
    layer.SetUp(bottom_vec, this->top_vec_);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("2 3 5 4 (120)"), std::string::npos) << what;
    EXPECT_NE(what.find("2 3 4 5 (120)"), std::string::npos) << what;
  }
  // Also when the shapes change after setup.
  EltwiseLayer<Dtype> ok(this->Param(EltwiseParameter::MAX));
  ok.SetUp(this->bottom_vec_, this->top_vec_);
  this->c_.Reshape({2, 3, 4});
  EXPECT_THROW(ok.Forward(this->bottom_vec_, this->top_vec_), ShapeError);
}

TYPED_TEST(EltwiseLayerTest, RejectsBadCoefficients) {
  using Dtype = typename TestFixture::Dtype;
  LayerParameter two_coeffs = this->Param(EltwiseParameter::SUM);
  two_coeffs.mutable_eltwise_param()->add_coeff(1);
  two_coeffs.mutable_eltwise_param()->add_coeff(2);
  EltwiseLayer<Dtype> layer(two_coeffs);
  EXPECT_THROW(layer.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);

  LayerParameter prod_coeffs = this->Param(EltwiseParameter::PROD);
  for (int k = 0; k < 3; ++k) prod_coeffs.mutable_eltwise_param()->add_coeff(1);
  EltwiseLayer<Dtype> prod(prod_coeffs);
  EXPECT_THROW(prod.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
}

TYPED_TEST(EltwiseLayerTest, RejectsInPlaceProdAndSingleBottom) {
  using Dtype = typename TestFixture::Dtype;
  EltwiseLayer<Dtype> prod(this->Param(EltwiseParameter::PROD));
  vector<Blob<Dtype>*> top_is_b = {&this->b_};
  EXPECT_THROW(prod.SetUp(this->bottom_vec_, top_is_b), ConfigError);

  EltwiseLayer<Dtype> single(this->Param(EltwiseParameter::SUM));
  vector<Blob<Dtype>*> one = {&this->a_};
  EXPECT_THROW(single.SetUp(one, this->top_vec_), ConfigError);
}

// More bottoms than one functor takes (kernels::kEltwiseMaxInputs): the
// chunks must give the single loop's results, also in place on a bottom of
// the first chunk and on one of a later chunk (whose values the first chunk
// would overwrite before the later one reads them).
TYPED_TEST(EltwiseLayerTest, MoreBottomsThanOneKernelTakes) {
  using Dtype = typename TestFixture::Dtype;
  const int num = kernels::kEltwiseMaxInputs + 5;
  const vector<int> shape = {3, 5, 7};
  const int count = 3 * 5 * 7;
  for (auto op : {EltwiseParameter::SUM, EltwiseParameter::PROD,
                  EltwiseParameter::MAX}) {
    SCOPED_TRACE(EltwiseParameter::EltwiseOp_Name(op));
    LayerParameter param = this->Param(op);
    vector<double> coeff(num, 1);
    for (int k = 0; k < num && op == EltwiseParameter::SUM; ++k) {
      coeff[k] = 0.25 * (k % 7) - 0.6;
      param.mutable_eltwise_param()->add_coeff(float(coeff[k]));
    }
    vector<std::unique_ptr<Blob<Dtype>>> blobs;
    vector<Blob<Dtype>*> bottoms;
    for (int k = 0; k < num; ++k) {
      blobs.emplace_back(new Blob<Dtype>(shape));
      test::FillUniform(blobs.back().get(), 0.7, 1.4);
      bottoms.push_back(blobs.back().get());
    }
    Blob<Dtype> top_diff(shape);
    test::FillGaussian(&top_diff);
    // Out of place, against a reference in double.
    Blob<Dtype> top;
    vector<Blob<Dtype>*> top_vec = {&top};
    auto layer = LayerRegistry<Dtype>::CreateLayer(param);
    layer->SetUp(bottoms, top_vec);
    layer->Forward(bottoms, top_vec);
    cpu_copy(count, top_diff.cpu_data(), top.mutable_cpu_diff());
    layer->Backward(top_vec, vector<bool>(num, true), bottoms);
    for (int i = 0; i < count; ++i) {
      double y = op == EltwiseParameter::SUM ? 0 : 1;
      int best = 0;
      for (int k = 0; k < num; ++k) {
        const double x = bottoms[k]->cpu_data()[i];
        if (op == EltwiseParameter::SUM) y += coeff[k] * x;
        if (op == EltwiseParameter::PROD) y *= x;
        if (x > bottoms[best]->cpu_data()[i]) best = k;
      }
      if (op == EltwiseParameter::MAX) y = bottoms[best]->cpu_data()[i];
      EXPECT_NEAR(top.cpu_data()[i], y, 1e-5 * (1 + std::fabs(y))) << i;
      for (int k = 0; k < num; ++k) {
        const double dy = top_diff.cpu_data()[i];
        const double x = bottoms[k]->cpu_data()[i];
        const double dx = op == EltwiseParameter::SUM    ? coeff[k] * dy
                          : op == EltwiseParameter::PROD ? dy * y / x
                          : k == best                    ? dy
                                                         : 0;
        EXPECT_NEAR(bottoms[k]->cpu_diff()[i], dx, 1e-5 * (1 + std::fabs(dx)))
            << "bottom " << k << " element " << i;
      }
    }
    if (op == EltwiseParameter::PROD) continue;  // PROD is never in place
    // In place on bottom 3 and on bottom 18: the same numbers.
    for (int aliased : {3, num - 3}) {
      SCOPED_TRACE(aliased);
      vector<std::unique_ptr<Blob<Dtype>>> copies;
      vector<Blob<Dtype>*> io;
      for (int k = 0; k < num; ++k) {
        copies.emplace_back(new Blob<Dtype>());
        copies.back()->CopyFrom(*bottoms[k], false, true);
        io.push_back(copies.back().get());
      }
      vector<Blob<Dtype>*> io_top = {io[aliased]};
      auto in_place = LayerRegistry<Dtype>::CreateLayer(param);
      in_place->SetUp(io, io_top);
      in_place->Forward(io, io_top);
      for (int i = 0; i < count; ++i) {
        ASSERT_EQ(io[aliased]->cpu_data()[i], top.cpu_data()[i]) << i;
      }
      cpu_copy(count, top_diff.cpu_data(), io[aliased]->mutable_cpu_diff());
      in_place->Backward(io_top, vector<bool>(num, true), io);
      for (int k = 0; k < num; ++k) {
        for (int i = 0; i < count; ++i) {
          ASSERT_EQ(io[k]->cpu_diff()[i], bottoms[k]->cpu_diff()[i])
              << "bottom " << k << " element " << i;
        }
      }
    }
  }
}

// SUM's one-pass backward with some bottoms switched off: their diffs stay
// as they were; the others get coeff * dE/dy, in place (the top is bottom
// `aliased`, switched on or off) and not, across kernel chunks.
TYPED_TEST(EltwiseLayerTest, SumBackwardSkipsBottomsNotPropagated) {
  using Dtype = typename TestFixture::Dtype;
  const int num = kernels::kEltwiseMaxInputs + 5;
  const vector<int> shape = {1, 17, 13, 17};
  LayerParameter param = this->Param(EltwiseParameter::SUM);
  vector<double> coeff(num);
  vector<bool> down(num);
  for (int k = 0; k < num; ++k) {
    coeff[k] = k % 4 == 0 ? 1 : 0.5 * (k % 5) - 1.25;
    param.mutable_eltwise_param()->add_coeff(float(coeff[k]));
    down[k] = k % 3 != 1;
  }
  Blob<Dtype> top_diff(shape);
  test::FillGaussian(&top_diff);
  for (int aliased : {-1, 0, 1, num - 2}) {
    SCOPED_TRACE(testing::Message() << "top is bottom " << aliased);
    vector<std::unique_ptr<Blob<Dtype>>> blobs;
    vector<Blob<Dtype>*> bottoms;
    for (int k = 0; k < num; ++k) {
      blobs.emplace_back(new Blob<Dtype>(shape));
      test::FillGaussian(blobs.back().get());
      cpu_set(blobs.back()->count(), Dtype(k + 100),
              blobs.back()->mutable_cpu_diff());
      bottoms.push_back(blobs.back().get());
    }
    Blob<Dtype> own_top;
    vector<Blob<Dtype>*> top_vec = {aliased < 0 ? &own_top : bottoms[aliased]};
    EltwiseLayer<Dtype> layer(param);
    layer.SetUp(bottoms, top_vec);
    layer.Forward(bottoms, top_vec);
    const int count = top_diff.count();
    cpu_copy(count, top_diff.cpu_data(), top_vec[0]->mutable_cpu_diff());
    layer.Backward(top_vec, down, bottoms);
    for (int k = 0; k < num; ++k) {
      for (int i = 0; i < count; ++i) {
        const double dy = top_diff.cpu_data()[i];
        // A bottom switched off keeps its diff, which in place is dE/dy.
        const double expected = down[k]        ? coeff[k] * dy
                                : k == aliased ? dy
                                               : k + 100;
        ASSERT_NEAR(bottoms[k]->cpu_diff()[i], expected,
                    1e-6 * (1 + std::fabs(expected)))
            << "bottom " << k << " element " << i;
      }
    }
  }
}

TYPED_TEST(EltwiseLayerTest, Registered) {
  using Dtype = typename TestFixture::Dtype;
  auto layer =
      LayerRegistry<Dtype>::CreateLayer(this->Param(EltwiseParameter::SUM));
  EXPECT_STREQ(layer->type(), "Eltwise");
}

// ---- CPU/GPU agreement ------------------------------------------------------

template <typename Dtype>
class EltwiseLayerGPUTest : public ::testing::Test {};

TYPED_TEST_SUITE(EltwiseLayerGPUTest, test::TestDtypes);

LayerParameter EltwiseParam(EltwiseParameter::EltwiseOp op) {
  LayerParameter param;
  param.set_type("Eltwise");
  param.mutable_eltwise_param()->set_operation(op);
  return param;
}

// `num` bottoms of one shape, uniform in [lo, hi].
template <typename Dtype>
void ExpectEltwiseAgrees(const LayerParameter& param, int num,
                         double lo = -1.5, double hi = 1.5) {
  vector<std::unique_ptr<Blob<Dtype>>> blobs;
  vector<Blob<Dtype>*> bottoms;
  for (int k = 0; k < num; ++k) {
    blobs.emplace_back(new Blob<Dtype>(vector<int>{2, 3, 4, 5}));
    test::FillUniform(blobs.back().get(), lo, hi);
    bottoms.push_back(blobs.back().get());
  }
  test::ExpectCpuGpuAgree<Dtype>(param, bottoms);
}

TYPED_TEST(EltwiseLayerGPUTest, SumAgreesWithCpu) {
  ExpectEltwiseAgrees<TypeParam>(EltwiseParam(EltwiseParameter::SUM), 2);
}

TYPED_TEST(EltwiseLayerGPUTest, SumWithCoefficientsAgreesWithCpu) {
  LayerParameter param = EltwiseParam(EltwiseParameter::SUM);
  for (float c : {0.5f, -1.5f, 2.0f}) {
    param.mutable_eltwise_param()->add_coeff(c);
  }
  ExpectEltwiseAgrees<TypeParam>(param, 3);
}

TYPED_TEST(EltwiseLayerGPUTest, ProdAgreesWithCpu) {
  ExpectEltwiseAgrees<TypeParam>(EltwiseParam(EltwiseParameter::PROD), 3);
}

TYPED_TEST(EltwiseLayerGPUTest, ProdQuotientGradientAgreesWithCpu) {
  LayerParameter param = EltwiseParam(EltwiseParameter::PROD);
  param.mutable_eltwise_param()->set_stable_prod_grad(false);
  ExpectEltwiseAgrees<TypeParam>(param, 3, 0.5, 1.5);
}

TYPED_TEST(EltwiseLayerGPUTest, MaxAgreesWithCpu) {
  ExpectEltwiseAgrees<TypeParam>(EltwiseParam(EltwiseParameter::MAX), 3);
}

TYPED_TEST(EltwiseLayerGPUTest, ManyBottomSumAgreesWithCpu) {
  ExpectEltwiseAgrees<TypeParam>(EltwiseParam(EltwiseParameter::SUM),
                                 kernels::kEltwiseMaxInputs + 4);
}

TYPED_TEST(EltwiseLayerGPUTest, ManyBottomProdAgreesWithCpu) {
  ExpectEltwiseAgrees<TypeParam>(EltwiseParam(EltwiseParameter::PROD),
                                 kernels::kEltwiseMaxInputs + 4, 0.7, 1.4);
}

TYPED_TEST(EltwiseLayerGPUTest, ManyBottomMaxAgreesWithCpu) {
  ExpectEltwiseAgrees<TypeParam>(EltwiseParam(EltwiseParameter::MAX),
                                 kernels::kEltwiseMaxInputs + 4);
}

}  // namespace
}  // namespace poseidon
