// Net's folding of an in-place Scale into the BatchNorm before it (Note
// [BatchNorm + Scale] in net_fold.cpp): which pairs fold, and that a folded
// net computes what the same net unfolded does, forward and backward,
// whole and in pieces, with batch and global statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "captured_warnings.hpp"
#include "poseidon/net.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

struct Variant {
  bool bn_in_place;
  bool bias;
  bool global_stats;
  bool frozen_scale;  // lr_mult 0 on the Scale's parameters
};

string NetText(const Variant& v) {
  const string bn_top = v.bn_in_place ? "c" : "b";
  string scale_params;
  if (v.frozen_scale) {
    scale_params = "param { lr_mult: 0 }";
    if (v.bias) scale_params += " param { lr_mult: 0 }";
  }
  return R"(
    name: "bn_scale" force_backward: true
    layer { name: "in" type: "Input" top: "x" top: "t" input_param {
      shape { dim: 3 dim: 2 dim: 5 dim: 7 } shape { dim: 3 dim: 5 dim: 5 dim: 7 } } }
    layer { name: "conv" type: "Convolution" bottom: "x" top: "c"
      convolution_param { num_output: 5 kernel_size: 3 pad: 1
        weight_filler { type: "gaussian" std: 0.5 }
        bias_filler { type: "gaussian" std: 0.5 } } }
    layer { name: "bn" type: "BatchNorm" bottom: "c" top: ")" +
         bn_top + R"(" batch_norm_param { use_global_stats: )" +
         (v.global_stats ? "true" : "false") + R"( } }
    layer { name: "scale" type: "Scale" bottom: ")" +
         bn_top + R"(" top: ")" + bn_top + R"(" )" + scale_params +
         R"( scale_param { bias_term: )" + (v.bias ? "true" : "false") +
         R"( filler { type: "gaussian" mean: 1 std: 0.5 }
          bias_filler { type: "gaussian" std: 0.5 } } }
    layer { name: "relu" type: "ReLU" bottom: ")" +
         bn_top + R"(" top: ")" + bn_top + R"(" }
    layer { name: "loss" type: "EuclideanLoss" bottom: ")" +
         bn_top + R"(" bottom: "t" top: "loss" }
  )";
}

using test::ParseNet;

template <typename Dtype>
void FillRandom(Blob<Dtype>* blob, std::mt19937* gen, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Dtype* p = blob->mutable_cpu_data();
  for (int i = 0; i < blob->count(); ++i) p[i] = static_cast<Dtype>(dist(*gen));
}

// Same parameters, statistics and inputs in both nets.
template <typename Dtype>
void CopyState(const Net<Dtype>& from, Net<Dtype>* to) {
  ASSERT_EQ(from.params().size(), to->params().size());
  for (size_t i = 0; i < from.params().size(); ++i) {
    to->params()[i]->CopyFrom(*from.params()[i]);
  }
  for (const string& name : {"x", "t"}) {
    to->blob_by_name(name)->CopyFrom(*from.blob_by_name(name));
  }
}

// Every blob's data, every parameter's data and diff, and the input diff.
template <typename Dtype>
void ExpectSameState(const Net<Dtype>& want, const Net<Dtype>& got, double tol,
                     const string& when) {
  for (const string& name : want.blob_names()) {
    const Blob<Dtype>& a = *want.blob_by_name(name);
    const Blob<Dtype>& b = *got.blob_by_name(name);
    test::ExpectRelativelyClose(a.cpu_data(), b.cpu_data(), a.count(), tol,
                                when + ", blob " + name + " data");
  }
  for (size_t i = 0; i < want.params().size(); ++i) {
    const Blob<Dtype>& a = *want.params()[i];
    const Blob<Dtype>& b = *got.params()[i];
    const string what = when + ", param " + std::to_string(i);
    test::ExpectRelativelyClose(a.cpu_data(), b.cpu_data(), a.count(), tol,
                                what + " data");
    test::ExpectRelativelyClose(a.cpu_diff(), b.cpu_diff(), a.count(), tol,
                                what + " diff");
  }
  const Blob<Dtype>& x = *want.blob_by_name("x");
  test::ExpectRelativelyClose(x.cpu_diff(), got.blob_by_name("x")->cpu_diff(),
                              x.count(), tol, when + ", blob x diff");
}

// Note [BatchNorm + Scale + ReLU]: runs `net` forward to the layer before
// the ReLU `relu` (in place on `blob`), then the ReLU alone, then whole;
// expects the same bits both ways and returns how many values were
// negative before the ReLU and after the whole pass.
template <typename Dtype>
std::pair<int, int> ExpectReLUApartAndFoldedAlike(Net<Dtype>* net, int relu,
                                                  const string& blob) {
  const Blob<Dtype>& b = *net->blob_by_name(blob);
  auto negatives = [&b] {
    int n = 0;
    for (int i = 0; i < b.count(); ++i) n += b.cpu_data()[i] < 0;
    return n;
  };
  net->ForwardTo(relu - 1);
  const int before = negatives();
  EXPECT_GT(before, b.count() / 10);
  net->ForwardFromTo(relu, relu);
  const vector<Dtype> apart(b.cpu_data(), b.cpu_data() + b.count());
  // Batch statistics: the second pass normalises the same batch alike.
  net->Forward();
  const vector<Dtype> whole(b.cpu_data(), b.cpu_data() + b.count());
  EXPECT_EQ(whole, apart);
  return {before, negatives()};
}

template <typename Dtype>
class NetFoldTest : public ::testing::Test {
 protected:
  // A folded and an unfolded net in the same state.
  void Build(const Variant& v) {
    Poseidon::set_mode(Poseidon::CPU);
    Poseidon::set_random_seed(1701);
    folded_ = std::make_unique<Net<Dtype>>(ParseNet(NetText(v)));
    plain_ = std::make_unique<Net<Dtype>>(ParseNet(NetText(v)));
    plain_->set_fold_batch_norm_scale(false);
    std::mt19937 gen(7);
    FillRandom(folded_->blob_by_name("x").get(), &gen, -2, 3);
    FillRandom(folded_->blob_by_name("t").get(), &gen, -1, 1);
    if (v.global_stats) {
      // Running sums: mean, variance (positive) and the factor.
      const auto& bn = folded_->layer_by_name("bn")->blobs();
      FillRandom(bn[0].get(), &gen, -1, 1);
      FillRandom(bn[1].get(), &gen, 0.5, 2);
      bn[2]->mutable_cpu_data()[0] = Dtype(1.5);
    }
    CopyState(*folded_, plain_.get());
  }
  double Tol() const { return sizeof(Dtype) == 4 ? 2e-4 : 1e-10; }

  std::unique_ptr<Net<Dtype>> folded_, plain_;
};
TYPED_TEST_SUITE(NetFoldTest, test::TestDtypes);

TYPED_TEST(NetFoldTest, MatchesTheUnfoldedNet) {
  for (bool bn_in_place : {true, false}) {
    for (bool bias : {true, false}) {
      for (bool global_stats : {false, true}) {
        for (bool frozen : {false, true}) {
          const Variant v{bn_in_place, bias, global_stats, frozen};
          SCOPED_TRACE(string("bn in place ") + (bn_in_place ? "yes" : "no") +
                       ", bias " + (bias ? "yes" : "no") + ", global stats " +
                       (global_stats ? "yes" : "no") + ", frozen scale " +
                       (frozen ? "yes" : "no"));
          this->Build(v);
          ASSERT_EQ(this->folded_->num_batch_norm_scale_folds(), 1);
          // Two iterations without clearing: diffs accumulate, running
          // statistics move.
          for (int it = 0; it < 2; ++it) {
            for (Net<TypeParam>* net :
                 {this->folded_.get(), this->plain_.get()}) {
              net->Forward();
              net->Backward();
            }
            ExpectSameState(*this->plain_, *this->folded_, this->Tol(),
                            "iteration " + std::to_string(it));
          }
        }
      }
    }
  }
}

TYPED_TEST(NetFoldTest, PassesThatRunOneOfThePairRunUnfolded) {
  this->Build({true, true, false, false});
  Net<TypeParam>& net = *this->folded_;
  const int bn = net.layer_index("bn");
  const int last = static_cast<int>(net.layers().size()) - 1;
  // Forward to the BatchNorm alone: its top holds x_hat, not s x_hat + b.
  net.ForwardTo(bn);
  this->plain_->ForwardTo(bn);
  ExpectSameState(*this->plain_, net, this->Tol(), "forward to bn");
  net.ForwardFrom(bn + 1);
  this->plain_->ForwardFrom(bn + 1);
  ExpectSameState(*this->plain_, net, this->Tol(), "forward from scale");
  // Backward down to the Scale, then the rest: the Scale writes dE/dx.
  net.BackwardFromTo(last, bn + 1);
  this->plain_->BackwardFromTo(last, bn + 1);
  ExpectSameState(*this->plain_, net, this->Tol(), "backward to scale");
  net.BackwardFromTo(bn, 0);
  this->plain_->BackwardFromTo(bn, 0);
  ExpectSameState(*this->plain_, net, this->Tol(), "backward from bn");
  // A whole pass after the pieces folds again and still agrees.
  for (Net<TypeParam>* n : {this->folded_.get(), this->plain_.get()}) {
    n->ClearParamDiffs();
    n->Forward();
    n->Backward();
  }
  ExpectSameState(*this->plain_, net, this->Tol(), "whole pass");
}

// Note [BatchNorm + Scale + ReLU]: the BatchNorm's pass rectifies as the
// ReLU would, bit for bit: a whole forward against one that ends at the
// Scale (which runs the pair folded and leaves the ReLU out) followed by
// the ReLU alone; with the plain ReLU and a leaky one.
TYPED_TEST(NetFoldTest, TheReLUFoldsIntoTheForwardWithItsOwnBits) {
  for (const string slope : {"0", "0.25"}) {
    SCOPED_TRACE("negative_slope " + slope);
    string text = NetText({true, true, false, false});
    const string relu = R"(type: "ReLU" bottom: "c" top: "c" )";
    ASSERT_NE(text.find(relu), string::npos);
    text.replace(text.find(relu), relu.size(),
                 relu + "relu_param { negative_slope: " + slope + " } ");
    Poseidon::set_mode(Poseidon::CPU);
    Net<TypeParam> net(ParseNet(text));
    ASSERT_EQ(net.num_batch_norm_scale_relu_folds(), 1);
    std::mt19937 gen(3);
    FillRandom(net.blob_by_name("x").get(), &gen, -2, 3);
    FillRandom(net.blob_by_name("t").get(), &gen, -1, 1);
    const int relu_layer = net.layer_index("relu");
    ASSERT_EQ(relu_layer, net.layer_index("scale") + 1);
    const auto [negative, still_negative] =
        ExpectReLUApartAndFoldedAlike(&net, relu_layer, "c");
    // Rectified: no negatives left with slope 0, scaled ones with 0.25.
    if (slope == "0") {
      EXPECT_EQ(still_negative, 0);
    } else {
      EXPECT_EQ(still_negative, negative);
    }
  }
}

TYPED_TEST(NetFoldTest, ScaleHooksRunBeforeTheFoldedForward) {
  // The synchroniser waits for a layer's fresh parameters in its
  // before-forward hook: the Scale's must run before the BatchNorm's
  // forward reads them, once per pass.
  this->Build({true, true, false, false});
  Net<TypeParam>& net = *this->folded_;
  vector<string> events;
  auto before = net.add_before_forward(
      [&](int l) { events.push_back("before " + net.layer_names()[l]); });
  auto after = net.add_after_forward(
      [&](int l) { events.push_back("after " + net.layer_names()[l]); });
  net.Forward();
  const vector<string> want = {"before in",  "after in",    "before conv",
                               "after conv", "before bn",   "before scale",
                               "after bn",   "after scale", "before relu",
                               "after relu", "before loss", "after loss"};
  EXPECT_EQ(events, want);
}

TYPED_TEST(NetFoldTest, APassStoppedByAnErrorLeavesTheLayersAsTheyWere) {
  // A folded pass sets nothing on the layers: stopped between the halves
  // of the pair, each layer called on its own still computes its whole
  // output.
  this->Build({true, true, false, false});
  Net<TypeParam>& net = *this->folded_;
  const int bn = net.layer_index("bn");
  auto stop = net.add_after_forward([&](int l) {
    if (l == bn) throw Error("stopped after the BatchNorm");
  });
  EXPECT_NE(test::ErrorOf([&] { net.Forward(); }).find("stopped after"),
            string::npos);
  Blob<TypeParam> x;
  x.Reshape({3, 5, 5, 7});
  std::mt19937 gen(11);
  FillRandom(&x, &gen, -1, 1);
  Blob<TypeParam> y;
  y.CopyFrom(x, false, true);
  Layer<TypeParam>& scale = *net.layers()[bn + 1];
  scale.Forward({&y}, {&y});
  const TypeParam* s = scale.blobs()[0]->cpu_data();
  const TypeParam* b = scale.blobs()[1]->cpu_data();
  for (int i = 0; i < x.count(); ++i) {
    const int c = i / (5 * 7) % 5;
    EXPECT_NEAR(y.cpu_data()[i], s[c] * x.cpu_data()[i] + b[c], 1e-5)
        << "element " << i;
  }
}

TYPED_TEST(NetFoldTest, DebugInfoPrintsEachLayerAndRunsUnfolded) {
  this->Build({true, true, false, false});
  Net<TypeParam>& net = *this->folded_;
  net.set_debug_info(true);
  {
    test::CapturedWarnings log(google::GLOG_INFO);
    net.Forward();
    net.Backward();
    // Each layer's own output: the BatchNorm's top is x_hat, so the pair
    // ran unfolded.
    EXPECT_EQ(log.Count("[Forward] Layer bn, top blob c data:"), 1);
    EXPECT_EQ(log.Count("[Forward] Layer scale, top blob c data:"), 1);
    EXPECT_EQ(log.Count("[Forward] Layer scale, param blob 1 data:"), 1);
    EXPECT_EQ(log.Count("[Backward] Layer scale, bottom blob c diff:"), 1);
    EXPECT_EQ(log.Count("[Backward] Layer bn, bottom blob c diff:"), 1);
    EXPECT_EQ(log.Count("[Backward] Layer in,"), 0);  // needs no backward
  }
  this->plain_->Forward();
  this->plain_->Backward();
  ExpectSameState(*this->plain_, net, this->Tol(), "with debug_info");
  net.set_debug_info(false);
  test::CapturedWarnings log(google::GLOG_INFO);
  net.Forward();
  net.Backward();
  EXPECT_EQ(log.Count("[Forward]"), 0);
  EXPECT_EQ(log.Count("[Backward]"), 0);
}

TEST(NetFoldPairsTest, OnlyInPlaceScalesOverChannelsFold) {
  const string head = R"(
    name: "pairs"
    layer { name: "in" type: "Input" top: "x" top: "s2" input_param {
      shape { dim: 2 dim: 3 dim: 4 dim: 4 } shape { dim: 3 } } }
    layer { name: "bn" type: "BatchNorm" bottom: "x" top: "x" }
  )";
  struct Case {
    string tail;
    int folds;
  };
  const Case cases[] = {
      {R"(layer { name: "s" type: "Scale" bottom: "x" top: "x"
            scale_param { bias_term: true } })",
       1},
      // Not in place.
      {R"(layer { name: "s" type: "Scale" bottom: "x" top: "y" })", 0},
      // A scale over two axes, and one over axis 2.
      {R"(layer { name: "s" type: "Scale" bottom: "x" top: "x"
            scale_param { num_axes: 2 } })",
       0},
      {R"(layer { name: "s" type: "Scale" bottom: "x" top: "x"
            scale_param { axis: 2 } })",
       0},
      // The Scale's output read by two layers: Splits after the Scale
      // only, the pair still folds.
      {R"(layer { name: "s" type: "Scale" bottom: "x" top: "x" }
          layer { name: "r" type: "ReLU" bottom: "x" top: "r" }
          layer { name: "q" type: "ReLU" bottom: "x" top: "q" })",
       1},
      // A Scale with its scale from a second bottom.
      {R"(layer { name: "s" type: "Scale" bottom: "x" bottom: "s2" top: "x" })",
       0},
      // A Scale whose output is a loss (its loss would be lost in the fold).
      {R"(layer { name: "s" type: "Scale" bottom: "x" top: "x"
            loss_weight: 1 })",
       0},
  };
  for (const Case& c : cases) {
    Net<float> net(ParseNet(head + c.tail));
    EXPECT_EQ(net.num_batch_norm_scale_folds(), c.folds) << c.tail;
  }
}

TEST(NetFoldPairsTest, ReLUsInPlaceRightAfterThePairFold) {
  const string head = R"(
    name: "pairs"
    layer { name: "in" type: "Input" top: "x"
      input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } } }
    layer { name: "bn" type: "BatchNorm" bottom: "x" top: "x" }
    layer { name: "s" type: "Scale" bottom: "x" top: "x" }
  )";
  struct Case {
    string tail;
    int relu_folds;
  };
  const Case cases[] = {
      {R"(layer { name: "r" type: "ReLU" bottom: "x" top: "x" })", 1},
      {R"(layer { name: "r" type: "ReLU" bottom: "x" top: "x"
            relu_param { negative_slope: 0.1 } })",
       1},
      // A negative slope: the ReLU saves its input for backward.
      {R"(layer { name: "r" type: "ReLU" bottom: "x" top: "x"
            relu_param { negative_slope: -0.5 } })",
       0},
      // Not in place; a layer in between; a loss weight.
      {R"(layer { name: "r" type: "ReLU" bottom: "x" top: "y" })", 0},
      {R"(layer { name: "p" type: "Power" bottom: "x" top: "x" }
          layer { name: "r" type: "ReLU" bottom: "x" top: "x" })",
       0},
      {R"(layer { name: "r" type: "ReLU" bottom: "x" top: "x"
            loss_weight: 1 })",
       0},
      // A TanH is no ReLU.
      {R"(layer { name: "r" type: "TanH" bottom: "x" top: "x" })", 0},
  };
  for (const Case& c : cases) {
    Net<float> net(ParseNet(head + c.tail));
    EXPECT_EQ(net.num_batch_norm_scale_folds(), 1) << c.tail;
    EXPECT_EQ(net.num_batch_norm_scale_relu_folds(), c.relu_folds) << c.tail;
  }
}

// Note [BatchNorm + Scale + ReLU]: a ReLU in place after an Eltwise sum of
// two (ResNet's shortcuts) folds into the sum, with the bits of the sum
// and the ReLU run apart; other Eltwise layers keep their ReLU apart.
TEST(NetFoldEltwiseTest, TheReLUFoldsIntoASumOfTwoWithItsOwnBits) {
  const string head = R"(
    name: "sums" force_backward: true
    layer { name: "in" type: "Input" top: "a" top: "b" top: "c"
      input_param { shape { dim: 2 dim: 3 dim: 5 dim: 7 }
                    shape { dim: 2 dim: 3 dim: 5 dim: 7 }
                    shape { dim: 2 dim: 3 dim: 5 dim: 7 } } }
  )";
  const string relu =
      R"(layer { name: "r" type: "ReLU" bottom: "s" top: "s" RELU })";
  struct Case {
    string sum;
    string relu_param;
    int folds;
  };
  const Case cases[] = {
      {R"(layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b"
            top: "s" })",
       "", 1},
      {R"(layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b"
            top: "s" eltwise_param { coeff: 1 coeff: 1 } })",
       "relu_param { negative_slope: 0.5 }", 1},
      // Coefficients other than 1, three bottoms, PROD, MAX.
      {R"(layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b"
            top: "s" eltwise_param { coeff: 1 coeff: -1 } })",
       "", 0},
      {R"(layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b"
            bottom: "c" top: "s" })",
       "", 0},
      {R"(layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b"
            top: "s" eltwise_param { operation: PROD } })",
       "", 0},
      {R"(layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b"
            top: "s" eltwise_param { operation: MAX } })",
       "", 0},
      // A negative slope.
      {R"(layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b"
            top: "s" })",
       "relu_param { negative_slope: -1 }", 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.sum + " " + c.relu_param);
    string r = relu;
    r.replace(r.find("RELU"), 4, c.relu_param);
    Poseidon::set_mode(Poseidon::CPU);
    Net<float> net(ParseNet(head + c.sum + r));
    ASSERT_EQ(net.num_eltwise_relu_folds(), c.folds);
    std::mt19937 gen(5);
    for (const string& name : {"a", "b", "c"}) {
      FillRandom(net.blob_by_name(name).get(), &gen, -1, 1);
    }
    const int sum = net.layer_index("sum");
    const int still_negative =
        ExpectReLUApartAndFoldedAlike(&net, sum + 1, "s").second;
    // Negatives stay (scaled) only with a positive slope.
    EXPECT_EQ(still_negative > 0,
              c.relu_param.find("slope: 0.5") != string::npos);
    // The ReLU's backward still runs: its mask zeroes the gradient.
    net.Backward();
    const Blob<float>& a = *net.blob_by_name("a");
    int zero_grad = 0;
    for (int i = 0; i < a.count(); ++i) zero_grad += a.cpu_diff()[i] == 0;
    if (c.relu_param.empty() && c.sum.find("MAX") == string::npos) {
      EXPECT_GT(zero_grad, a.count() / 10);
    }
  }
}

}  // namespace
}  // namespace poseidon
