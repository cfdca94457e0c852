// AccuracyLayer: hand-computed top-1 / top-k values, the tie rule,
// ignore_label, per-class accuracy, other axes, and the error paths;
// CPU/GPU agreement.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_agreement.hpp"
#include "poseidon/layers/accuracy_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class AccuracyLayerTest : public test::MultiDeviceTest<TypeParam> {
  using Dtype = typename TypeParam::Dtype;

 protected:
  // Five samples over four classes:
  //   sample  scores              label  rank of label (classes above it)
  //   0       .1 .7 .1 .1         1      0
  //   1       .4 .3 .2 .1         2      2
  //   2       .1 .2 .3 .4         0      3
  //   3       .3 .5 .2 .0         0      1
  //   4       .2 .2 .5 .1         1      1 (tied with class 0)
  AccuracyLayerTest() {
    const Dtype scores[] = {.1, .7, .1, .1, .4, .3, .2, .1, .1, .2,
                            .3, .4, .3, .5, .2, .0, .2, .2, .5, .1};
    const Dtype labels[] = {1, 2, 0, 0, 1};
    std::copy(scores, scores + 20, scores_.mutable_cpu_data());
    std::copy(labels, labels + 5, labels_.mutable_cpu_data());
    bottom_vec_ = {&scores_, &labels_};
    top_vec_ = {&accuracy_};
  }

  static LayerParameter Param(int top_k = 1) {
    LayerParameter p;
    p.set_type("Accuracy");
    p.mutable_accuracy_param()->set_top_k(top_k);
    return p;
  }

  Dtype Run(const LayerParameter& p) {
    AccuracyLayer<Dtype> layer(p);
    layer.SetUp(bottom_vec_, top_vec_);
    layer.Forward(bottom_vec_, top_vec_);
    return accuracy_.cpu_data()[0];
  }

  Blob<Dtype> scores_{5, 4};
  Blob<Dtype> labels_{5};
  Blob<Dtype> accuracy_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(AccuracyLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(AccuracyLayerTest, TopKHandComputed) {
  // Ranks 0, 2, 3, 1, 1: a hit when rank < k.
  EXPECT_NEAR(this->Run(this->Param(1)), 1.0 / 5, 1e-6);
  EXPECT_EQ(this->accuracy_.num_axes(), 0);
  EXPECT_NEAR(this->Run(this->Param(2)), 3.0 / 5, 1e-6);
  EXPECT_NEAR(this->Run(this->Param(3)), 4.0 / 5, 1e-6);
  EXPECT_NEAR(this->Run(this->Param(4)), 1.0, 1e-6);
}

TYPED_TEST(AccuracyLayerTest, TiesCountForTheLabel) {
  using Dtype = typename TypeParam::Dtype;
  // Every score equal: no class is strictly better, so all are top-1 hits.
  cpu_set(this->scores_.count(), Dtype(0.25), this->scores_.mutable_cpu_data());
  EXPECT_NEAR(this->Run(this->Param(1)), 1.0, 1e-6);
}

TYPED_TEST(AccuracyLayerTest, IgnoreLabel) {
  LayerParameter p = this->Param(2);
  p.mutable_accuracy_param()->set_ignore_label(0);
  // Samples 2 and 3 (label 0) are skipped: hits at samples 0 and 4 of the
  // remaining 0, 1, 4.
  EXPECT_NEAR(this->Run(p), 2.0 / 3, 1e-6);
  // Everything ignored: 0, not NaN.
  p.mutable_accuracy_param()->set_ignore_label(7);
  for (int i = 0; i < 5; ++i) this->labels_.mutable_cpu_data()[i] = 7;
  EXPECT_EQ(this->Run(p), 0);
}

TYPED_TEST(AccuracyLayerTest, PerClassTop) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> per_class;
  vector<Blob<Dtype>*> top = {&this->accuracy_, &per_class};
  AccuracyLayer<Dtype> layer(this->Param(2));
  layer.SetUp(this->bottom_vec_, top);
  EXPECT_EQ(per_class.shape(), vector<int>{4});
  layer.Forward(this->bottom_vec_, top);
  EXPECT_NEAR(this->accuracy_.cpu_data()[0], 3.0 / 5, 1e-6);
  // Class 0: samples 2 (miss), 3 (hit); class 1: samples 0, 4 (hits);
  // class 2: sample 1 (miss); class 3: no samples.
  EXPECT_NEAR(per_class.cpu_data()[0], 0.5, 1e-6);
  EXPECT_NEAR(per_class.cpu_data()[1], 1.0, 1e-6);
  EXPECT_NEAR(per_class.cpu_data()[2], 0.0, 1e-6);
  EXPECT_EQ(per_class.cpu_data()[3], Dtype(0));
}

TYPED_TEST(AccuracyLayerTest, OtherAxis) {
  using Dtype = typename TypeParam::Dtype;
  // Scores 2 x 2 x 3 with classes on axis 1: positions (n, j), labels 2 x 3.
  Blob<Dtype> scores({2, 2, 3});
  Blob<Dtype> labels({2, 3});
  // Class 1 wins at every position except (1, 2), where class 0 wins.
  const Dtype s[] = {0, 0, 0, 1, 1, 1,   // n = 0: class 0 row, class 1 row
                     0, 0, 2, 1, 1, 1};  // n = 1
  const Dtype l[] = {1, 1, 0, 1, 1, 1};
  std::copy(s, s + 12, scores.mutable_cpu_data());
  std::copy(l, l + 6, labels.mutable_cpu_data());
  vector<Blob<Dtype>*> bottom = {&scores, &labels};
  AccuracyLayer<Dtype> layer(this->Param());
  layer.SetUp(bottom, this->top_vec_);
  layer.Forward(bottom, this->top_vec_);
  // Hits: (0,0) (0,1) (1,0) (1,1); misses: (0,2) label 0, (1,2) label 1.
  EXPECT_NEAR(this->accuracy_.cpu_data()[0], 4.0 / 6, 1e-6);

  // The same data viewed as N x 3 x C with classes last (axis -1).
  Blob<Dtype> last({2, 3, 2});
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 3; ++j) {
      for (int c = 0; c < 2; ++c) {
        last.mutable_cpu_data()[(n * 3 + j) * 2 + c] = s[(n * 2 + c) * 3 + j];
      }
    }
  }
  bottom = {&last, &labels};
  LayerParameter p = this->Param();
  p.mutable_accuracy_param()->set_axis(-1);
  AccuracyLayer<Dtype> layer2(p);
  layer2.SetUp(bottom, this->top_vec_);
  layer2.Forward(bottom, this->top_vec_);
  EXPECT_NEAR(this->accuracy_.cpu_data()[0], 4.0 / 6, 1e-6);
}

TYPED_TEST(AccuracyLayerTest, NoBackward) {
  using Dtype = typename TypeParam::Dtype;
  AccuracyLayer<Dtype> layer(this->Param());
  EXPECT_FALSE(layer.AllowForceBackward(0));
  EXPECT_FALSE(layer.AllowForceBackward(1));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  EXPECT_NO_THROW(
      layer.Backward(this->top_vec_, {false, false}, this->bottom_vec_));
  EXPECT_THROW(layer.Backward(this->top_vec_, {true, false}, this->bottom_vec_),
               ConfigError);
}

TYPED_TEST(AccuracyLayerTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  {
    AccuracyLayer<Dtype> layer(this->Param(5));  // only 4 classes
    EXPECT_THROW(layer.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
  }
  {
    AccuracyLayer<Dtype> layer(this->Param(0));
    EXPECT_THROW(layer.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
  }
  {
    LayerParameter p = this->Param();
    p.mutable_accuracy_param()->set_axis(2);
    AccuracyLayer<Dtype> layer(p);
    EXPECT_THROW(layer.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
  }
  {
    Blob<Dtype> labels({4});
    vector<Blob<Dtype>*> bottom = {&this->scores_, &labels};
    AccuracyLayer<Dtype> layer(this->Param());
    EXPECT_THROW(layer.SetUp(bottom, this->top_vec_), ShapeError);
  }
  {
    this->labels_.mutable_cpu_data()[3] = 4;
    AccuracyLayer<Dtype> layer(this->Param());
    layer.SetUp(this->bottom_vec_, this->top_vec_);
    try {
      layer.Forward(this->bottom_vec_, this->top_vec_);
      FAIL() << "expected ConfigError";
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("label value 4"), std::string::npos) << what;
      EXPECT_NE(what.find("4 classes"), std::string::npos) << what;
    }
  }
}

template <typename Dtype>
class AccuracyLayerGPUTest : public ::testing::Test {};
TYPED_TEST_SUITE(AccuracyLayerGPUTest, test::TestDtypes);

// top_k 1 and 3, with an ignored label, the class axis in the middle, and
// the per-class top. Forward only: Accuracy has no gradient.
TYPED_TEST(AccuracyLayerGPUTest, AgreesWithCpu) {
  using Dtype = TypeParam;
  if (!test::GpuSkipReason().empty()) {
    GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
  }
  Blob<Dtype> scores({4, 6, 3, 2});
  test::FillGaussian(&scores);
  Blob<Dtype> labels({4, 3, 2});
  for (int i = 0; i < labels.count(); ++i) {
    labels.mutable_cpu_data()[i] = (i * 5 + 2) % 6;
  }
  for (int top_k : {1, 3}) {
    for (bool ignore : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << "top_k " << top_k << (ignore ? " ignore 2" : ""));
      LayerParameter param;
      param.set_type("Accuracy");
      param.add_top("accuracy");
      param.add_top("per_class");
      param.mutable_accuracy_param()->set_top_k(top_k);
      if (ignore) param.mutable_accuracy_param()->set_ignore_label(2);
      test::ExpectCpuGpuAgree<Dtype>(param, {&scores, &labels}, {false, false});
    }
  }
}

}  // namespace
}  // namespace poseidon
