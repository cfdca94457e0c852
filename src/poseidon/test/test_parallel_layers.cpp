// The element-wise neuron layers (ReLU, Sigmoid, TanH) and LRN on blobs
// large enough to split over ParallelFor: two threads give the same bits
// as one, which match the formulas; ReLU in place and out of place.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/util/math_functions.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// Large enough for every layer's parallel threshold.
const vector<int> kShape = {4, 16, 32, 33};

// Forward and backward of a fresh layer on `threads` threads; returns top
// data and bottom diff. In place when top is null.
vector<vector<float>> RunLayer(const LayerParameter& param, int threads,
                               const Blob<float>& input, bool in_place) {
  const int saved = Poseidon::num_threads();
  Poseidon::set_num_threads(threads);
  Blob<float> bottom(kShape), top;
  cpu_copy(input.count(), input.cpu_data(), bottom.mutable_cpu_data());
  Blob<float>* out = in_place ? &bottom : &top;
  auto layer = LayerRegistry<float>::CreateLayer(param);
  layer->SetUp({&bottom}, {out});
  layer->Forward({&bottom}, {out});
  const vector<float> y(out->cpu_data(), out->cpu_data() + out->count());
  for (int i = 0; i < out->count(); ++i) {
    out->mutable_cpu_diff()[i] = 0.01f * (i % 101) - 0.5f;
  }
  layer->Backward({out}, {true}, {&bottom});
  Poseidon::set_num_threads(saved);
  return {y,
          vector<float>(bottom.cpu_diff(), bottom.cpu_diff() + bottom.count())};
}

void ExpectSameBits(const vector<vector<float>>& a,
                    const vector<vector<float>>& b, const string& what) {
  const char* names[] = {"top", "bottom diff"};
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(a[k].size(), b[k].size());
    for (size_t i = 0; i < a[k].size(); ++i) {
      ASSERT_EQ(a[k][i], b[k][i]) << what << ": " << names[k] << "[" << i
                                  << "] differs between 1 and 2 threads";
    }
  }
}

LayerParameter Param(const string& type) {
  LayerParameter param;
  param.set_type(type);
  return param;
}

TEST(NeuronLayersParallelTest, TwoThreadsMatchOneAndTheFormulas) {
  Blob<float> input(kShape);
  test::FillGaussian(&input);
  const float* x = input.cpu_data();
  LayerParameter leaky = Param("ReLU");
  leaky.mutable_relu_param()->set_negative_slope(-0.3f);
  struct Case {
    LayerParameter param;
    bool in_place;
    float (*f)(float);   // y(x)
    float (*df)(float);  // dy/dx
  };
  const Case cases[] = {
      {Param("ReLU"), false, [](float v) { return v > 0 ? v : 0.0f; },
       [](float v) { return v > 0 ? 1.0f : 0.0f; }},
      {Param("ReLU"), true, [](float v) { return v > 0 ? v : 0.0f; },
       [](float v) { return v > 0 ? 1.0f : 0.0f; }},
      {leaky, true, [](float v) { return v > 0 ? v : -0.3f * v; },
       [](float v) { return v > 0 ? 1.0f : -0.3f; }},
      {Param("Sigmoid"), false,
       [](float v) { return 1.0f / (1.0f + std::exp(-v)); },
       [](float v) {
         const float s = 1.0f / (1.0f + std::exp(-v));
         return s * (1 - s);
       }},
      {Param("TanH"), false, [](float v) { return std::tanh(v); },
       [](float v) { return 1 - std::tanh(v) * std::tanh(v); }},
  };
  for (const Case& c : cases) {
    const string what = c.param.type() + (c.in_place ? " in place" : "");
    const auto one = RunLayer(c.param, 1, input, c.in_place);
    const auto two = RunLayer(c.param, 2, input, c.in_place);
    ExpectSameBits(one, two, what);
    for (int i = 0; i < input.count(); ++i) {
      ASSERT_NEAR(two[0][i], c.f(x[i]), 1e-6) << what << " top[" << i << "]";
      const float dy = 0.01f * (i % 101) - 0.5f;
      ASSERT_NEAR(two[1][i], dy * c.df(x[i]), 1e-6)
          << what << " bottom diff[" << i << "]";
    }
  }
}

TEST(LRNLayerParallelTest, TwoThreadsMatchOne) {
  Blob<float> input(kShape);
  test::FillGaussian(&input);
  for (auto region :
       {LRNParameter::ACROSS_CHANNELS, LRNParameter::WITHIN_CHANNEL}) {
    LayerParameter param = Param("LRN");
    param.mutable_lrn_param()->set_norm_region(region);
    param.mutable_lrn_param()->set_local_size(3);
    param.mutable_lrn_param()->set_alpha(0.5f);
    const auto one = RunLayer(param, 1, input, false);
    const auto two = RunLayer(param, 2, input, false);
    ExpectSameBits(one, two,
                   region == LRNParameter::ACROSS_CHANNELS
                       ? "LRN across channels"
                       : "LRN within channel");
    // Spot-check the across-channels formula at a few points.
    if (region != LRNParameter::ACROSS_CHANNELS) continue;
    const int C = kShape[1], plane = kShape[2] * kShape[3];
    for (int i : {0, 1234, 40000, input.count() - 1}) {
      const int c = (i / plane) % C;
      double sum = 0;
      for (int d = -1; d <= 1; ++d) {
        if (c + d < 0 || c + d >= C) continue;
        const float v = input.cpu_data()[i + d * plane];
        sum += static_cast<double>(v) * v;
      }
      const double want =
          input.cpu_data()[i] / std::pow(1 + 0.5 / 3 * sum, 0.75);
      EXPECT_NEAR(two[0][i], want, 1e-5) << "LRN top[" << i << "]";
    }
  }
}

}  // namespace
}  // namespace poseidon
