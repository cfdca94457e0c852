// The convolution layer's Winograd path (Note [Winograd path] in
// conv_algorithms/winograd_conv.cpp) against its per-image im2col path:
// forward, input and weight gradients, on 1 and 2 threads, on shapes with
// padding 0 to 2, groups, channel counts that are not multiples of 16 and
// batch 1, and 1x7 and 7x1 kernels (F(2, 7)); where kAuto chooses it; and
// a deconvolution through it.
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

LayerParameter Param(const std::string& type, int outputs, int pad,
                     int group = 1, int kernel = 3, int stride = 1) {
  return test::ConvPathParam(type, outputs, kernel, pad, stride, group);
}

// Winograd's float error grows with the magnitude of the sums (Note
// [Winograd] in util/winograd.cpp), not with each element's: elements may
// differ by 1e-4 of the largest one. A wrong transform or tile errs by
// the size of the values themselves.
constexpr double kTolerance = 1e-4;

// A kernel_h x kernel_w convolution padded pad_h, pad_w.
LayerParameter Rect(int outputs, int kernel_h, int kernel_w, int pad_h,
                    int pad_w, int group = 1) {
  LayerParameter param = Param("Convolution", outputs, 0, group);
  ConvolutionParameter* p = param.mutable_convolution_param();
  p->clear_kernel_size();
  p->clear_pad();
  p->set_kernel_h(kernel_h);
  p->set_kernel_w(kernel_w);
  p->set_pad_h(pad_h);
  p->set_pad_w(pad_w);
  return param;
}

template <typename Layer>
void CheckLayer(const std::vector<int>& shape, const LayerParameter& param) {
  test::CheckConvPath<Layer>(
      shape, param, kTolerance, {true},
      [](const Layer& layer) { return layer.winograd(); }, "Winograd path");
}

TEST(WinogradConvolutionTest, LayerMatchesPerImagePath) {
  POSEIDON_SKIP_WITHOUT_AVX2();
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
  // (Every shape has at least 100 output tiles in the batch.)
  CheckLayer<Conv>({3, 128, 22, 22}, Param("Convolution", 260, 1, 2));
  // 48 channels, the AVX-512 kernels' floor, and 50 outputs.
  CheckLayer<Conv>({2, 48, 31, 30}, Param("Convolution", 50, 1));
  // Below that floor, Winograd's with the AVX2 kernels only: Inception-V3's
  // stem (32 channels, no pad), outputs not a multiple of 16.
  if (!Avx512KernelsAvailable()) {
    CheckLayer<Conv>({2, 32, 31, 30}, Param("Convolution", 33, 0));
  }
}

TEST(WinogradConvolutionTest, FiveByFiveLayerMatchesPerImagePath) {
  POSEIDON_SKIP_WITHOUT_AVX2();
  using Conv = ConvolutionLayer<float>;
  // Pads 0, 1, 3 and 4, sizes not multiples of the tile, 49 and 52
  // outputs (at least 100 2 x 2 tiles in each shape).
  CheckLayer<Conv>({3, 48, 13, 14}, Param("Convolution", 64, 1, 1, 5));
  CheckLayer<Conv>({2, 48, 19, 17}, Param("Convolution", 49, 0, 1, 5));
  CheckLayer<Conv>({3, 48, 9, 11}, Param("Convolution", 52, 3, 1, 5));
  CheckLayer<Conv>({3, 48, 7, 9}, Param("Convolution", 48, 4, 1, 5));
  // Two groups of 48 channels and 64 outputs (AlexNet's conv2 in small).
  CheckLayer<Conv>({3, 96, 14, 14}, Param("Convolution", 128, 2, 2, 5));
  // CIFAR-10 quick's conv3 (7 images of 16 tiles on the 8 x 8 maps): 32
  // channels, on rows narrower than 12 (Winograd's with either kernels).
  CheckLayer<Conv>({7, 32, 8, 8}, Param("Convolution", 64, 2, 1, 5));
  // F(4x4, 5x5) where the batch has enough 4 x 4 tiles (at least 100 in
  // each, so with either kernels): pads 2 and 3, sizes not multiples of 4,
  // two groups.
  CheckLayer<Conv>({7, 48, 16, 15}, Param("Convolution", 50, 2, 1, 5));
  CheckLayer<Conv>({9, 48, 13, 14}, Param("Convolution", 64, 3, 1, 5));
  CheckLayer<Conv>({8, 96, 14, 14}, Param("Convolution", 128, 2, 2, 5));
  // CIFAR-10 quick's conv2 with 128 tiles of 4 x 4: 32 channels on rows of
  // 16, F(4x4, 5x5)'s floor with either kernels.
  CheckLayer<Conv>({8, 32, 16, 16}, Param("Convolution", 32, 2, 1, 5));
  // Below the AVX-512 kernels' channel floor for F(2x2, 5x5): CIFAR-10
  // quick's conv2 with 32 tiles of 4 x 4 (128 of 2 x 2), 40 channels and
  // 33 outputs.
  if (!Avx512KernelsAvailable()) {
    CheckLayer<Conv>({2, 32, 16, 16}, Param("Convolution", 32, 2, 1, 5));
    CheckLayer<Conv>({2, 40, 19, 17}, Param("Convolution", 33, 0, 1, 5));
  }
}

TEST(WinogradConvolutionTest, OneDimensionalLayerMatchesPerImagePath) {
  POSEIDON_SKIP_WITHOUT_AVX2();
  using Conv = ConvolutionLayer<float>;
  // Inception-V3's 1x7 and 7x1 on 17 x 17 in small: pad 3 along the
  // kernel, outputs past 128 (where the direct path stops); pads 0 and 6;
  // sizes that leave a partial last tile or short runs; two groups. (Each
  // above the AVX-512 kernels' floors too: 100 tiles, 48 channels on rows
  // of 12 or more, else 32.) The AVX-512 kernels take 7x1 only; the
  // avx2_paths test runs the 1x7 cases on such a CPU.
  CheckLayer<Conv>({2, 48, 17, 17}, Rect(136, 7, 1, 3, 0));
  CheckLayer<Conv>({3, 40, 12, 9}, Rect(33, 7, 1, 6, 0));
  CheckLayer<Conv>({4, 96, 10, 11}, Rect(80, 7, 1, 2, 0, 2));
  if (!Avx512KernelsAvailable()) {
    CheckLayer<Conv>({2, 48, 17, 17}, Rect(136, 1, 7, 0, 3));
    CheckLayer<Conv>({5, 40, 9, 12}, Rect(33, 1, 7, 0, 0));
    CheckLayer<Conv>({2, 48, 5, 30}, Rect(48, 1, 7, 0, 6));
  }
}

TEST(WinogradConvolutionTest, DeconvolutionMatchesPerImagePath) {
  POSEIDON_SKIP_WITHOUT_AVX2();
  // Convolution-space 64 channels -> 130 outputs: the deconvolution's
  // forward pass is that convolution's input gradient.
  CheckLayer<DeconvolutionLayer<float>>({2, 130, 30, 33},
                                        Param("Deconvolution", 64, 1));
}

TEST(WinogradConvolutionTest, ChosenOnlyWhereItPays) {
  // Expected with the AVX-512 kernels and with the AVX2 ones: the channel
  // floor is 48 there (32 on output rows narrower than 12 and for
  // F(4x4, 5x5)) and 32 here, and 1x7 goes by F(2, 7) here only (Note
  // [Winograd path]).
  struct Case {
    std::vector<int> shape;
    LayerParameter param;
    bool avx512, avx2;
  };
  const Case cases[] = {
      {{2, 64, 40, 40}, Param("Convolution", 256, 1), true, true},
      {{2, 64, 40, 40}, Param("Convolution", 100, 1), true, true},  // direct
      {{2, 128, 40, 40}, Param("Convolution", 128, 1), true, true},
      {{2, 64, 40, 40}, Param("Convolution", 48, 1), true, true},  // outputs
      {{2, 64, 40, 40}, Param("Convolution", 40, 1), false, true},
      {{2, 64, 40, 40}, Param("Convolution", 16, 1), false, false},
      {{2, 48, 40, 40}, Param("Convolution", 64, 1), true, true},  // channels
      {{2, 32, 40, 40}, Param("Convolution", 64, 1), false, true},
      {{12, 32, 10, 10}, Param("Convolution", 32, 1), true, true},  // narrow
      {{12, 32, 12, 12}, Param("Convolution", 32, 1), false, true},
      {{12, 16, 10, 10}, Param("Convolution", 32, 1), false, false},
      {{2, 16, 40, 40}, Param("Convolution", 256, 1), false, false},
      {{2, 64, 40, 40}, Param("Convolution", 256, 3), false, false},  // pad 3
      // 5x5: the same floors, but 32 channels for F(4x4, 5x5) with the
      // AVX-512 kernels too; pad at most 4.
      {{2, 64, 40, 40}, Param("Convolution", 256, 1, 1, 5, 1), true, true},
      {{2, 48, 16, 16}, Param("Convolution", 64, 4, 1, 5, 1), true, true},
      {{2, 32, 16, 16}, Param("Convolution", 32, 2, 1, 5, 1), false, true},
      {{7, 32, 16, 16}, Param("Convolution", 32, 2, 1, 5, 1), true, true},
      {{6, 32, 16, 16}, Param("Convolution", 32, 2, 1, 5, 1), false, true},
      {{6, 48, 16, 16}, Param("Convolution", 32, 2, 1, 5, 1), false, true},
      {{7, 24, 16, 16}, Param("Convolution", 32, 2, 1, 5, 1), false, false},
      {{7, 32, 8, 8}, Param("Convolution", 64, 2, 1, 5, 1), true, true},
      {{2, 64, 40, 40}, Param("Convolution", 256, 5, 1, 5, 1), false, false},
      {{2, 16, 16, 16}, Param("Convolution", 32, 2, 1, 5, 1), false, false},
      {{2, 64, 40, 40}, Param("Convolution", 256, 2, 1, 5, 2), false, false},
      {{2, 64, 40, 40}, Param("Convolution", 256, 1, 1, 7, 1), false, false},
      // 1x7 and 7x1: F(2, 7), the same floors (1 x 2 tiles counted); pad
      // at most 6 along the kernel and none across it.
      {{2, 64, 17, 17}, Rect(192, 1, 7, 0, 3), false, true},
      {{2, 64, 17, 17}, Rect(192, 7, 1, 3, 0), true, true},
      {{2, 32, 17, 17}, Rect(192, 7, 1, 3, 0), false, true},
      {{2, 16, 17, 17}, Rect(192, 1, 7, 0, 3), false, false},
      {{2, 64, 17, 17}, Rect(192, 1, 7, 1, 3), false, false},
      {{2, 64, 17, 17}, Rect(192, 1, 7, 0, 7), false, false},
      {{1, 64, 8, 7}, Rect(192, 1, 7, 0, 3), false, true},   // 32 tiles
      {{1, 64, 4, 4}, Rect(192, 1, 7, 0, 3), false, false},  // 8
      {{2, 64, 17, 17}, Rect(192, 1, 5, 0, 2), false, false},
      {{2, 64, 17, 17}, Rect(192, 3, 7, 1, 3), false, false},
      {{2, 64, 40, 40}, Param("Convolution", 256, 1, 1, 3, 2), false, false},
      {{2, 64, 40, 40}, Param("Convolution", 256, 1, 2), false, true},   // 32
      {{2, 64, 40, 40}, Param("Convolution", 256, 1, 4), false, false},  // 16
      {{2, 64, 7, 7}, Param("Convolution", 256, 1), false, false},  // 8 tiles
      // The tile floor: 100 with the AVX-512 kernels, 32 with the AVX2 ones.
      {{8, 64, 7, 7}, Param("Convolution", 256, 1), false, true},   // 32
      {{7, 64, 7, 7}, Param("Convolution", 256, 1), false, false},  // 28
      {{25, 64, 7, 7}, Param("Convolution", 256, 1), true, true},   // 100
  };
  for (const Case& c : cases) {
    Blob<float> bottom(c.shape), top;
    ConvolutionLayer<float> layer(c.param);
    layer.SetUp({&bottom}, {&top});
    const bool expected = Avx512KernelsAvailable() ? c.avx512
                          : Avx2KernelsAvailable() ? c.avx2
                                                   : false;
    EXPECT_EQ(layer.winograd(), expected) << c.param.ShortDebugString();
    layer.set_algorithm(Algo::kBatched);
    layer.Reshape({&bottom}, {&top});
    EXPECT_FALSE(layer.winograd());
  }
  // 5x5: F(4x4, 5x5) where the batch has the tile floor's 4 x 4 tiles,
  // else F(2x2, 5x5) where it has 2 x 2 ones.
  struct Form {
    std::vector<int> shape;
    int pad;
    const char* avx512;  // the form chosen with the AVX-512 kernels
    const char* avx2;    // and with the AVX2 ones (null: not Winograd)
  };
  const char* const k4x4 = "F(4x4, 5x5)";
  const char* const k2x2 = "F(2x2, 5x5)";
  const Form forms[] = {
      {{8, 48, 16, 16}, 2, k4x4, k4x4},      // 128 tiles of 4 x 4
      {{2, 64, 40, 40}, 1, k4x4, k4x4},      // 200
      {{7, 48, 8, 8}, 2, k2x2, k2x2},        // 28, and 112 of 2 x 2
      {{3, 48, 13, 14}, 1, k2x2, k2x2},      // 27, and 108 of 2 x 2
      {{2, 48, 19, 17}, 0, k2x2, k4x4},      // 32, and 112
      {{2, 48, 12, 12}, 2, nullptr, k2x2},   // 18, and 72
      {{1, 48, 9, 9}, 2, nullptr, nullptr},  // 9, and 25
  };
  for (const Form& f : forms) {
    Blob<float> bottom(f.shape), top;
    ConvolutionLayer<float> layer(Param("Convolution", 64, f.pad, 1, 5));
    layer.SetUp({&bottom}, {&top});
    const char* want = Avx512KernelsAvailable() ? f.avx512
                       : Avx2KernelsAvailable() ? f.avx2
                                                : nullptr;
    SCOPED_TRACE(testing::PrintToString(f.shape));
    ASSERT_EQ(layer.winograd(), want != nullptr) << layer.CpuPathDescription();
    if (want != nullptr) {
      EXPECT_NE(layer.CpuPathDescription().find(want), std::string::npos)
          << layer.CpuPathDescription();
    }
  }
  Blob<double> bottom_d(2, 64, 8, 8), top_d;
  ConvolutionLayer<double> layer_d(Param("Convolution", 256, 1));
  layer_d.SetUp({&bottom_d}, {&top_d});
  EXPECT_FALSE(layer_d.winograd());
}

}  // namespace
}  // namespace poseidon
