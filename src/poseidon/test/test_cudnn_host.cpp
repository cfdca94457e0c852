// The host-side logic of the GPU path that needs no GPU: cuDNN tensor
// layouts from blob shapes, the for_each contract on the CPU, and the GPU
// switches and device listing in every build.
#include <gtest/gtest.h>

#include <atomic>
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
