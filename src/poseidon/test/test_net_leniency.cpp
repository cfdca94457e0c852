// Caffe's leniency when building nets and reading files (the audit table is
// in docs/caffe_compatibility.md): what Caffe accepts is accepted (two layers
// of one name, stages joining the file's, deprecated fields), what Caffe
// silently does uselessly is a clear error (a net with no layers), and error
// messages escape the bytes they quote from the input.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "poseidon/net.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/upgrade_proto.hpp"
#include "test_util.hpp"
#ifdef USE_HDF5
#include "poseidon/util/hdf5.hpp"
#endif

namespace poseidon {
namespace {

using test::ParseNet;

string WriteFile(const string& dir, const string& name, const string& text) {
  const string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

using test::ErrorOf;

// True when `text` holds a byte a terminal would act on (other than the
// newlines and tabs messages use for layout) or one >= 0x80 outside UTF-8.
bool HasRawControlBytes(const string& text) {
  for (unsigned char c : text) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f || c == 0xff) {
      return true;
    }
  }
  return false;
}

// ---- error messages ---------------------------------------------------------

TEST(EscapeForMessageTest, EscapesControlBytesAndInvalidUtf8) {
  EXPECT_EQ(EscapeForMessage("conv1"), "conv1");
  EXPECT_EQ(EscapeForMessage("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(EscapeForMessage(string("x\0y", 3)), "x\\x00y");
  EXPECT_EQ(EscapeForMessage("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(EscapeForMessage("del\x7f"), "del\\x7f");
  EXPECT_EQ(EscapeForMessage("back\\slash"), "back\\\\slash");
  // Valid UTF-8 (a non-Latin layer name) stays; stray or overlong bytes and
  // a truncated sequence do not.
  EXPECT_EQ(EscapeForMessage("\xce\xb1\xce\xb2 \xe5\xb1\x82"),
            "\xce\xb1\xce\xb2 \xe5\xb1\x82");
  EXPECT_EQ(EscapeForMessage("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(EscapeForMessage("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(EscapeForMessage("cut \xe5\xb1"), "cut \\xe5\\xb1");
}

TEST(EscapeForMessageTest, EveryErrorMessageIsPrintable) {
  const Error e("layer 'a\x01' in\nfile \xff");
  EXPECT_EQ(string(e.what()), "layer 'a\\x01' in\nfile \\xff");
  // Subclasses too, since they construct Error.
  const ConfigError c("bell\x07");
  EXPECT_EQ(string(c.what()), "bell\\x07");
}

TEST(EscapeForMessageTest, NetErrorsQuoteLayerNamesEscaped) {
  NetParameter param = ParseNet(R"(
    layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 } } }
    layer { type: "ReLU" bottom: "y" top: "z" })");
  param.mutable_layer(1)->set_name("relu\x1b[2J\xff");
  const string message = ErrorOf([&] { Net<float> net(param); });
  EXPECT_FALSE(HasRawControlBytes(message)) << message;
  EXPECT_NE(message.find("relu\\x1b[2J\\xff"), string::npos) << message;
}

TEST(EscapeForMessageTest, ParseErrorsQuoteTheSourceLineEscaped) {
  const string text = "name: 'n'\nlayer { name: 'a' bogus\x01: 3 }\n";
  NetParameter param;
  const string message =
      ErrorOf([&] { ReadProtoFromTextString(text, "net.prototxt", &param); });
  EXPECT_FALSE(HasRawControlBytes(message)) << message;
  EXPECT_NE(message.find("net.prototxt:2:"), string::npos) << message;
  EXPECT_NE(message.find("\\x01"), string::npos) << message;
}

// ---- what Caffe accepts
// -------------------------------------------------------

// As BVLC's examples/mnist/mnist_autoencoder.prototxt does: two layers named
// "loss" (a cross-entropy loss and a Euclidean monitor of weight 0). Caffe
// trains it; the lookups by name find the last layer of the name.
const char* kTwoLossesNet = R"(
name: "autoencoder"
layer { name: "data" type: "DummyData" top: "data"
  dummy_data_param { shape { dim: 4 dim: 6 }
                     data_filler { type: "uniform" min: 0 max: 1 } } }
layer { name: "encode" type: "InnerProduct" bottom: "data" top: "code"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "decode" type: "InnerProduct" bottom: "code" top: "decode"
  inner_product_param { num_output: 6 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "SigmoidCrossEntropyLoss" bottom: "decode"
  bottom: "data" top: "cross_entropy_loss" loss_weight: 1 }
layer { name: "decode_neuron" type: "Sigmoid" bottom: "decode"
  top: "decode_neuron" }
layer { name: "loss" type: "EuclideanLoss" bottom: "decode_neuron"
  bottom: "data" top: "l2_error" loss_weight: 0 }
)";

TEST(NetLeniencyTest, TwoLayersOfOneNameBuildAndTrain) {
  Poseidon::set_mode(Poseidon::CPU);
  Poseidon::set_random_seed(1701);
  Net<float> net(ParseNet(kTwoLossesNet));
  ASSERT_EQ(net.num_outputs(), 2);
  EXPECT_EQ(net.layer_by_name("loss")->type(), string("EuclideanLoss"));
  float loss = 0;
  net.Forward(&loss);
  EXPECT_GT(loss, 0);
  EXPECT_GT(net.blob_by_name("l2_error")->cpu_data()[0], 0);
  net.Backward();

  SolverParameter solver_param;
  ReadProtoFromTextString(
      "base_lr: 0.5 lr_policy: 'fixed' max_iter: 20 display: 0 "
      "random_seed: 1 snapshot_after_train: false",
      "solver", &solver_param);
  *solver_param.mutable_train_net_param() = ParseNet(kTwoLossesNet);
  auto solver = CreateSolver<float>(solver_param);
  float before = 0, after = 0;
  solver->net()->Forward(&before);
  solver->Step(20);
  solver->net()->Forward(&after);
  EXPECT_LT(after, before) << "training did not lower the loss";
}

// Two InnerProduct layers named "ip" (3 -> 4, then 4 -> 2).
const char* kTwoIpNet = R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "h"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "h" top: "y"
  inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 1 } } }
)";

// See Note [Layers of one name] in net.cpp.
TEST(NetLeniencyTest, WeightsOfRepeatedNamesAreMatchedInOrder) {
  Poseidon::set_random_seed(5);
  Net<float> trained(ParseNet(kTwoIpNet));
  NetParameter snapshot;
  trained.ToProto(&snapshot);
  // A snapshot of the net loads back into it (Caffe fails here, copying
  // both "ip" layers of the file into the first "ip").
  Poseidon::set_random_seed(6);
  Net<float> net(ParseNet(kTwoIpNet));
  net.CopyTrainedLayersFrom(snapshot);
  for (int l : {1, 2}) {
    for (int p : {0, 1}) {
      const Blob<float>& a = *trained.layers()[l]->blobs()[p];
      const Blob<float>& b = *net.layers()[l]->blobs()[p];
      for (int i = 0; i < a.count(); ++i) {
        ASSERT_EQ(a.cpu_data()[i], b.cpu_data()[i]) << l << " " << p;
      }
    }
  }
  // One stored "ip" fills the first layer of the name, as in Caffe.
  NetParameter first;
  LayerParameter* stored = first.add_layer();
  stored->set_name("ip");
  Blob<float> w({4, 3}), b({4});
  test::FillGaussian(&w);
  test::FillGaussian(&b);
  w.ToProto(stored->add_blobs());
  b.ToProto(stored->add_blobs());
  net.CopyTrainedLayersFrom(first);
  EXPECT_EQ(net.layers()[1]->blobs()[0]->cpu_data()[5], w.cpu_data()[5]);
  EXPECT_EQ(net.layers()[1]->blobs()[1]->cpu_data()[3], b.cpu_data()[3]);
  // ... so weights shaped for the second do not fit.
  NetParameter second;
  LayerParameter* l = second.add_layer();
  l->set_name("ip");
  Blob<float>({2, 4}).ToProto(l->add_blobs());
  Blob<float>({2}).ToProto(l->add_blobs());
  const string message = ErrorOf([&] { net.CopyTrainedLayersFrom(second); });
  EXPECT_NE(message.find("2 4 (8)"), string::npos) << message;

  // Sharing with another net pairs the layers the same way.
  Net<float> other(ParseNet(kTwoIpNet));
  other.ShareTrainedLayersWith(&net);
  for (int k : {1, 2}) {
    EXPECT_EQ(other.layers()[k]->blobs()[0]->cpu_data(),
              net.layers()[k]->blobs()[0]->cpu_data());
  }
}

const char* kStagedNet = R"(
name: "staged"
state { stage: "A" }
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 2 } } }
layer { name: "a" type: "ReLU" bottom: "x" top: "a" include { stage: "A" } }
layer { name: "b" type: "ReLU" bottom: "x" top: "b" include { stage: "B" } }
layer { name: "ab" type: "ReLU" bottom: "x" top: "ab"
  include { stage: "A" stage: "B" } }
)";

TEST(NetLeniencyTest, GivenStagesJoinTheStagesTheFileNames) {
  const string path =
      WriteFile(test::MakeTempDir(), "staged.prototxt", kStagedNet);
  const vector<string> b = {"B"};
  Net<float> both(path, TEST, 0, &b);
  EXPECT_TRUE(both.has_layer("a"));
  EXPECT_TRUE(both.has_layer("b"));
  EXPECT_TRUE(both.has_layer("ab"));
  Net<float> file_only(path, TEST);
  EXPECT_TRUE(file_only.has_layer("a"));
  EXPECT_FALSE(file_only.has_layer("b"));
}

TEST(NetLeniencyTest, LegacyFilesAreNotEmpty) {
  const string dir = test::MakeTempDir();
  // V1 `layers` and net-level inputs become layers when upgraded.
  Net<float> v1(WriteFile(dir, "v1.prototxt", R"(
    input: "data" input_dim: 1 input_dim: 2 input_dim: 1 input_dim: 1
    layers { name: "relu" type: RELU bottom: "data" top: "data" })"),
                TEST);
  EXPECT_EQ(v1.layers().size(), 2u);
  Net<float> inputs_only(WriteFile(dir, "inputs.prototxt", R"(
    input: "data" input_shape { dim: 1 dim: 2 })"),
                         TEST);
  EXPECT_EQ(inputs_only.layers().size(), 1u);
}

// ---- what Caffe silently does uselessly
// ---------------------------------------

TEST(NetLeniencyTest, ANetWithNoLayersIsAnError) {
  const string dir = test::MakeTempDir();
  const string empty = WriteFile(dir, "empty.prototxt", "");
  string message = ErrorOf([&] { Net<float> net(empty, TRAIN); });
  EXPECT_NE(message.find("empty.prototxt"), string::npos) << message;
  EXPECT_NE(message.find("defines no layers"), string::npos) << message;

  const string named = WriteFile(dir, "named.prototxt", "name: 'nothing'");
  message = ErrorOf([&] { Net<float> net(named, TRAIN); });
  EXPECT_NE(message.find("defines no layers"), string::npos) << message;

  message = ErrorOf([&] { Net<float> net(ParseNet("name: 'bare'")); });
  EXPECT_NE(message.find("net 'bare' defines no layers"), string::npos)
      << message;
}

TEST(NetLeniencyTest, ANetWhoseRulesExcludeEveryLayerIsAnError) {
  NetParameter param = ParseNet(R"(
    name: "train_only"
    layer { name: "in" type: "Input" top: "x" include { phase: TRAIN }
            input_param { shape { dim: 1 } } }
    layer { name: "r" type: "ReLU" bottom: "x" top: "y" include { phase: TRAIN } })");
  param.mutable_state()->set_phase(TEST);
  param.mutable_state()->add_stage("deploy");
  const string message = ErrorOf([&] { Net<float> net(param); });
  EXPECT_NE(message.find("'train_only' has no layer in TEST phase"),
            string::npos)
      << message;
  EXPECT_NE(message.find("stages: deploy"), string::npos) << message;
  EXPECT_NE(message.find("all 2 of its layers"), string::npos) << message;
  param.mutable_state()->set_phase(TRAIN);
  Net<float> train(param);
  EXPECT_EQ(train.layers().size(), 2u);
}

// ---- upgrades of deprecated fields
// ---------------------------------------------

TEST(NetLeniencyTest, DeprecatedTransformFieldsOfImageAndWindowDataMove) {
  NetParameter param = ParseNet(R"(
    layer { name: "img" type: "ImageData" top: "a" top: "b"
      image_data_param { source: "list.txt" batch_size: 2 scale: 0.5
                         crop_size: 7 mirror: true mean_file: "mean.bp" } }
    layer { name: "win" type: "WindowData" top: "c" top: "d"
      window_data_param { source: "w.txt" batch_size: 2 crop_size: 9
                          mirror: true } })");
  ASSERT_TRUE(NetNeedsUpgrade(param));
  UpgradeNetAsNeeded("<test>", &param);
  const LayerParameter& img = param.layer(0);
  EXPECT_FLOAT_EQ(img.transform_param().scale(), 0.5f);
  EXPECT_EQ(img.transform_param().crop_size(), 7u);
  EXPECT_TRUE(img.transform_param().mirror());
  EXPECT_EQ(img.transform_param().mean_file(), "mean.bp");
  EXPECT_FALSE(img.image_data_param().has_scale());
  EXPECT_FALSE(img.image_data_param().has_crop_size());
  EXPECT_EQ(img.image_data_param().source(), "list.txt");
  const LayerParameter& win = param.layer(1);
  EXPECT_EQ(win.transform_param().crop_size(), 9u);
  EXPECT_TRUE(win.transform_param().mirror());
  EXPECT_FALSE(win.window_data_param().has_mirror());
  EXPECT_FALSE(NetNeedsUpgrade(param));
}

TEST(NetLeniencyTest, BatchNormThreeSpecsBecomeFrozenAndKeepTheirNames) {
  NetParameter param = ParseNet(R"(
    layer { name: "bn" type: "BatchNorm" bottom: "x" top: "x"
      param { name: "mean" lr_mult: 1 } param { name: "var" lr_mult: 1 }
      param { name: "factor" lr_mult: 1 decay_mult: 1 } })");
  UpgradeNetAsNeeded("<test>", &param);
  const LayerParameter& bn = param.layer(0);
  ASSERT_EQ(bn.param_size(), 3);
  const char* names[] = {"mean", "var", "factor"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(bn.param(i).name(), names[i]);
    EXPECT_EQ(bn.param(i).lr_mult(), 0);
    EXPECT_EQ(bn.param(i).decay_mult(), 0);
  }
}

// ---- HDF5 weights (Net.save_hdf5 / load_hdf5)
// ------------------------------------

#ifdef USE_HDF5

// conv1/7x7 (a '/' as in GoogLeNet) -> ip, whose weights "shared" are used
// again by ip_b (a shared parameter is stored once, by its owner).
const char* kHdf5Net = R"(
layer { name: "in" type: "Input" top: "x"
  input_param { shape { dim: 2 dim: 1 dim: 4 dim: 4 } } }
layer { name: "conv1/7x7" type: "Convolution" bottom: "x" top: "c"
  convolution_param { num_output: 2 kernel_size: 3
    weight_filler { type: "gaussian" std: 1 }
    bias_filler { type: "gaussian" std: 1 } } }
layer { name: "relu" type: "ReLU" bottom: "c" top: "c" }
layer { name: "ip" type: "InnerProduct" bottom: "c" top: "y"
  param { name: "shared" } inner_product_param { num_output: 3
    weight_filler { type: "gaussian" std: 1 } bias_term: false } }
layer { name: "ip_b" type: "InnerProduct" bottom: "c" top: "z"
  param { name: "shared" } inner_product_param { num_output: 3
    bias_term: false } }
)";

TEST(NetHdf5Test, WeightsRoundTripInCaffesLayout) {
  Poseidon::set_random_seed(7);
  Net<float> source(ParseNet(kHdf5Net));
  const string dir = test::MakeTempDir();
  const string path = dir + "/weights.h5";
  source.ToHDF5(path, /*write_diff=*/true);
  {
    const Hdf5File file = Hdf5File::OpenForRead(path);
    EXPECT_TRUE(file.HasGroup("data/in"));  // every layer has its group
    EXPECT_TRUE(file.HasDataset("data/conv1/7x7/0"));
    EXPECT_TRUE(file.HasDataset("data/conv1/7x7/1"));
    EXPECT_EQ(file.DatasetShape("data/conv1/7x7/0"), (vector<int>{2, 1, 3, 3}));
    EXPECT_TRUE(file.HasDataset("data/ip/0"));
    EXPECT_FALSE(file.HasDataset("data/ip_b/0"));  // shared: owner only
    EXPECT_TRUE(file.HasDataset("diff/ip_b/0"));   // diffs of every param
  }
  EXPECT_TRUE(IsHdf5File(path));

  Poseidon::set_random_seed(8);
  Net<float> target(ParseNet(kHdf5Net));
  ASSERT_NE(target.params()[0]->cpu_data()[0],
            source.params()[0]->cpu_data()[0]);
  target.CopyTrainedLayersFromHDF5(path);
  for (size_t p = 0; p < source.params().size(); ++p) {
    const Blob<float>& a = *source.params()[p];
    const Blob<float>& b = *target.params()[p];
    for (int i = 0; i < a.count(); ++i) {
      ASSERT_EQ(a.cpu_data()[i], b.cpu_data()[i]) << "param " << p;
    }
  }
  // The shared weights are still one blob.
  EXPECT_EQ(target.layer_by_name("ip_b")->blobs()[0]->cpu_data(),
            target.layer_by_name("ip")->blobs()[0]->cpu_data());
}

TEST(NetHdf5Test, CopyTrainedLayersFromRecognisesHdf5ByContent) {
  Poseidon::set_random_seed(7);
  Net<float> source(ParseNet(kHdf5Net));
  const string dir = test::MakeTempDir();
  const string path = dir + "/weights_without_suffix";
  source.ToHDF5(path);
  Poseidon::set_random_seed(8);
  Net<float> target(ParseNet(kHdf5Net));
  target.CopyTrainedLayersFrom(path);
  EXPECT_EQ(target.params()[0]->cpu_data()[1],
            source.params()[0]->cpu_data()[1]);

  NetParameter proto;
  source.ToProto(&proto);
  WriteProtoToBinaryFile(proto, dir + "/weights.h5");  // a misnamed caffemodel
  EXPECT_FALSE(IsHdf5File(dir + "/weights.h5"));
  EXPECT_FALSE(IsHdf5File(dir + "/missing"));
  target.CopyTrainedLayersFrom(dir + "/weights.h5");
}

TEST(NetHdf5Test, MismatchesAreNamedErrors) {
  const string dir = test::MakeTempDir();
  Net<float> net(ParseNet(kHdf5Net));
  // Another number of conv outputs: the shapes differ.
  string other = kHdf5Net;
  other.replace(other.find("num_output: 2"), 13, "num_output: 5");
  Net<float> wider(ParseNet(other));
  wider.ToHDF5(dir + "/wider.h5");
  string message =
      ErrorOf([&] { net.CopyTrainedLayersFromHDF5(dir + "/wider.h5"); });
  EXPECT_NE(message.find("conv1/7x7"), string::npos) << message;
  EXPECT_NE(message.find("5 1 3 3"), string::npos) << message;

  // More datasets than the layer has blobs.
  Hdf5File extra = Hdf5File::Create(dir + "/extra.h5");
  extra.CreateGroup("data/ip");
  const float values[3 * 8] = {};
  extra.WriteDataset("data/ip/0", {3, 8}, values);
  extra.WriteDataset("data/ip/1", {3}, values);
  extra.Close();
  message = ErrorOf([&] { net.CopyTrainedLayersFromHDF5(dir + "/extra.h5"); });
  EXPECT_NE(message.find("layer 'ip' has 1 parameter blobs"), string::npos)
      << message;

  // Not a weights file: no /data group.
  Hdf5File plain = Hdf5File::Create(dir + "/plain.h5");
  plain.WriteDataset("label", {3}, values);
  plain.Close();
  message = ErrorOf([&] { net.CopyTrainedLayersFromHDF5(dir + "/plain.h5"); });
  EXPECT_NE(message.find("no /data group"), string::npos) << message;
}

TEST(NetHdf5Test, TwoLayersOfOneNameStoreTheFirst) {
  const string dir = test::MakeTempDir();
  Poseidon::set_random_seed(3);
  Net<float> net(ParseNet(kTwoIpNet));
  net.ToHDF5(dir + "/two.h5");
  {
    const Hdf5File file = Hdf5File::OpenForRead(dir + "/two.h5");
    EXPECT_EQ(file.DatasetShape("data/ip/0"), (vector<int>{4, 3}));
  }
  Poseidon::set_random_seed(4);
  Net<float> other(ParseNet(kTwoIpNet));
  other.CopyTrainedLayersFromHDF5(dir + "/two.h5");
  EXPECT_EQ(other.layers()[1]->blobs()[0]->cpu_data()[2],
            net.layers()[1]->blobs()[0]->cpu_data()[2]);
}

#endif  // USE_HDF5

}  // namespace
}  // namespace poseidon
