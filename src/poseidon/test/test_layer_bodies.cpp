// Note [Layer bodies] in layer.hpp: a layer's portable body is its
// definition, and a tuned CPU path must give the same results. Every layer
// type with a tuned path has cases here (a type that says it has one and
// has none fails RegisteredTunedPathsAllHaveCases); each case runs forward
// and backward through the tuned path and through the portable body
// (set_portable) on the same inputs and compares the tops and the bottom
// diff, to the case's tolerance (0: the same bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/base_conv_layer.hpp"
#include "poseidon/util/math_functions.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

struct BodyCase {
  std::string name;
  std::string layer;  // the LayerParameter in prototxt text
  std::vector<int> bottom;
  int tops = 1;
  // Largest |tuned - portable| / max(1, |portable|) allowed, for float and
  // double; 0 asks for the same bits.
  double float_tol = 0, double_tol = 0;
};

std::vector<BodyCase> Cases() {
  const std::vector<int> image = {2, 7, 5, 4};
  const std::vector<int> odd = {2, 3, 7, 6};
  return {
      {"LRN across, AlexNet's",
       "type: 'LRN' lrn_param { local_size: 5 "
       "alpha: 0.0001 beta: 0.75 }",
       image, 1, 2e-5, 1e-12},
      {"LRN across, k 2",
       "type: 'LRN' lrn_param { local_size: 3 alpha: 0.5 "
       "beta: 0.6 k: 2 }",
       image, 1, 2e-5, 1e-12},
      {"LRN across, wider than the channels",
       "type: 'LRN' lrn_param { "
       "local_size: 9 alpha: 2 }",
       image, 1, 2e-5, 1e-12},
      {"LRN across, size 1", "type: 'LRN' lrn_param { local_size: 1 }", image,
       1, 2e-5, 1e-12},
      {"LRN within",
       "type: 'LRN' lrn_param { local_size: 3 alpha: 2 "
       "norm_region: WITHIN_CHANNEL }",
       image, 1, 2e-5, 1e-12},
      {"LRN within, size 5",
       "type: 'LRN' lrn_param { local_size: 5 alpha: "
       "1.5 beta: 0.6 norm_region: WITHIN_CHANNEL }",
       image, 1, 2e-5, 1e-12},
      {"MAX pooling, padded",
       "type: 'Pooling' pooling_param { pool: MAX "
       "kernel_size: 3 stride: 2 pad: 1 }",
       odd, 1},
      {"MAX pooling with the mask top",
       "type: 'Pooling' pooling_param { "
       "pool: MAX kernel_size: 2 stride: 2 }",
       odd, 2},
      {"AVE pooling, padded",
       "type: 'Pooling' pooling_param { pool: AVE "
       "kernel_size: 3 stride: 1 pad: 1 }",
       odd, 1},
      {"AVE pooling, global",
       "type: 'Pooling' pooling_param { pool: AVE "
       "global_pooling: true }",
       odd, 1},
      {"STOCHASTIC pooling, testing",
       "type: 'Pooling' phase: TEST "
       "pooling_param { pool: STOCHASTIC kernel_size: 3 stride: 2 }",
       odd, 1},
      {"Im2col 2-D",
       "type: 'Im2col' convolution_param { kernel_size: 3 "
       "stride: 2 pad: 1 }",
       odd, 1},
      {"Im2col 2-D, dilated",
       "type: 'Im2col' convolution_param { "
       "kernel_size: 2 dilation: 2 pad: 1 }",
       odd, 1},
      {"Im2col N-D",
       "type: 'Im2col' convolution_param { kernel_size: 2 "
       "kernel_size: 3 kernel_size: 2 stride: 1 pad: 1 }",
       {1, 2, 4, 5, 3},
       1},
  };
}

LayerParameter ParseLayer(const std::string& text) {
  const NetParameter net =
      test::ParseNet("layer { name: 'body' bottom: 'x' " + text + " }");
  return net.layer(0);
}

template <typename Dtype>
class LayerBodiesTest : public ::testing::Test {};
TYPED_TEST_SUITE(LayerBodiesTest, test::TestDtypes);

TYPED_TEST(LayerBodiesTest, TunedPathsMatchThePortableBodies) {
  using Dtype = TypeParam;
  for (const BodyCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    const LayerParameter param = ParseLayer(c.layer);
    const double tol = sizeof(Dtype) == 4 ? c.float_tol : c.double_tol;
    Blob<Dtype> x(c.bottom);
    test::FillGaussian(&x);
    // [run][k]: the tops' data, then the bottom diff.
    std::vector<std::vector<Dtype>> results[2];
    for (int run = 0; run < 2; ++run) {
      shared_ptr<Layer<Dtype>> layer = LayerRegistry<Dtype>::CreateLayer(param);
      ASSERT_TRUE(layer->has_tuned_cpu())
          << layer->type() << " has no tuned CPU path: drop its cases";
      layer->set_portable(run == 1);
      Blob<Dtype> bottom;
      bottom.CopyFrom(x, false, true);
      std::vector<Blob<Dtype>> top_blobs(c.tops);
      std::vector<Blob<Dtype>*> tops;
      for (Blob<Dtype>& t : top_blobs) tops.push_back(&t);
      layer->SetUp({&bottom}, tops);
      layer->Forward({&bottom}, tops);
      // The same top diff on both runs, values whose sums round (the order
      // of the adds shows).
      Dtype* dy = tops[0]->mutable_cpu_diff();
      for (int i = 0; i < tops[0]->count(); ++i) {
        dy[i] = Dtype(0.3) * (i % 7) - Dtype(0.7) + Dtype(0.0137) * (i % 11);
      }
      cpu_set(bottom.count(), Dtype(7), bottom.mutable_cpu_diff());
      layer->Backward(tops, {true}, {&bottom});
      for (Blob<Dtype>* t : tops) {
        results[run].emplace_back(t->cpu_data(), t->cpu_data() + t->count());
      }
      results[run].emplace_back(bottom.cpu_diff(),
                                bottom.cpu_diff() + bottom.count());
    }
    ASSERT_EQ(results[0].size(), results[1].size());
    for (size_t k = 0; k < results[0].size(); ++k) {
      const char* what = k + 1 == results[0].size() ? "bottom diff" : "top";
      ASSERT_EQ(results[0][k].size(), results[1][k].size()) << what;
      for (size_t i = 0; i < results[0][k].size(); ++i) {
        const double tuned = results[0][k][i], portable = results[1][k][i];
        if (tol == 0) {
          ASSERT_TRUE(std::isnan(portable) ? std::isnan(tuned)
                                           : tuned == portable)
              << what << " " << k << "[" << i << "]: tuned " << tuned
              << ", portable " << portable;
        } else {
          ASSERT_LE(std::abs(tuned - portable),
                    tol * std::max(1.0, std::abs(portable)))
              << what << " " << k << "[" << i << "]: tuned " << tuned
              << ", portable " << portable;
        }
      }
    }
  }
}

// Every registered layer type that says it has a tuned CPU path has cases
// above, and every type with cases has one.
TEST(LayerBodiesTest, RegisteredTunedPathsAllHaveCases) {
  std::set<std::string> covered;
  for (const BodyCase& c : Cases()) {
    covered.insert(ParseLayer(c.layer).type());
  }
  std::set<std::string> tuned;
  for (const std::string& type : LayerRegistry<float>::LayerTypeList()) {
    LayerParameter param;
    param.set_name("probe");
    param.set_type(type);
    shared_ptr<Layer<float>> layer;
    try {
      layer = LayerRegistry<float>::CreateLayer(param);
    } catch (const Error&) {
      continue;  // needs parameters to exist at all (none of these has a
                 // tuned path: the cases' types are made above)
    }
    if (layer && layer->has_tuned_cpu()) tuned.insert(type);
  }
  for (const std::string& type : tuned) {
    EXPECT_EQ(covered.count(type), 1u)
        << type << " has a tuned CPU path but no case in test_layer_bodies";
  }
  for (const std::string& type : covered) {
    EXPECT_EQ(tuned.count(type), 1u)
        << type << " has cases here but no tuned CPU path registered";
  }
  EXPECT_FALSE(tuned.empty());
}

// The convolution has several algorithms, chosen by its own table
// (test_conv_algorithm.cpp); set_portable(true) asks it for its portable
// body, the GPU im2col path, on the CPU too.
TEST(LayerBodiesTest, PortableConvolutionRunsTheGpuIm2colPath) {
  const LayerParameter param = ParseLayer(
      "type: 'Convolution' convolution_param { num_output: 4 kernel_size: 3 "
      "weight_filler { type: 'gaussian' } }");
  for (bool portable : {false, true}) {
    auto layer = std::dynamic_pointer_cast<BaseConvolutionLayer<float>>(
        LayerRegistry<float>::CreateLayer(param));
    ASSERT_NE(layer, nullptr);
    layer->set_portable(portable);
    Blob<float> bottom({2, 3, 8, 8}), top;
    layer->SetUp({&bottom}, {&top});
    EXPECT_EQ(layer->CpuPathDescription().find("GPU im2col") == 0, portable)
        << layer->CpuPathDescription();
  }
}

}  // namespace
}  // namespace poseidon
