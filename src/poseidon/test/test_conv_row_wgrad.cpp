// The convolution layer's row weight gradient (Note [Row weight-gradient
// path] in conv_algorithms/row_weight_grad_conv.cpp) against its per-image
// im2col path: the weight gradient (and that the forward pass, the input
// and bias gradients are untouched), with and without the input gradient,
// on 1 and 2 threads (images split, or outputs split for a lone image), on
// strides, pads, dilation, groups and a deconvolution; and where kAuto
// chooses it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "conv_path_test.hpp"
#include "poseidon/layers/conv_layer.hpp"
#include "poseidon/layers/deconv_layer.hpp"
#include "poseidon/util/avx512.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using Algo = test::ConvAlgo;

// Sums in another order: elements may differ by float rounding of the
// largest sums, 1e-5 of the largest element; a wrong tap or channel errs by
// the size of the values.
constexpr double kTolerance = 1e-5;

template <typename Layer>
void CheckLayer(const std::vector<int>& shape, const LayerParameter& param) {
  test::CheckConvPath<Layer>(
      shape, param, kTolerance, {false, true},
      [](const Layer& layer) { return layer.row_weight_grad(); },
      "row weight gradient");
}

TEST(RowWeightGradConvolutionTest, LayerMatchesPerImagePath) {
  POSEIDON_SKIP_WITHOUT_AVX2();
  using Conv = ConvolutionLayer<float>;
  // First layers in small: VGG-16 (3x3 pad 1: the direct path runs the
  // rest), ResNet-50 (7x7 stride 2 pad 3), Inception-V3 (3x3 stride 2),
  // CIFAR-10 (5x5 pad 2), LeNet (one channel, 5x5).
  CheckLayer<Conv>({3, 3, 30, 37},
                   test::ConvPathParam("Convolution", 10, 3, 1));
  CheckLayer<Conv>({2, 3, 33, 31},
                   test::ConvPathParam("Convolution", 9, 7, 3, 2));
  CheckLayer<Conv>({3, 3, 29, 29},
                   test::ConvPathParam("Convolution", 6, 3, 0, 2));
  CheckLayer<Conv>({2, 3, 20, 20},
                   test::ConvPathParam("Convolution", 17, 5, 2));
  CheckLayer<Conv>({2, 1, 28, 28},
                   test::ConvPathParam("Convolution", 20, 5, 0));
  // One image on 2 threads: the outputs are split.
  CheckLayer<Conv>({1, 3, 26, 19},
                   test::ConvPathParam("Convolution", 13, 3, 1));
  // Groups of 2 channels, dilation, 4 channels at stride 3.
  CheckLayer<Conv>({2, 6, 21, 24},
                   test::ConvPathParam("Convolution", 15, 3, 1, 1, 3));
  CheckLayer<Conv>({2, 2, 25, 23},
                   test::ConvPathParam("Convolution", 7, 3, 2, 1, 1, 2));
  CheckLayer<Conv>({3, 4, 26, 26},
                   test::ConvPathParam("Convolution", 5, 4, 1, 3));
}

TEST(RowWeightGradConvolutionTest, DeconvolutionMatchesPerImagePath) {
  POSEIDON_SKIP_WITHOUT_AVX2();
  // The deconvolution's weight gradient is that of a convolution from its
  // 3 outputs to its 8 channels.
  CheckLayer<DeconvolutionLayer<float>>(
      {2, 8, 12, 13}, test::ConvPathParam("Deconvolution", 3, 4, 1, 2));
}

TEST(RowWeightGradConvolutionTest, ChosenOnlyForFewChannels) {
  struct Case {
    std::vector<int> shape;
    LayerParameter param;
    bool rows;
  };
  const Case cases[] = {
      {{2, 3, 40, 40}, test::ConvPathParam("Convolution", 64, 3, 1), true},
      {{2, 4, 40, 40}, test::ConvPathParam("Convolution", 64, 7, 3, 2), true},
      {{2, 8, 40, 40},
       test::ConvPathParam("Convolution", 64, 3, 1, 1, 2),
       true},  // 4 a group
      {{2, 5, 40, 40},
       test::ConvPathParam("Convolution", 64, 3, 1),
       false},  // 5 channels
      // AlexNet's 11x11 conv1: 363 pairs, where im2col + GEMM was faster.
      {{2, 3, 60, 60}, test::ConvPathParam("Convolution", 96, 11, 0, 4), false},
  };
  for (const Case& c : cases) {
    Blob<float> bottom(c.shape), top;
    ConvolutionLayer<float> layer(c.param);
    layer.SetUp({&bottom}, {&top});
    EXPECT_EQ(layer.row_weight_grad(),
              c.rows && (Avx512KernelsAvailable() || Avx2KernelsAvailable()))
        << c.param.ShortDebugString();
    layer.set_algorithm(Algo::kBatched);
    layer.Reshape({&bottom}, {&top});
    EXPECT_FALSE(layer.row_weight_grad());
  }
  Blob<double> bottom_d(2, 3, 16, 16), top_d;
  ConvolutionLayer<double> layer_d(test::ConvPathParam("Convolution", 8, 3, 1));
  layer_d.SetUp({&bottom_d}, {&top_d});
  EXPECT_FALSE(layer_d.row_weight_grad());
}

}  // namespace
}  // namespace poseidon
