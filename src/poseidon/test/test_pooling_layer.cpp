// PoolingLayer: hand-computed windows, Caffe's output-size rules, a naive
// reference for random inputs, the mask top, stochastic pooling, gradients,
// the tuned CPU path against the portable body (bitwise, on odd shapes,
// ties, NaN, empty windows, several threads) and the error paths.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/pooling_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

LayerParameter PoolParam(PoolingParameter::PoolMethod method, int kernel,
                         int stride = 1, int pad = 0) {
  LayerParameter param;
  param.set_type("Pooling");
  PoolingParameter* p = param.mutable_pooling_param();
  p->set_pool(method);
  p->set_kernel_size(kernel);
  p->set_stride(stride);
  p->set_pad(pad);
  return param;
}

// Pooled size of one axis: the documented rule, written out independently.
int ExpectedPooled(int size, int kernel, int pad, int stride, bool ceil) {
  const int span = size + 2 * pad - kernel;
  int out = (ceil ? (span + stride - 1) / stride : span / stride) + 1;
  if (pad > 0 && (out - 1) * stride >= size + pad) --out;
  return out;
}

template <typename TypeParam>
class PoolingLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  // The 4 x 4 plane used by the hand-computed cases.
  void FillKnown(Blob<Dtype>* blob) {
    const Dtype v[] = {1, 2, 3, 16, 5, 9, 7, 6, 4, 10, 11, 8, 13, 12, 15, 14};
    blob->Reshape(1, 1, 4, 4);
    std::copy(v, v + 16, blob->mutable_cpu_data());
  }

  // Compares MAX or AVE against loops over the windows written here.
  void CheckAgainstNaive(PoolingParameter::PoolMethod method, int kh, int kw,
                         int sh, int sw, int ph, int pw, bool ceil) {
    Blob<Dtype> bottom(2, 3, 7, 6), top;
    test::FillGaussian(&bottom);
    LayerParameter param;
    PoolingParameter* p = param.mutable_pooling_param();
    p->set_pool(method);
    p->set_kernel_h(kh);
    p->set_kernel_w(kw);
    p->set_stride_h(sh);
    p->set_stride_w(sw);
    p->set_pad_h(ph);
    p->set_pad_w(pw);
    if (!ceil) p->set_round_mode(PoolingParameter::FLOOR);
    PoolingLayer<Dtype> layer(param);
    layer.SetUp({&bottom}, {&top});
    const int H = 7, W = 6;
    const int PH = ExpectedPooled(H, kh, ph, sh, ceil);
    const int PW = ExpectedPooled(W, kw, pw, sw, ceil);
    ASSERT_EQ(top.shape(), (vector<int>{2, 3, PH, PW}));
    layer.Forward({&bottom}, {&top});
    for (int n = 0; n < 2; ++n) {
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < PH; ++y) {
          for (int x = 0; x < PW; ++x) {
            double best = -1e300, sum = 0;
            int padded_area = 0;
            for (int i = 0; i < kh; ++i) {
              for (int j = 0; j < kw; ++j) {
                const int h = y * sh - ph + i, w = x * sw - pw + j;
                if (h < H + ph && w < W + pw) ++padded_area;
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                best = std::max(best, double(bottom.data_at(n, c, h, w)));
                sum += bottom.data_at(n, c, h, w);
              }
            }
            const double expected =
                method == PoolingParameter::MAX ? best : sum / padded_area;
            EXPECT_NEAR(top.data_at(n, c, y, x), expected, 1e-5)
                << "at " << n << "," << c << "," << y << "," << x;
          }
        }
      }
    }
  }
};

// Sets Poseidon::num_threads() for a scope and restores it after.
using test::ScopedNumThreads;

// A pooling geometry: kernel, stride and pad per axis (0 kernel: global).
struct Window {
  int kh, kw, sh, sw, ph, pw;
  bool ceil;
};

LayerParameter WindowParam(PoolingParameter::PoolMethod method,
                           const Window& w) {
  LayerParameter param;
  PoolingParameter* p = param.mutable_pooling_param();
  p->set_pool(method);
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

// Runs forward (with a mask top for MAX) and backward on the portable body
// and on the tuned path (on 1 and 2 threads); expects identical bits in
// top, mask and bottom diff.
template <typename Dtype>
void CheckTunedMatchesPortable(PoolingParameter::PoolMethod method,
                               const Window& w, Blob<Dtype>* bottom) {
  const bool max = method == PoolingParameter::MAX;
  SCOPED_TRACE(std::string(max ? "MAX" : "AVE") + " bottom " +
               bottom->shape_string() + " kernel " + std::to_string(w.kh) +
               "x" + std::to_string(w.kw) + " stride " + std::to_string(w.sh) +
               "x" + std::to_string(w.sw) + " pad " + std::to_string(w.ph) +
               "x" + std::to_string(w.pw) + (w.ceil ? " CEIL" : " FLOOR"));
  vector<vector<Dtype>> results[3];
  for (int run = 0; run < 3; ++run) {
    ScopedNumThreads threads(run == 2 ? 2 : 1);
    PoolingLayer<Dtype> layer(WindowParam(method, w));
    layer.set_portable(run == 0);
    Blob<Dtype> top, mask;
    vector<Blob<Dtype>*> tops{&top};
    if (max) tops.push_back(&mask);
    layer.SetUp({bottom}, tops);
    layer.Forward({bottom}, tops);
    for (int i = 0; i < top.count(); ++i) {
      // Values whose sums round, so that the order of the adds shows.
      top.mutable_cpu_diff()[i] =
          Dtype(0.3) * (i % 7) - Dtype(0.7) + Dtype(0.0137) * (i % 11);
    }
    layer.Backward(tops, {true}, {bottom});
    results[run] = {vector<Dtype>(top.cpu_data(), top.cpu_data() + top.count()),
                    vector<Dtype>(bottom->cpu_diff(),
                                  bottom->cpu_diff() + bottom->count())};
    if (max) {
      results[run].emplace_back(mask.cpu_data(),
                                mask.cpu_data() + mask.count());
    }
  }
  const char* names[] = {"top", "bottom diff", "mask"};
  for (int run = 1; run < 3; ++run) {
    for (size_t k = 0; k < results[0].size(); ++k) {
      ASSERT_EQ(results[0][k].size(), results[run][k].size());
      for (size_t i = 0; i < results[0][k].size(); ++i) {
        const Dtype want = results[0][k][i], got = results[run][k][i];
        // Bitwise: NaN where the portable body has NaN, else the same value.
        ASSERT_TRUE(std::isnan(want) ? std::isnan(got) : want == got)
            << names[k] << "[" << i << "]: portable " << want << ", tuned "
            << got << (run == 2 ? " (2 threads)" : "");
      }
    }
  }
}

TYPED_TEST_SUITE(PoolingLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(PoolingLayerTest, MaxHandComputedWithMask) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom, top, mask;
  this->FillKnown(&bottom);
  PoolingLayer<Dtype> layer(PoolParam(PoolingParameter::MAX, 3));
  layer.SetUp({&bottom}, {&top, &mask});
  layer.Forward({&bottom}, {&top, &mask});
  ASSERT_EQ(top.shape(), (vector<int>{1, 1, 2, 2}));
  ASSERT_EQ(mask.shape(), top.shape());
  const Dtype expected[] = {11, 16, 15, 15};
  const Dtype expected_mask[] = {10, 3, 14, 14};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(top.cpu_data()[i], expected[i]) << i;
    EXPECT_EQ(mask.cpu_data()[i], expected_mask[i]) << i;
  }
  // Backward routes each diff to its maximum; 15 collects two.
  for (int i = 0; i < 4; ++i) top.mutable_cpu_diff()[i] = i + 1;
  layer.Backward({&top, &mask}, {true}, {&bottom});
  for (int i = 0; i < 16; ++i) {
    const Dtype want = i == 10 ? 1 : i == 3 ? 2 : i == 14 ? 7 : 0;
    EXPECT_EQ(bottom.cpu_diff()[i], want) << i;
  }
}

TYPED_TEST(PoolingLayerTest, AveHandComputed) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom, top;
  this->FillKnown(&bottom);
  PoolingLayer<Dtype> layer(PoolParam(PoolingParameter::AVE, 3));
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  const double expected[] = {52 / 9.0, 8, 86 / 9.0, 92 / 9.0};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(top.cpu_data()[i], expected[i], 1e-5);

  // Padding counts toward the divisor up to the padded border only: all-ones
  // 4x4, kernel 3, stride 2, pad 1 gives 3x3 windows of areas 9, 9, 6 /
  // 9, 9, 6 / 6, 6, 4.
  Blob<Dtype> ones(1, 1, 4, 4);
  cpu_set(16, Dtype(1), ones.mutable_cpu_data());
  PoolingLayer<Dtype> padded(PoolParam(PoolingParameter::AVE, 3, 2, 1));
  padded.SetUp({&ones}, {&top});
  padded.Forward({&ones}, {&top});
  ASSERT_EQ(top.shape(), (vector<int>{1, 1, 3, 3}));
  const double want[] = {4 / 9.0, 6 / 9.0, 2 / 6.0, 6 / 9.0, 9 / 9.0,
                         3 / 6.0, 2 / 6.0, 3 / 6.0, 1 / 4.0};
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(top.cpu_data()[i], want[i], 1e-6);
}

TYPED_TEST(PoolingLayerTest, OutputShapeRounding) {
  using Dtype = typename TypeParam::Dtype;
  struct Case {
    int size, kernel, stride, pad;
    bool ceil;
    int expected;
  };
  const Case cases[] = {
      {6, 3, 2, 0, true, 3},    // ceil(1.5) + 1
      {6, 3, 2, 0, false, 2},   // floor(1.5) + 1
      {32, 3, 2, 0, true, 16},  // CIFAR-10 quick
      {32, 3, 2, 0, false, 15},
      {55, 3, 2, 0, true, 27},  // AlexNet
      {13, 3, 2, 0, true, 6},
      {5, 2, 2, 1, true, 3},  // ceil gives 4; the last window would start
                              // in the right padding, so 3
      {5, 2, 2, 1, false, 3},
      {4, 3, 2, 1, true, 3},  // last window starts inside: kept
      {7, 2, 3, 1, true, 3},  // ceil(7/3) + 1 = 4; (4-1)*3 = 9 >= 8: 3
      {2, 3, 2, 0, true, 1},  // kernel larger than the image, one window
  };
  for (const Case& c : cases) {
    Blob<Dtype> bottom(1, 2, c.size, c.size), top;
    LayerParameter param =
        PoolParam(PoolingParameter::MAX, c.kernel, c.stride, c.pad);
    if (!c.ceil) {
      param.mutable_pooling_param()->set_round_mode(PoolingParameter::FLOOR);
    }
    PoolingLayer<Dtype> layer(param);
    layer.SetUp({&bottom}, {&top});
    EXPECT_EQ(top.shape(2), c.expected)
        << "size " << c.size << " kernel " << c.kernel << " stride " << c.stride
        << " pad " << c.pad << (c.ceil ? " CEIL" : " FLOOR");
    EXPECT_EQ(top.shape(3), c.expected);
    EXPECT_EQ(ExpectedPooled(c.size, c.kernel, c.pad, c.stride, c.ceil),
              c.expected);
  }
}

TYPED_TEST(PoolingLayerTest, MaxMatchesNaive) {
  this->CheckAgainstNaive(PoolingParameter::MAX, 3, 3, 2, 2, 0, 0, true);
  this->CheckAgainstNaive(PoolingParameter::MAX, 3, 2, 2, 1, 1, 1, true);
  this->CheckAgainstNaive(PoolingParameter::MAX, 2, 3, 3, 2, 1, 0, false);
}

TYPED_TEST(PoolingLayerTest, AveMatchesNaive) {
  this->CheckAgainstNaive(PoolingParameter::AVE, 3, 3, 2, 2, 0, 0, true);
  this->CheckAgainstNaive(PoolingParameter::AVE, 3, 2, 2, 1, 1, 1, true);
  this->CheckAgainstNaive(PoolingParameter::AVE, 4, 3, 3, 2, 2, 1, false);
}

TYPED_TEST(PoolingLayerTest, GlobalPooling) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 4, 5), top;
  test::FillGaussian(&bottom);
  for (auto method : {PoolingParameter::MAX, PoolingParameter::AVE}) {
    LayerParameter param;
    param.mutable_pooling_param()->set_pool(method);
    param.mutable_pooling_param()->set_global_pooling(true);
    PoolingLayer<Dtype> layer(param);
    layer.SetUp({&bottom}, {&top});
    layer.Forward({&bottom}, {&top});
    ASSERT_EQ(top.shape(), (vector<int>{2, 3, 1, 1}));
    for (int nc = 0; nc < 6; ++nc) {
      const Dtype* plane = bottom.cpu_data() + nc * 20;
      double want = 0;
      if (method == PoolingParameter::MAX) {
        want = *std::max_element(plane, plane + 20);
      } else {
        for (int i = 0; i < 20; ++i) want += plane[i] / 20.0;
      }
      EXPECT_NEAR(top.cpu_data()[nc], want, 1e-5);
    }
  }
}

TYPED_TEST(PoolingLayerTest, StochasticTrainPicksByValue) {
  using Dtype = typename TypeParam::Dtype;
  // 2000 windows of [1, 3]: 3 should be drawn about 3/4 of the time.
  Blob<Dtype> bottom(1, 2000, 1, 2), top;
  for (int i = 0; i < 2000; ++i) {
    bottom.mutable_cpu_data()[2 * i] = 1;
    bottom.mutable_cpu_data()[2 * i + 1] = 3;
  }
  LayerParameter param = PoolParam(PoolingParameter::STOCHASTIC, 1);
  param.mutable_pooling_param()->clear_kernel_size();
  param.mutable_pooling_param()->set_kernel_h(1);
  param.mutable_pooling_param()->set_kernel_w(2);
  param.set_phase(TRAIN);
  PoolingLayer<Dtype> layer(param);
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  int threes = 0;
  for (int i = 0; i < 2000; ++i) {
    const Dtype v = top.cpu_data()[i];
    ASSERT_TRUE(v == 1 || v == 3) << v;
    threes += v == 3;
  }
  EXPECT_NEAR(threes / 2000.0, 0.75, 0.04);
}

TYPED_TEST(PoolingLayerTest, StochasticTestIsWeightedAverage) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 2, 5, 6), top;
  test::FillUniform(&bottom, 0.1, 1.0);
  bottom.mutable_cpu_data()[0] = 0;
  LayerParameter param = PoolParam(PoolingParameter::STOCHASTIC, 3, 2);
  param.set_phase(TEST);
  PoolingLayer<Dtype> layer(param);
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  ASSERT_EQ(top.shape(), (vector<int>{2, 2, 2, 3}));
  for (int n = 0; n < 2; ++n) {
    for (int c = 0; c < 2; ++c) {
      for (int y = 0; y < 2; ++y) {
        for (int x = 0; x < 3; ++x) {
          double s1 = 0, s2 = 0;
          for (int h = 2 * y; h < std::min(2 * y + 3, 5); ++h) {
            for (int w = 2 * x; w < std::min(2 * x + 3, 6); ++w) {
              s1 += bottom.data_at(n, c, h, w);
              s2 += bottom.data_at(n, c, h, w) * bottom.data_at(n, c, h, w);
            }
          }
          EXPECT_NEAR(top.data_at(n, c, y, x), s2 / s1, 1e-5);
        }
      }
    }
  }
}

TYPED_TEST(PoolingLayerTest, RegisteredInFactory) {
  using Dtype = typename TypeParam::Dtype;
  auto layer =
      LayerRegistry<Dtype>::CreateLayer(PoolParam(PoolingParameter::MAX, 2));
  EXPECT_STREQ(layer->type(), "Pooling");
}

TYPED_TEST(PoolingLayerTest, GradientMax) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 6, 5), top;
  test::FillGaussian(&bottom);
  PoolingLayer<Dtype> layer(PoolParam(PoolingParameter::MAX, 3, 2, 1));
  test::GradientChecker<Dtype> checker(1e-4, 1e-2);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(PoolingLayerTest, GradientMaxWithMaskTop) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 6, 5), top, mask;
  test::FillGaussian(&bottom);
  PoolingLayer<Dtype> layer(PoolParam(PoolingParameter::MAX, 2, 2));
  layer.SetUp({&bottom}, {&top, &mask});
  // Only the first top carries a gradient; check through a one-top view.
  test::GradientChecker<Dtype> checker(1e-4, 1e-2);
  PoolingLayer<Dtype> plain(PoolParam(PoolingParameter::MAX, 2, 2));
  checker.CheckGradient(&plain, {&bottom}, {&top});
  // The mask path gives the same bottom diff as the internal indices.
  layer.Forward({&bottom}, {&top, &mask});
  test::FillGaussian(&top);
  cpu_copy(top.count(), top.cpu_data(), top.mutable_cpu_diff());
  layer.Forward({&bottom}, {&top, &mask});
  layer.Backward({&top, &mask}, {true}, {&bottom});
  vector<Dtype> with_mask(bottom.cpu_diff(),
                          bottom.cpu_diff() + bottom.count());
  plain.Forward({&bottom}, {&top});
  plain.Backward({&top}, {true}, {&bottom});
  for (int i = 0; i < bottom.count(); ++i) {
    EXPECT_EQ(with_mask[i], bottom.cpu_diff()[i]) << i;
  }
}

TYPED_TEST(PoolingLayerTest, GradientAve) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 6, 5), top;
  test::FillGaussian(&bottom);
  for (bool ceil : {true, false}) {
    LayerParameter param = PoolParam(PoolingParameter::AVE, 3, 2, 1);
    if (!ceil) {
      param.mutable_pooling_param()->set_round_mode(PoolingParameter::FLOOR);
    }
    PoolingLayer<Dtype> layer(param);
    test::GradientChecker<Dtype> checker(1e-2, 1e-3);
    checker.CheckGradient(&layer, {&bottom}, {&top});
  }
}

TYPED_TEST(PoolingLayerTest, GradientStochastic) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 6, 5), top;
  test::FillUniform(&bottom, 0.1, 1.0);
  for (Phase phase : {TRAIN, TEST}) {
    LayerParameter param = PoolParam(PoolingParameter::STOCHASTIC, 3, 2);
    param.set_phase(phase);
    PoolingLayer<Dtype> layer(param);
    test::GradientChecker<Dtype> checker(1e-4, 1e-2);
    checker.CheckGradient(&layer, {&bottom}, {&top});
  }
}

TYPED_TEST(PoolingLayerTest, TunedPathMatchesPortable) {
  using Dtype = typename TypeParam::Dtype;
  const Window windows[] = {
      {3, 3, 2, 2, 0, 0, true},   // CIFAR-10 / AlexNet
      {2, 2, 2, 2, 0, 0, true},   // LeNet
      {3, 3, 1, 1, 1, 1, true},   // padded, stride 1
      {3, 2, 2, 1, 1, 1, true},   // rectangular, padded
      {2, 3, 3, 2, 1, 0, false},  // stride > kernel, FLOOR
      {2, 1, 3, 4, 0, 0, true},   // stride > kernel: empty windows
      {4, 3, 3, 2, 2, 1, false},
      {5, 5, 1, 1, 2, 2, true},  // windows wider than some rows
      {0, 0, 1, 1, 0, 0, true},  // global
  };
  // Rows of 3 to 35 interior windows (16 per vector on the AVX-512 path, 8
  // on the AVX2 path); 15 planes for the global windows' groups of 8.
  const vector<int> shapes[] = {
      {2, 3, 7, 6}, {1, 2, 13, 17}, {3, 2, 5, 24}, {1, 2, 6, 70}, {3, 5, 7, 7}};
  for (const vector<int>& shape : shapes) {
    Blob<Dtype> bottom(shape);
    test::FillGaussian(&bottom);
    for (const Window& w : windows) {
      CheckTunedMatchesPortable(PoolingParameter::MAX, w, &bottom);
      CheckTunedMatchesPortable(PoolingParameter::AVE, w, &bottom);
    }
  }
}

TYPED_TEST(PoolingLayerTest, TunedPathMatchesPortableOnTiesAndNaN) {
  using Dtype = typename TypeParam::Dtype;
  // After a ReLU most windows tie at 0: the first maximum in scan order
  // must win on both paths. NaN: kept when first in a window, else losing.
  Blob<Dtype> bottom(2, 2, 9, 20);
  test::FillGaussian(&bottom);
  Dtype* x = bottom.mutable_cpu_data();
  for (int i = 0; i < bottom.count(); ++i) {
    if (x[i] < Dtype(0.3)) x[i] = 0;
    if (i % 37 == 5) x[i] = std::numeric_limits<Dtype>::quiet_NaN();
  }
  CheckTunedMatchesPortable(PoolingParameter::MAX,
                            Window{3, 3, 2, 2, 0, 0, true}, &bottom);
  CheckTunedMatchesPortable(PoolingParameter::MAX,
                            Window{2, 2, 1, 1, 1, 1, true}, &bottom);
}

TYPED_TEST(PoolingLayerTest, LargeBlobOnTwoThreads) {
  using Dtype = typename TypeParam::Dtype;
  // Big enough for the planes to split over ParallelFor.
  Blob<Dtype> bottom(4, 16, 32, 32);
  test::FillGaussian(&bottom);
  CheckTunedMatchesPortable(PoolingParameter::MAX,
                            Window{3, 3, 2, 2, 0, 0, true}, &bottom);
  CheckTunedMatchesPortable(PoolingParameter::AVE,
                            Window{3, 3, 2, 2, 1, 1, true}, &bottom);
}

TYPED_TEST(PoolingLayerTest, EmptyWindowsGiveNoOutputAndNoGradient) {
  using Dtype = typename TypeParam::Dtype;
  // Width 8, kernel 1, stride 2, CEIL, no pad: windows start at 0, 2, 4, 6
  // and 8; the last lies past the image (Caffe's shape rule keeps it).
  Blob<Dtype> bottom(1, 1, 1, 8);
  for (int i = 0; i < 8; ++i) bottom.mutable_cpu_data()[i] = i + 1;
  for (bool portable : {true, false}) {
    for (auto method : {PoolingParameter::MAX, PoolingParameter::AVE}) {
      LayerParameter param;
      PoolingParameter* p = param.mutable_pooling_param();
      p->set_pool(method);
      p->set_kernel_h(1);
      p->set_kernel_w(1);
      p->set_stride_h(1);
      p->set_stride_w(2);
      PoolingLayer<Dtype> layer(param);
      layer.set_portable(portable);
      Blob<Dtype> top, mask;
      vector<Blob<Dtype>*> tops{&top};
      if (method == PoolingParameter::MAX) tops.push_back(&mask);
      layer.SetUp({&bottom}, tops);
      ASSERT_EQ(top.shape(), (vector<int>{1, 1, 1, 5}));
      layer.Forward({&bottom}, tops);
      for (int i = 0; i < 4; ++i) EXPECT_EQ(top.cpu_data()[i], 2 * i + 1);
      if (method == PoolingParameter::MAX) {
        EXPECT_EQ(top.cpu_data()[4], std::numeric_limits<Dtype>::lowest());
        EXPECT_EQ(mask.cpu_data()[4], -1);
      } else {
        EXPECT_EQ(top.cpu_data()[4], 0);
      }
      cpu_set(top.count(), Dtype(1), top.mutable_cpu_diff());
      layer.Backward(tops, {true}, {&bottom});
      for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(bottom.cpu_diff()[i], i % 2 == 0 ? 1 : 0)
            << "element " << i << (portable ? " (portable)" : " (tuned)");
      }
    }
  }
}

// Caps the address space `headroom` bytes above what the process maps now
// (or at the limit already set, if lower), for its lifetime.
class ScopedAddressSpaceCap {
 public:
  explicit ScopedAddressSpaceCap(size_t headroom) {
    unsigned long pages = 0;
    if (FILE* statm = std::fopen("/proc/self/statm", "r")) {
      ok_ = std::fscanf(statm, "%lu", &pages) == 1;
      std::fclose(statm);
    }
    ok_ = ok_ && getrlimit(RLIMIT_AS, &old_) == 0;
    if (!ok_) return;
    rlimit cap = old_;
    cap.rlim_cur = static_cast<rlim_t>(pages) * sysconf(_SC_PAGESIZE) +
                   static_cast<rlim_t>(headroom);
    if (old_.rlim_cur != RLIM_INFINITY) {
      cap.rlim_cur = std::min(cap.rlim_cur, old_.rlim_cur);
    }
    ok_ = setrlimit(RLIMIT_AS, &cap) == 0;
  }
  ~ScopedAddressSpaceCap() {
    if (ok_) setrlimit(RLIMIT_AS, &old_);
  }
  bool ok() const { return ok_; }

 private:
  rlimit old_{};
  bool ok_ = false;
};

// An empty batch (num or channels 0) passes every shape rule whatever its
// width, so a pass must not size anything by the width alone: AVE's backward
// once allocated a row of pooled_width floats, 4 GB for these bottoms (found
// by fuzz_layer_setup). With the address space capped 512 MB above what the
// process maps, such an allocation fails instead of going unnoticed.
TEST(PoolingEmptyBatchTest, AWideEmptyBatchAllocatesNothingByItsWidth) {
  for (auto method : {PoolingParameter::AVE, PoolingParameter::MAX}) {
    for (const vector<int>& shape :
         {vector<int>{0, 0, 2, 1000000000}, vector<int>{0, 1, 2, 1000000000},
          vector<int>{1, 0, 2, 1000000000}}) {
      SCOPED_TRACE(testing::Message()
                   << PoolingParameter::PoolMethod_Name(method) << " bottom "
                   << shape[0] << " x " << shape[1] << " x " << shape[2]
                   << " x " << shape[3]);
      PoolingLayer<float> layer(PoolParam(method, 1));
      Blob<float> bottom(shape), top;
      layer.SetUp({&bottom}, {&top});
      EXPECT_EQ(top.count(), 0);
      ScopedAddressSpaceCap cap(size_t{512} << 20);
      ASSERT_TRUE(cap.ok());
      layer.Forward({&bottom}, {&top});
      layer.Backward({&top}, {true}, {&bottom});
    }
  }
}

// AVE divides by the window clipped to the padded input: with a kernel of
// 2000000000 and padding 1000000000 that is 2e9 x 2e9, beyond an int (it
// once wrapped to a negative divisor; found by fuzz_layer_setup). Every
// window covers the whole 3 x 3 image. Tuned path and portable body.
TEST(PoolingHugeWindowTest, AveDivisorBeyondAnIntIsExact) {
  for (bool portable : {false, true}) {
    SCOPED_TRACE(portable ? "portable" : "tuned");
    PoolingLayer<double> layer(
        PoolParam(PoolingParameter::AVE, 2000000000, 1, 1000000000));
    layer.set_portable(portable);
    Blob<double> bottom(1, 1, 3, 3), top;
    for (int i = 0; i < 9; ++i) bottom.mutable_cpu_data()[i] = i + 1;
    layer.SetUp({&bottom}, {&top});
    ASSERT_EQ(top.shape(), (vector<int>{1, 1, 4, 4}));
    layer.Forward({&bottom}, {&top});
    const double area = 2e9 * 2e9;
    for (int i = 0; i < top.count(); ++i) {
      EXPECT_DOUBLE_EQ(top.cpu_data()[i], 45 / area) << "output " << i;
    }
    cpu_set(top.count(), 1.0, top.mutable_cpu_diff());
    layer.Backward({&top}, {true}, {&bottom});
    for (int i = 0; i < 9; ++i) {
      EXPECT_DOUBLE_EQ(bottom.cpu_diff()[i], 16 / area) << "element " << i;
    }
  }
}

TYPED_TEST(PoolingLayerTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 6, 5), top, mask;
  auto expect_config_error = [&](const LayerParameter& param,
                                 const char* what) {
    PoolingLayer<Dtype> layer(param);
    EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ConfigError) << what;
  };
  expect_config_error(PoolParam(PoolingParameter::MAX, 3, 1, 3),
                      "pad equal to the kernel");
  expect_config_error(PoolParam(PoolingParameter::MAX, 2, 0), "stride 0");
  expect_config_error(PoolParam(PoolingParameter::MAX, 0), "kernel 0");
  expect_config_error(PoolParam(PoolingParameter::STOCHASTIC, 3, 1, 1),
                      "stochastic with pad");
  LayerParameter p = PoolParam(PoolingParameter::MAX, 3);
  p.mutable_pooling_param()->set_kernel_h(3);
  p.mutable_pooling_param()->set_kernel_w(3);
  expect_config_error(p, "kernel_size and kernel_h/w");
  p = PoolParam(PoolingParameter::MAX, 3);
  p.mutable_pooling_param()->clear_kernel_size();
  p.mutable_pooling_param()->set_kernel_h(3);
  expect_config_error(p, "kernel_h without kernel_w");
  p = PoolParam(PoolingParameter::MAX, 3);
  p.mutable_pooling_param()->clear_kernel_size();
  expect_config_error(p, "no kernel");
  p = PoolParam(PoolingParameter::MAX, 3);
  p.mutable_pooling_param()->set_global_pooling(true);
  expect_config_error(p, "global pooling with a kernel");
  p.mutable_pooling_param()->clear_kernel_size();
  p.mutable_pooling_param()->set_stride(2);
  expect_config_error(p, "global pooling with stride");
  p = PoolParam(PoolingParameter::MAX, 3);
  p.mutable_pooling_param()->set_pad(static_cast<uint32_t>(-1));
  expect_config_error(p, "negative pad");
  {
    PoolingLayer<Dtype> ave(PoolParam(PoolingParameter::AVE, 2));
    EXPECT_THROW(ave.SetUp({&bottom}, {&top, &mask}), ConfigError)
        << "mask top for AVE";
  }
  {
    Blob<Dtype> flat({2, 3, 6});
    PoolingLayer<Dtype> layer(PoolParam(PoolingParameter::MAX, 2));
    EXPECT_THROW(layer.SetUp({&flat}, {&top}), ShapeError) << "3-D bottom";
  }
  {
    // A 7x7 kernel over 6x5 without padding leaves no output.
    PoolingLayer<Dtype> layer(PoolParam(PoolingParameter::MAX, 7));
    EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ShapeError) << "kernel 7";
  }
}

}  // namespace
}  // namespace poseidon
