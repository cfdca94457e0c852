// The reference models in models/: every deploy net builds, has the published
// number of learnable parameters, and runs forward and backward at batch 1;
// every train_val net parses and builds in both phases with its data layers
// swapped for DummyData of the same shapes (no datasets needed).
#include <gtest/gtest.h>

#include <map>

#include "poseidon/net.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// Learnable parameters (BatchNorm statistics excluded; Scale's gamma and beta
// included), as published: AlexNet and CaffeNet ~61M, VGG-16 ~138M, VGG-19
// ~144M, GoogLeNet ~7M, ResNet-50 ~25.6M, ResNet-152 ~60.2M, Inception-V3
// ~23.8M. Differences from torchvision's exact figures: both ResNets keep a
// bias on conv1 as the authors' Caffe release does (+64); Inception-V3 equals
// torchvision's 23,834,568 without the auxiliary head (Keras' 23,851,784
// counts BatchNorm's running mean and variance but no gamma). VGG19-22K is
// VGG-19 with a 21,841-way fc8.
const std::map<string, int64_t>& PublishedCounts() {
  static const std::map<string, int64_t> counts = {
      {"lenet", 431080},          {"cifar10_quick", 145578},
      {"cifar10_full", 89578},    {"alexnet", 60965224},
      {"caffenet", 60965224},     {"vgg16", 138357544},
      {"vgg19", 143667240},       {"vgg19_22k", 229052817},
      {"googlenet", 6998552},     {"inception_v3", 23834568},
      {"resnet50", 25557096},     {"resnet152", 60192872}};
  return counts;
}

// Too slow for a unit test's forward/backward (VGG19-22K: 229M parameters,
// 0.9 GB of weights plus as much of gradients): built and counted only.
bool BuildOnly(const string& model) { return model == "vgg19_22k"; }

int64_t LearnableCount(const Net<float>& net) {
  int64_t n = 0;
  for (size_t i = 0; i < net.learnable_params().size(); ++i) {
    if (net.params_lr()[i] != 0) n += net.learnable_params()[i]->count();
  }
  return n;
}

class ModelTest : public ::testing::TestWithParam<string> {};

TEST_P(ModelTest, DeployNetHasPublishedSizeAndRuns) {
  const string dir = test::SourceDir() + "/models/" + GetParam();
  NetParameter param;
  ReadNetParamsFromTextFile(dir + "/deploy.prototxt", &param);
  for (auto& layer : *param.mutable_layer()) {
    if (layer.type() != "Input") continue;
    for (auto& shape : *layer.mutable_input_param()->mutable_shape()) {
      shape.set_dim(0, 1);
    }
  }
  param.set_force_backward(true);
  param.mutable_state()->set_phase(TEST);
  Net<float> net(param);
  EXPECT_EQ(LearnableCount(net), PublishedCounts().at(GetParam()));
  if (BuildOnly(GetParam())) return;
  const auto& out = net.Forward();
  ASSERT_EQ(out.size(), 1u);
  // Softmax probabilities of one image sum to one.
  double sum = 0;
  for (int i = 0; i < out[0]->count(); ++i) sum += out[0]->cpu_data()[i];
  EXPECT_NEAR(sum, 1.0, 1e-3);
  net.Backward();
}

// Replaces each Data layer by DummyData with the same tops and shapes, so the
// net builds without its dataset (the same swap users make to time nets).
NetParameter WithDummyData(const NetParameter& in) {
  NetParameter out(in);
  for (auto& layer : *out.mutable_layer()) {
    if (layer.type() != "Data") continue;
    const int batch = layer.data_param().batch_size();
    const int crop = layer.transform_param().crop_size();
    layer.set_type("DummyData");
    layer.clear_data_param();
    layer.clear_transform_param();
    DummyDataParameter* dummy = layer.mutable_dummy_data_param();
    BlobShape* data = dummy->add_shape();
    // Channels and size: the datasets the reference nets are written for.
    const bool gray = in.name().find("LeNet") != string::npos;
    const int size = crop > 0 ? crop : (gray ? 28 : 32);
    for (int d : {batch, gray ? 1 : 3, size, size}) data->add_dim(d);
    if (layer.top_size() > 1) dummy->add_shape()->add_dim(batch);
  }
  return out;
}

TEST_P(ModelTest, TrainValBuildsInBothPhases) {
  const string dir = test::SourceDir() + "/models/" + GetParam();
  NetParameter param;
  ReadNetParamsFromTextFile(dir + "/train_val.prototxt", &param);
  for (Phase phase : {TRAIN, TEST}) {
    NetParameter p = WithDummyData(param);
    // Small batches keep the big nets' activations small.
    for (auto& layer : *p.mutable_layer()) {
      if (layer.type() != "DummyData") continue;
      for (auto& shape : *layer.mutable_dummy_data_param()->mutable_shape()) {
        shape.set_dim(0, 2);
      }
    }
    p.mutable_state()->set_phase(phase);
    Net<float> net(p);
    EXPECT_GT(net.learnable_params().size(), 0u) << Phase_Name(phase);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelTest,
                         ::testing::Values("lenet", "cifar10_quick",
                                           "cifar10_full", "alexnet",
                                           "caffenet", "vgg16", "vgg19",
                                           "vgg19_22k", "googlenet",
                                           "inception_v3", "resnet50",
                                           "resnet152"));

}  // namespace
}  // namespace poseidon
