// The layer registry holds every layer type BVLC Caffe ships, under Caffe's
// `type:` strings, for both float and double.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "poseidon/layer_factory.hpp"

namespace poseidon {
namespace {

// BVLC Caffe's layer types (its src/caffe/layers), less "Python", which
// the Python module and poseidon_train register when Python is embedded.
const std::vector<std::string>& CaffeLayerTypes() {
  static const std::vector<std::string> types = {
      "AbsVal", "Accuracy", "ArgMax", "BatchNorm", "BatchReindex", "Bias",
      "BNLL", "Clip", "Concat", "ContrastiveLoss", "Convolution", "Crop",
      "Data", "Deconvolution", "Dropout", "DummyData", "Eltwise", "ELU",
      "Embed", "EuclideanLoss", "Exp", "Filter", "Flatten",
#ifdef USE_HDF5
      "HDF5Data", "HDF5Output",
#endif
      "HingeLoss", "Im2col",
#ifdef USE_OPENCV
      "ImageData", "WindowData",
#endif
      "InfogainLoss", "InnerProduct", "Input", "Log", "LRN", "LSTM",
      "LSTMUnit", "MemoryData", "MultinomialLogisticLoss", "MVN", "Parameter",
      "Pooling", "Power", "PReLU", "Reduction", "ReLU", "Reshape", "RNN",
      "Scale", "Sigmoid", "SigmoidCrossEntropyLoss", "Silence", "Slice",
      "Softmax", "SoftmaxWithLoss", "Split", "SPP", "Swish", "TanH",
      "Threshold", "Tile"};
  return types;
}

template <typename Dtype>
std::vector<std::string> Missing() {
  const std::vector<std::string> have = LayerRegistry<Dtype>::LayerTypeList();
  std::vector<std::string> missing;
  for (const std::string& type : CaffeLayerTypes()) {
    if (std::find(have.begin(), have.end(), type) == have.end()) {
      missing.push_back(type);
    }
  }
  return missing;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

TEST(LayerFactoryTest, EveryCaffeLayerTypeIsRegistered) {
  EXPECT_TRUE(Missing<float>().empty())
      << "not registered for float: " << Join(Missing<float>());
  EXPECT_TRUE(Missing<double>().empty())
      << "not registered for double: " << Join(Missing<double>());
}

TEST(LayerFactoryTest, UnknownTypeIsAnErrorNamingIt) {
  LayerParameter param;
  param.set_name("mystery");
  param.set_type("NoSuchLayer");
  try {
    LayerRegistry<float>::CreateLayer(param);
    FAIL() << "an unknown type was created";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NoSuchLayer"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace poseidon
