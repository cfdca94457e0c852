// LRNLayer: both norm regions against a direct evaluation of the formula,
// a hand-computed case, gradients, and the error paths; when cuDNN is used;
// CPU/GPU agreement for both GPU engines (the tuned CPU path against the
// portable body: test_layer_bodies.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpu_agreement.hpp"
#include "gradient_checker.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/lrn_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

LayerParameter LRNParam(int size, double alpha, double beta, double k,
                        bool within = false) {
  LayerParameter param;
  param.set_type("LRN");
  LRNParameter* p = param.mutable_lrn_param();
  p->set_local_size(size);
  p->set_alpha(alpha);
  p->set_beta(beta);
  p->set_k(k);
  if (within) p->set_norm_region(LRNParameter::WITHIN_CHANNEL);
  return param;
}

// The formula evaluated element by element.
template <typename Dtype>
double NaiveLRN(const Blob<Dtype>& x, int n, int c, int h, int w, int size,
                double alpha, double beta, double k, bool within) {
  const int half = (size - 1) / 2;
  double sum = 0;
  if (within) {
    for (int u = h - half; u <= h + half; ++u) {
      for (int v = w - half; v <= w + half; ++v) {
        if (u < 0 || u >= x.height() || v < 0 || v >= x.width()) continue;
        sum += std::pow(double(x.data_at(n, c, u, v)), 2);
      }
    }
    const double scale = 1 + alpha / (size * size) * sum;
    return x.data_at(n, c, h, w) * std::pow(scale, -beta);
  }
  for (int d = std::max(c - half, 0); d <= std::min(c + half, x.channels() - 1);
       ++d) {
    sum += std::pow(double(x.data_at(n, d, h, w)), 2);
  }
  const double scale = k + alpha / size * sum;
  return x.data_at(n, c, h, w) * std::pow(scale, -beta);
}

template <typename TypeParam>
class LRNLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  void CheckForward(int size, double alpha, double beta, double k,
                    bool within) {
    Blob<Dtype> bottom(2, 7, 3, 4), top;
    test::FillGaussian(&bottom);
    LRNLayer<Dtype> layer(LRNParam(size, alpha, beta, k, within));
    layer.SetUp({&bottom}, {&top});
    layer.Forward({&bottom}, {&top});
    ASSERT_EQ(top.shape(), bottom.shape());
    for (int n = 0; n < 2; ++n) {
      for (int c = 0; c < 7; ++c) {
        for (int h = 0; h < 3; ++h) {
          for (int w = 0; w < 4; ++w) {
            EXPECT_NEAR(
                top.data_at(n, c, h, w),
                NaiveLRN(bottom, n, c, h, w, size, alpha, beta, k, within),
                1e-5)
                << (within ? "WITHIN" : "ACROSS") << " size " << size << " at "
                << n << "," << c << "," << h << "," << w;
          }
        }
      }
    }
  }
};

TYPED_TEST_SUITE(LRNLayerTest, test::TestDtypesAndDevices, test::DeviceNames);

TYPED_TEST(LRNLayerTest, HandComputedAcross) {
  using Dtype = typename TypeParam::Dtype;
  // x = [1, 2, 3] over channels, size 3, alpha 3, beta 1, k 1:
  // scale = 1 + (1 + 4), 1 + (1 + 4 + 9), 1 + (4 + 9) = 6, 15, 14.
  Blob<Dtype> bottom(1, 3, 1, 1), top;
  for (int i = 0; i < 3; ++i) bottom.mutable_cpu_data()[i] = i + 1;
  LRNLayer<Dtype> layer(LRNParam(3, 3, 1, 1));
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  EXPECT_NEAR(top.cpu_data()[0], 1 / 6.0, 1e-6);
  EXPECT_NEAR(top.cpu_data()[1], 2 / 15.0, 1e-6);
  EXPECT_NEAR(top.cpu_data()[2], 3 / 14.0, 1e-6);
}

TYPED_TEST(LRNLayerTest, ForwardAcrossChannels) {
  this->CheckForward(5, 1e-4, 0.75, 1, false);  // AlexNet's settings
  this->CheckForward(3, 0.5, 0.6, 2, false);
  this->CheckForward(9, 2, 0.75, 1, false);  // window wider than C
}

TYPED_TEST(LRNLayerTest, ForwardWithinChannel) {
  this->CheckForward(3, 5e-5, 0.75, 1, true);  // CIFAR-10 full's settings
  this->CheckForward(3, 2, 0.6, 1, true);
  this->CheckForward(5, 1.5, 0.75, 1, true);  // window wider than the plane
}

TYPED_TEST(LRNLayerTest, WithinChannelIgnoresKLikeCaffe) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(1, 2, 3, 3), top1, top2;
  test::FillGaussian(&bottom);
  LRNLayer<Dtype> one(LRNParam(3, 2, 0.75, 1, true));
  LRNLayer<Dtype> two(LRNParam(3, 2, 0.75, 2, true));
  one.SetUp({&bottom}, {&top1});
  two.SetUp({&bottom}, {&top2});
  one.Forward({&bottom}, {&top1});
  two.Forward({&bottom}, {&top2});
  for (int i = 0; i < top1.count(); ++i) {
    EXPECT_EQ(top1.cpu_data()[i], top2.cpu_data()[i]);
  }
}

TYPED_TEST(LRNLayerTest, RegisteredInFactory) {
  using Dtype = typename TypeParam::Dtype;
  auto layer = LayerRegistry<Dtype>::CreateLayer(LRNParam(5, 1, 0.75, 1));
  EXPECT_STREQ(layer->type(), "LRN");
}

TYPED_TEST(LRNLayerTest, GradientAcrossChannels) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 7, 3, 3), top;
  test::FillGaussian(&bottom);
  LRNLayer<Dtype> layer(LRNParam(5, 1, 0.75, 2));
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(LRNLayerTest, GradientAcrossChannelsLargeRegion) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 4, 3, 3), top;
  test::FillGaussian(&bottom);
  LRNLayer<Dtype> layer(LRNParam(15, 1, 0.75, 1));
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(LRNLayerTest, GradientWithinChannel) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 5, 4), top;
  test::FillGaussian(&bottom);
  LRNLayer<Dtype> layer(LRNParam(3, 2, 0.75, 1, true));
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(LRNLayerTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 4, 4), top;
  {
    LRNLayer<Dtype> layer(LRNParam(4, 1, 0.75, 1));
    EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ConfigError) << "even size";
  }
  {
    LRNLayer<Dtype> layer(LRNParam(0, 1, 0.75, 1));
    EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ConfigError) << "size 0";
  }
  {
    Blob<Dtype> flat({2, 3});
    LRNLayer<Dtype> layer(LRNParam(3, 1, 0.75, 1));
    EXPECT_THROW(layer.SetUp({&flat}, {&top}), ShapeError) << "2-D bottom";
  }
  {
    LRNLayer<Dtype> layer(LRNParam(3, 1, 0.75, 1));
    EXPECT_THROW(layer.SetUp({&bottom}, {&bottom}), ConfigError) << "in place";
  }
}

TEST(LRNCudnnTest, SupportsOnlyWhatCudnnComputes) {
  auto supports = [](const LayerParameter& p, std::string* why) {
    return LRNLayer<float>::CudnnSupports(p.lrn_param(), why);
  };
  std::string why;
  EXPECT_TRUE(supports(LRNParam(5, 1e-4, 0.75, 1), &why)) << why;
  EXPECT_TRUE(supports(LRNParam(1, 1, 0.75, 1), &why)) << why;
  EXPECT_TRUE(supports(LRNParam(15, 1, 0.75, 2e-5), &why)) << why;
  EXPECT_FALSE(supports(LRNParam(17, 1, 0.75, 1), &why));
  EXPECT_NE(why.find("local_size"), std::string::npos) << why;
  EXPECT_FALSE(supports(LRNParam(5, 1, 0.75, 0), &why));
  EXPECT_NE(why.find("k >="), std::string::npos) << why;
  EXPECT_FALSE(supports(LRNParam(5, 1, 0.001, 1), &why));
  EXPECT_NE(why.find("beta"), std::string::npos) << why;
  EXPECT_FALSE(supports(LRNParam(3, 1, 0.75, 1, true), &why));
  EXPECT_NE(why.find("WITHIN_CHANNEL"), std::string::npos) << why;
}

template <typename Dtype>
class LRNLayerGPUTest : public ::testing::Test {};
TYPED_TEST_SUITE(LRNLayerGPUTest, test::TestDtypes);

TYPED_TEST(LRNLayerGPUTest, AgreesWithCpuForEachEngine) {
  using Dtype = TypeParam;
  if (!test::GpuSkipReason().empty()) {
    GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
  }
  Blob<Dtype> x(2, 7, 5, 4);
  test::FillGaussian(&x);
  struct Case {
    int size;
    double alpha, beta, k;
    bool within;
  };
  // The last two are outside cuDNN's limits, so CUDNN falls back.
  const Case cases[] = {{5, 1e-4, 0.75, 1, false},
                        {3, 0.5, 0.6, 2, false},
                        {3, 2, 0.75, 1, true},
                        {17, 1, 0.75, 1, false},
                        {5, 1, 0.75, 0, false}};
  for (auto engine : {LRNParameter::CAFFE, LRNParameter::CUDNN}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(testing::Message()
                   << "engine " << engine << (c.within ? " WITHIN" : " ACROSS")
                   << " size " << c.size << " k " << c.k);
      LayerParameter param = LRNParam(c.size, c.alpha, c.beta, c.k, c.within);
      param.mutable_lrn_param()->set_engine(engine);
      test::ExpectCpuGpuAgree<Dtype>(param, {&x});
    }
  }
}

}  // namespace
}  // namespace poseidon
