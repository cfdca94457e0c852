// RowWeightGradient (util/row_weight_grad.hpp) against a weight gradient
// written here as plain loops in double: strides 1 to 4, pads 0 to 3,
// dilation, kernels from 1x1 to 11x11 and 1x7, output rows narrower and
// wider than a vector and not a multiple of 16, output and pair counts that
// are not multiples of the register block, output ranges, one image and
// several. Skipped on CPUs without AVX-512.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "poseidon/util/avx512.hpp"
#include "poseidon/util/row_weight_grad.hpp"

namespace poseidon {
namespace {

using Geometry = RowWeightGradient::Geometry;

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

std::string Describe(const Geometry& g) {
  auto pair = [](int a, int b) {
    return std::to_string(a) + "x" + std::to_string(b);
  };
  return "C " + std::to_string(g.channels) + " " + pair(g.height, g.width) +
         " O " + std::to_string(g.outputs) + " kernel " +
         pair(g.kernel_h, g.kernel_w) + " pad " + pair(g.pad_h, g.pad_w) +
         " stride " + pair(g.stride_h, g.stride_w) + " dilation " +
         pair(g.dilation_h, g.dilation_w);
}

// Caffe's output size.
int OutputSize(int in, int pad, int kernel, int stride, int dilation) {
  return (in + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
}

// The gradient of outputs [begin, end) over `images` images, onto `start`
// (the layout (outputs, channels, kernel_h, kernel_w)), in double.
std::vector<double> Reference(const Geometry& g, int images,
                              const std::vector<float>& bottom,
                              const std::vector<float>& top_diff, int begin,
                              int end, const std::vector<float>& start) {
  const int OH =
      OutputSize(g.height, g.pad_h, g.kernel_h, g.stride_h, g.dilation_h);
  const int OW =
      OutputSize(g.width, g.pad_w, g.kernel_w, g.stride_w, g.dilation_w);
  std::vector<double> dw(start.begin(), start.end());
  const int k_total = g.channels * g.kernel_h * g.kernel_w;
  for (int n = 0; n < images; ++n) {
    for (int o = begin; o < end; ++o) {
      for (int c = 0; c < g.channels; ++c) {
        for (int i = 0; i < g.kernel_h; ++i) {
          for (int j = 0; j < g.kernel_w; ++j) {
            double sum = 0;
            for (int y = 0; y < OH; ++y) {
              const int h = y * g.stride_h - g.pad_h + i * g.dilation_h;
              if (h < 0 || h >= g.height) continue;
              for (int x = 0; x < OW; ++x) {
                const int w = x * g.stride_w - g.pad_w + j * g.dilation_w;
                if (w < 0 || w >= g.width) continue;
                sum += static_cast<double>(
                           top_diff[((static_cast<size_t>(n) * g.outputs + o) *
                                         OH +
                                     y) *
                                        OW +
                                    x]) *
                       bottom[((static_cast<size_t>(n) * g.channels + c) *
                                   g.height +
                               h) *
                                  g.width +
                              w];
              }
            }
            dw[static_cast<size_t>(o) * k_total +
               (c * g.kernel_h + i) * g.kernel_w + j] += sum;
          }
        }
      }
    }
  }
  return dw;
}

// Accumulate over `images` images for outputs [begin, end) (end 0: all)
// against Reference, onto a non-zero start; rows outside the range must
// keep their start values bit for bit.
void Check(const Geometry& g, int images, int begin = 0, int end = 0) {
  if (end == 0) end = g.outputs;
  SCOPED_TRACE(Describe(g) + ", " + std::to_string(images) +
               " image(s), outputs " + std::to_string(begin) + " to " +
               std::to_string(end));
  const RowWeightGradient grad(g);
  ASSERT_TRUE(grad.supported());
  const int OH = grad.output_h(), OW = grad.output_w();
  ASSERT_EQ(
      OH, OutputSize(g.height, g.pad_h, g.kernel_h, g.stride_h, g.dilation_h));
  ASSERT_EQ(OW,
            OutputSize(g.width, g.pad_w, g.kernel_w, g.stride_w, g.dilation_w));
  const size_t in_size = static_cast<size_t>(g.channels) * g.height * g.width;
  const size_t out_size = static_cast<size_t>(g.outputs) * OH * OW;
  const int k_total = g.channels * g.kernel_h * g.kernel_w;
  const std::vector<float> bottom = Random(in_size * images, 1);
  const std::vector<float> top_diff = Random(out_size * images, 2);
  const std::vector<float> start =
      Random(static_cast<size_t>(g.outputs) * k_total, 3);
  std::vector<float> got = start;
  // Aligned scratch, filled with garbage the call must not depend on.
  std::vector<float> scratch(grad.scratch_size(end - begin) + 16, 1e30f);
  float* aligned = reinterpret_cast<float*>(
      (reinterpret_cast<uintptr_t>(scratch.data()) + 63) & ~uintptr_t{63});
  grad.Accumulate(images, bottom.data(), static_cast<ptrdiff_t>(in_size),
                  top_diff.data(), static_cast<ptrdiff_t>(out_size), begin, end,
                  got.data(), aligned);
  const std::vector<double> want =
      Reference(g, images, bottom, top_diff, begin, end, start);
  // Each sum has images * OH * OW terms of magnitude below 1, in float.
  const double tol = 4e-6 * std::sqrt(static_cast<double>(images) * OH * OW);
  for (size_t e = 0; e < want.size(); ++e) {
    const int o = static_cast<int>(e / k_total);
    if (o < begin || o >= end) {
      ASSERT_EQ(start[e], got[e]) << "element " << e << " (output " << o
                                  << ", outside the range) changed";
      continue;
    }
    ASSERT_NEAR(want[e], got[e], tol) << "element " << e << " (output " << o
                                      << ", pair " << e % k_total << ")";
  }
}

Geometry Make(int channels, int height, int width, int outputs, int kh, int kw,
              int pad_h, int pad_w, int stride_h, int stride_w,
              int dilation = 1) {
  Geometry g;
  g.channels = channels;
  g.height = height;
  g.width = width;
  g.outputs = outputs;
  g.kernel_h = kh;
  g.kernel_w = kw;
  g.pad_h = pad_h;
  g.pad_w = pad_w;
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  g.dilation_h = g.dilation_w = dilation;
  return g;
}

class RowWeightGradientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Avx512KernelsAvailable() && !Avx2KernelsAvailable()) {
      GTEST_SKIP() << "neither AVX-512 nor AVX2 on this CPU (or "
                      "POSEIDON_KERNELS is blas)";
    }
  }
};

TEST_F(RowWeightGradientTest, UnitStrideMatchesLoops) {
  // VGG-16's conv1_1 in small: 3 channels, 3x3, pad 1.
  Check(Make(3, 20, 37, 8, 3, 3, 1, 1, 1, 1), 2);
  // CIFAR-10 quick's conv1 in small: 5x5, pad 2; a single image.
  Check(Make(3, 16, 16, 32, 5, 5, 2, 2, 1, 1), 1);
  // Output rows narrower than a vector, odd counts everywhere.
  Check(Make(5, 9, 7, 7, 3, 3, 0, 0, 1, 1), 3);
  Check(Make(1, 6, 5, 3, 1, 1, 0, 0, 1, 1), 2);
  Check(Make(2, 11, 40, 5, 1, 7, 0, 3, 1, 1), 2);
  Check(Make(2, 12, 9, 6, 7, 1, 3, 0, 1, 1), 1);
}

TEST_F(RowWeightGradientTest, StridesMatchLoops) {
  // ResNet-50's and GoogLeNet's conv1 in small: 7x7, stride 2, pad 3.
  Check(Make(3, 30, 35, 9, 7, 7, 3, 3, 2, 2), 2);
  // Inception-V3's conv1: 3x3, stride 2, no pad, odd size.
  Check(Make(3, 21, 21, 10, 3, 3, 0, 0, 2, 2), 1);
  // AlexNet's conv1: 11x11, stride 4.
  Check(Make(3, 43, 47, 6, 11, 11, 0, 0, 4, 4), 2);
  // Unequal strides, pads larger than the stride, strides past the kernel.
  Check(Make(2, 17, 29, 5, 3, 5, 2, 3, 3, 2), 2);
  Check(Make(4, 13, 19, 3, 2, 2, 1, 0, 3, 3), 3);
}

TEST_F(RowWeightGradientTest, DilationMatchesLoops) {
  Check(Make(3, 18, 33, 6, 3, 3, 2, 2, 1, 1, 2), 2);
  Check(Make(2, 19, 23, 5, 3, 3, 1, 2, 2, 2, 3), 1);
}

TEST_F(RowWeightGradientTest, OutputRangesMatchLoops) {
  const Geometry g = Make(3, 14, 21, 11, 3, 3, 1, 1, 1, 1);
  Check(g, 2, 0, 4);
  Check(g, 2, 4, 11);
  Check(g, 2, 5, 6);
  Check(g, 2, 3, 10);
}

TEST_F(RowWeightGradientTest, RepeatsBitForBit) {
  const Geometry g = Make(3, 24, 50, 13, 5, 5, 2, 2, 2, 2);
  const RowWeightGradient grad(g);
  ASSERT_TRUE(grad.supported());
  const size_t in_size = static_cast<size_t>(g.channels) * g.height * g.width;
  const size_t out_size =
      static_cast<size_t>(g.outputs) * grad.output_h() * grad.output_w();
  const std::vector<float> bottom = Random(in_size * 2, 4);
  const std::vector<float> top_diff = Random(out_size * 2, 5);
  const size_t w_size = static_cast<size_t>(g.outputs) * g.channels * 25;
  std::vector<float> a(w_size, 0.0f), b(w_size, 0.0f);
  std::vector<float> scratch(grad.scratch_size(g.outputs) + 16);
  float* aligned = reinterpret_cast<float*>(
      (reinterpret_cast<uintptr_t>(scratch.data()) + 63) & ~uintptr_t{63});
  grad.Accumulate(2, bottom.data(), in_size, top_diff.data(), out_size, 0,
                  g.outputs, a.data(), aligned);
  std::fill(scratch.begin(), scratch.end(), -7.0f);
  grad.Accumulate(2, bottom.data(), in_size, top_diff.data(), out_size, 0,
                  g.outputs, b.data(), aligned);
  for (size_t i = 0; i < w_size; ++i) {
    ASSERT_EQ(a[i], b[i]) << "element " << i;
  }
}

TEST(RowWeightGradient, EmptyOutputIsUnsupported) {
  // A kernel larger than the padded image has no output position.
  EXPECT_FALSE(
      RowWeightGradient(Make(3, 4, 4, 2, 7, 7, 1, 1, 1, 1)).supported());
  EXPECT_FALSE(
      RowWeightGradient(Make(3, 4, 4, 2, 3, 3, 0, 0, 0, 1)).supported());
}

}  // namespace
}  // namespace poseidon
