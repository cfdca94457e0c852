// DirectConv against naive convolution loops (forward, weight gradient,
// input gradient through the flipped weights) on odd shapes, and the
// convolution layer's direct path against its per-image reference path.
// On AVX-512 CPUs DirectConv runs its own kernels, on AVX2 CPUs the AVX2
// implicit GEMM (both are checked where the CPU has them); skipped on CPUs
// with neither, apart from checking that the layer then does not choose
// the direct path.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "conv_path_test.hpp"
#include "gradient_checker.hpp"
#include "poseidon/layers/conv_layer.hpp"
#include "poseidon/util/direct_conv.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Relative-to-magnitude comparison; names the first differing element.
void ExpectNear(const vector<double>& want, const float* got, double tol,
                const string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(want[i], got[i], tol * (1 + std::fabs(want[i])))
        << what << ": element " << i << " of " << want.size();
  }
}

// DirectConv on one geometry against loops written here: forward, the
// weight gradient (accumulated onto a non-zero start, over 3 images) and
// the input gradient (the flipped-weight plan).
void CheckDirectConv(const DirectConv::Geometry& g, DirectConv::Kernel kernel) {
  SCOPED_TRACE(
      std::string(kernel == DirectConv::Kernel::kOutputVectors
                      ? "output vectors: "
                      : "position vectors: ") +
      "C " + std::to_string(g.channels) + " " + std::to_string(g.height) + "x" +
      std::to_string(g.width) + " O " + std::to_string(g.outputs) + " kernel " +
      std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) + " pad " +
      std::to_string(g.pad_h) + "," + std::to_string(g.pad_w) + " dilation " +
      std::to_string(g.dilation_h) + "," + std::to_string(g.dilation_w) +
      " stride " + std::to_string(g.stride_h) + "," +
      std::to_string(g.stride_w));
  const DirectConv conv(g, kernel);
  ASSERT_TRUE(conv.supported());
  const int OH = conv.output_h(), OW = conv.output_w();
  // Caffe's output size.
  ASSERT_EQ(OH, (g.height + 2 * g.pad_h - g.dilation_h * (g.kernel_h - 1) - 1) /
                        g.stride_h +
                    1);
  ASSERT_EQ(OW, (g.width + 2 * g.pad_w - g.dilation_w * (g.kernel_w - 1) - 1) /
                        g.stride_w +
                    1);
  const int images = 3, taps = g.kernel_h * g.kernel_w;
  const size_t in_size = static_cast<size_t>(g.channels) * g.height * g.width;
  const size_t out_size = static_cast<size_t>(g.outputs) * OH * OW;
  const size_t w_size = static_cast<size_t>(g.outputs) * g.channels * taps;
  const vector<float> x = Random(in_size * images, 11);
  const vector<float> w = Random(w_size, 12);
  const vector<float> dy = Random(out_size * images, 13);
  vector<double> y_want(out_size * images, 0.0), dw_want(w_size, 0.5);
  vector<double> dx_want(in_size * images, 0.0);
  for (int n = 0; n < images; ++n) {
    for (int o = 0; o < g.outputs; ++o) {
      for (int oy = 0; oy < OH; ++oy) {
        for (int ox = 0; ox < OW; ++ox) {
          const size_t yi = n * out_size + (o * OH + oy) * OW + ox;
          for (int c = 0; c < g.channels; ++c) {
            for (int t = 0; t < taps; ++t) {
              const int h =
                  oy * g.stride_h - g.pad_h + (t / g.kernel_w) * g.dilation_h;
              const int v =
                  ox * g.stride_w - g.pad_w + (t % g.kernel_w) * g.dilation_w;
              if (h < 0 || h >= g.height || v < 0 || v >= g.width) continue;
              const size_t xi = n * in_size + (c * g.height + h) * g.width + v;
              const size_t wi = (o * g.channels + c) * taps + t;
              y_want[yi] += static_cast<double>(w[wi]) * x[xi];
              dw_want[wi] += static_cast<double>(dy[yi]) * x[xi];
              dx_want[xi] += static_cast<double>(dy[yi]) * w[wi];
            }
          }
        }
      }
    }
  }
  vector<float> packed(conv.packed_size()), y(out_size * images);
  conv.PackWeights(w.data(), false, packed.data());
  for (int n = 0; n < images; ++n) {
    conv.Forward(packed.data(), x.data() + n * in_size,
                 y.data() + n * out_size);
  }
  ExpectNear(y_want, y.data(), 1e-5, "forward");
  vector<float> dw(w_size, 0.5f);
  conv.AccumulateWeightGrad(images, x.data(), in_size, dy.data(), out_size,
                            dw.data());
  // A float sum of n products of numbers in [-1, 1] is off by about
  // sqrt(n) roundings of its size: the tolerance grows with the number of
  // positions summed once that passes 100.
  const double dw_tol =
      1e-5 *
      std::max(1.0, std::sqrt(static_cast<double>(images) * OH * OW) / 10.0);
  ExpectNear(dw_want, dw.data(), dw_tol, "weight gradient");
  // A strided convolution's input gradient is not a convolution (the
  // layer takes im2col's).
  if (g.stride_h != 1 || g.stride_w != 1) return;
  DirectConv::Geometry b = g;
  std::swap(b.channels, b.outputs);
  b.height = OH;
  b.width = OW;
  b.pad_h = g.dilation_h * (g.kernel_h - 1) - g.pad_h;
  b.pad_w = g.dilation_w * (g.kernel_w - 1) - g.pad_w;
  const DirectConv back(b, kernel);
  ASSERT_TRUE(back.supported());
  ASSERT_EQ(back.output_h(), g.height);
  ASSERT_EQ(back.output_w(), g.width);
  vector<float> packed_back(back.packed_size()), dx(in_size * images);
  back.PackWeights(w.data(), true, packed_back.data());
  for (int n = 0; n < images; ++n) {
    back.Forward(packed_back.data(), dy.data() + n * out_size,
                 dx.data() + n * in_size);
  }
  ExpectNear(dx_want, dx.data(), 1e-5, "input gradient");
}

DirectConv::Geometry Geom(int c, int h, int w, int o, int kh, int kw,
                          int ph = 0, int pw = 0, int dh = 1, int dw = 1) {
  DirectConv::Geometry g;
  g.channels = c;
  g.height = h;
  g.width = w;
  g.outputs = o;
  g.kernel_h = kh;
  g.kernel_w = kw;
  g.pad_h = ph;
  g.pad_w = pw;
  g.dilation_h = dh;
  g.dilation_w = dw;
  return g;
}

// Each geometry through both AVX-512 kernels (Note [Output vectors]); on
// AVX2 CPUs both runs take the AVX2 path.
void CheckDirectConv(const DirectConv::Geometry& g) {
  CheckDirectConv(g, DirectConv::Kernel::kPositionVectors);
  CheckDirectConv(g, DirectConv::Kernel::kOutputVectors);
}

TEST(DirectConvolutionTest, KernelsMatchNaiveLoops) {
  POSEIDON_SKIP_WITHOUT_DIRECT_CONV();
  // Same-size 5x5 (rows of 16 and 32, and 8: segments spanning rows).
  CheckDirectConv(Geom(3, 16, 16, 8, 5, 5, 2, 2));
  CheckDirectConv(Geom(2, 4, 32, 9, 5, 5, 2, 2));
  CheckDirectConv(Geom(5, 8, 8, 12, 5, 5, 2, 2));
  // 7 x 7 (49 positions: a short last tile of positions), 70 outputs (a
  // block of 4 output vectors and one more, 10 lanes of it idle).
  CheckDirectConv(Geom(3, 7, 7, 70, 5, 5, 2, 2));
  // Unpadded (output rows narrower than the image), rectangular kernels,
  // pads differing per axis, dilation.
  CheckDirectConv(Geom(2, 12, 12, 5, 5, 5));
  CheckDirectConv(Geom(3, 7, 9, 11, 3, 2, 1, 0, 1, 2));
  CheckDirectConv(Geom(3, 9, 9, 40, 3, 3, 2, 2, 2, 2));
  // Rows of 1, 2, 3 and 27 outputs (a segment with several row pieces, up
  // to the limit), 1x1 kernels, a single output.
  CheckDirectConv(Geom(2, 7, 1, 3, 3, 1, 1, 0));
  CheckDirectConv(Geom(2, 9, 2, 3, 1, 1));
  CheckDirectConv(Geom(2, 11, 3, 4, 3, 3, 1, 1));
  CheckDirectConv(Geom(2, 3, 27, 17, 3, 3, 1, 1));
  CheckDirectConv(Geom(3, 1, 1, 5, 1, 1));
  // More channels than one K block (256 steps / 9 taps = 28 channels),
  // outputs past one 32-wide weight-gradient tile.
  CheckDirectConv(Geom(30, 5, 6, 35, 3, 3, 1, 1));
  // More outputs than the AVX2 GEMM's row block (at most 252 here, never
  // above 600): its B panels are then packed a block of columns ahead,
  // straight from the image (Note [Implicit im2col]).
  CheckDirectConv(Geom(2, 6, 7, 610, 3, 3, 1, 1));
  // The weight gradient in row bands (Note [Weight gradient in row bands]):
  // 400 x 70 top-diff floats per output row make bands of two rows, the
  // last of five rows alone; 1000 x 70, bands of one row.
  CheckDirectConv(Geom(2, 5, 400, 70, 3, 3, 1, 1));
  CheckDirectConv(Geom(3, 3, 1000, 70, 3, 2, 1, 0));
}

// kAuto's choice between the AVX-512 kernels (Note [Output vectors]).
DirectConv::Geometry Strided(DirectConv::Geometry g, int stride_h,
                             int stride_w) {
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  return g;
}

// Note [Strided direct convolution]: the AVX2 path only.
TEST(DirectConvolutionTest, StridedMatchesNaiveLoops) {
  POSEIDON_SKIP_WITHOUT_DIRECT_CONV();
  if (Avx512KernelsAvailable()) {
    EXPECT_FALSE(DirectConv(Strided(Geom(3, 9, 9, 4, 3, 3), 2, 2)).supported())
        << "the AVX-512 kernels take unit strides only";
    GTEST_SKIP() << "strides run on the AVX2 path only";
  }
  // AlexNet's conv1 in small (11x11, stride 4), ResNet-50's (7x7, stride
  // 2, pad 3), Inception-V3's (3x3, stride 2, no pad).
  CheckDirectConv(Strided(Geom(3, 35, 39, 10, 11, 11), 4, 4));
  CheckDirectConv(Strided(Geom(3, 20, 23, 17, 7, 7, 3, 3), 2, 2));
  CheckDirectConv(Strided(Geom(3, 21, 21, 8, 3, 3), 2, 2));
  // Different strides per axis, dilation, more channels.
  CheckDirectConv(Strided(Geom(20, 13, 17, 9, 3, 2, 1, 0, 2, 1), 3, 2));
  CheckDirectConv(Strided(Geom(5, 12, 10, 6, 5, 3, 2, 1), 1, 3));
  // A 1x1 kernel (subsampling), a stride past the kernel, and a stride as
  // wide as the padded row (one output column, and phases of one element).
  CheckDirectConv(Strided(Geom(4, 9, 11, 7, 1, 1), 2, 2));
  CheckDirectConv(Strided(Geom(2, 15, 16, 3, 2, 2, 1, 1), 5, 3));
  CheckDirectConv(Strided(Geom(2, 8, 5, 3, 3, 3, 1, 1), 2, 7));
}

TEST(DirectConvolutionTest, OutputVectorsOnlyForNarrowOrPoorlyFilledRows) {
  POSEIDON_SKIP_WITHOUT_AVX512();
  // CIFAR-10 quick's conv3 and its input gradient; GoogLeNet's 5b 5x5.
  EXPECT_TRUE(DirectConv(Geom(32, 8, 8, 64, 5, 5, 2, 2)).output_vectors());
  EXPECT_TRUE(DirectConv(Geom(64, 8, 8, 32, 5, 5, 2, 2)).output_vectors());
  EXPECT_TRUE(DirectConv(Geom(48, 7, 7, 128, 5, 5, 2, 2)).output_vectors());
  // Rows of 17 and 19, under 60% of the position vectors' lanes
  // (Inception-V3's 1x7 and 7x1 layers on 17 x 17).
  EXPECT_TRUE(DirectConv(Geom(128, 17, 17, 128, 1, 7, 0, 3)).output_vectors());
  EXPECT_TRUE(DirectConv(Geom(128, 17, 17, 128, 7, 1, 3, 0)).output_vectors());
  EXPECT_TRUE(DirectConv(Geom(16, 19, 19, 32, 3, 3, 1, 1)).output_vectors());
  // Rows of 20 (62.5% of 32 lanes); rows of 16 (CIFAR-10 quick's conv2);
  // 50 outputs in 64 lanes (LeNet's conv2, 8 x 8 output); rows of 12.
  EXPECT_FALSE(DirectConv(Geom(16, 20, 20, 32, 3, 3, 1, 1)).output_vectors());
  EXPECT_FALSE(DirectConv(Geom(32, 16, 16, 32, 5, 5, 2, 2)).output_vectors());
  EXPECT_FALSE(DirectConv(Geom(20, 12, 12, 50, 5, 5)).output_vectors());
  EXPECT_FALSE(DirectConv(Geom(8, 12, 12, 32, 3, 3, 1, 1)).output_vectors());
  // Asked for explicitly.
  EXPECT_TRUE(DirectConv(Geom(8, 16, 16, 32, 3, 3, 1, 1),
                         DirectConv::Kernel::kOutputVectors)
                  .output_vectors());
  EXPECT_FALSE(DirectConv(Geom(32, 8, 8, 64, 5, 5, 2, 2),
                          DirectConv::Kernel::kPositionVectors)
                   .output_vectors());
}

TEST(DirectConvolutionTest, RejectsEmptyOutput) {
  EXPECT_FALSE(DirectConv(Geom(2, 3, 3, 4, 5, 5)).supported());
}

using Algo = BaseConvolutionLayer<float>::Algorithm;

LayerParameter ConvParam(int outputs, int kernel, int pad, int stride = 1,
                         int group = 1) {
  return test::ConvPathParam("Convolution", outputs, kernel, pad, stride,
                             group);
}

// Runs forward and backward with `algo` on `threads` threads; returns top,
// bottom diff, weight diff and bias diff.
vector<vector<float>> RunConv(ConvolutionLayer<float>* layer, Algo algo,
                              int threads, Blob<float>* bottom, bool* direct) {
  const int saved = Poseidon::num_threads();
  Poseidon::set_num_threads(threads);
  Blob<float> top;
  layer->set_algorithm(algo);
  layer->Reshape({bottom}, {&top});
  *direct = layer->direct();
  layer->Forward({bottom}, {&top});
  const vector<float> diff = Random(top.count(), 21);
  std::copy(diff.begin(), diff.end(), top.mutable_cpu_diff());
  for (auto& b : layer->blobs()) {
    cpu_set(b->count(), 0.25f, b->mutable_cpu_diff());
  }
  layer->Backward({&top}, {true}, {bottom});
  Poseidon::set_num_threads(saved);
  auto grab = [](const float* p, int n) { return vector<float>(p, p + n); };
  return {grab(top.cpu_data(), top.count()),
          grab(bottom->cpu_diff(), bottom->count()),
          grab(layer->blobs()[0]->cpu_diff(), layer->blobs()[0]->count()),
          grab(layer->blobs()[1]->cpu_diff(), layer->blobs()[1]->count())};
}

// The layer's direct path against its per-image path, on 1 and 2 threads.
void CheckDirectLayer(const vector<int>& shape, const LayerParameter& param) {
  SCOPED_TRACE("bottom " + std::to_string(shape[1]) + "x" +
               std::to_string(shape[2]) + "x" + std::to_string(shape[3]));
  Blob<float> bottom(shape);
  test::FillGaussian(&bottom);
  ConvolutionLayer<float> layer(param);
  Blob<float> top;
  layer.SetUp({&bottom}, {&top});
  bool direct = false;
  const auto want = RunConv(&layer, Algo::kPerImage, 1, &bottom, &direct);
  EXPECT_FALSE(direct);
  const char* names[] = {"top data", "bottom diff", "weight diff", "bias diff"};
  for (int threads : {1, 2}) {
    const auto got = RunConv(&layer, Algo::kAuto, threads, &bottom, &direct);
    ASSERT_TRUE(direct) << "kAuto did not take the direct path";
    for (int k = 0; k < 4; ++k) {
      ASSERT_EQ(want[k].size(), got[k].size());
      ExpectNear(
          vector<double>(want[k].begin(), want[k].end()), got[k].data(), 2e-4,
          string(names[k]) + " on " + std::to_string(threads) + " threads");
    }
  }
}

TEST(DirectConvolutionTest, LayerMatchesPerImagePath) {
  POSEIDON_SKIP_WITHOUT_DIRECT_CONV();
  CheckDirectLayer({5, 3, 8, 16}, ConvParam(10, 5, 2));
  CheckDirectLayer({3, 4, 6, 5}, ConvParam(6, 3, 1, 1, /*group=*/2));
  // Output over 1.25 times smaller than the input: the input gradient
  // takes the im2col path (LeNet's conv2 shape, then a padded but still
  // shrinking one).
  CheckDirectLayer({3, 20, 12, 12}, ConvParam(50, 5, 0));
  CheckDirectLayer({4, 3, 9, 7}, ConvParam(5, 5, 1, 1));
  // Less (24 x 22 to 22 x 20, 1.2 times): the direct input gradient.
  CheckDirectLayer({2, 6, 24, 22}, ConvParam(7, 3, 0));
  // Strided (the AVX2 path only): the forward and weight gradient direct,
  // the input gradient by im2col; a first layer's weight gradient is the
  // row kernel's.
  if (!Avx512KernelsAvailable()) {
    CheckDirectLayer({3, 6, 17, 19}, ConvParam(9, 3, 1, /*stride=*/2));
    CheckDirectLayer({2, 3, 31, 29}, ConvParam(8, 7, 3, /*stride=*/2));
  }
}

TEST(DirectConvolutionTest, ChosenOnlyWhereItPays) {
  Blob<float> bottom(2, 4, 8, 8), top;
  struct Case {
    LayerParameter param;
    bool direct;
    bool direct_input_grad;
    bool avx2_only;  // Note [Strided direct convolution]
  };
  const Case cases[] = {
      {ConvParam(8, 3, 1), true, true, false},                // same size
      {ConvParam(8, 3, 0), true, false, false},               // output smaller
      {ConvParam(8, 3, 1, /*stride=*/2), true, false, true},  // strided
      {ConvParam(8, 3, 1, /*stride=*/11), false, false, false},  // > row
      {ConvParam(8, 1, 0, /*stride=*/2), false, false, false},   // 1x1 strided
      {ConvParam(130, 3, 1), false, false, false},               // many outputs
      {ConvParam(8, 1, 0), false, false, false},  // 1x1: a GEMM on the image
      {ConvParam(260, 3, 1, 1, /*group=*/2), false, false, false},  // per group
  };
  for (const Case& c : cases) {
    ConvolutionLayer<float> layer(c.param);
    layer.SetUp({&bottom}, {&top});
    const bool kernels = DirectConv::KernelsAvailable() &&
                         !(c.avx2_only && Avx512KernelsAvailable());
    EXPECT_EQ(layer.direct(), c.direct && kernels)
        << c.param.ShortDebugString();
    EXPECT_EQ(layer.direct_input_grad(), c.direct_input_grad && kernels)
        << c.param.ShortDebugString();
    // The log line says the same.
    const string path = layer.CpuPathDescription();
    EXPECT_EQ(path.rfind("direct", 0) == 0, layer.direct()) << path;
    EXPECT_EQ(path.find("input gradient by im2col") != string::npos,
              layer.direct() && !layer.direct_input_grad())
        << path;
    layer.set_algorithm(Algo::kPerImage);
    layer.Reshape({&bottom}, {&top});
    EXPECT_FALSE(layer.direct());
    EXPECT_EQ(layer.CpuPathDescription(), "im2col + GEMM per image");
  }
  Blob<double> bottom_d(2, 4, 8, 8), top_d;
  ConvolutionLayer<double> layer_d(ConvParam(8, 3, 1));
  layer_d.SetUp({&bottom_d}, {&top_d});
  EXPECT_FALSE(layer_d.direct());
}

TEST(DirectConvolutionTest, Gradient) {
  POSEIDON_SKIP_WITHOUT_DIRECT_CONV();
  Blob<float> bottom(2, 3, 5, 6), top;
  test::FillGaussian(&bottom);
  ConvolutionLayer<float> layer(ConvParam(4, 3, 1));
  layer.SetUp({&bottom}, {&top});
  ASSERT_TRUE(layer.direct());
  test::GradientChecker<float> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TEST(DirectConvolutionTest, GradientWhenTheOutputShrinks) {
  POSEIDON_SKIP_WITHOUT_DIRECT_CONV();
  Blob<float> bottom(2, 3, 7, 6), top;
  test::FillGaussian(&bottom);
  ConvolutionLayer<float> layer(ConvParam(4, 3, 0));
  layer.SetUp({&bottom}, {&top});
  ASSERT_TRUE(layer.direct());
  ASSERT_FALSE(layer.direct_input_grad());
  test::GradientChecker<float> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

}  // namespace
}  // namespace poseidon
