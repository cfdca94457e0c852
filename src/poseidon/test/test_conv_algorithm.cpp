// The convolution algorithms' table (ConvAlgorithms::Choose, Note
// [Convolution algorithm table] in layers/conv_algorithm.cpp): which
// algorithm each pass gets, and the reasons it gives, per mode and type.
#include <gtest/gtest.h>

#include <string>

#include "poseidon/layers/conv_algorithm.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/direct_conv.hpp"
#include "poseidon/util/gpu_engine.hpp"

namespace poseidon {
namespace {

// A 2-D convolution of `num` images of channels x size x size, square
// kernel, as BaseConvolutionLayer::Reshape fills it in.
ConvShape Shape2D(int num, int channels, int size, int outputs, int kernel,
                  int pad, int stride = 1) {
  ConvShape s;
  const int out = (size + 2 * pad - kernel) / stride + 1;
  s.num = num;
  s.num_spatial_axes = 2;
  s.is_1x1 = kernel == 1 && pad == 0 && stride == 1;
  s.kernel = {kernel, kernel};
  s.stride = {stride, stride};
  s.pad = {pad, pad};
  s.dilation = {1, 1};
  s.in_channels = channels;
  s.out_channels = outputs;
  s.input_shape = {channels, size, size};
  s.kernel_dim = channels * kernel * kernel;
  s.col_shape = {s.kernel_dim, out, out};
  s.out_spatial_dim = out * out;
  s.input_dim = channels * size * size;
  s.output_dim = outputs * out * out;
  s.num_output = outputs;
  s.top_spatial_dim = out * out;
  s.top_dim = s.output_dim;
  return s;
}

std::string Names(const ConvPlan<float>& p) {
  return std::string(p.forward->name()) + " / " + p.backward_data->name() +
         " / " + p.backward_weights->name();
}

TEST(ConvAlgorithmTableTest, FirstLayerTakesTheRowWeightGradient) {
  const ConvShape s = Shape2D(2, 3, 32, 16, 7, 3);
  ConvAlgorithms<float> algos;
  algos.Choose(s, ConvOptions());
  const std::string rows = Avx512KernelsAvailable() || Avx2KernelsAvailable()
                               ? "row weight gradient"
                               : "";
  if (DirectConv::KernelsAvailable()) {
    EXPECT_EQ(Names(algos.cpu()),
              "direct / direct / " + (rows.empty() ? "direct" : rows));
  }
  EXPECT_NE(
      algos.Refusals().find("Winograd: not a 3x3, 5x5, 1x7 or 7x1 kernel"),
      std::string::npos)
      << algos.Refusals();
}

TEST(ConvAlgorithmTableTest, ShrinkingOutputTakesIm2colForTheInputGradient) {
  if (!DirectConv::KernelsAvailable()) GTEST_SKIP() << "no direct kernels";
  const ConvShape s = Shape2D(2, 8, 12, 16, 3, 0);
  ConvAlgorithms<float> algos;
  algos.Choose(s, ConvOptions());
  EXPECT_TRUE(algos.direct());
  EXPECT_FALSE(algos.direct_input_grad());
  EXPECT_EQ(algos.cpu().forward, algos.cpu().backward_weights);
  EXPECT_NE(algos.cpu().forward, algos.cpu().backward_data);
  EXPECT_NE(algos.cpu().Description().find("input gradient by im2col"),
            std::string::npos);
  EXPECT_NE(algos.Refusals().find(
                "direct input gradient: the output is over 1.25 times smaller "
                "than the input"),
            std::string::npos)
      << algos.Refusals();
  // 40 x 40 to 38 x 38 (1.11 times the useful work): the direct input
  // gradient (Note [Direct path]).
  algos.Choose(Shape2D(2, 8, 40, 16, 3, 0), ConvOptions());
  EXPECT_TRUE(algos.direct_input_grad()) << algos.Refusals();
  EXPECT_EQ(algos.cpu().forward, algos.cpu().backward_data);
}

TEST(ConvAlgorithmTableTest, ModesNameTheirPaths) {
  const ConvShape s = Shape2D(4, 64, 16, 64, 3, 1);
  ConvAlgorithms<float> algos;
  ConvOptions options;
  options.mode = ConvMode::kPerImage;
  algos.Choose(s, options);
  EXPECT_EQ(Names(algos.cpu()), "im2col / im2col / im2col");
  EXPECT_NE(algos.Refusals().find("batched im2col: per image asked for"),
            std::string::npos)
      << algos.Refusals();
  options.mode = ConvMode::kBatched;
  algos.Choose(s, options);
  EXPECT_EQ(Names(algos.cpu()),
            "batched im2col / batched im2col / batched im2col");
  options.mode = ConvMode::kPortable;
  algos.Choose(s, options);
  EXPECT_EQ(Names(algos.cpu()), "GPU im2col / GPU im2col / GPU im2col");
  EXPECT_EQ(algos.gpu().forward->name(), std::string("GPU im2col"));
  EXPECT_FALSE(algos.cudnn());
}

TEST(ConvAlgorithmTableTest, GpuPlanIsCudnnWhereBuiltWithIt) {
  const ConvShape s = Shape2D(2, 3, 8, 4, 3, 1);
  ConvAlgorithms<float> algos;
  algos.Choose(s, ConvOptions());
  EXPECT_EQ(algos.cudnn(), BuiltWithCudnn());
  EXPECT_EQ(algos.gpu().forward->name(),
            std::string(BuiltWithCudnn() ? "cuDNN" : "GPU im2col"));
  EXPECT_EQ(algos.gpu().forward, algos.gpu().backward_data);
  EXPECT_EQ(algos.gpu().forward, algos.gpu().backward_weights);
}

TEST(ConvAlgorithmTableTest, DoubleRunsIm2col) {
  const ConvShape s = Shape2D(1, 64, 32, 64, 3, 1);
  ConvAlgorithms<double> algos;
  algos.Choose(s, ConvOptions());
  EXPECT_FALSE(algos.direct() || algos.winograd() || algos.row_weight_grad());
  const ConvPlan<double>& p = algos.cpu();
  EXPECT_EQ(p.forward, p.backward_data);
  EXPECT_EQ(p.forward, p.backward_weights);
  EXPECT_EQ(p.Description().rfind("im2col + GEMM", 0), 0u) << p.Description();
  EXPECT_EQ(algos.Refusals().find("Winograd: float only"), 0u)
      << algos.Refusals();
}

}  // namespace
}  // namespace poseidon
