// Shared by the tests of the convolution layer's CPU paths (Winograd, the
// row weight gradient): one forward and backward pass with a chosen
// algorithm and thread count, and a comparison relative to the largest
// element, for checking a fast path against the per-image im2col path.
#ifndef POSEIDON_TEST_CONV_PATH_TEST_HPP_
#define POSEIDON_TEST_CONV_PATH_TEST_HPP_

// The hand-written kernels' tests skip on CPUs without AVX-512.
#define POSEIDON_SKIP_WITHOUT_AVX512()                             \
  if (!Avx512KernelsAvailable()) {                                 \
    GTEST_SKIP() << "no AVX-512 on this CPU (or POSEIDON_KERNELS " \
                    "is blas or avx2)";                            \
  }
// The Winograd path's tests skip on CPUs with neither AVX-512 nor AVX2
// kernels (its GEMMs and transforms run on either).
#define POSEIDON_SKIP_WITHOUT_AVX2()                            \
  if (!Avx512KernelsAvailable() && !Avx2KernelsAvailable()) {   \
    GTEST_SKIP() << "neither AVX-512 nor AVX2 on this CPU (or " \
                    "POSEIDON_KERNELS=blas)";                   \
  }
// The direct convolution's tests skip on CPUs with neither its AVX-512
// kernels nor the AVX2 implicit GEMM.
#define POSEIDON_SKIP_WITHOUT_DIRECT_CONV()                     \
  if (!DirectConv::KernelsAvailable()) {                        \
    GTEST_SKIP() << "neither AVX-512 nor AVX2 on this CPU (or " \
                    "POSEIDON_KERNELS=blas)";                   \
  }

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "poseidon/layers/base_conv_layer.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/direct_conv.hpp"
#include "poseidon/util/math_functions.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace test {

using ConvAlgo = BaseConvolutionLayer<float>::Algorithm;

// A Convolution or Deconvolution layer's parameters with Gaussian fillers.
inline LayerParameter ConvPathParam(const std::string& type, int outputs,
                                    int kernel, int pad, int stride = 1,
                                    int group = 1, int dilation = 1) {
  LayerParameter param;
  param.set_type(type);
  ConvolutionParameter* p = param.mutable_convolution_param();
  p->set_num_output(outputs);
  p->add_kernel_size(kernel);
  p->add_pad(pad);
  p->add_stride(stride);
  p->add_dilation(dilation);
  p->set_group(group);
  p->mutable_weight_filler()->set_type("gaussian");
  p->mutable_bias_filler()->set_type("gaussian");
  return param;
}

// Forward and backward with `algo` on `threads` threads, the input
// gradient only if `propagate`, from parameter diffs of 0.25 (gradients
// accumulate) and a bottom diff of -3 (overwritten): top, bottom diff,
// weight diff, bias diff. The layer keeps what its Reshape chose
// (winograd(), row_weight_grad()) for the caller to check.
template <typename Layer>
std::vector<std::vector<float>> RunConvPath(Layer* layer, ConvAlgo algo,
                                            int threads, bool propagate,
                                            Blob<float>* bottom,
                                            const Blob<float>& diff) {
  const int saved = Poseidon::num_threads();
  Poseidon::set_num_threads(threads);
  Blob<float> top;
  layer->set_algorithm(algo);
  layer->Reshape({bottom}, {&top});
  layer->Forward({bottom}, {&top});
  CHECK_EQ(diff.count(), top.count());
  std::copy(diff.cpu_data(), diff.cpu_data() + diff.count(),
            top.mutable_cpu_diff());
  for (auto& b : layer->blobs()) {
    cpu_set(b->count(), 0.25f, b->mutable_cpu_diff());
  }
  cpu_set(bottom->count(), -3.0f, bottom->mutable_cpu_diff());
  layer->Backward({&top}, {propagate}, {bottom});
  Poseidon::set_num_threads(saved);
  auto grab = [](const float* p, int n) {
    return std::vector<float>(p, p + n);
  };
  return {grab(top.cpu_data(), top.count()),
          grab(bottom->cpu_diff(), bottom->count()),
          grab(layer->blobs()[0]->cpu_diff(), layer->blobs()[0]->count()),
          grab(layer->blobs()[1]->cpu_diff(), layer->blobs()[1]->count())};
}

// Every element of `got` within `relative` times the largest magnitude in
// `want`; names the first that is not.
inline void ExpectCloseToLargest(const std::vector<float>& want,
                                 const std::vector<float>& got, double relative,
                                 const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  float largest = 0;
  for (float v : want) largest = std::max(largest, std::fabs(v));
  const double tol = relative * largest;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(want[i], got[i], tol)
        << what << ": element " << i << " of " << want.size();
  }
}

// The names of RunConvPath's four results.
inline const char* ConvPathResultName(int k) {
  static const char* const names[] = {"top data", "bottom diff", "weight diff",
                                      "bias diff"};
  return names[k];
}

// A Layer set up from `param` on a Gaussian bottom of `shape`, run with
// kAuto on 1 and 2 threads against kPerImage on 1, with the input gradient
// off and on as `propagates` lists: kAuto must choose the path
// (chosen(layer) true; false for kPerImage), and all four results must agree
// within `relative` of their largest elements. `path` names it in messages.
template <typename Layer, typename Chosen>
void CheckConvPath(const std::vector<int>& shape, const LayerParameter& param,
                   double relative, std::initializer_list<bool> propagates,
                   const Chosen& chosen, const std::string& path) {
  std::string dims;
  for (int d : shape) dims += (dims.empty() ? "" : "x") + std::to_string(d);
  SCOPED_TRACE(param.ShortDebugString() + " on " + dims);
  Blob<float> bottom(shape), top;
  FillGaussian(&bottom);
  Layer layer(param);
  layer.SetUp({&bottom}, {&top});
  Blob<float> diff(top.shape());  // the same top diff for every run
  FillGaussian(&diff);
  for (bool propagate : propagates) {
    const auto want =
        RunConvPath(&layer, ConvAlgo::kPerImage, 1, propagate, &bottom, diff);
    EXPECT_FALSE(chosen(layer)) << "kPerImage took the " << path;
    for (int threads : {1, 2}) {
      const auto got = RunConvPath(&layer, ConvAlgo::kAuto, threads, propagate,
                                   &bottom, diff);
      ASSERT_TRUE(chosen(layer)) << "kAuto did not take the " << path;
      for (int k = 0; k < 4; ++k) {
        ExpectCloseToLargest(want[k], got[k], relative,
                             std::string(ConvPathResultName(k)) + " on " +
                                 std::to_string(threads) +
                                 " threads, input gradient " +
                                 (propagate ? "on" : "off"));
      }
    }
  }
}

}  // namespace test
}  // namespace poseidon

#endif  // POSEIDON_TEST_CONV_PATH_TEST_HPP_
