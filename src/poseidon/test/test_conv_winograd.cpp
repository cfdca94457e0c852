// The convolution layer's Winograd path (Note [Winograd path] in
// base_conv_layer_winograd.cpp) against its per-image im2col path: forward,
// input and weight gradients, on 1 and 2 threads, on shapes with padding 0
// to 2, groups, channel counts that are not multiples of 16 and batch 1;
// where kAuto chooses it; and a deconvolution through it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "poseidon/layers/conv_layer.hpp"
#include "poseidon/layers/deconv_layer.hpp"
#include "poseidon/util/avx512.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using Algo = BaseConvolutionLayer<float>::Algorithm;

LayerParameter Param(const std::string& type, int outputs, int pad,
                     int group = 1, int kernel = 3, int stride = 1) {
  LayerParameter param;
  param.set_type(type);
  ConvolutionParameter* p = param.mutable_convolution_param();
  p->set_num_output(outputs);
  p->add_kernel_size(kernel);
  p->add_pad(pad);
  p->add_stride(stride);
  p->set_group(group);
  p->mutable_weight_filler()->set_type("gaussian");
  p->mutable_bias_filler()->set_type("gaussian");
  return param;
}

// Forward and backward with `algo` on `threads` threads: top, bottom diff,
// weight diff, bias diff; *winograd says what the layer ran.
template <typename Layer>
std::vector<std::vector<float>> Run(Layer* layer, Algo algo, int threads,
                                    Blob<float>* bottom,
                                    const Blob<float>& diff, bool* winograd) {
  const int saved = Poseidon::num_threads();
  Poseidon::set_num_threads(threads);
  Blob<float> top;
  layer->set_algorithm(algo);
  layer->Reshape({bottom}, {&top});
  *winograd = layer->winograd();
  layer->Forward({bottom}, {&top});
  CHECK_EQ(diff.count(), top.count());
  std::copy(diff.cpu_data(), diff.cpu_data() + diff.count(),
            top.mutable_cpu_diff());
  for (auto& b : layer->blobs()) {
    cpu_set(b->count(), 0.25f, b->mutable_cpu_diff());
  }
  layer->Backward({&top}, {true}, {bottom});
  Poseidon::set_num_threads(saved);
  auto grab = [](const float* p, int n) {
    return std::vector<float>(p, p + n);
  };
  return {grab(top.cpu_data(), top.count()),
          grab(bottom->cpu_diff(), bottom->count()),
          grab(layer->blobs()[0]->cpu_diff(), layer->blobs()[0]->count()),
          grab(layer->blobs()[1]->cpu_diff(), layer->blobs()[1]->count())};
}

// Winograd's float error grows with the magnitude of the sums (Note
// [Winograd] in util/winograd.cpp), not with each element's: elements may
// differ by 1e-4 of the largest one. A wrong transform or tile errs by
// the size of the values themselves.
void ExpectClose(const std::vector<float>& want, const std::vector<float>& got,
                 const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  float largest = 0;
  for (float v : want) largest = std::max(largest, std::fabs(v));
  const double tol = 1e-4 * largest;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(want[i], got[i], tol)
        << what << ": element " << i << " of " << want.size();
  }
}

template <typename Layer>
void CheckLayer(const std::vector<int>& shape, const LayerParameter& param) {
  SCOPED_TRACE(param.ShortDebugString() + " on " + std::to_string(shape[0]) +
               "x" + std::to_string(shape[1]) + "x" + std::to_string(shape[2]) +
               "x" + std::to_string(shape[3]));
  Blob<float> bottom(shape), top;
  test::FillGaussian(&bottom);
  Layer layer(param);
  layer.SetUp({&bottom}, {&top});
  Blob<float> diff(top.shape());  // the same top diff for every run
  test::FillGaussian(&diff);
  bool winograd = false;
  const auto want = Run(&layer, Algo::kPerImage, 1, &bottom, diff, &winograd);
  EXPECT_FALSE(winograd);
  const char* names[] = {"top data", "bottom diff", "weight diff", "bias diff"};
  for (int threads : {1, 2}) {
    const auto got =
        Run(&layer, Algo::kAuto, threads, &bottom, diff, &winograd);
    ASSERT_TRUE(winograd) << "kAuto did not take the Winograd path";
    for (int k = 0; k < 4; ++k) {
      ExpectClose(want[k], got[k],
                  std::string(names[k]) + " on " + std::to_string(threads) +
                      " threads");
    }
  }
}

#define POSEIDON_SKIP_WITHOUT_AVX512()                                   \
  if (!Avx512KernelsAvailable()) {                                       \
    GTEST_SKIP() << "no AVX-512 on this CPU (or POSEIDON_KERNELS=blas)"; \
  }

TEST(WinogradConvolutionTest, LayerMatchesPerImagePath) {
  POSEIDON_SKIP_WITHOUT_AVX512();
  using Conv = ConvolutionLayer<float>;
  CheckLayer<Conv>({2, 64, 30, 33}, Param("Convolution", 130, 1));
  CheckLayer<Conv>({1, 70, 42, 42}, Param("Convolution", 129, 0));
  CheckLayer<Conv>({3, 65, 22, 22}, Param("Convolution", 140, 2));
  // 64 and 128 channels and outputs: where the direct path would run.
  CheckLayer<Conv>({2, 128, 30, 30}, Param("Convolution", 128, 1));
  CheckLayer<Conv>({2, 64, 30, 27}, Param("Convolution", 64, 1));
  // The weight gradient split by outputs (few tiles: one image) and by
  // tiles (512 tiles, at least two blocks per thread).
  CheckLayer<Conv>({1, 64, 41, 41}, Param("Convolution", 96, 1));
  CheckLayer<Conv>({2, 64, 64, 64}, Param("Convolution", 64, 1));
  // Two groups of 64 channels and 130 outputs; an odd batch on 2 threads.
  // (Every shape has at least kWinogradMinTiles output tiles in the batch.)
  CheckLayer<Conv>({3, 128, 22, 22}, Param("Convolution", 260, 1, 2));
}

TEST(WinogradConvolutionTest, DeconvolutionMatchesPerImagePath) {
  POSEIDON_SKIP_WITHOUT_AVX512();
  // Convolution-space 64 channels -> 130 outputs: the deconvolution's
  // forward pass is that convolution's input gradient.
  CheckLayer<DeconvolutionLayer<float>>({2, 130, 30, 33},
                                        Param("Deconvolution", 64, 1));
}

TEST(WinogradConvolutionTest, ChosenOnlyWhereItPays) {
  struct Case {
    std::vector<int> shape;
    LayerParameter param;
    bool winograd;
  };
  const Case cases[] = {
      {{2, 64, 40, 40}, Param("Convolution", 256, 1), true},
      {{2, 64, 40, 40}, Param("Convolution", 100, 1), true},   // over direct
      {{2, 128, 40, 40}, Param("Convolution", 128, 1), true},  // over direct
      {{2, 64, 40, 40}, Param("Convolution", 48, 1), false},   // few outputs
      {{2, 32, 8, 8}, Param("Convolution", 256, 1), false},    // few channels
      {{2, 64, 40, 40}, Param("Convolution", 256, 3), false},  // pad 3
      {{2, 64, 40, 40}, Param("Convolution", 256, 1, 1, 5, 1), false},  // 5x5
      {{2, 64, 40, 40},
       Param("Convolution", 256, 1, 1, 3, 2),
       false},                                                    // stride
      {{2, 64, 40, 40}, Param("Convolution", 256, 1, 2), false},  // 32 a group
      {{2, 64, 7, 7}, Param("Convolution", 256, 1), false},       // 8 tiles
  };
  for (const Case& c : cases) {
    Blob<float> bottom(c.shape), top;
    ConvolutionLayer<float> layer(c.param);
    layer.SetUp({&bottom}, {&top});
    EXPECT_EQ(layer.winograd(), c.winograd && Avx512KernelsAvailable())
        << c.param.ShortDebugString();
    layer.set_algorithm(Algo::kBatched);
    layer.Reshape({&bottom}, {&top});
    EXPECT_FALSE(layer.winograd());
  }
  Blob<double> bottom_d(2, 64, 8, 8), top_d;
  ConvolutionLayer<double> layer_d(Param("Convolution", 256, 1));
  layer_d.SetUp({&bottom_d}, {&top_d});
  EXPECT_FALSE(layer_d.winograd());
}

}  // namespace
}  // namespace poseidon
