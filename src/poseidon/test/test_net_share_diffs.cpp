// Net's shared-diff pool (Note [Shared diffs] in net_diffs.cpp): a net whose
// blob diffs share memory computes the same gradients as one whose do not,
// on graphs with in-place chains, Splits, Eltwise, Concat, diff-aliasing
// layers, a Split top nobody writes a gradient for, and several losses; the
// pool is smaller than the diffs apart; reshapes plan again; and the diffs
// that are not pooled keep their values after Backward.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "poseidon/net.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// A residual block (conv, BatchNorm + Scale + ReLU in place, Eltwise with
// the shortcut), pooling, a classifier read by a loss and by an Accuracy
// layer (whose Split top never gets a gradient).
const char kResidual[] = R"(
  name: "residual" force_backward: true
  layer { name: "in" type: "Input" top: "x" top: "label"
    input_param { shape { dim: 4 dim: 3 dim: 8 dim: 8 } shape { dim: 4 } } }
  layer { name: "conv1" type: "Convolution" bottom: "x" top: "c1"
    convolution_param { num_output: 8 kernel_size: 3 pad: 1
      weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "bn1" type: "BatchNorm" bottom: "c1" top: "c1" }
  layer { name: "sc1" type: "Scale" bottom: "c1" top: "c1"
    scale_param { bias_term: true filler { type: "gaussian" mean: 1 std: 0.3 }
      bias_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "relu1" type: "ReLU" bottom: "c1" top: "c1" }
  layer { name: "conv2a" type: "Convolution" bottom: "c1" top: "c2a"
    convolution_param { num_output: 4 kernel_size: 1
      weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "relu2a" type: "ReLU" bottom: "c2a" top: "c2a" }
  layer { name: "conv2b" type: "Convolution" bottom: "c2a" top: "c2b"
    convolution_param { num_output: 8 kernel_size: 3 pad: 1
      weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "sum" type: "Eltwise" bottom: "c1" bottom: "c2b" top: "s" }
  layer { name: "relu_s" type: "ReLU" bottom: "s" top: "s" }
  layer { name: "pool" type: "Pooling" bottom: "s" top: "p"
    pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
  layer { name: "fc" type: "InnerProduct" bottom: "p" top: "fc"
    inner_product_param { num_output: 5
      weight_filler { type: "gaussian" std: 0.1 } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label"
    top: "loss" }
  layer { name: "acc" type: "Accuracy" bottom: "fc" bottom: "label"
    top: "acc" }
)";

// Inception-style branches joined by Concat, Flatten and Reshape (which
// share their diff with their bottom), a bottom that propagates nothing,
// and two weighted losses, one on an inner blob.
const char kBranches[] = R"(
  name: "branches" force_backward: true
  layer { name: "in" type: "Input" top: "x" top: "t" top: "u"
    input_param { shape { dim: 3 dim: 4 dim: 6 dim: 6 } shape { dim: 3 dim: 6 }
                  shape { dim: 3 dim: 9 dim: 6 dim: 6 } } }
  layer { name: "b1" type: "Convolution" bottom: "x" top: "b1"
    convolution_param { num_output: 2 kernel_size: 1
      weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "b2" type: "Convolution" bottom: "x" top: "b2"
    convolution_param { num_output: 3 kernel_size: 3 pad: 1
      weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "b2_act" type: "Sigmoid" bottom: "b2" top: "b2" }
  layer { name: "b3" type: "Pooling" bottom: "x" top: "b3"
    pooling_param { pool: AVE kernel_size: 3 stride: 1 pad: 1 } }
  layer { name: "b3_lrn" type: "LRN" bottom: "b3" top: "b3n" }
  layer { name: "cat" type: "Concat" bottom: "b1" bottom: "b2" bottom: "b3n"
    top: "cat" }
  layer { name: "inner" type: "EuclideanLoss" bottom: "cat" bottom: "u"
    top: "inner_loss" loss_weight: 0.5 propagate_down: true
    propagate_down: false }
  layer { name: "reshape" type: "Reshape" bottom: "cat" top: "r"
    reshape_param { shape { dim: 0 dim: -1 dim: 6 dim: 6 } } }
  layer { name: "flat" type: "Flatten" bottom: "r" top: "f" }
  layer { name: "fc1" type: "InnerProduct" bottom: "f" top: "h"
    inner_product_param { num_output: 7
      weight_filler { type: "gaussian" std: 0.05 } } }
  layer { name: "tanh" type: "TanH" bottom: "h" top: "h2" }
  layer { name: "fc2" type: "InnerProduct" bottom: "h2" top: "y"
    inner_product_param { num_output: 6
      weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "t"
    top: "loss" }
)";

// A chain of equal-size layers, each with its own top.
string Chain(int depth) {
  string text = R"(
    name: "chain"
    layer { name: "in" type: "Input" top: "x" top: "t"
      input_param { shape { dim: 8 dim: 64 } shape { dim: 8 dim: 64 } } }
    layer { name: "fc0" type: "InnerProduct" bottom: "x" top: "h0"
      inner_product_param { num_output: 64
        weight_filler { type: "gaussian" std: 0.1 } } })";
  for (int i = 1; i < depth; ++i) {
    const string prev = "h" + std::to_string(i - 1);
    const string next = "h" + std::to_string(i);
    text += "\nlayer { name: \"act" + std::to_string(i) +
            "\" type: \"Sigmoid\" bottom: \"" + prev + "\" top: \"" + prev +
            "s\" }\nlayer { name: \"fc" + std::to_string(i) +
            "\" type: \"InnerProduct\" bottom: \"" + prev + "s\" top: \"" +
            next +
            "\" inner_product_param { num_output: 64 weight_filler { "
            "type: \"gaussian\" std: 0.3 } } }";
  }
  text += "\nlayer { name: \"loss\" type: \"EuclideanLoss\" bottom: \"h" +
          std::to_string(depth - 1) + "\" bottom: \"t\" top: \"loss\" }";
  return text;
}

using test::ParseNet;

// Fills every input: a blob named "label" with class indices below 5, the
// others with uniform values; the same stream for both nets.
template <typename Dtype>
void FillInputs(Net<Dtype>* net, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> value(-1, 1);
  std::uniform_int_distribution<int> label(0, 4);
  for (int i = 0; i < net->num_inputs(); ++i) {
    const int id = net->input_blob_indices()[i];
    Blob<Dtype>* blob = net->input_blobs()[i];
    const bool is_label = net->blob_names()[id] == "label";
    Dtype* p = blob->mutable_cpu_data();
    for (int k = 0; k < blob->count(); ++k) {
      p[k] = static_cast<Dtype>(is_label ? label(gen) : value(gen));
    }
  }
}

template <typename Dtype>
class NetShareDiffsTest : public ::testing::Test {
 protected:
  // Two nets of `text` with the same parameters; `shared_` pools its diffs.
  void Build(const string& text) {
    Poseidon::set_mode(Poseidon::CPU);
    shared_ = std::make_unique<Net<Dtype>>(ParseNet(text));
    plain_ = std::make_unique<Net<Dtype>>(ParseNet(text));
    shared_->set_share_diffs(true);
    ASSERT_EQ(shared_->params().size(), plain_->params().size());
    for (size_t i = 0; i < plain_->params().size(); ++i) {
      plain_->params()[i]->CopyFrom(*shared_->params()[i]);
    }
  }
  // Forward and Backward on both from the same inputs, then the loss, every
  // parameter diff (accumulated over the passes so far) and every diff
  // that is not pooled must agree.
  void PassAndCompare(unsigned seed, const string& when) {
    for (Net<Dtype>* net : {shared_.get(), plain_.get()}) {
      FillInputs(net, seed);
      net->Forward();
      net->Backward();
    }
    const double tol = sizeof(Dtype) == 4 ? 1e-5 : 1e-12;
    for (size_t i = 0; i < plain_->params().size(); ++i) {
      const Blob<Dtype>& a = *plain_->params()[i];
      const Blob<Dtype>& b = *shared_->params()[i];
      test::ExpectRelativelyClose(
          a.cpu_diff(), b.cpu_diff(), a.count(), tol,
          when + ", param " + plain_->param_display_names()[i] + " diff");
    }
    for (const int id : Unpooled()) {
      const string& name = plain_->blob_names()[id];
      const Blob<Dtype>& a = *plain_->blobs()[id];
      const Blob<Dtype>& b = *shared_->blobs()[id];
      test::ExpectRelativelyClose(a.cpu_data(), b.cpu_data(), a.count(), tol,
                                  when + ", blob " + name + " data");
      test::ExpectRelativelyClose(a.cpu_diff(), b.cpu_diff(), a.count(), tol,
                                  when + ", blob " + name + " diff");
    }
  }
  // The blobs of the shared net whose diff is not in the pool.
  vector<int> Unpooled() const {
    vector<int> ids;
    for (int b = 0; b < static_cast<int>(shared_->blobs().size()); ++b) {
      if (!shared_->diff_pooled(b)) ids.push_back(b);
    }
    return ids;
  }
  bool Pooled(const string& blob) const {
    const auto& names = shared_->blob_names();
    for (size_t b = 0; b < names.size(); ++b) {
      if (names[b] == blob) return shared_->diff_pooled(static_cast<int>(b));
    }
    ADD_FAILURE() << "no blob " << blob;
    return false;
  }
  std::unique_ptr<Net<Dtype>> shared_, plain_;
};
TYPED_TEST_SUITE(NetShareDiffsTest, test::TestDtypes);

TYPED_TEST(NetShareDiffsTest, ResidualBlockMatchesTheUnsharedNet) {
  this->Build(kResidual);
  for (int it = 0; it < 3; ++it) {
    this->PassAndCompare(11 + it, "iteration " + std::to_string(it));
  }
  Net<TypeParam>& net = *this->shared_;
  EXPECT_GT(net.num_pooled_diffs(), 0);
  EXPECT_LT(net.diff_pool_bytes(), net.pooled_diff_bytes());
  // Inside: pooled. The input, the outputs, and the Split top that only
  // the Accuracy layer reads (nobody writes its diff; the Split below adds
  // it as zeros, as in Caffe): not.
  for (const char* blob : {"c1", "c2a", "c2b", "s", "p"}) {
    EXPECT_TRUE(this->Pooled(blob)) << blob;
  }
  for (const char* blob : {"x", "label", "loss", "acc"}) {
    EXPECT_FALSE(this->Pooled(blob)) << blob;
  }
  int unwritten_split_tops = 0;
  for (size_t l = 0; l < net.layers().size(); ++l) {
    if (net.layer_names()[l] != "acc") continue;
    const string& fc_top = net.blob_names()[net.bottom_ids(l)[0]];
    EXPECT_NE(fc_top, "fc") << "expected a Split between fc and acc";
    EXPECT_FALSE(this->Pooled(fc_top)) << fc_top;
    ++unwritten_split_tops;
  }
  EXPECT_EQ(unwritten_split_tops, 1);
}

TYPED_TEST(NetShareDiffsTest, BranchesConcatAndAliasedDiffsMatch) {
  this->Build(kBranches);
  for (int it = 0; it < 3; ++it) {
    this->PassAndCompare(21 + it, "iteration " + std::to_string(it));
  }
  // Reshape and Flatten alias their bottom's diff: pooled as one group.
  EXPECT_TRUE(this->Pooled("r"));
  EXPECT_TRUE(this->Pooled("f"));
  EXPECT_EQ(this->shared_->blob_by_name("r")->diff(),
            this->shared_->blob_by_name("f")->diff());
  EXPECT_FALSE(this->Pooled("u"));
  EXPECT_FALSE(this->Pooled("inner_loss"));
}

TYPED_TEST(NetShareDiffsTest, AChainNeedsAFewDiffs) {
  const int depth = 12;
  this->Build(Chain(depth));
  this->PassAndCompare(5, "chain");
  Net<TypeParam>& net = *this->shared_;
  // h0..h10 and their sigmoids are pooled (h11 is the loss's bottom and
  // is pooled too; x, t and loss are not).
  EXPECT_EQ(net.num_pooled_diffs(), 2 * (depth - 1) + 1);
  const size_t one = 8 * 64 * sizeof(TypeParam);
  EXPECT_EQ(net.pooled_diff_bytes(), (2 * (depth - 1) + 1) * one);
  // At any layer at most two of them are live: a bottom and a top.
  EXPECT_LE(net.diff_pool_bytes(), 2 * one + 64);
}

// Pass-through (Note [Shared diffs]): a Split of three tops, an Eltwise
// whose coefficient-1 bottom can take dE/dy's memory, and one whose
// coefficients are none of them 1.
const char kPassThrough[] = R"(
  name: "pass_through" force_backward: true
  layer { name: "in" type: "Input" top: "x" top: "t"
    input_param { shape { dim: 2 dim: 3 dim: 5 dim: 5 }
                  shape { dim: 2 dim: 4 dim: 5 dim: 5 } } }
  layer { name: "a" type: "Convolution" bottom: "x" top: "a"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1
      weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "b1" type: "Convolution" bottom: "a" top: "b1"
    convolution_param { num_output: 4 kernel_size: 1
      weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "b2" type: "Convolution" bottom: "a" top: "b2"
    convolution_param { num_output: 4 kernel_size: 3 pad: 1
      weight_filler { type: "gaussian" std: 0.3 } } }
  layer { name: "e1" type: "Eltwise" bottom: "a" bottom: "b1" top: "e1"
    eltwise_param { operation: SUM coeff: 2 coeff: 1 } }
  layer { name: "e1_act" type: "TanH" bottom: "e1" top: "e1" }
  layer { name: "e2" type: "Eltwise" bottom: "e1" bottom: "b2" top: "e2"
    eltwise_param { operation: SUM coeff: 3 coeff: -0.5 } }
  layer { name: "loss" type: "EuclideanLoss" bottom: "e2" bottom: "t"
    top: "loss" }
)";

TYPED_TEST(NetShareDiffsTest, PassThroughSharesDiffsWithoutChangingThem) {
  this->Build(kPassThrough);
  for (int it = 0; it < 3; ++it) {
    this->PassAndCompare(51 + it, "iteration " + std::to_string(it));
  }
  Net<TypeParam>& net = *this->shared_;
  auto diff_of = [&net](const string& blob) {
    return net.blob_by_name(blob)->diff();
  };
  // e1's coefficient-1 bottom b1 holds dE/de1 in e1's top memory; its
  // coefficient-2 bottom (a Split top) does not; e2 shares with neither.
  EXPECT_EQ(diff_of("e1"), diff_of("b1"));
  EXPECT_NE(
      diff_of("e1"),
      diff_of(net.blob_names()[net.bottom_ids(net.layer_index("e1"))[0]]));
  for (int id : net.bottom_ids(net.layer_index("e2"))) {
    EXPECT_NE(diff_of("e2"), net.blobs()[id]->diff()) << net.blob_names()[id];
  }
  // The Split of a into three: its bottom sums into top 0's diff.
  int splits = 0;
  for (size_t l = 0; l < net.layers().size(); ++l) {
    if (string(net.layers()[l]->type()) != "Split") continue;
    ++splits;
    ASSERT_EQ(net.top_ids(l).size(), 3u);
    EXPECT_EQ(net.blobs()[net.bottom_ids(l)[0]]->diff(),
              net.blobs()[net.top_ids(l)[0]]->diff());
    EXPECT_NE(net.blobs()[net.bottom_ids(l)[0]]->diff(),
              net.blobs()[net.top_ids(l)[1]]->diff());
  }
  EXPECT_EQ(splits, 1);
  // Released, every blob has a diff of its own again.
  net.set_share_diffs(false);
  this->PassAndCompare(55, "released");
  std::set<const SyncedMemory*> distinct;
  for (const auto& blob : net.blobs()) distinct.insert(blob->diff().get());
  EXPECT_EQ(distinct.size(), net.blobs().size());
}

TYPED_TEST(NetShareDiffsTest, ReshapedInputsPlanAgain) {
  this->Build(kResidual);
  this->PassAndCompare(31, "batch 4");
  const size_t before = this->shared_->diff_pool_bytes();
  auto set_batch = [this](int batch) {
    for (Net<TypeParam>* net : {this->shared_.get(), this->plain_.get()}) {
      net->blob_by_name("x")->Reshape({batch, 3, 8, 8});
      net->blob_by_name("label")->Reshape({batch});
      net->Reshape();
    }
  };
  set_batch(6);
  this->PassAndCompare(32, "batch 6");
  EXPECT_GT(this->shared_->diff_pool_bytes(), before);
  set_batch(2);
  this->PassAndCompare(33, "batch 2");
  EXPECT_LT(this->shared_->diff_pool_bytes(), before);
}

TYPED_TEST(NetShareDiffsTest, KeptAndReleasedDiffsHoldTheirGradients) {
  this->Build(kResidual);
  Net<TypeParam>& net = *this->shared_;
  net.KeepDiff("p");
  this->PassAndCompare(41, "p kept");
  EXPECT_FALSE(this->Pooled("p"));
  EXPECT_TRUE(this->Pooled("s"));
  EXPECT_THROW(net.KeepDiff("no_such_blob"), Error);
  // Turned off, the next pass gives every blob its own diff again, and all
  // of them agree with the plain net's.
  net.set_share_diffs(false);
  this->PassAndCompare(42, "released");
  EXPECT_EQ(net.num_pooled_diffs(), 0);
  EXPECT_EQ(net.diff_pool_bytes(), 0u);
  EXPECT_EQ(this->Unpooled().size(), net.blobs().size());
}

// Training: two solvers from one seed, one with a pooled net, take the same
// steps (momentum and weight decay on the parameter diffs the pool must
// not disturb) and end with the same weights.
TYPED_TEST(NetShareDiffsTest, SolverStepsMatchTheUnsharedNet) {
  string net = kBranches;
  const string input = net.substr(
      net.find("layer { name: \"in\""),
      net.find("layer { name: \"b1\"") - net.find("layer { name: \"in\""));
  net.replace(net.find(input), input.size(), R"(
    layer { name: "in" type: "DummyData" top: "x" top: "t" top: "u"
      dummy_data_param {
        data_filler { type: "gaussian" std: 1 }
        shape { dim: 3 dim: 4 dim: 6 dim: 6 } shape { dim: 3 dim: 6 }
        shape { dim: 3 dim: 9 dim: 6 dim: 6 } } }
  )");
  SolverParameter param;
  ReadProtoFromTextString("train_net_param { " + net +
                              " } base_lr: 0.05 lr_policy: \"fixed\" "
                              "momentum: 0.9 weight_decay: 0.01 "
                              "random_seed: 1701 max_iter: 4 display: 0",
                          "<test solver>", &param);
  Poseidon::set_mode(Poseidon::CPU);
  auto plain = CreateSolver<TypeParam>(param);
  auto shared = CreateSolver<TypeParam>(param);
  shared->net()->set_share_diffs(true);
  // The same data each iteration: the nets draw from one stream in turn.
  for (int it = 0; it < 4; ++it) {
    Poseidon::set_random_seed(100 + it);
    plain->Step(1);
    Poseidon::set_random_seed(100 + it);
    shared->Step(1);
  }
  EXPECT_GT(shared->net()->num_pooled_diffs(), 0);
  const auto& want = plain->net()->learnable_params();
  const auto& got = shared->net()->learnable_params();
  ASSERT_EQ(want.size(), got.size());
  const double tol = sizeof(TypeParam) == 4 ? 1e-5 : 1e-12;
  for (size_t i = 0; i < want.size(); ++i) {
    test::ExpectRelativelyClose(
        want[i]->cpu_data(), got[i]->cpu_data(), want[i]->count(), tol,
        "learnable param " + std::to_string(i) + " after 4 steps");
  }
}

}  // namespace
}  // namespace poseidon
