// The GPU passes of Pooling, SPP and Im2col. On the CPU: the portable
// bodies the GPU runs (set_portable) against the tuned CPU path, bitwise (tops,
// masks and bottom diffs, on odd shapes, padding, empty windows, ties and
// NaN), STOCHASTIC against an independent reference with the same draws,
// and which pooling configurations may use cuDNN. With a GPU: CPU/GPU
// agreement for every method, with and without the mask top, global
// pooling, both engines, SPP and Im2col, and STOCHASTIC training on the GPU
// against its own draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gpu_agreement.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/im2col_layer.hpp"
#include "poseidon/layers/pooling_layer.hpp"
#include "poseidon/util/math_functions.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// A pooling geometry: kernel, stride and pad per axis (0 kernel: global).
struct Window {
  int kh, kw, sh, sw, ph, pw;
  bool ceil;
};

LayerParameter PoolParam(PoolingParameter::PoolMethod method, const Window& w,
                         PoolingParameter::Engine engine =
                             PoolingParameter::DEFAULT) {
  LayerParameter param;
  param.set_type("Pooling");
  param.set_name("pool");
  param.add_bottom("in");
  param.add_top("out");
  PoolingParameter* p = param.mutable_pooling_param();
  p->set_pool(method);
  p->set_engine(engine);
  if (w.kh == 0) {
    p->set_global_pooling(true);
  } else {
    p->set_kernel_h(w.kh);
    p->set_kernel_w(w.kw);
    p->set_stride_h(w.sh);
    p->set_stride_w(w.sw);
    p->set_pad_h(w.ph);
    p->set_pad_w(w.pw);
  }
  if (!w.ceil) p->set_round_mode(PoolingParameter::FLOOR);
  return param;
}

std::string Describe(const Window& w) {
  return "kernel " + std::to_string(w.kh) + "x" + std::to_string(w.kw) +
         " stride " + std::to_string(w.sh) + "x" + std::to_string(w.sw) +
         " pad " + std::to_string(w.ph) + "x" + std::to_string(w.pw) +
         (w.ceil ? " CEIL" : " FLOOR");
}

const Window kWindows[] = {
    {3, 3, 2, 2, 0, 0, true},   // AlexNet
    {2, 2, 2, 2, 0, 0, true},   // LeNet
    {3, 3, 1, 1, 1, 1, true},   // padded, stride 1
    {3, 2, 2, 1, 1, 1, true},   // rectangular, padded
    {2, 3, 3, 2, 1, 0, false},  // stride > kernel, FLOOR
    {2, 1, 3, 4, 0, 0, true},   // stride > kernel: empty windows
    {4, 3, 3, 2, 2, 1, false},
    {5, 5, 1, 1, 2, 2, true},
    {3, 3, 2, 2, 1, 1, true},   // padded window past the padded input
    {0, 0, 1, 1, 0, 0, true},   // global
};

template <typename Dtype>
bool SameBits(Dtype a, Dtype b) {
  return std::isnan(a) ? std::isnan(b) : a == b;
}

template <typename Dtype>
class PoolingPortableTest : public ::testing::Test {
 protected:
  // Forward (with a mask top for MAX when `mask`) and backward on the
  // tuned CPU path and on the portable body (the kernels); expects
  // identical bits.
  void Check(PoolingParameter::PoolMethod method, const Window& w, bool mask,
             Blob<Dtype>* bottom) {
    SCOPED_TRACE(std::string(method == PoolingParameter::MAX ? "MAX" : "AVE") +
                 (mask ? " with mask" : "") + " bottom " +
                 bottom->shape_string() + " " + Describe(w));
    vector<vector<Dtype>> results[2];
    for (int run = 0; run < 2; ++run) {
      PoolingLayer<Dtype> layer(PoolParam(method, w));
      layer.set_portable(run == 1);
      Blob<Dtype> top, mask_top;
      vector<Blob<Dtype>*> tops{&top};
      if (mask) tops.push_back(&mask_top);
      layer.SetUp({bottom}, tops);
      layer.Forward({bottom}, tops);
      for (int i = 0; i < top.count(); ++i) {
        top.mutable_cpu_diff()[i] = Dtype(0.25) * (i % 7) - Dtype(0.5);
      }
      cpu_set(bottom->count(), Dtype(3), bottom->mutable_cpu_diff());
      layer.Backward(tops, {true}, {bottom});
      results[run] = {
          vector<Dtype>(top.cpu_data(), top.cpu_data() + top.count()),
          vector<Dtype>(bottom->cpu_diff(),
                        bottom->cpu_diff() + bottom->count())};
      if (mask) {
        results[run].emplace_back(mask_top.cpu_data(),
                                  mask_top.cpu_data() + mask_top.count());
      }
    }
    const char* names[] = {"top", "bottom diff", "mask"};
    for (size_t k = 0; k < results[0].size(); ++k) {
      ASSERT_EQ(results[0][k].size(), results[1][k].size());
      for (size_t i = 0; i < results[0][k].size(); ++i) {
        ASSERT_TRUE(SameBits(results[0][k][i], results[1][k][i]))
            << names[k] << "[" << i << "]: CPU pass " << results[0][k][i]
            << ", kernels " << results[1][k][i];
      }
    }
  }
};
TYPED_TEST_SUITE(PoolingPortableTest, test::TestDtypes);

TYPED_TEST(PoolingPortableTest, MaxAndAveMatchTheCpuPassBitwise) {
  using Dtype = TypeParam;
  const vector<int> shapes[] = {
      {2, 3, 7, 6}, {1, 2, 13, 17}, {3, 2, 5, 24}, {1, 1, 1, 8}};
  for (const vector<int>& shape : shapes) {
    Blob<Dtype> bottom(shape);
    test::FillGaussian(&bottom);
    for (const Window& w : kWindows) {
      if (w.kh > shape[2] + 2 * w.ph) continue;  // no window fits
      this->Check(PoolingParameter::MAX, w, false, &bottom);
      this->Check(PoolingParameter::MAX, w, true, &bottom);
      this->Check(PoolingParameter::AVE, w, false, &bottom);
    }
  }
}

TYPED_TEST(PoolingPortableTest, MaxTiesAndNaNPickWhatTheCpuPicks) {
  using Dtype = TypeParam;
  // After a ReLU most windows tie at 0: the first maximum in scan order
  // wins. NaN: kept when first in a window, else losing.
  Blob<Dtype> bottom(2, 2, 9, 20);
  test::FillGaussian(&bottom);
  Dtype* x = bottom.mutable_cpu_data();
  for (int i = 0; i < bottom.count(); ++i) {
    if (x[i] < Dtype(0.3)) x[i] = 0;
    if (i % 37 == 5) x[i] = std::numeric_limits<Dtype>::quiet_NaN();
  }
  for (const Window& w : {Window{3, 3, 2, 2, 0, 0, true},
                          Window{2, 2, 1, 1, 1, 1, true},
                          Window{3, 3, 1, 1, 1, 1, true}}) {
    for (bool mask : {false, true}) {
      this->Check(PoolingParameter::MAX, w, mask, &bottom);
    }
  }
}

// STOCHASTIC (now the kernels on the CPU too) against loops written here,
// with the same uniform draws (the first numbers of the seeded generator).
TYPED_TEST(PoolingPortableTest, StochasticMatchesIndependentReference) {
  using Dtype = TypeParam;
  const Window w{3, 3, 2, 2, 0, 0, true};
  Blob<Dtype> bottom(2, 3, 7, 6), top;
  test::FillUniform(&bottom, 0.0, 1.0);
  bottom.mutable_cpu_data()[0] = 0;
  for (Phase phase : {TRAIN, TEST}) {
    LayerParameter param = PoolParam(PoolingParameter::STOCHASTIC, w);
    param.set_phase(phase);
    PoolingLayer<Dtype> layer(param);
    layer.SetUp({&bottom}, {&top});
    const int PH = top.height(), PW = top.width();
    Poseidon::set_random_seed(11);
    vector<Dtype> draws(top.count());
    rng_uniform<Dtype>(top.count(), Dtype(0), Dtype(1), draws.data());
    Poseidon::set_random_seed(11);
    layer.Forward({&bottom}, {&top});
    for (int i = 0; i < top.count(); ++i) {
      top.mutable_cpu_diff()[i] = Dtype(0.1) * (i % 5) + Dtype(0.3);
    }
    layer.Backward({&top}, {true}, {&bottom});
    vector<double> diff(bottom.count(), 0.0);
    for (int nc = 0; nc < 6; ++nc) {
      const Dtype* in = bottom.cpu_data() + nc * 42;
      for (int y = 0; y < PH; ++y) {
        for (int x = 0; x < PW; ++x) {
          const int t = (nc * PH + y) * PW + x;
          const int h1 = std::min(2 * y + 3, 7), w1 = std::min(2 * x + 3, 6);
          double s1 = 0, s2 = 0;
          for (int h = 2 * y; h < h1; ++h) {
            for (int v = 2 * x; v < w1; ++v) {
              s1 += in[h * 6 + v];
              s2 += double(in[h * 6 + v]) * in[h * 6 + v];
            }
          }
          const double g = top.cpu_diff()[t];
          if (phase == TEST) {
            EXPECT_NEAR(top.cpu_data()[t], s1 > 0 ? s2 / s1 : 0, 1e-5);
            for (int h = 2 * y; h < h1 && s1 > 0; ++h) {
              for (int v = 2 * x; v < w1; ++v) {
                diff[nc * 42 + h * 6 + v] +=
                    g * (2 * in[h * 6 + v] * s1 - s2) / (s1 * s1);
              }
            }
            continue;
          }
          // In Dtype and in window order, as documented, so that the
          // threshold comparisons come out the same.
          Dtype sum = 0, running = 0;
          for (int h = 2 * y; h < h1; ++h) {
            for (int v = 2 * x; v < w1; ++v) sum += in[h * 6 + v];
          }
          const Dtype threshold = draws[t] * sum;
          int pick = (h1 - 1) * 6 + (w1 - 1);
          bool found = false;
          for (int h = 2 * y; h < h1 && !found; ++h) {
            for (int v = 2 * x; v < w1; ++v) {
              running += in[h * 6 + v];
              if (running >= threshold) {
                pick = h * 6 + v;
                found = true;
                break;
              }
            }
          }
          EXPECT_EQ(top.cpu_data()[t], in[pick]) << "window " << t;
          diff[nc * 42 + pick] += g;
        }
      }
    }
    for (int i = 0; i < bottom.count(); ++i) {
      EXPECT_NEAR(bottom.cpu_diff()[i], diff[i], 1e-4)
          << (phase == TRAIN ? "TRAIN" : "TEST") << " diff " << i;
    }
  }
}

TEST(PoolingCudnnChoiceTest, OnlyWhereCudnnGivesCaffesResult) {
#ifdef USE_CUDNN
  const bool have = true;
#else
  const bool have = false;
#endif
  struct Case {
    PoolingParameter::PoolMethod method;
    Window w;
    PoolingParameter::Engine engine;
    bool mask;
    bool expected;
  };
  const auto MAX = PoolingParameter::MAX, AVE = PoolingParameter::AVE;
  const auto DEFAULT = PoolingParameter::DEFAULT;
  const auto CUDNN = PoolingParameter::CUDNN, CAFFE = PoolingParameter::CAFFE;
  // Bottom 8 x 8. (8 - 2) / 2 + 1 = 4 either way; (8 - 3) / 2 rounds.
  const Case cases[] = {
      {AVE, {2, 2, 2, 2, 0, 0, true}, DEFAULT, false, have},
      {AVE, {3, 3, 2, 2, 0, 0, true}, DEFAULT, false, false},  // ceil
      {AVE, {3, 3, 2, 2, 0, 0, false}, DEFAULT, false, have},  // floor
      {AVE, {3, 3, 1, 1, 1, 1, true}, DEFAULT, false, have},   // padded
      {AVE, {0, 0, 1, 1, 0, 0, true}, DEFAULT, false, have},   // global
      {AVE, {2, 2, 2, 2, 0, 0, true}, CAFFE, false, false},
      {MAX, {2, 2, 2, 2, 0, 0, true}, DEFAULT, false, false},  // ties
      {MAX, {2, 2, 2, 2, 0, 0, true}, CUDNN, false, have},
      {MAX, {2, 2, 2, 2, 0, 0, true}, CUDNN, true, false},  // mask top
      {MAX, {3, 3, 2, 2, 0, 0, true}, CUDNN, false, false},  // ceil
      {PoolingParameter::STOCHASTIC, {2, 2, 2, 2, 0, 0, true}, CUDNN, false,
       false},
  };
  for (const Case& c : cases) {
    PoolingLayer<float> layer(PoolParam(c.method, c.w, c.engine));
    Blob<float> bottom(2, 3, 8, 8), top, mask;
    vector<Blob<float>*> tops{&top};
    if (c.mask) tops.push_back(&mask);
    layer.SetUp({&bottom}, tops);
    EXPECT_EQ(layer.uses_cudnn(), c.expected)
        << "method " << c.method << " " << Describe(c.w) << " engine "
        << c.engine << (c.mask ? " with mask" : "");
    layer.set_portable(true);
    layer.Reshape({&bottom}, tops);
    EXPECT_FALSE(layer.uses_cudnn());
  }
}

template <typename Dtype>
class Im2colPortableTest : public ::testing::Test {};
TYPED_TEST_SUITE(Im2colPortableTest, test::TestDtypes);

LayerParameter Im2colParam(const vector<int>& kernel, const vector<int>& pad,
                           const vector<int>& stride,
                           const vector<int>& dilation, bool force_nd) {
  LayerParameter param;
  param.set_type("Im2col");
  param.set_name("im2col");
  param.add_bottom("in");
  param.add_top("out");
  ConvolutionParameter* p = param.mutable_convolution_param();
  for (int k : kernel) p->add_kernel_size(k);
  for (int v : pad) p->add_pad(v);
  for (int v : stride) p->add_stride(v);
  for (int v : dilation) p->add_dilation(v);
  p->set_force_nd_im2col(force_nd);
  return param;
}

struct Im2colCase {
  vector<int> shape, kernel, pad, stride, dilation;
  bool force_nd;
};

const Im2colCase kIm2colCases[] = {
    {{2, 3, 6, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false},
    {{3, 2, 7, 8}, {3, 2}, {1, 2}, {2, 3}, {2, 1}, false},
    {{3, 2, 7, 8}, {3, 2}, {1, 2}, {2, 3}, {2, 1}, true},
    {{2, 2, 4, 5, 3}, {3, 2, 2}, {1, 0, 1}, {1, 2, 1}, {1, 1, 2}, false},
    {{2, 3, 10}, {4}, {2}, {3}, {1}, false},
};

TYPED_TEST(Im2colPortableTest, KernelsMatchTheCpuPassBitwise) {
  using Dtype = TypeParam;
  for (const Im2colCase& c : kIm2colCases) {
    Blob<Dtype> bottom(c.shape);
    test::FillGaussian(&bottom);
    vector<vector<Dtype>> results[2];
    for (int run = 0; run < 2; ++run) {
      Im2colLayer<Dtype> layer(
          Im2colParam(c.kernel, c.pad, c.stride, c.dilation, c.force_nd));
      layer.set_portable(run == 1);
      Blob<Dtype> top;
      layer.SetUp({&bottom}, {&top});
      layer.Forward({&bottom}, {&top});
      for (int i = 0; i < top.count(); ++i) {
        top.mutable_cpu_diff()[i] = Dtype(0.5) * (i % 9) - Dtype(1);
      }
      layer.Backward({&top}, {true}, {&bottom});
      results[run] = {
          vector<Dtype>(top.cpu_data(), top.cpu_data() + top.count()),
          vector<Dtype>(bottom.cpu_diff(), bottom.cpu_diff() + bottom.count())};
    }
    EXPECT_EQ(results[0][0], results[1][0]) << "top of " << c.shape.size();
    EXPECT_EQ(results[0][1], results[1][1]) << "diff of " << c.shape.size();
  }
}

// CPU/GPU agreement. Pooling sums few terms; the GPU may contract
// multiply-adds (STOCHASTIC), hence slightly looser than the default.
template <typename Dtype>
class PoolingLayerGPUTest : public ::testing::Test {
 protected:
  static test::Tolerance Tol() {
    return sizeof(Dtype) == 4 ? test::Tolerance{1e-4, 1e-5}
                              : test::Tolerance{1e-10, 1e-12};
  }
};
TYPED_TEST_SUITE(PoolingLayerGPUTest, test::TestDtypes);

TYPED_TEST(PoolingLayerGPUTest, MaxWithAndWithoutMask) {
  using Dtype = TypeParam;
  Blob<Dtype> bottom(2, 3, 9, 8);
  test::FillGaussian(&bottom);
  for (const Window& w : kWindows) {
    SCOPED_TRACE(Describe(w));
    for (auto engine : {PoolingParameter::DEFAULT, PoolingParameter::CUDNN}) {
      LayerParameter param = PoolParam(PoolingParameter::MAX, w, engine);
      test::ExpectCpuGpuAgree<Dtype>(param, {&bottom}, {}, this->Tol());
      param.add_top("mask");
      test::ExpectCpuGpuAgree<Dtype>(param, {&bottom}, {}, this->Tol());
    }
  }
}

TYPED_TEST(PoolingLayerGPUTest, Ave) {
  using Dtype = TypeParam;
  Blob<Dtype> bottom(2, 3, 9, 8);
  test::FillGaussian(&bottom);
  for (const Window& w : kWindows) {
    SCOPED_TRACE(Describe(w));
    for (auto engine : {PoolingParameter::DEFAULT, PoolingParameter::CAFFE}) {
      test::ExpectCpuGpuAgree<Dtype>(
          PoolParam(PoolingParameter::AVE, w, engine), {&bottom}, {},
          this->Tol());
    }
  }
}

TYPED_TEST(PoolingLayerGPUTest, MaxTies) {
  using Dtype = TypeParam;
  Blob<Dtype> bottom(2, 2, 9, 20);
  test::FillGaussian(&bottom);
  Dtype* x = bottom.mutable_cpu_data();
  for (int i = 0; i < bottom.count(); ++i) x[i] = x[i] < 0.3 ? Dtype(0) : x[i];
  test::ExpectCpuGpuAgree<Dtype>(
      PoolParam(PoolingParameter::MAX, Window{3, 3, 2, 2, 0, 0, true}),
      {&bottom}, {}, this->Tol());
}

TYPED_TEST(PoolingLayerGPUTest, StochasticTestPhase) {
  using Dtype = TypeParam;
  Blob<Dtype> bottom(2, 3, 9, 8);
  test::FillUniform(&bottom, 0.0, 1.0);
  LayerParameter param =
      PoolParam(PoolingParameter::STOCHASTIC, Window{3, 3, 2, 2, 0, 0, true});
  param.set_phase(TEST);
  const test::Tolerance tol = sizeof(Dtype) == 4
                                  ? test::Tolerance{1e-4, 1e-5}
                                  : test::Tolerance{1e-9, 1e-11};
  test::ExpectCpuGpuAgree<Dtype>(param, {&bottom}, {}, tol);
}

// Training draws from cuRAND on the GPU, so it cannot agree with the CPU:
// every top must be an element of its window, and its gradient goes there.
TYPED_TEST(PoolingLayerGPUTest, StochasticTrainPicksFromTheWindow) {
  using Dtype = TypeParam;
  if (!test::GpuSkipReason().empty()) {
    GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
  }
  Blob<Dtype> bottom(2, 3, 9, 8), top;
  test::FillUniform(&bottom, 0.1, 1.0);
  LayerParameter param =
      PoolParam(PoolingParameter::STOCHASTIC, Window{3, 3, 2, 2, 0, 0, true});
  param.set_phase(TRAIN);
  Poseidon::set_mode(Poseidon::GPU);
  PoolingLayer<Dtype> layer(param);
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  math::set<Dtype>(Poseidon::GPU, top.count(), Dtype(1),
                   top.mutable_gpu_diff());
  layer.Backward({&top}, {true}, {&bottom});
  const int PH = top.height(), PW = top.width();
  double diff_sum = 0;
  for (int i = 0; i < bottom.count(); ++i) diff_sum += bottom.cpu_diff()[i];
  EXPECT_DOUBLE_EQ(diff_sum, top.count());
  for (int nc = 0; nc < 6; ++nc) {
    for (int y = 0; y < PH; ++y) {
      for (int x = 0; x < PW; ++x) {
        const Dtype v = top.cpu_data()[(nc * PH + y) * PW + x];
        bool found = false;
        for (int h = 2 * y; h < std::min(2 * y + 3, 9); ++h) {
          for (int w = 2 * x; w < std::min(2 * x + 3, 8); ++w) {
            found = found || bottom.cpu_data()[(nc * 9 + h) * 8 + w] == v;
          }
        }
        EXPECT_TRUE(found) << "top " << v << " at " << nc << "," << y << ","
                           << x;
      }
    }
  }
  Poseidon::set_mode(Poseidon::CPU);
}

template <typename Dtype>
class SPPLayerGPUTest : public PoolingLayerGPUTest<Dtype> {};
TYPED_TEST_SUITE(SPPLayerGPUTest, test::TestDtypes);

TYPED_TEST(SPPLayerGPUTest, MaxAndAveLevels) {
  using Dtype = TypeParam;
  Blob<Dtype> bottom(2, 3, 9, 7);
  test::FillGaussian(&bottom);
  for (auto pool : {SPPParameter::MAX, SPPParameter::AVE}) {
    for (int height : {1, 3}) {
      LayerParameter param;
      param.set_type("SPP");
      param.set_name("spp");
      param.add_bottom("in");
      param.add_top("out");
      param.mutable_spp_param()->set_pyramid_height(height);
      param.mutable_spp_param()->set_pool(pool);
      test::ExpectCpuGpuAgree<Dtype>(param, {&bottom}, {}, this->Tol());
    }
  }
}

template <typename Dtype>
class Im2colLayerGPUTest : public PoolingLayerGPUTest<Dtype> {};
TYPED_TEST_SUITE(Im2colLayerGPUTest, test::TestDtypes);

TYPED_TEST(Im2colLayerGPUTest, TwoDNdAndForceNd) {
  using Dtype = TypeParam;
  for (const Im2colCase& c : kIm2colCases) {
    Blob<Dtype> bottom(c.shape);
    test::FillGaussian(&bottom);
    test::ExpectCpuGpuAgree<Dtype>(
        Im2colParam(c.kernel, c.pad, c.stride, c.dilation, c.force_nd),
        {&bottom}, {}, this->Tol());
  }
}

}  // namespace
}  // namespace poseidon
