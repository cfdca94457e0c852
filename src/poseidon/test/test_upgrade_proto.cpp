// The V0 -> V1 -> V2 upgrade of legacy nets: a V0 net with padding layers
// becomes the expected V2 net and computes what that net computes; every V0
// field lands in its typed parameter; V0 weight files load into current nets;
// the upgrade tools rewrite V0 files; bad V0 input names the layer and field.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "poseidon/net.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/upgrade_proto.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

NetParameter Parse(const string& text) {
  NetParameter param;
  ReadProtoFromTextString(text, "<test net>", &param);
  return param;
}

// Empty when equal, else what differs.
string Differences(const NetParameter& expected, const NetParameter& actual) {
  string report;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&report);
  return differ.Compare(expected, actual) ? "" : report;
}

NetParameter Upgraded(const string& v0_text) {
  NetParameter param = Parse(v0_text);
  EXPECT_TRUE(NetNeedsUpgrade(param));
  EXPECT_TRUE(NetNeedsV0ToV1Upgrade(param));
  EXPECT_TRUE(UpgradeNetAsNeeded("v0.prototxt", &param));
  EXPECT_FALSE(NetNeedsUpgrade(param));
  return param;
}

// The message of the ConfigError that upgrading `v0_text` throws.
string UpgradeError(const string& v0_text) {
  NetParameter param = Parse(v0_text);
  try {
    UpgradeNetAsNeeded("bad_v0.prototxt", &param);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for:\n" << v0_text;
  return "";
}

void WriteText(const string& path, const string& text) {
  std::ofstream out(path);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// A CaffeNet-style V0 net: padding layers in front of a conv and a pool,
// LRN, grouped conv, average pooling, a fully connected layer, dropout and
// softmax, with the net input given by input/input_dim.
const char* kV0Net = R"(
name: "v0net"
input: "data"
input_dim: 2 input_dim: 3 input_dim: 12 input_dim: 12
layers { layer { name: "pad1" type: "padding" pad: 2 }
         bottom: "data" top: "pad1" }
layers { layer { name: "conv1" type: "conv" num_output: 4 kernelsize: 5
                 stride: 1
                 weight_filler { type: "gaussian" std: 0.1 }
                 bias_filler { type: "constant" value: 0.1 }
                 blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0 }
         bottom: "pad1" top: "conv1" }
layers { layer { name: "relu1" type: "relu" } bottom: "conv1" top: "conv1" }
layers { layer { name: "norm1" type: "lrn" local_size: 3 alpha: 0.0001
                 beta: 0.75 }
         bottom: "conv1" top: "norm1" }
layers { layer { name: "pad2" type: "padding" pad: 1 }
         bottom: "norm1" top: "pad2" }
layers { layer { name: "pool1" type: "pool" pool: MAX kernelsize: 3 stride: 2 }
         bottom: "pad2" top: "pool1" }
layers { layer { name: "conv2" type: "conv" num_output: 6 kernelsize: 3
                 group: 2 biasterm: false
                 weight_filler { type: "gaussian" std: 0.1 } }
         bottom: "pool1" top: "conv2" }
layers { layer { name: "pool2" type: "pool" pool: AVE kernelsize: 2 stride: 2 }
         bottom: "conv2" top: "pool2" }
layers { layer { name: "fc" type: "innerproduct" num_output: 5
                 weight_filler { type: "xavier" } }
         bottom: "pool2" top: "fc" }
layers { layer { name: "drop" type: "dropout" dropout_ratio: 0.4 }
         bottom: "fc" top: "fc" }
layers { layer { name: "prob" type: "softmax" } bottom: "fc" top: "prob" }
)";

// kV0Net as written today, by hand.
const char* kExpectedV2Net = R"(
name: "v0net"
layer { name: "input" type: "Input" top: "data"
        input_param { shape { dim: 2 dim: 3 dim: 12 dim: 12 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
        convolution_param { num_output: 4 pad: 2 kernel_size: 5 stride: 1
                            weight_filler { type: "gaussian" std: 0.1 }
                            bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "norm1" type: "LRN" bottom: "conv1" top: "norm1"
        lrn_param { local_size: 3 alpha: 0.0001 beta: 0.75 } }
layer { name: "pool1" type: "Pooling" bottom: "norm1" top: "pool1"
        pooling_param { pool: MAX pad: 1 kernel_size: 3 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
        convolution_param { num_output: 6 kernel_size: 3 group: 2
                            bias_term: false
                            weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2"
        pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool2" top: "fc"
        inner_product_param { num_output: 5 weight_filler { type: "xavier" } } }
layer { name: "drop" type: "Dropout" bottom: "fc" top: "fc"
        dropout_param { dropout_ratio: 0.4 } }
layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
)";

TEST(UpgradeV0Test, PaddedNetUpgradesToTheExpectedV2Net) {
  const NetParameter upgraded = Upgraded(kV0Net);
  EXPECT_EQ(Differences(Parse(kExpectedV2Net), upgraded), "");
}

TEST(UpgradeV0Test, V0StepLeavesAV1Net) {
  NetParameter param = Parse(kV0Net);
  UpgradeV0Net("v0.prototxt", &param);
  EXPECT_FALSE(NetNeedsV0ToV1Upgrade(param));
  ASSERT_EQ(param.layers_size(), 9);     // the two padding layers are gone
  EXPECT_EQ(param.input_dim_size(), 4);  // left for the input upgrade
  const V1LayerParameter& conv1 = param.layers(0);
  EXPECT_EQ(conv1.type(), V1LayerParameter::CONVOLUTION);
  EXPECT_EQ(conv1.bottom(0), "data");
  EXPECT_EQ(conv1.convolution_param().pad(0), 2u);
  EXPECT_FALSE(conv1.has_layer());
  const V1LayerParameter& pool1 = param.layers(3);
  EXPECT_EQ(pool1.type(), V1LayerParameter::POOLING);
  EXPECT_EQ(pool1.bottom(0), "norm1");
  EXPECT_EQ(pool1.pooling_param().pad(), 1u);
}

template <typename TypeParam>
class UpgradeV0NetTest : public test::MultiDeviceTest<TypeParam> {};
TYPED_TEST_SUITE(UpgradeV0NetTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

// The upgraded V0 net builds, runs, and computes what the hand-written V2
// net computes with the same weights.
TYPED_TEST(UpgradeV0NetTest, UpgradedNetMatchesTheV2Net) {
  using Dtype = typename TypeParam::Dtype;
  Net<Dtype> legacy(Parse(kV0Net));
  Net<Dtype> current(Parse(kExpectedV2Net));
  ASSERT_EQ(legacy.layers().size(), current.layers().size());
  EXPECT_EQ(legacy.blob_by_name("conv1")->shape(),
            (vector<int>{2, 4, 12, 12}));  // pad 2 keeps 12 x 12
  EXPECT_EQ(legacy.blob_by_name("pool1")->shape(), (vector<int>{2, 4, 7, 7}));
  EXPECT_EQ(legacy.blob_by_name("prob")->shape(), (vector<int>{2, 5}));
  EXPECT_EQ(legacy.params_lr()[1], 2.f);
  EXPECT_EQ(legacy.params_weight_decay()[1], 0.f);

  NetParameter weights;
  legacy.ToProto(&weights);
  current.CopyTrainedLayersFrom(weights);
  test::FillGaussian(legacy.blob_by_name("data").get());
  current.blob_by_name("data")->CopyFrom(*legacy.blob_by_name("data"));
  legacy.Forward();
  current.Forward();
  const Blob<Dtype>& a = *legacy.blob_by_name("prob");
  const Blob<Dtype>& b = *current.blob_by_name("prob");
  for (int n = 0; n < 2; ++n) {
    Dtype sum = 0;
    for (int c = 0; c < 5; ++c) sum += a.data_at({n, c});
    EXPECT_NEAR(sum, 1, 1e-5);
  }
  for (int i = 0; i < a.count(); ++i) {
    EXPECT_EQ(a.cpu_data()[i], b.cpu_data()[i]) << "at " << i;
  }
}

// Each data/loss/utility field lands in its typed parameter message.
TEST(UpgradeV0Test, EveryFieldMovesToItsTypedParameter) {
  const NetParameter upgraded = Upgraded(R"(
    layers { layer { name: "data" type: "data" source: "train_lmdb"
                     batchsize: 64 rand_skip: 10 meanfile: "mean.binaryproto"
                     cropsize: 227 mirror: true scale: 0.5 }
             top: "data" top: "label" }
    layers { layer { name: "images" type: "images" source: "list.txt"
                     batchsize: 8 rand_skip: 2 shuffle_images: true
                     new_height: 256 new_width: 320 }
             top: "im" top: "im_label" }
    layers { layer { name: "windows" type: "window_data" source: "win.txt"
                     batchsize: 16 det_fg_threshold: 0.6 det_bg_threshold: 0.4
                     det_fg_fraction: 0.3 det_context_pad: 16
                     det_crop_mode: "square" }
             top: "win" top: "win_label" }
    layers { layer { name: "h5" type: "hdf5_data" source: "h5.txt"
                     batchsize: 4 }
             top: "h5" }
    layers { layer { name: "cat" type: "concat" concat_dim: 0 }
             bottom: "data" bottom: "im" top: "cat" }
    layers { layer { name: "flat" type: "flatten" } bottom: "cat" top: "flat" }
    layers { layer { name: "loss" type: "softmax_loss" }
             bottom: "flat" bottom: "label" top: "loss" }
    layers { layer { name: "gain" type: "infogain_loss"
                     source: "H.binaryproto" }
             bottom: "flat" bottom: "label" }
    layers { layer { name: "acc" type: "accuracy" }
             bottom: "flat" bottom: "label" top: "acc" }
    layers { layer { name: "out" type: "hdf5_output"
                     hdf5_output_param { file_name: "out.h5" } }
             bottom: "flat" bottom: "label" }
    layers { layer { name: "s" type: "sigmoid" } bottom: "h5" top: "s" }
    layers { layer { name: "t" type: "tanh" } bottom: "s" top: "t" }
    layers { layer { name: "b" type: "bnll" } bottom: "t" top: "b" }
    layers { layer { name: "sp" type: "split" }
             bottom: "b" top: "b1" top: "b2" }
    layers { layer { name: "e" type: "euclidean_loss" }
             bottom: "b1" bottom: "b2" }
    layers { layer { name: "m" type: "multinomial_logistic_loss" }
             bottom: "flat" bottom: "label" }
    layers { layer { name: "i2c" type: "im2col" } bottom: "im" top: "cols" }
  )");
  const string expected = R"(
    layer { name: "data" type: "Data" top: "data" top: "label"
            data_param { source: "train_lmdb" batch_size: 64 rand_skip: 10 }
            transform_param { scale: 0.5 mean_file: "mean.binaryproto"
                              crop_size: 227 mirror: true } }
    layer { name: "images" type: "ImageData" top: "im" top: "im_label"
            image_data_param { source: "list.txt" batch_size: 8 rand_skip: 2
                               shuffle: true new_height: 256 new_width: 320 } }
    layer { name: "windows" type: "WindowData" top: "win" top: "win_label"
            window_data_param { source: "win.txt" batch_size: 16
                                fg_threshold: 0.6 bg_threshold: 0.4
                                fg_fraction: 0.3 context_pad: 16
                                crop_mode: "square" } }
    layer { name: "h5" type: "HDF5Data" top: "h5"
            hdf5_data_param { source: "h5.txt" batch_size: 4 } }
    layer { name: "cat" type: "Concat" bottom: "data" bottom: "im" top: "cat"
            concat_param { concat_dim: 0 } }
    layer { name: "flat" type: "Flatten" bottom: "cat" top: "flat" }
    layer { name: "loss" type: "SoftmaxWithLoss" bottom: "flat"
            bottom: "label" top: "loss" }
    layer { name: "gain" type: "InfogainLoss" bottom: "flat" bottom: "label"
            infogain_loss_param { source: "H.binaryproto" } }
    layer { name: "acc" type: "Accuracy" bottom: "flat" bottom: "label"
            top: "acc" }
    layer { name: "out" type: "HDF5Output" bottom: "flat" bottom: "label"
            hdf5_output_param { file_name: "out.h5" } }
    layer { name: "s" type: "Sigmoid" bottom: "h5" top: "s" }
    layer { name: "t" type: "TanH" bottom: "s" top: "t" }
    layer { name: "b" type: "BNLL" bottom: "t" top: "b" }
    layer { name: "sp" type: "Split" bottom: "b" top: "b1" top: "b2" }
    layer { name: "e" type: "EuclideanLoss" bottom: "b1" bottom: "b2" }
    layer { name: "m" type: "MultinomialLogisticLoss" bottom: "flat"
            bottom: "label" }
    layer { name: "i2c" type: "Im2col" bottom: "im" top: "cols" }
  )";
  EXPECT_EQ(Differences(Parse(expected), upgraded), "");
}

TEST(UpgradeV0Test, TypeStringsMapToV1Types) {
  EXPECT_EQ(UpgradeV0LayerType("conv"), V1LayerParameter::CONVOLUTION);
  EXPECT_EQ(UpgradeV0LayerType("innerproduct"),
            V1LayerParameter::INNER_PRODUCT);
  EXPECT_EQ(UpgradeV0LayerType("softmax_loss"), V1LayerParameter::SOFTMAX_LOSS);
  EXPECT_EQ(UpgradeV0LayerType("images"), V1LayerParameter::IMAGE_DATA);
  EXPECT_EQ(UpgradeV0LayerType("padding"), V1LayerParameter::NONE);
  EXPECT_EQ(UpgradeV0LayerType("Convolution"), V1LayerParameter::NONE);
}

// A V0 binary net (as an old .caffemodel stores it: padding layer included,
// 4-D num/channels/height/width blobs) loads its weights into the net that
// the V0 prototxt upgrades to.
TYPED_TEST(UpgradeV0NetTest, BinaryV0WeightsLoad) {
  using Dtype = typename TypeParam::Dtype;
  const char* v0_text = R"(
    name: "tiny_v0"
    input: "x" input_dim: 1 input_dim: 1 input_dim: 3 input_dim: 3
    layers { layer { name: "pad" type: "padding" pad: 1 }
             bottom: "x" top: "xp" }
    layers { layer { name: "conv" type: "conv" num_output: 1 kernelsize: 3 }
             bottom: "xp" top: "conv" }
    layers { layer { name: "ip" type: "innerproduct" num_output: 2 }
             bottom: "conv" top: "ip" })";
  NetParameter stored = Parse(v0_text);
  auto add_blob = [](V0LayerParameter* layer, vector<int> nchw,
                     const vector<float>& values) {
    BlobProto* b = layer->add_blobs();
    b->set_num(nchw[0]);
    b->set_channels(nchw[1]);
    b->set_height(nchw[2]);
    b->set_width(nchw[3]);
    for (float v : values) b->add_data(v);
  };
  vector<float> kernel(9), fc(18);
  for (int i = 0; i < 9; ++i) kernel[i] = 0.1f * (i + 1);
  for (int i = 0; i < 18; ++i) fc[i] = (i % 3) - 1.0f;
  add_blob(stored.mutable_layers(1)->mutable_layer(), {1, 1, 3, 3}, kernel);
  add_blob(stored.mutable_layers(1)->mutable_layer(), {1, 1, 1, 1}, {0.5f});
  add_blob(stored.mutable_layers(2)->mutable_layer(), {1, 1, 2, 9}, fc);
  add_blob(stored.mutable_layers(2)->mutable_layer(), {1, 1, 1, 2},
           {1.0f, -1.0f});
  const string file = test::MakeTempDir() + "/v0.caffemodel";
  WriteProtoToBinaryFile(stored, file);

  NetParameter read;
  ReadNetParamsFromBinaryFile(file, &read);
  ASSERT_EQ(read.layer_size(), 3);  // Input, conv, ip
  EXPECT_EQ(read.layer(1).blobs_size(), 2);

  Net<Dtype> net(Parse(v0_text));
  net.CopyTrainedLayersFrom(file);
  const Blob<Dtype>& w = *net.layer_by_name("conv")->blobs()[0];
  ASSERT_EQ(w.shape(), (vector<int>{1, 1, 3, 3}));
  for (int i = 0; i < 9; ++i) EXPECT_EQ(w.cpu_data()[i], Dtype(kernel[i]));
  EXPECT_EQ(net.layer_by_name("conv")->blobs()[1]->cpu_data()[0], Dtype(0.5));
  const Blob<Dtype>& v = *net.layer_by_name("ip")->blobs()[0];
  ASSERT_EQ(v.shape(), (vector<int>{2, 9}));
  for (int i = 0; i < 18; ++i) EXPECT_EQ(v.cpu_data()[i], Dtype(fc[i]));

  // Forward against a zero-padded 3x3 convolution and the product by hand.
  Blob<Dtype>* x = net.blob_by_name("x").get();
  for (int i = 0; i < 9; ++i) x->mutable_cpu_data()[i] = Dtype(i - 4);
  net.Forward();
  vector<double> conv(9);
  for (int h = 0; h < 3; ++h) {
    for (int wi = 0; wi < 3; ++wi) {
      double sum = 0.5;
      for (int kh = 0; kh < 3; ++kh) {
        for (int kw = 0; kw < 3; ++kw) {
          const int ih = h + kh - 1, iw = wi + kw - 1;
          if (ih < 0 || ih >= 3 || iw < 0 || iw >= 3) continue;
          sum += kernel[kh * 3 + kw] * (ih * 3 + iw - 4);
        }
      }
      conv[h * 3 + wi] = sum;
      EXPECT_NEAR(net.blob_by_name("conv")->cpu_data()[h * 3 + wi], sum, 1e-4);
    }
  }
  for (int o = 0; o < 2; ++o) {
    double y = o == 0 ? 1.0 : -1.0;
    for (int i = 0; i < 9; ++i) y += fc[o * 9 + i] * conv[i];
    EXPECT_NEAR(net.blob_by_name("ip")->cpu_data()[o], y, 1e-4);
  }
}

// What upgrade_net_proto_text does, through the same calls: read, upgrade,
// write; the written file is the expected V2 net.
TEST(UpgradeV0Test, TextFileRoundTrip) {
  const string dir = test::MakeTempDir();
  WriteText(dir + "/v0.prototxt", kV0Net);
  NetParameter param;
  ReadProtoFromTextFile(dir + "/v0.prototxt", &param);
  ASSERT_TRUE(UpgradeNetAsNeeded(dir + "/v0.prototxt", &param));
  WriteProtoToTextFile(param, dir + "/v2.prototxt");
  NetParameter reread;
  ReadProtoFromTextFile(dir + "/v2.prototxt", &reread);
  EXPECT_FALSE(NetNeedsUpgrade(reread));
  EXPECT_EQ(Differences(Parse(kExpectedV2Net), reread), "");
}

// The tools themselves, where this build has them.
TEST(UpgradeV0Test, UpgradeToolsRewriteV0Files) {
  const string tools = test::BinaryDir() + "/tools/";
  const string text_tool = tools + "upgrade_net_proto_text";
  const string binary_tool = tools + "upgrade_net_proto_binary";
  if (!std::ifstream(text_tool).good() || !std::ifstream(binary_tool).good()) {
    GTEST_SKIP() << "upgrade tools not built in " << tools;
  }
  const string dir = test::MakeTempDir();
  WriteText(dir + "/v0.prototxt", kV0Net);
  const string quiet = " 2> " + dir + "/log.txt";
  ASSERT_EQ(std::system((text_tool + " " + dir + "/v0.prototxt " + dir +
                         "/v2.prototxt" + quiet)
                            .c_str()),
            0);
  NetParameter text_out;
  ReadProtoFromTextFile(dir + "/v2.prototxt", &text_out);
  EXPECT_EQ(Differences(Parse(kExpectedV2Net), text_out), "");

  WriteProtoToBinaryFile(Parse(kV0Net), dir + "/v0.caffemodel");
  ASSERT_EQ(std::system((binary_tool + " " + dir + "/v0.caffemodel " + dir +
                         "/v2.caffemodel" + quiet)
                            .c_str()),
            0);
  NetParameter binary_out;
  ReadProtoFromBinaryFile(dir + "/v2.caffemodel", &binary_out);
  EXPECT_EQ(Differences(Parse(kExpectedV2Net), binary_out), "");

  // A bad V0 file: exit status 1 and an error naming the padding layer.
  WriteText(dir + "/bad.prototxt", R"(
    input: "data" input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4
    layers { layer { name: "pad" type: "padding" pad: 1 } bottom: "data"
             top: "padded" }
    layers { layer { name: "conv_a" type: "conv" num_output: 1 kernelsize: 3 }
             bottom: "padded" top: "a" }
    layers { layer { name: "conv_b" type: "conv" num_output: 1 kernelsize: 3 }
             bottom: "padded" top: "b" })");
  const int status = std::system(
      (text_tool + " " + dir + "/bad.prototxt " + dir + "/out.prototxt" + quiet)
          .c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  const string log = ReadFileToString(dir + "/log.txt");
  EXPECT_NE(log.find("Error: "), string::npos) << log;
  EXPECT_NE(log.find("padding layer 'pad' feeds both"), string::npos) << log;
}

TEST(UpgradeV0Test, PaddingFeedingTwoLayersIsAnError) {
  const string msg = UpgradeError(R"(
    input: "data" input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4
    layers { layer { name: "pad" type: "padding" pad: 1 } bottom: "data"
             top: "padded" }
    layers { layer { name: "conv_a" type: "conv" num_output: 1 kernelsize: 3 }
             bottom: "padded" top: "a" }
    layers { layer { name: "pool_b" type: "pool" kernelsize: 3 }
             bottom: "padded" top: "b" })");
  EXPECT_NE(msg.find("bad_v0.prototxt"), string::npos) << msg;
  EXPECT_NE(msg.find("padding layer 'pad'"), string::npos) << msg;
  EXPECT_NE(msg.find("'conv_a'"), string::npos) << msg;
  EXPECT_NE(msg.find("'pool_b'"), string::npos) << msg;
}

TEST(UpgradeV0Test, PaddingMustFeedOneConvOrPool) {
  const string into_relu = UpgradeError(R"(
    layers { layer { name: "pad" type: "padding" pad: 1 } bottom: "data"
             top: "padded" }
    layers { layer { name: "relu" type: "relu" } bottom: "padded"
             top: "r" })");
  EXPECT_NE(into_relu.find("'pad' feeds layer 'relu' of type \"relu\""),
            string::npos)
      << into_relu;

  const string unused = UpgradeError(R"(
    layers { layer { name: "pad" type: "padding" pad: 1 } bottom: "data"
             top: "padded" })");
  EXPECT_NE(unused.find("padding layer 'pad' feeds no layer"), string::npos)
      << unused;

  const string two_bottoms = UpgradeError(R"(
    layers { layer { name: "pad" type: "padding" pad: 1 } bottom: "a"
             bottom: "b" top: "padded" }
    layers { layer { name: "conv" type: "conv" kernelsize: 3 num_output: 1 }
             bottom: "padded" top: "c" })");
  EXPECT_NE(two_bottoms.find("padding layer 'pad' needs one bottom"),
            string::npos)
      << two_bottoms;

  const string own_pad = UpgradeError(R"(
    layers { layer { name: "pad" type: "padding" pad: 1 } bottom: "data"
             top: "padded" }
    layers { layer { name: "conv" type: "conv" kernelsize: 3 num_output: 1
                     pad: 2 }
             bottom: "padded" top: "c" })");
  EXPECT_NE(own_pad.find("layer 'conv' sets pad 2"), string::npos) << own_pad;

  // A field a padding layer does not take is ignored (with a warning), as
  // in Caffe.
  NetParameter padding_field = Parse(R"(
    layers { layer { name: "pad" type: "padding" pad: 1 kernelsize: 3 }
             bottom: "data" top: "padded" }
    layers { layer { name: "conv" type: "conv" kernelsize: 3 num_output: 1 }
             bottom: "padded" top: "c" })");
  UpgradeNetAsNeeded("v0.prototxt", &padding_field);
  ASSERT_EQ(padding_field.layer_size(), 1);
  EXPECT_EQ(padding_field.layer(0).convolution_param().pad(0), 1u);
}

TEST(UpgradeV0Test, BadV0LayersNameTheLayerAndField) {
  const string unknown_type = UpgradeError(R"(
    layers { layer { name: "mystery" type: "warp" } bottom: "x" top: "y" })");
  EXPECT_NE(unknown_type.find("V0 layer 'mystery' has the unknown type "
                              "\"warp\""),
            string::npos)
      << unknown_type;

  // Fields a type does not take are ignored with a warning, as Caffe's
  // upgrade does ("Unknown parameter ...; continuing anyway").
  NetParameter wrong_field = Parse(R"(
    layers { layer { name: "relu" type: "relu" kernelsize: 3 } bottom: "x"
             top: "y" }
    layers { layer { name: "fc" type: "innerproduct" num_output: 2 group: 2 }
             bottom: "y" top: "z" })");
  UpgradeNetAsNeeded("v0.prototxt", &wrong_field);
  ASSERT_EQ(wrong_field.layer_size(), 2);
  EXPECT_EQ(wrong_field.layer(0).type(), "ReLU");
  EXPECT_FALSE(wrong_field.layer(0).has_convolution_param());
  EXPECT_EQ(wrong_field.layer(1).inner_product_param().num_output(), 2u);

  const string mixed = UpgradeError(R"(
    layers { layer { name: "conv" type: "conv" kernelsize: 3 num_output: 1 }
             blobs_lr: 1 bottom: "x" top: "y" })");
  EXPECT_NE(mixed.find("V0 layer 'conv' also sets the V1 field 'blobs_lr'"),
            string::npos)
      << mixed;
}

}  // namespace
}  // namespace poseidon
