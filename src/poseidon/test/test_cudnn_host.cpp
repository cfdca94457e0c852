// The host-side logic of the GPU path that needs no GPU: cuDNN tensor
// layouts, filter dims and convolution/pooling arrays from Caffe's shapes,
// the for_each contract on the CPU, and the GPU switches and device
// listing in every build.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "poseidon/util/cudnn.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/gpu_context.hpp"
#include "poseidon/util/gpu_engine.hpp"
#include "poseidon/util/status.hpp"

namespace poseidon {
namespace {

TEST(CudnnLayoutTest, PacksRowMajorAndPadsToFourDims) {
  const cudnn::TensorLayout l4 = cudnn::PackedLayout({2, 3, 4, 5});
  EXPECT_EQ(l4.dims, (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(l4.strides, (std::vector<int>{60, 20, 5, 1}));
  const cudnn::TensorLayout l2 = cudnn::PackedLayout({7, 10});
  EXPECT_EQ(l2.dims, (std::vector<int>{7, 10, 1, 1}));
  EXPECT_EQ(l2.strides, (std::vector<int>{10, 1, 1, 1}));
  const cudnn::TensorLayout l5 = cudnn::PackedLayout({2, 3, 4, 5, 6});
  EXPECT_EQ(l5.strides, (std::vector<int>{360, 120, 30, 6, 1}));
  EXPECT_EQ(l5.ToString(), "2x3x4x5x6 / 360,120,30,6,1");
}

TEST(CudnnLayoutTest, RefusesShapesCudnnCannotDescribe) {
  EXPECT_THROW(cudnn::PackedLayout({1, 2, 3, 4, 5, 6, 7, 8, 9}), ShapeError);
  EXPECT_THROW(cudnn::PackedLayout({2, 0, 4, 4}), ShapeError);
}

TEST(CudnnFilterTest, PadsFilterDimsLikeTensors) {
  EXPECT_EQ(cudnn::PaddedFilterDims({16, 3, 5, 5}),
            (std::vector<int>{16, 3, 5, 5}));
  EXPECT_EQ(cudnn::PaddedFilterDims({8, 4, 3}), (std::vector<int>{8, 4, 3, 1}));
  EXPECT_EQ(cudnn::PaddedFilterDims({8, 4, 3, 2, 1}),
            (std::vector<int>{8, 4, 3, 2, 1}));
}

TEST(CudnnConvolutionArraysTest, PadsOneDimensionalConvolutionsToTwo) {
  cudnn::ConvolutionArrays a = cudnn::PaddedConvolutionArrays({2}, {3}, {4});
  EXPECT_EQ(a.pad, (std::vector<int>{2, 0}));
  EXPECT_EQ(a.stride, (std::vector<int>{3, 1}));
  EXPECT_EQ(a.dilation, (std::vector<int>{4, 1}));
  a = cudnn::PaddedConvolutionArrays({1, 2}, {3, 4}, {5, 6});
  EXPECT_EQ(a.pad, (std::vector<int>{1, 2}));
  EXPECT_EQ(a.stride, (std::vector<int>{3, 4}));
  EXPECT_EQ(a.dilation, (std::vector<int>{5, 6}));
  a = cudnn::PaddedConvolutionArrays({1, 0, 2}, {1, 2, 3}, {2, 1, 1});
  EXPECT_EQ(a.pad, (std::vector<int>{1, 0, 2}));
  EXPECT_EQ(a.stride, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(a.dilation, (std::vector<int>{2, 1, 1}));
}

TEST(CudnnPoolingArraysTest, PadsOneDimensionalPoolingToTwo) {
  cudnn::PoolingArrays a = cudnn::PaddedPoolingArrays({3}, {1}, {2});
  EXPECT_EQ(a.window, (std::vector<int>{3, 1}));
  EXPECT_EQ(a.pad, (std::vector<int>{1, 0}));
  EXPECT_EQ(a.stride, (std::vector<int>{2, 1}));
  a = cudnn::PaddedPoolingArrays({3, 2}, {1, 0}, {2, 1});
  EXPECT_EQ(a.window, (std::vector<int>{3, 2}));
  EXPECT_EQ(a.pad, (std::vector<int>{1, 0}));
  EXPECT_EQ(a.stride, (std::vector<int>{2, 1}));
}

TEST(CudnnConvolutionDimsTest, GroupedConvolutionSlicesTheFilterChannels) {
  // 6 input channels in 2 groups: each of the 4 filters sees 3.
  const cudnn::ConvolutionDims d =
      cudnn::ConvolutionTensorDims(2, 6, 4, 2, {9, 7}, {3, 2}, {7, 6}, 4);
  EXPECT_EQ(d.x, (std::vector<int>{2, 6, 9, 7}));
  EXPECT_EQ(d.w, (std::vector<int>{4, 3, 3, 2}));
  EXPECT_EQ(d.y, (std::vector<int>{2, 4, 7, 6}));
  EXPECT_EQ(d.bias, (std::vector<int>{1, 4, 1, 1}));
  // A Deconvolution's bias is on its top, the x side (num_output = C_in).
  const cudnn::ConvolutionDims t = cudnn::ConvolutionTensorDims(
      1, 4, 6, 1, {5, 5, 5}, {2, 2, 2}, {4, 4, 4}, 4);
  EXPECT_EQ(t.x, (std::vector<int>{1, 4, 5, 5, 5}));
  EXPECT_EQ(t.w, (std::vector<int>{6, 4, 2, 2, 2}));
  EXPECT_EQ(t.y, (std::vector<int>{1, 6, 4, 4, 4}));
  EXPECT_EQ(t.bias, (std::vector<int>{1, 4, 1, 1, 1}));
  EXPECT_THROW(cudnn::ConvolutionTensorDims(2, 6, 4, 4, {9}, {3}, {7}, 4),
               ShapeError);
  EXPECT_THROW(cudnn::ConvolutionTensorDims(2, 6, 3, 2, {9}, {3}, {7}, 3),
               ShapeError);
  EXPECT_THROW(cudnn::ConvolutionTensorDims(2, 6, 4, 1, {9, 9}, {3}, {7}, 4),
               ShapeError);
}

// What cuDNN checks when it runs a convolution, applied to the padded
// descriptors of 1-, 2- and 3-D convolutions: x, w and y of one rank, two
// more than the convolution's spatial axes; pad >= 0, stride and dilation
// >= 1; C_in = w's channels x groups;
// y's channels w's count; every spatial output dim
//   1 + (in + 2 pad - ((filter - 1) dilation + 1)) / stride
// (cudnnGetConvolutionNdForwardOutputDim); and a bias that broadcasts
// (each dim 1 or the top's) over the top.
TEST(CudnnConvolutionDimsTest, PaddedDescriptorsAgreeWithCudnnsOutputRule) {
  struct Case {
    int groups;
    std::vector<int> in, kernel, pad, stride, dilation;
  };
  const Case cases[] = {
      {1, {11}, {3}, {1}, {2}, {1}},
      {3, {10, 7}, {3, 2}, {1, 0}, {2, 1}, {1, 2}},
      {2, {6, 5, 9}, {2, 3, 3}, {0, 1, 2}, {1, 2, 3}, {2, 1, 1}},
  };
  for (const Case& c : cases) {
    const int axes = static_cast<int>(c.in.size());
    SCOPED_TRACE(std::to_string(axes) + "-D");
    std::vector<int> out;
    for (int i = 0; i < axes; ++i) {
      const int extent = c.dilation[i] * (c.kernel[i] - 1) + 1;
      out.push_back((c.in[i] + 2 * c.pad[i] - extent) / c.stride[i] + 1);
    }
    const int in_channels = 2 * c.groups, out_channels = 3 * c.groups;
    const cudnn::ConvolutionDims d =
        cudnn::ConvolutionTensorDims(4, in_channels, out_channels, c.groups,
                                     c.in, c.kernel, out, out_channels);
    const cudnn::TensorLayout x = cudnn::PackedLayout(d.x);
    const cudnn::TensorLayout y = cudnn::PackedLayout(d.y);
    const std::vector<int> w = cudnn::PaddedFilterDims(d.w);
    const cudnn::ConvolutionArrays a =
        cudnn::PaddedConvolutionArrays(c.pad, c.stride, c.dilation);
    const int rank = static_cast<int>(x.dims.size());
    ASSERT_EQ(rank, 2 + static_cast<int>(a.pad.size()));
    ASSERT_EQ(static_cast<int>(y.dims.size()), rank);
    ASSERT_EQ(static_cast<int>(w.size()), rank);
    EXPECT_EQ(x.dims[0], y.dims[0]);
    EXPECT_EQ(x.dims[1], w[1] * c.groups);
    EXPECT_EQ(y.dims[1], w[0]);
    for (int i = 0; i < rank - 2; ++i) {
      // cuDNN refuses a negative pad and a stride or dilation below 1.
      EXPECT_GE(a.pad[i], 0) << "spatial axis " << i;
      EXPECT_GE(a.stride[i], 1) << "spatial axis " << i;
      EXPECT_GE(a.dilation[i], 1) << "spatial axis " << i;
      const int extent = (w[2 + i] - 1) * a.dilation[i] + 1;
      EXPECT_EQ(y.dims[2 + i],
                1 + (x.dims[2 + i] + 2 * a.pad[i] - extent) / a.stride[i])
          << "spatial axis " << i << ": x " << x.ToString() << ", y "
          << y.ToString();
    }
    const cudnn::TensorLayout bias = cudnn::PackedLayout(d.bias);
    ASSERT_EQ(bias.dims.size(), y.dims.size());
    for (int i = 0; i < rank; ++i) {
      EXPECT_TRUE(bias.dims[i] == 1 || bias.dims[i] == y.dims[i])
          << "bias " << bias.ToString() << " over y " << y.ToString();
    }
    EXPECT_EQ(bias.dims[1], y.dims[1]);
  }
}

// One functor, the way layers write element-wise bodies.
struct Square {
  const float* x;
  float* y;
  POSEIDON_HD void operator()(int i) const { y[i] = x[i] * x[i]; }
};

struct CountingAdd {
  int* total;
  static constexpr bool kSerialOnHost = true;
  POSEIDON_HD void operator()(int i) const { hd::AtomicAdd(total, i); }
};

TEST(ForEachTest, RunsEveryIndexOnceOnTheCpu) {
  for (int n : {0, 1, 17, 1 << 17}) {
    std::vector<float> x(n), y(n, -1.f);
    for (int i = 0; i < n; ++i) x[i] = 0.5f * i;
    cpu_for_each(n, Square{x.data(), y.data()});
    for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] * x[i]) << "n " << n;
  }
}

TEST(ForEachTest, SerialFunctorsMayAccumulateOnTheHost) {
  // Large enough to be split over the pool, were it not kSerialOnHost;
  // the sum 0 + ... + (n - 1) = 2147450880 still fits an int.
  const int n = 1 << 16;
  int total = 0;
  cpu_for_each(n, CountingAdd{&total});
  EXPECT_EQ(total, n / 2 * (n - 1));
}

// Caffe's engine field, for both kinds of build (util/gpu_engine.hpp).
TEST(GpuEngineTest, DecidesAsTheEngineFieldSays) {
  const int kDefault = 0, kCaffe = 1, kCudnn = 2;
  for (bool built : {false, true}) {
    SCOPED_TRACE(built);
    const GpuEngine cudnn_if_built =
        built ? GpuEngine::kCudnn : GpuEngine::kKernels;
    GpuEngineDecision d = DecideGpuEngine("ReLU layer 'r'", kDefault, built,
                                          true, "");
    EXPECT_EQ(d.engine, cudnn_if_built);
    EXPECT_EQ(d.warning, "");
    d = DecideGpuEngine("ReLU layer 'r'", kCaffe, built, true, "");
    EXPECT_EQ(d.engine, GpuEngine::kKernels);
    EXPECT_EQ(d.warning, "");
    d = DecideGpuEngine("ReLU layer 'r'", kCudnn, built, true, "");
    EXPECT_EQ(d.engine, cudnn_if_built);
    EXPECT_EQ(d.warning.empty(), built);
    if (!built) EXPECT_NE(d.warning.find("without cuDNN"), std::string::npos);
    // Parameters cuDNN cannot compute: our kernels, silently unless CUDNN
    // was asked for.
    d = DecideGpuEngine("ReLU layer 'r'", kDefault, built, false,
                        "no leaky ReLU");
    EXPECT_EQ(d.engine, GpuEngine::kKernels);
    EXPECT_EQ(d.warning, "");
    d = DecideGpuEngine("ReLU layer 'r'", kCudnn, built, false,
                        "no leaky ReLU");
    EXPECT_EQ(d.engine, GpuEngine::kKernels);
    EXPECT_NE(d.warning.find("ReLU layer 'r'"), std::string::npos)
        << d.warning;
    EXPECT_NE(d.warning.find(built ? "no leaky ReLU" : "without cuDNN"),
              std::string::npos)
        << d.warning;
  }
  // This build's wrapper agrees with the rule.
  EXPECT_EQ(ChooseGpuEngine("x", kDefault, true),
            BuiltWithCudnn() ? GpuEngine::kCudnn : GpuEngine::kKernels);
}

TEST(GpuContextTest, SettingsRoundTrip) {
  const gpu::Settings saved = gpu::GetSettings();
  gpu::SetDeterministic(true);
  gpu::SetAllowTf32(true);
  gpu::SetWorkspaceLimit(123 << 20);
  EXPECT_TRUE(gpu::GetSettings().deterministic);
  EXPECT_TRUE(gpu::GetSettings().allow_tf32);
  EXPECT_EQ(gpu::GetSettings().workspace_limit, size_t(123) << 20);
  gpu::SetDeterministic(saved.deterministic);
  gpu::SetAllowTf32(saved.allow_tf32);
  gpu::SetWorkspaceLimit(saved.workspace_limit);
}

TEST(GpuContextTest, ListingNeverThrowsAndExplainsAnAbsentGpu) {
  const int count = gpu::DeviceCount();
  EXPECT_GE(count, 0);
  if (count == 0) {
    EXPECT_FALSE(gpu::UnavailableReason().empty());
    EXPECT_THROW(gpu::RequireDevice("--gpu=0", 0), ConfigError);
    EXPECT_THROW(Poseidon::set_mode(Poseidon::GPU), Error);
    EXPECT_EQ(Poseidon::mode(), Poseidon::CPU);
  } else {
    EXPECT_TRUE(gpu::UnavailableReason().empty());
    EXPECT_THROW(gpu::RequireDevice("--gpu=99", count), ConfigError);
  }
  EXPECT_FALSE(gpu::LibraryVersions().empty());
}

}  // namespace
}  // namespace poseidon
