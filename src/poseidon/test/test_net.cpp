// Net: filtering by phase/level/stage, wiring, Split insertion, in-place
// layers, shared parameters, backward needs, loss weights, weight copying,
// legacy upgrades and the errors for malformed nets.
#include <gtest/gtest.h>

#include <cmath>

#include "poseidon/net.hpp"
#include "poseidon/util/insert_splits.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using test::ParseNet;

// data (2x3) -> ip1 (4) -> relu (in place) -> ip2 (2) -> loss vs target.
const char* kTinyNet = R"(
name: "tiny"
layer { name: "data" type: "DummyData" top: "data" top: "target"
  dummy_data_param {
    shape { dim: 2 dim: 3 } shape { dim: 2 dim: 2 }
    data_filler { type: "gaussian" std: 1 } data_filler { type: "gaussian" std: 1 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.5 }
                        bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip2" bottom: "target" top: "loss" }
)";

template <typename TypeParam>
class NetTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
};
TYPED_TEST_SUITE(NetTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(NetTest, BuildsAndWiresTinyNet) {
  using Dtype = typename TypeParam::Dtype;
  Net<Dtype> net(ParseNet(kTinyNet));
  EXPECT_EQ(net.name(), "tiny");
  ASSERT_EQ(net.layers().size(), 5u);
  EXPECT_EQ(net.blob_names(),
            (vector<string>{"data", "target", "ip1", "ip2", "loss"}));
  EXPECT_EQ(net.learnable_params().size(), 4u);  // ip1 w, b; ip2 w, b
  ASSERT_EQ(net.num_outputs(), 1);
  EXPECT_EQ(net.output_blobs()[0], net.blob_by_name("loss").get());
  EXPECT_EQ(net.blob_loss_weights()[4], Dtype(1));
  EXPECT_FALSE(net.layer_need_backward()[0]);  // data
  EXPECT_TRUE(net.layer_need_backward()[1]);
  EXPECT_FALSE(net.bottom_need_backward()[1][0]);  // no diff into data
  EXPECT_TRUE(net.bottom_need_backward()[3][0]);   // ip2 -> ip1
  EXPECT_FALSE(net.bottom_need_backward()[4][1]);  // no diff into target
  // The in-place ReLU shares its blob.
  EXPECT_EQ(net.top_vecs()[2][0], net.bottom_vecs()[2][0]);
  EXPECT_THROW(net.blob_by_name("nope"), Error);
  EXPECT_EQ(net.layer_index("ip2"), 3);
}

TYPED_TEST(NetTest, EmulatedTimesSkipTheComputeButRunTheHooks) {
  using Dtype = typename TypeParam::Dtype;
  Net<Dtype> net(ParseNet(kTinyNet));
  EXPECT_THROW(net.SetEmulatedTimes({1.0}, {1.0}), ConfigError);
  net.SetEmulatedTimes(vector<double>(5, 0.0), vector<double>(5, 0.0));
  int forwards = 0, backwards = 0;
  net.add_after_forward([&](int) { ++forwards; }).Detach();
  net.add_after_backward([&](int) { ++backwards; }).Detach();
  Dtype loss = -1;
  net.Forward(&loss);
  net.Backward();
  EXPECT_EQ(loss, Dtype(0));  // nothing computed
  EXPECT_EQ(net.blob_by_name("ip2")->asum_data(), Dtype(0));
  EXPECT_EQ(net.learnable_params()[0]->asum_diff(), Dtype(0));
  EXPECT_EQ(forwards, 5);
  EXPECT_EQ(backwards, 5);
  net.SetEmulatedTimes({}, {});  // computing again
  net.Forward(&loss);
  EXPECT_GT(loss, Dtype(0));
}

// A body replacement is an observer like the hooks: while subscribed it
// runs instead of each layer's body, between the hooks, and once its
// subscription goes the layers compute again.
TYPED_TEST(NetTest, BodyReplacementsRunInsteadOfTheLayersWhileSubscribed) {
  using Dtype = typename TypeParam::Dtype;
  Net<Dtype> net(ParseNet(kTinyNet));
  vector<string> calls;
  net.add_before_forward([&](int i) { calls.push_back(StrCat("before ", i)); })
      .Detach();
  net.add_after_forward([&](int i) { calls.push_back(StrCat("after ", i)); })
      .Detach();
  {
    Subscription forward = net.add_forward_replacement(
        [&](int i) { calls.push_back(StrCat("instead of ", i)); });
    vector<int> replaced_backward;
    Subscription backward = net.add_backward_replacement(
        [&](int i) { replaced_backward.push_back(i); });
    Dtype loss = -1;
    net.Forward(&loss);
    EXPECT_EQ(loss, Dtype(0));  // no layer ran
    EXPECT_EQ(net.blob_by_name("ip2")->asum_data(), Dtype(0));
    ASSERT_EQ(calls.size(), 15u);
    EXPECT_EQ(calls[0], "before 0");
    EXPECT_EQ(calls[1], "instead of 0");
    EXPECT_EQ(calls[2], "after 0");
    net.Backward();
    EXPECT_EQ(net.learnable_params()[0]->asum_diff(), Dtype(0));
    // Only the layers that need backward: the loss, ip2, relu, ip1.
    EXPECT_EQ(replaced_backward, (vector<int>{4, 3, 2, 1}));
  }
  calls.clear();
  Dtype loss = 0;
  net.Forward(&loss);
  EXPECT_GT(loss, Dtype(0));
  EXPECT_EQ(calls.size(), 10u);  // the hooks only
}

TYPED_TEST(NetTest, LossMatchesManualComputation) {
  using Dtype = typename TypeParam::Dtype;
  Net<Dtype> net(ParseNet(kTinyNet));
  Dtype loss = 0;
  net.Forward(&loss);
  const Blob<Dtype>& ip2 = *net.blob_by_name("ip2");
  const Blob<Dtype>& target = *net.blob_by_name("target");
  double expected = 0;
  for (int i = 0; i < ip2.count(); ++i) {
    const double d = ip2.cpu_data()[i] - target.cpu_data()[i];
    expected += d * d;
  }
  expected /= 2 * ip2.num();
  EXPECT_NEAR(loss, expected, 1e-5);
  EXPECT_NEAR(net.blob_by_name("loss")->cpu_data()[0], expected, 1e-5);
}

TYPED_TEST(NetTest, GradientMatchesFiniteDifference) {
  using Dtype = typename TypeParam::Dtype;
  NetParameter param = ParseNet(kTinyNet);
  Net<Dtype> net(param);
  // DummyData refills random data on every forward; freeze it by using a
  // constant layer output: run once, then only forward from ip1.
  net.Forward();
  net.ClearParamDiffs();
  net.ForwardFrom(1);
  net.Backward();
  const Dtype h = sizeof(Dtype) == 4 ? 1e-2 : 1e-4;
  for (Blob<Dtype>* p : net.learnable_params()) {
    for (int i = 0; i < p->count(); ++i) {
      const Dtype analytic = p->cpu_diff()[i];
      const Dtype x = p->cpu_data()[i];
      p->mutable_cpu_data()[i] = x + h;
      const Dtype plus = net.ForwardFrom(1);
      p->mutable_cpu_data()[i] = x - h;
      const Dtype minus = net.ForwardFrom(1);
      p->mutable_cpu_data()[i] = x;
      const Dtype numeric = (plus - minus) / (2 * h);
      EXPECT_NEAR(analytic, numeric, 2e-2 * std::max<Dtype>(1, std::fabs(numeric)))
          << "param element " << i;
    }
  }
}

TYPED_TEST(NetTest, PhaseLevelAndStageRules) {
  using Dtype = typename TypeParam::Dtype;
  const char* text = R"(
    name: "rules"
    layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 2 } } }
    layer { name: "train_only" type: "ReLU" bottom: "x" top: "a" include { phase: TRAIN } }
    layer { name: "test_only" type: "ReLU" bottom: "x" top: "a" include { phase: TEST } }
    layer { name: "deep" type: "ReLU" bottom: "a" top: "b" include { min_level: 2 } }
    layer { name: "staged" type: "ReLU" bottom: "a" top: "c" include { stage: "deploy" } }
    layer { name: "not_staged" type: "ReLU" bottom: "a" top: "d" exclude { stage: "deploy" } }
  )";
  NetParameter param = ParseNet(text);
  param.mutable_state()->set_phase(TEST);
  Net<Dtype> test_net(param);
  EXPECT_TRUE(test_net.has_layer("test_only"));
  EXPECT_FALSE(test_net.has_layer("train_only"));
  EXPECT_FALSE(test_net.has_layer("deep"));
  EXPECT_FALSE(test_net.has_layer("staged"));
  EXPECT_TRUE(test_net.has_layer("not_staged"));

  param.mutable_state()->set_level(3);
  param.mutable_state()->add_stage("deploy");
  Net<Dtype> deploy(param);
  EXPECT_TRUE(deploy.has_layer("deep"));
  EXPECT_TRUE(deploy.has_layer("staged"));
  EXPECT_FALSE(deploy.has_layer("not_staged"));
}

TYPED_TEST(NetTest, InsertsSplitsAndSumsDiffs) {
  using Dtype = typename TypeParam::Dtype;
  // x feeds two losses: its diff must be the sum of both contributions.
  const char* text = R"(
    name: "fanout" force_backward: true
    layer { name: "in" type: "Input" top: "x" top: "t" input_param {
      shape { dim: 2 dim: 3 } shape { dim: 2 dim: 3 } } }
    layer { name: "l1" type: "EuclideanLoss" bottom: "x" bottom: "t" top: "l1" }
    layer { name: "l2" type: "EuclideanLoss" bottom: "x" bottom: "t" top: "l2"
            loss_weight: 3 }
  )";
  Net<Dtype> net(ParseNet(text));
  EXPECT_TRUE(net.has_layer("x_in_0_split"));
  EXPECT_TRUE(net.has_blob("x_in_0_split_1"));
  Blob<Dtype>* x = net.blob_by_name("x").get();
  Blob<Dtype>* t = net.blob_by_name("t").get();
  for (int i = 0; i < 6; ++i) {
    x->mutable_cpu_data()[i] = i;
    t->mutable_cpu_data()[i] = 0;
  }
  Dtype loss = 0;
  net.Forward(&loss);
  EXPECT_NEAR(loss, 4 * (0 + 1 + 4 + 9 + 16 + 25) / 4.0, 1e-4);
  net.Backward();
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(x->cpu_diff()[i], 4 * i / 2.0, 1e-5) << i;
  }
}

TYPED_TEST(NetTest, SharedParametersAliasAndAccumulate) {
  using Dtype = typename TypeParam::Dtype;
  const char* text = R"(
    name: "shared"
    layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
    layer { name: "a" type: "InnerProduct" bottom: "x" top: "a"
      param { name: "w" } inner_product_param { num_output: 3 bias_term: false
      weight_filler { type: "gaussian" std: 1 } } }
    layer { name: "b" type: "InnerProduct" bottom: "a" top: "b"
      param { name: "w" } inner_product_param { num_output: 3 bias_term: false
      weight_filler { type: "gaussian" std: 1 } } }
  )";
  Net<Dtype> net(ParseNet(text));
  EXPECT_EQ(net.params().size(), 2u);
  EXPECT_EQ(net.learnable_params().size(), 1u);
  EXPECT_EQ(net.param_owners()[1], 0);
  EXPECT_EQ(net.params()[0]->cpu_data(), net.params()[1]->cpu_data());

  const char* bad = R"(
    name: "bad_shared"
    layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
    layer { name: "a" type: "InnerProduct" bottom: "x" top: "a"
      param { name: "w" } inner_product_param { num_output: 3 bias_term: false } }
    layer { name: "b" type: "InnerProduct" bottom: "a" top: "b"
      param { name: "w" } inner_product_param { num_output: 4 bias_term: false } }
  )";
  try {
    Net<Dtype> net2(ParseNet(bad));
    FAIL() << "mismatched shared parameter accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(string(e.what()).find("'w'"), string::npos) << e.what();
  }
}

TYPED_TEST(NetTest, FrozenParamsAndPropagateDown) {
  using Dtype = typename TypeParam::Dtype;
  const char* text = R"(
    name: "frozen"
    layer { name: "in" type: "Input" top: "x" top: "t" input_param {
      shape { dim: 2 dim: 3 } shape { dim: 2 dim: 2 } } }
    layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
      param { lr_mult: 0 } param { lr_mult: 0 }
      inner_product_param { num_output: 3 } }
    layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y"
      propagate_down: false inner_product_param { num_output: 2 } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t" top: "loss" }
  )";
  Net<Dtype> net(ParseNet(text));
  // ip1 is frozen and ip2 does not send it a diff: ip1 skips backward.
  EXPECT_FALSE(net.layer_need_backward()[1]);
  EXPECT_FALSE(net.bottom_need_backward()[2][0]);
  EXPECT_TRUE(net.layer_need_backward()[2]);
  EXPECT_FALSE(net.layers()[1]->param_propagate_down(0));
  EXPECT_EQ(net.params_lr()[0], 0.f);
}

TYPED_TEST(NetTest, CopyTrainedLayersAndShapeMismatch) {
  using Dtype = typename TypeParam::Dtype;
  Net<Dtype> a(ParseNet(kTinyNet));
  NetParameter weights;
  a.ToProto(&weights);
  Poseidon::set_random_seed(99);
  Net<Dtype> b(ParseNet(kTinyNet));
  b.CopyTrainedLayersFrom(weights);
  for (size_t i = 0; i < a.learnable_params().size(); ++i) {
    const Blob<Dtype>* pa = a.learnable_params()[i];
    const Blob<Dtype>* pb = b.learnable_params()[i];
    for (int j = 0; j < pa->count(); ++j) {
      EXPECT_EQ(pa->cpu_data()[j], pb->cpu_data()[j]);
    }
  }
  // A net whose ip1 has 5 outputs cannot take these weights.
  string changed = kTinyNet;
  changed.replace(changed.find("num_output: 4"), 13, "num_output: 5");
  Net<Dtype> c(ParseNet(changed));
  try {
    c.CopyTrainedLayersFrom(weights);
    FAIL() << "shape mismatch accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(string(e.what()).find("ip1"), string::npos) << e.what();
  }
}

TYPED_TEST(NetTest, ClearErrorsForMalformedNets) {
  using Dtype = typename TypeParam::Dtype;
  auto message_of = [](const string& text) -> string {
    try {
      Net<Dtype> net(ParseNet(text));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const string unknown_bottom = message_of(R"(
    layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 } } }
    layer { name: "r" type: "ReLU" bottom: "y" top: "z" })");
  EXPECT_NE(unknown_bottom.find("unknown bottom blob 'y'"), string::npos)
      << unknown_bottom;
  EXPECT_NE(unknown_bottom.find("'r'"), string::npos) << unknown_bottom;

  const string unknown_type = message_of(R"(
    layer { name: "mystery" type: "Frobnicate" top: "x" })");
  EXPECT_NE(unknown_type.find("unknown type 'Frobnicate'"), string::npos)
      << unknown_type;

  const string shape = message_of(R"(
    layer { name: "in" type: "Input" top: "x" top: "t" input_param {
      shape { dim: 2 dim: 3 } shape { dim: 2 dim: 4 } } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "x" bottom: "t" })");
  EXPECT_NE(shape.find("layer 'loss'"), string::npos) << shape;
  EXPECT_NE(shape.find("2 3 (6)"), string::npos) << shape;

  const string duplicate_top = message_of(R"(
    layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 } } }
    layer { name: "a" type: "ReLU" bottom: "x" top: "y" }
    layer { name: "b" type: "ReLU" bottom: "x" top: "y" })");
  EXPECT_NE(duplicate_top.find("more than one layer"), string::npos)
      << duplicate_top;
}

TEST(NetParseTest, UnknownFieldNamesLineAndColumn) {
  NetParameter param;
  try {
    ReadProtoFromTextString("name: \"x\"\nlayer {\n  nmae: \"oops\"\n}\n",
                            "net.prototxt", &param);
    FAIL() << "unknown field accepted";
  } catch (const ConfigError& e) {
    const string msg = e.what();
    EXPECT_NE(msg.find("net.prototxt:3:"), string::npos) << msg;
    EXPECT_NE(msg.find("nmae"), string::npos) << msg;
  }
}

TEST(NetUpgradeTest, V1LayersAndInputFieldsUpgrade) {
  const char* v1 = R"(
    name: "legacy"
    input: "data" input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4
    layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv"
      blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
      convolution_param { num_output: 2 kernel_size: 3 } }
    layers { name: "relu" type: RELU bottom: "conv" top: "conv" }
  )";
  NetParameter param = ParseNet(v1);
  Net<float> net(param);
  ASSERT_EQ(net.layers().size(), 3u);
  EXPECT_STREQ(net.layers()[0]->type(), "Input");
  EXPECT_STREQ(net.layers()[1]->type(), "Convolution");
  EXPECT_EQ(net.params_lr()[1], 2.f);
  EXPECT_EQ(net.params_weight_decay()[1], 0.f);
  EXPECT_EQ(net.blob_by_name("conv")->shape(), (vector<int>{1, 2, 2, 2}));
}

}  // namespace
}  // namespace poseidon

namespace poseidon {
namespace {

// Old Caffe weight files store V1 `layers` with 4-D num/channels/height/width
// blobs; they load by layer name into a current net.
TEST(NetUpgradeTest, LegacyBinaryWeightsLoad) {
  NetParameter legacy;
  legacy.set_name("old");
  V1LayerParameter* ip = legacy.add_layers();
  ip->set_name("ip");
  ip->set_type(V1LayerParameter::INNER_PRODUCT);
  BlobProto* w = ip->add_blobs();
  w->set_num(1);
  w->set_channels(1);
  w->set_height(2);
  w->set_width(3);
  for (int i = 0; i < 6; ++i) w->add_data(i + 1);
  BlobProto* b = ip->add_blobs();
  b->set_num(1);
  b->set_channels(1);
  b->set_height(1);
  b->set_width(2);
  b->add_data(-1);
  b->add_data(-2);
  const string file = test::MakeTempDir() + "/old.caffemodel";
  WriteProtoToBinaryFile(legacy, file);

  Net<float> net(ParseNet(R"(
    layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 3 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
            inner_product_param { num_output: 2 } })"));
  net.CopyTrainedLayersFrom(file);
  const Blob<float>& weights = *net.layer_by_name("ip")->blobs()[0];
  for (int i = 0; i < 6; ++i) EXPECT_EQ(weights.cpu_data()[i], i + 1);
  Blob<float>* x = net.blob_by_name("x").get();
  for (int i = 0; i < 3; ++i) x->mutable_cpu_data()[i] = 1;
  net.Forward();
  EXPECT_EQ(net.blob_by_name("y")->cpu_data()[0], 1 + 2 + 3 - 1);
  EXPECT_EQ(net.blob_by_name("y")->cpu_data()[1], 4 + 5 + 6 - 2);
}

}  // namespace
}  // namespace poseidon
