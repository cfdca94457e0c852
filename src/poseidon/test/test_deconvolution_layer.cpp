// DeconvolutionLayer: shapes, forward against a naive scatter-add written
// here (every algorithm, one and two threads), the adjoint relation with
// Convolution under shared weights (forward and gradients), gradient
// checks, FCN-style bilinear upsampling against hand-computed values, and
// the error paths, also through Net construction.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/conv_layer.hpp"
#include "poseidon/layers/deconv_layer.hpp"
#include "poseidon/net.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/direct_conv.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

struct Geometry {
  int kernel_h, kernel_w;
  int pad_h = 0, pad_w = 0;
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
  int group = 1;
};

LayerParameter ConvParam(const char* type, int num_output, const Geometry& g,
                         bool bias = true) {
  LayerParameter param;
  param.set_type(type);
  ConvolutionParameter* p = param.mutable_convolution_param();
  p->set_num_output(num_output);
  p->set_kernel_h(g.kernel_h);
  p->set_kernel_w(g.kernel_w);
  p->set_pad_h(g.pad_h);
  p->set_pad_w(g.pad_w);
  p->set_stride_h(g.stride_h);
  p->set_stride_w(g.stride_w);
  if (g.dilation_h != 1 || g.dilation_w != 1) {
    p->add_dilation(g.dilation_h);
    p->add_dilation(g.dilation_w);
  }
  p->set_group(g.group);
  p->set_bias_term(bias);
  p->mutable_weight_filler()->set_type("gaussian");
  p->mutable_bias_filler()->set_type("gaussian");
  return param;
}

LayerParameter DeconvParam(int num_output, const Geometry& g,
                           bool bias = true) {
  return ConvParam("Deconvolution", num_output, g, bias);
}

// Transposed convolution by scattering: every bottom pixel adds the kernel,
// scaled by its value, into the top at stride spacing.
template <typename Dtype>
void NaiveDeconv(const Blob<Dtype>& in, const Blob<Dtype>& w,
                 const Blob<Dtype>* bias, const Geometry& g, Blob<Dtype>* out) {
  const int N = in.num(), C = in.channels(), H = in.height(), W = in.width();
  const int KH = w.shape(2), KW = w.shape(3);
  const int og = w.shape(1), O = og * g.group, cg = C / g.group;
  const int OH =
      g.stride_h * (H - 1) + g.dilation_h * (KH - 1) + 1 - 2 * g.pad_h;
  const int OW =
      g.stride_w * (W - 1) + g.dilation_w * (KW - 1) + 1 - 2 * g.pad_w;
  vector<double> acc(static_cast<size_t>(N) * O * OH * OW, 0.0);
  for (int n = 0; n < N; ++n) {
    for (int c = 0; c < C; ++c) {
      const int first_o = (c / cg) * og;
      for (int y = 0; y < H; ++y) {
        for (int x = 0; x < W; ++x) {
          const double v = in.data_at(n, c, y, x);
          for (int o = 0; o < og; ++o) {
            for (int i = 0; i < KH; ++i) {
              for (int j = 0; j < KW; ++j) {
                const int ty = y * g.stride_h - g.pad_h + i * g.dilation_h;
                const int tx = x * g.stride_w - g.pad_w + j * g.dilation_w;
                if (ty < 0 || ty >= OH || tx < 0 || tx >= OW) continue;
                acc[((static_cast<size_t>(n) * O + first_o + o) * OH + ty) *
                        OW +
                    tx] += w.data_at(c, o, i, j) * v;
              }
            }
          }
        }
      }
    }
  }
  out->Reshape(N, O, OH, OW);
  for (size_t k = 0; k < acc.size(); ++k) {
    const int o = static_cast<int>(k / (static_cast<size_t>(OH) * OW)) % O;
    out->mutable_cpu_data()[k] =
        static_cast<Dtype>(acc[k] + (bias ? bias->cpu_data()[o] : 0));
  }
}

template <typename Dtype>
void ExpectBlobsNear(const Dtype* expected, const Dtype* actual, int count,
                     double tol, const string& what) {
  for (int i = 0; i < count; ++i) {
    const double scale = std::max(1.0, std::fabs(double(expected[i])));
    ASSERT_NEAR(expected[i], actual[i], tol * scale)
        << what << " differs at element " << i;
  }
}

template <typename Dtype>
double Dot(const Blob<Dtype>& a, const Blob<Dtype>& b) {
  double s = 0;
  for (int i = 0; i < a.count(); ++i) {
    s += double(a.cpu_data()[i]) * b.cpu_data()[i];
  }
  return s;
}

// Sets Poseidon::num_threads() for a scope and restores it after.
using test::ScopedNumThreads;

using test::ParseNet;

template <typename TypeParam>
class DeconvolutionLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  using Algo = typename BaseConvolutionLayer<Dtype>::Algorithm;
  static double Tol() { return sizeof(Dtype) == 4 ? 2e-4 : 1e-10; }

  // Compares the forward of every algorithm, on one and on two threads,
  // against NaiveDeconv.
  void CheckForward(const vector<int>& shape, int num_output, const Geometry& g,
                    bool bias = true) {
    Blob<Dtype> bottom(shape), top, expected;
    test::FillGaussian(&bottom);
    DeconvolutionLayer<Dtype> layer(DeconvParam(num_output, g, bias));
    vector<Blob<Dtype>*> bottoms{&bottom}, tops{&top};
    layer.SetUp(bottoms, tops);
    ASSERT_EQ(layer.blobs().size(), bias ? 2u : 1u);
    NaiveDeconv(bottom, *layer.blobs()[0],
                bias ? layer.blobs()[1].get() : nullptr, g, &expected);
    ASSERT_EQ(top.shape(), expected.shape());
    for (int threads : {1, 2}) {
      ScopedNumThreads scoped(threads);
      for (Algo algo : {Algo::kPerImage, Algo::kBatched, Algo::kAuto}) {
        layer.set_algorithm(algo);
        // A tiny budget forces chunks of one image for kBatched.
        layer.set_max_buffer_bytes(algo == Algo::kBatched ? 1 : 64 << 20);
        cpu_set(top.count(), Dtype(1e6), top.mutable_cpu_data());
        layer.Forward(bottoms, tops);
        ExpectBlobsNear(
            expected.cpu_data(), top.cpu_data(), top.count(), Tol(),
            StrCat("forward (algorithm ", static_cast<int>(algo), ", ", threads,
                   " threads, direct ", layer.direct(), ")"));
      }
    }
  }

  // Convolution C -> O and Deconvolution O -> C with the same weights
  // (shape (O, C / group, kernel...) for both) are adjoint:
  //   <conv(x), y> = <x, deconv(y)>,
  // and each one's gradients are the other's passes: deconv's bottom diff
  // for top diff x is conv(x); conv's bottom diff for top diff y is
  // deconv(y); their weight gradients agree with the roles of x and y
  // swapped. Bias is off. `geometry` must make the shapes round-trip.
  void CheckAdjoint(const vector<int>& x_shape, int num_output,
                    const Geometry& g) {
    Blob<Dtype> x(x_shape), y, conv_top, deconv_top;
    test::FillGaussian(&x);
    ConvolutionLayer<Dtype> conv(
        ConvParam("Convolution", num_output, g, /*bias=*/false));
    conv.SetUp({&x}, {&conv_top});
    y.Reshape(conv_top.shape());
    test::FillGaussian(&y);
    DeconvolutionLayer<Dtype> deconv(DeconvParam(x_shape[1], g, false));
    deconv.SetUp({&y}, {&deconv_top});
    ASSERT_EQ(deconv_top.shape(), x.shape()) << "shapes do not round-trip";
    ASSERT_EQ(deconv.blobs()[0]->shape(), conv.blobs()[0]->shape());
    deconv.blobs()[0]->CopyFrom(*conv.blobs()[0]);

    conv.Forward({&x}, {&conv_top});
    deconv.Forward({&y}, {&deconv_top});
    const double lhs = Dot(conv_top, y), rhs = Dot(x, deconv_top);
    EXPECT_NEAR(lhs, rhs, Tol() * 10 * (1 + std::fabs(lhs)))
        << "<conv(x), y> != <x, deconv(y)>";

    // Conv backward with top diff y; deconv backward with top diff x.
    cpu_copy(y.count(), y.cpu_data(), conv_top.mutable_cpu_diff());
    cpu_copy(x.count(), x.cpu_data(), deconv_top.mutable_cpu_diff());
    for (auto* l : {static_cast<Layer<Dtype>*>(&conv),
                    static_cast<Layer<Dtype>*>(&deconv)}) {
      cpu_set(l->blobs()[0]->count(), Dtype(0),
              l->blobs()[0]->mutable_cpu_diff());
    }
    conv.Backward({&conv_top}, {true}, {&x});
    deconv.Backward({&deconv_top}, {true}, {&y});
    ExpectBlobsNear(deconv_top.cpu_data(), x.cpu_diff(), x.count(), Tol(),
                    "conv bottom diff vs deconv forward");
    ExpectBlobsNear(conv_top.cpu_data(), y.cpu_diff(), y.count(), Tol(),
                    "deconv bottom diff vs conv forward");
    ExpectBlobsNear(conv.blobs()[0]->cpu_diff(), deconv.blobs()[0]->cpu_diff(),
                    conv.blobs()[0]->count(), Tol(), "weight diffs");
  }
};

TYPED_TEST_SUITE(DeconvolutionLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(DeconvolutionLayerTest, SetupShapes) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> b0(2, 3, 4, 5), b1(2, 3, 4, 5), t0, t1;
  Geometry g{3, 3};
  g.stride_h = g.stride_w = 2;
  g.pad_h = g.pad_w = 1;
  DeconvolutionLayer<Dtype> layer(DeconvParam(4, g));
  layer.SetUp({&b0, &b1}, {&t0, &t1});
  // 2 * (4 - 1) + 3 - 2 = 7 rows, 2 * (5 - 1) + 3 - 2 = 9 columns.
  EXPECT_EQ(t0.shape(), (vector<int>{2, 4, 7, 9}));
  EXPECT_EQ(t1.shape(), (vector<int>{2, 4, 7, 9}));
  EXPECT_EQ(layer.blobs()[0]->shape(), (vector<int>{3, 4, 3, 3}));
  EXPECT_EQ(layer.blobs()[1]->shape(), (vector<int>{4}));
  EXPECT_STREQ(layer.type(), "Deconvolution");

  // Groups, dilation, rectangular geometry, no bias.
  Geometry g2{3, 2};
  g2.dilation_h = 2;
  g2.stride_w = 3;
  g2.pad_w = 1;
  g2.group = 3;
  DeconvolutionLayer<Dtype> grouped(DeconvParam(6, g2, /*bias=*/false));
  Blob<Dtype> b2(1, 3, 5, 4), t2;
  grouped.SetUp({&b2}, {&t2});
  // (5 - 1) + 2 * 2 + 1 = 9 rows; 3 * (4 - 1) + 2 - 2 = 9 columns.
  EXPECT_EQ(t2.shape(), (vector<int>{1, 6, 9, 9}));
  ASSERT_EQ(grouped.blobs().size(), 1u);
  EXPECT_EQ(grouped.blobs()[0]->shape(), (vector<int>{3, 2, 3, 2}));

  // A Convolution with the same parameters maps the top shape back.
  ConvolutionLayer<Dtype> conv(ConvParam("Convolution", 3, g));
  Blob<Dtype> back;
  conv.SetUp({&t0}, {&back});
  EXPECT_EQ(back.shape(), b0.shape());
}

TYPED_TEST(DeconvolutionLayerTest, RegisteredInFactory) {
  using Dtype = typename TypeParam::Dtype;
  auto layer =
      LayerRegistry<Dtype>::CreateLayer(DeconvParam(2, Geometry{3, 3}));
  EXPECT_STREQ(layer->type(), "Deconvolution");
}

TYPED_TEST(DeconvolutionLayerTest, HandComputed) {
  using Dtype = typename TypeParam::Dtype;
  // One 2x2 input [[1, 2], [3, 4]], kernel [[1, 10], [100, 1000]], stride 2,
  // bias 0.5: the four scaled kernels tile the 4x4 top without overlap.
  Blob<Dtype> bottom(1, 1, 2, 2), top;
  for (int i = 0; i < 4; ++i) bottom.mutable_cpu_data()[i] = i + 1;
  Geometry g{2, 2};
  g.stride_h = g.stride_w = 2;
  LayerParameter param = DeconvParam(1, g);
  param.mutable_convolution_param()->mutable_bias_filler()->set_type(
      "constant");
  param.mutable_convolution_param()->mutable_bias_filler()->set_value(0.5);
  DeconvolutionLayer<Dtype> layer(param);
  layer.SetUp({&bottom}, {&top});
  const Dtype kernel[] = {1, 10, 100, 1000};
  std::copy(kernel, kernel + 4, layer.blobs()[0]->mutable_cpu_data());
  layer.Forward({&bottom}, {&top});
  ASSERT_EQ(top.shape(), (vector<int>{1, 1, 4, 4}));
  const Dtype expected[] = {1.5,   10.5,   2.5,   20.5,    //
                            100.5, 1000.5, 200.5, 2000.5,  //
                            3.5,   30.5,   4.5,   40.5,    //
                            300.5, 3000.5, 400.5, 4000.5};
  for (int i = 0; i < 16; ++i) {
    EXPECT_NEAR(top.cpu_data()[i], expected[i], 1e-6) << "element " << i;
  }

  // Stride 1, pad 1, 3x3 kernel of ones: a 3x3 box sum of the zero-padded
  // input (the top has the bottom's size).
  Geometry box{3, 3};
  box.pad_h = box.pad_w = 1;
  LayerParameter bp = DeconvParam(1, box, /*bias=*/false);
  bp.mutable_convolution_param()->mutable_weight_filler()->set_type("constant");
  bp.mutable_convolution_param()->mutable_weight_filler()->set_value(1);
  DeconvolutionLayer<Dtype> boxes(bp);
  boxes.SetUp({&bottom}, {&top});
  boxes.Forward({&bottom}, {&top});
  ASSERT_EQ(top.shape(), (vector<int>{1, 1, 2, 2}));
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(top.cpu_data()[i], 10, 1e-6);
}

TYPED_TEST(DeconvolutionLayerTest, ForwardSimple) {
  this->CheckForward({2, 3, 4, 5}, 4, Geometry{3, 3});
}

TYPED_TEST(DeconvolutionLayerTest, ForwardStride2Pad) {
  Geometry g{4, 4};
  g.stride_h = g.stride_w = 2;
  g.pad_h = g.pad_w = 1;
  this->CheckForward({2, 3, 3, 4}, 2, g);
}

TYPED_TEST(DeconvolutionLayerTest, ForwardRectangularStridePad) {
  Geometry g{3, 2};
  g.pad_h = 1;
  g.pad_w = 2;
  g.stride_h = 2;
  g.stride_w = 3;
  this->CheckForward({3, 2, 4, 5}, 3, g);
}

TYPED_TEST(DeconvolutionLayerTest, ForwardStrideLargerThanKernel) {
  // Stride 3 over a 2-wide kernel leaves top positions nothing reaches:
  // they hold the bias alone.
  Geometry g{2, 2};
  g.stride_h = g.stride_w = 3;
  this->CheckForward({2, 2, 3, 3}, 2, g);
}

TYPED_TEST(DeconvolutionLayerTest, ForwardDilation) {
  Geometry g{3, 2};
  g.dilation_h = 2;
  g.dilation_w = 3;
  g.stride_h = 2;
  g.pad_h = 1;
  this->CheckForward({2, 3, 4, 3}, 2, g);
}

TYPED_TEST(DeconvolutionLayerTest, ForwardGroups) {
  Geometry g{3, 3};
  g.group = 3;
  g.stride_h = g.stride_w = 2;
  g.pad_h = g.pad_w = 1;
  this->CheckForward({2, 6, 3, 4}, 9, g);
}

TYPED_TEST(DeconvolutionLayerTest, ForwardNoBias) {
  Geometry g{3, 3};
  g.group = 2;
  g.pad_h = 1;
  this->CheckForward({2, 4, 3, 3}, 2, g, /*bias=*/false);
}

TYPED_TEST(DeconvolutionLayerTest, Forward1x1) {
  this->CheckForward({3, 4, 3, 5}, 5, Geometry{1, 1});
  Geometry g{1, 1};
  g.stride_h = g.stride_w = 2;
  this->CheckForward({2, 3, 3, 2}, 2, g);
}

// Stride 1 with the top as large as the bottom ("same" padding): for float
// on AVX-512 and AVX2 CPUs kAuto takes the direct path (its input-gradient
// kernel computes the deconvolution).
TYPED_TEST(DeconvolutionLayerTest, ForwardSameSizeDirectPath) {
  using Dtype = typename TypeParam::Dtype;
  Geometry g{3, 5};
  g.pad_h = 1;
  g.pad_w = 2;
  this->CheckForward({3, 4, 6, 7}, 8, g);
  Geometry grouped{3, 3};
  grouped.pad_h = grouped.pad_w = 1;
  grouped.group = 2;
  this->CheckForward({2, 4, 5, 5}, 6, grouped);
  Blob<Dtype> bottom(3, 4, 6, 7), top;
  DeconvolutionLayer<Dtype> layer(DeconvParam(8, g));
  layer.SetUp({&bottom}, {&top});
  EXPECT_EQ(top.shape(), (vector<int>{3, 8, 6, 7}));
  const bool direct_expected =
      std::is_same<Dtype, float>::value && DirectConv::KernelsAvailable();
  EXPECT_EQ(layer.direct(), direct_expected);
}

TYPED_TEST(DeconvolutionLayerTest, AdjointOfConvolution) {
  Geometry g{3, 2};
  this->CheckAdjoint({2, 3, 5, 4}, 4, g);
  Geometry s{3, 2};
  s.stride_h = 2;
  s.stride_w = 3;
  s.pad_h = 1;
  // (7 + 2 - 3) / 2 + 1 = 4 rows, (5 - 2) / 3 + 1 = 2 columns, exactly.
  this->CheckAdjoint({2, 3, 7, 5}, 2, s);
  Geometry d{3, 3};
  d.dilation_h = d.dilation_w = 2;
  d.stride_h = d.stride_w = 2;
  d.pad_h = d.pad_w = 1;
  d.group = 2;
  this->CheckAdjoint({3, 4, 9, 7}, 6, d);
  Geometry same{3, 3};
  same.pad_h = same.pad_w = 1;
  this->CheckAdjoint({2, 4, 6, 6}, 5, same);
}

TYPED_TEST(DeconvolutionLayerTest, ParamDiffsAccumulateAndRespectFlags) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 2, 3, 3), top;
  test::FillGaussian(&bottom);
  Geometry g{3, 3};
  g.stride_h = g.stride_w = 2;
  DeconvolutionLayer<Dtype> layer(DeconvParam(3, g));
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  test::FillGaussian(&top);
  cpu_copy(top.count(), top.cpu_data(), top.mutable_cpu_diff());
  Blob<Dtype>& w = *layer.blobs()[0];
  Blob<Dtype>& b = *layer.blobs()[1];
  cpu_set(w.count(), Dtype(0), w.mutable_cpu_diff());
  cpu_set(b.count(), Dtype(0), b.mutable_cpu_diff());
  cpu_set(bottom.count(), Dtype(7), bottom.mutable_cpu_diff());
  layer.Backward({&top}, {false}, {&bottom});
  EXPECT_EQ(bottom.cpu_diff()[0], Dtype(7)) << "propagate_down false ignored";
  const vector<Dtype> once(w.cpu_diff(), w.cpu_diff() + w.count());
  const vector<Dtype> bias_once(b.cpu_diff(), b.cpu_diff() + b.count());
  // The bias gradient is the top diff summed per output channel.
  for (int o = 0; o < 3; ++o) {
    double sum = 0;
    for (int n = 0; n < 2; ++n) {
      for (int s = 0; s < top.count(2); ++s) {
        sum += top.cpu_diff()[top.offset(n, o) + s];
      }
    }
    EXPECT_NEAR(bias_once[o], sum, 1e-4 * (1 + std::fabs(sum)));
  }
  layer.Backward({&top}, {false}, {&bottom});
  for (int i = 0; i < w.count(); ++i) {
    EXPECT_NEAR(w.cpu_diff()[i], 2 * once[i], 1e-4 * (1 + std::fabs(once[i])));
  }
  EXPECT_NEAR(b.cpu_diff()[0], 2 * bias_once[0], 1e-4);
  // Frozen parameters keep their diffs; the bottom diff is overwritten.
  layer.set_param_propagate_down(0, false);
  layer.set_param_propagate_down(1, false);
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_NEAR(w.cpu_diff()[0], 2 * once[0], 1e-4 * (1 + std::fabs(once[0])));
  EXPECT_NEAR(b.cpu_diff()[0], 2 * bias_once[0], 1e-4);
  EXPECT_NE(bottom.cpu_diff()[0], Dtype(7));
}

TYPED_TEST(DeconvolutionLayerTest, GradientStridePad) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 3, 2), top;
  test::FillGaussian(&bottom);
  Geometry g{3, 3};
  g.pad_h = g.pad_w = 1;
  g.stride_h = g.stride_w = 2;
  DeconvolutionLayer<Dtype> layer(DeconvParam(2, g));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(DeconvolutionLayerTest, GradientGroupsDilationPerImage) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 4, 3, 3), top;
  test::FillGaussian(&bottom);
  Geometry g{3, 2};
  g.group = 2;
  g.dilation_h = 2;
  g.stride_w = 2;
  g.pad_w = 1;
  DeconvolutionLayer<Dtype> layer(DeconvParam(4, g));
  layer.set_algorithm(BaseConvolutionLayer<Dtype>::Algorithm::kPerImage);
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(DeconvolutionLayerTest, GradientSameSizeNoBias) {
  // kAuto: the direct path for float on AVX-512 and AVX2 CPUs.
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 4, 4), top;
  test::FillGaussian(&bottom);
  Geometry g{3, 3};
  g.pad_h = g.pad_w = 1;
  DeconvolutionLayer<Dtype> layer(DeconvParam(2, g, /*bias=*/false));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(DeconvolutionLayerTest, GradientBatchedChunksTwoBottomsThreaded) {
  using Dtype = typename TypeParam::Dtype;
  ScopedNumThreads threads(2);
  Blob<Dtype> b0(3, 2, 3, 2), b1(3, 2, 3, 2), t0, t1;
  test::FillGaussian(&b0);
  test::FillGaussian(&b1);
  Geometry g{2, 3};
  g.stride_h = 2;
  DeconvolutionLayer<Dtype> layer(DeconvParam(3, g));
  layer.set_algorithm(BaseConvolutionLayer<Dtype>::Algorithm::kBatched);
  layer.set_max_buffer_bytes(1);
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&b0, &b1}, {&t0, &t1});
}

// Caffe's FCN upsampling: factor f, kernel 2f - f % 2, stride f,
// pad ceil((f - 1) / 2), one group per channel, bilinear weights, frozen.
// The 1-D interpolation weights (bilinear filler, kernel 4) are 1/4, 3/4,
// 3/4, 1/4, so with pad 1 the top rows of input rows a, b are
//   3/4 a, 3/4 a + 1/4 b, 1/4 a + 3/4 b, 3/4 b
// (the borders fade against the zero padding); in 2-D the product of the
// row and column weights. Factor 3 (kernel 5, weights 1/3, 2/3, 1, 2/3,
// 1/3, pad 1) gives rows 2/3 a, a, 2/3 a + 1/3 b, 1/3 a + 2/3 b, b, 2/3 b.
TYPED_TEST(DeconvolutionLayerTest, BilinearUpsamplingNet) {
  using Dtype = typename TypeParam::Dtype;
  auto net_text = [](int f) {
    const int kernel = 2 * f - f % 2, pad = (f - 1 + 1) / 2;
    return StrCat(R"(
      layer { name: "in" type: "Input" top: "x"
        input_param { shape { dim: 1 dim: 2 dim: 2 dim: 2 } } }
      layer { name: "up" type: "Deconvolution" bottom: "x" top: "y"
        param { lr_mult: 0 decay_mult: 0 }
        convolution_param { num_output: 2 group: 2 bias_term: false
          kernel_size: )",
                  kernel, " stride: ", f, " pad: ", pad, R"(
          weight_filler { type: "bilinear" } } })");
  };
  // Channel 0 holds [[1, 2], [3, 4]], channel 1 ten times that.
  auto run = [&](int f) {
    auto net = std::make_unique<Net<Dtype>>(ParseNet(net_text(f)));
    Blob<Dtype>& x = *net->blob_by_name("x");
    for (int i = 0; i < 8; ++i) {
      x.mutable_cpu_data()[i] = (i % 4 + 1) * (i < 4 ? 1 : 10);
    }
    net->Forward();
    Layer<Dtype>& up = *net->layers()[1];
    EXPECT_FALSE(up.param_propagate_down(0)) << "lr_mult 0 must freeze";
    const int k = 2 * f - f % 2;
    EXPECT_EQ(up.blobs()[0]->shape(), (vector<int>{2, 1, k, k}));
    return net;
  };
  {
    auto net = run(2);
    const Blob<Dtype>& y = *net->blob_by_name("y");
    ASSERT_EQ(y.shape(), (vector<int>{1, 2, 4, 4}));
    const double expected[] = {0.5625, 0.9375, 1.3125, 1.125,  //
                               1.125,  1.75,   2.25,   1.875,  //
                               1.875,  2.75,   3.25,   2.625,  //
                               1.6875, 2.4375, 2.8125, 2.25};
    for (int i = 0; i < 16; ++i) {
      EXPECT_NEAR(y.cpu_data()[i], expected[i], 1e-5) << "f=2, element " << i;
      EXPECT_NEAR(y.cpu_data()[16 + i], 10 * expected[i], 1e-4)
          << "f=2, channel 1, element " << i;
    }
  }
  {
    auto net = run(3);
    const Blob<Dtype>& y = *net->blob_by_name("y");
    ASSERT_EQ(y.shape(), (vector<int>{1, 2, 6, 6}));
    // Nine times the expected values; the input pixels themselves reappear
    // at (1, 1), (1, 4), (4, 1), (4, 4).
    const int ninths[] = {4,  6,  8,  10, 12, 8,   //
                          6,  9,  12, 15, 18, 12,  //
                          10, 15, 18, 21, 24, 16,  //
                          14, 21, 24, 27, 30, 20,  //
                          18, 27, 30, 33, 36, 24,  //
                          12, 18, 20, 22, 24, 16};
    for (int i = 0; i < 36; ++i) {
      EXPECT_NEAR(y.cpu_data()[i], ninths[i] / 9.0, 1e-5)
          << "f=3, element " << i;
      EXPECT_NEAR(y.cpu_data()[36 + i], 10 * ninths[i] / 9.0, 1e-4)
          << "f=3, channel 1, element " << i;
    }
  }
}

TYPED_TEST(DeconvolutionLayerTest, ConfigAndShapeErrors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 4, 3, 3), top;
  {
    Geometry g{3, 3};
    g.group = 2;
    DeconvolutionLayer<Dtype> layer(DeconvParam(3, g));
    EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ConfigError)
        << "num_output 3 not divisible by group 2";
  }
  {
    Geometry g{3, 3};
    g.group = 3;
    DeconvolutionLayer<Dtype> layer(DeconvParam(3, g));
    EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ShapeError)
        << "4 channels not divisible by group 3";
  }
  {
    // 1 * (1 - 1) + 3 - 2 * 2 = -1 columns.
    Blob<Dtype> thin(1, 2, 3, 1);
    Geometry g{3, 3};
    g.pad_w = 2;
    DeconvolutionLayer<Dtype> layer(DeconvParam(2, g));
    try {
      layer.SetUp({&thin}, {&top});
      ADD_FAILURE() << "non-positive output size accepted";
    } catch (const ShapeError& e) {
      const string msg = e.what();
      EXPECT_NE(msg.find("spatial axis 1"), string::npos) << msg;
      EXPECT_NE(msg.find("= -1"), string::npos) << msg;
      EXPECT_NE(msg.find("1 2 3 1 (6)"), string::npos) << msg;
    }
  }
  {
    // Stored weights in the Convolution layout (num_output, C / group).
    LayerParameter param = DeconvParam(2, Geometry{3, 3});
    Blob<Dtype> w(2, 4, 3, 3), b({2});
    w.ToProto(param.add_blobs());
    b.ToProto(param.add_blobs());
    DeconvolutionLayer<Dtype> layer(param);
    try {
      layer.SetUp({&bottom}, {&top});
      ADD_FAILURE() << "weights of the wrong layout accepted";
    } catch (const ShapeError& e) {
      EXPECT_NE(string(e.what()).find("4 x 2 x 3 x 3"), string::npos)
          << e.what();
    }
  }
  {
    // Bottom channels change after setup.
    DeconvolutionLayer<Dtype> layer(DeconvParam(2, Geometry{3, 3}));
    layer.SetUp({&bottom}, {&top});
    Blob<Dtype> wrong(2, 3, 3, 3);
    EXPECT_THROW(layer.Forward({&wrong}, {&top}), ShapeError);
  }
}

TYPED_TEST(DeconvolutionLayerTest, NetConstructionErrorNamesLayerAndShape) {
  using Dtype = typename TypeParam::Dtype;
  const char* text = R"(
    layer { name: "in" type: "Input" top: "x"
      input_param { shape { dim: 1 dim: 2 dim: 1 dim: 4 } } }
    layer { name: "up2" type: "Deconvolution" bottom: "x" top: "y"
      convolution_param { num_output: 2 kernel_size: 3 pad: 2 } })";
  try {
    Net<Dtype> net(ParseNet(text));
    ADD_FAILURE() << "a deconvolution with an empty output was built";
  } catch (const ShapeError& e) {
    const string msg = e.what();
    EXPECT_NE(msg.find("layer 'up2'"), string::npos) << msg;
    EXPECT_NE(msg.find("1 2 1 4 (8)"), string::npos) << msg;
    EXPECT_NE(msg.find("spatial axis 0"), string::npos) << msg;
    EXPECT_NE(msg.find("pad 2"), string::npos) << msg;
  }
}

}  // namespace
}  // namespace poseidon
