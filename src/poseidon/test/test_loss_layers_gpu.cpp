// ContrastiveLoss, HingeLoss, InfogainLoss, MultinomialLogisticLoss and
// SigmoidCrossEntropyLoss: CPU/GPU agreement over their parameters (their
// CPU tests are in test_loss_layers.cpp). Labels are always valid.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu_agreement.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename Dtype>
class LossLayersGPUTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::GpuSkipReason().empty()) {
      GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
    }
  }
  static LayerParameter Param(const char* type) {
    LayerParameter p;
    p.set_type(type);
    return p;
  }
  // labels[i] = (i * 3 + 1) % classes.
  static void CyclicLabels(Blob<Dtype>* labels, int classes) {
    for (int i = 0; i < labels->count(); ++i) {
      labels->mutable_cpu_data()[i] = (i * 3 + 1) % classes;
    }
  }
};
TYPED_TEST_SUITE(LossLayersGPUTest, test::TestDtypes);

TYPED_TEST(LossLayersGPUTest, Contrastive) {
  using Dtype = TypeParam;
  Blob<Dtype> a({8, 5}), b({8, 5}), similar({8});
  test::FillGaussian(&a, 0.5);
  test::FillGaussian(&b, 0.5);
  for (int n = 0; n < 8; ++n) similar.mutable_cpu_data()[n] = n % 3 == 0;
  for (bool legacy : {false, true}) {
    SCOPED_TRACE(legacy ? "legacy" : "default");
    LayerParameter p = this->Param("ContrastiveLoss");
    p.mutable_contrastive_loss_param()->set_legacy_version(legacy);
    p.mutable_contrastive_loss_param()->set_margin(1.5f);
    test::ExpectCpuGpuAgree<Dtype>(p, {&a, &b, &similar}, {true, true, false});
  }
}

TYPED_TEST(LossLayersGPUTest, SigmoidCrossEntropy) {
  using Dtype = TypeParam;
  Blob<Dtype> x({4, 3, 2}), t({4, 3, 2});
  test::FillGaussian(&x, 3.0);
  for (int i = 0; i < t.count(); ++i) {
    t.mutable_cpu_data()[i] = i % 5 == 0 ? -1 : i % 2;
  }
  using Mode = LossParameter::NormalizationMode;
  for (Mode mode : {LossParameter::FULL, LossParameter::VALID,
                    LossParameter::BATCH_SIZE, LossParameter::NONE}) {
    for (bool ignore : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << "mode " << mode << (ignore ? " ignore -1" : ""));
      LayerParameter p = this->Param("SigmoidCrossEntropyLoss");
      p.mutable_loss_param()->set_normalization(mode);
      if (ignore) p.mutable_loss_param()->set_ignore_label(-1);
      test::ExpectCpuGpuAgree<Dtype>(p, {&x, &t}, {true, false});
    }
  }
}

TYPED_TEST(LossLayersGPUTest, Hinge) {
  using Dtype = TypeParam;
  Blob<Dtype> x({6, 5}), labels({6});
  test::FillGaussian(&x);
  this->CyclicLabels(&labels, 5);
  for (auto norm : {HingeLossParameter::L1, HingeLossParameter::L2}) {
    SCOPED_TRACE(norm == HingeLossParameter::L1 ? "L1" : "L2");
    LayerParameter p = this->Param("HingeLoss");
    p.mutable_hinge_loss_param()->set_norm(norm);
    test::ExpectCpuGpuAgree<Dtype>(p, {&x, &labels}, {true, false});
  }
}

TYPED_TEST(LossLayersGPUTest, MultinomialLogistic) {
  using Dtype = TypeParam;
  Blob<Dtype> prob({6, 4}), labels({6});
  test::FillUniform(&prob, 0.05, 1.0);
  this->CyclicLabels(&labels, 4);
  prob.mutable_cpu_data()[1] = 0;  // the label of sample 0: clamped
  test::ExpectCpuGpuAgree<Dtype>(this->Param("MultinomialLogisticLoss"),
                                 {&prob, &labels}, {true, false});
}

TYPED_TEST(LossLayersGPUTest, Infogain) {
  using Dtype = TypeParam;
  Blob<Dtype> scores({3, 4, 5}), labels({3, 1, 5}), h({4, 4});
  test::FillGaussian(&scores, 2.0);
  this->CyclicLabels(&labels, 4);
  test::FillUniform(&h, 0.0, 1.0);
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(testing::Message() << "variant " << variant);
    LayerParameter p = this->Param("InfogainLoss");
    p.add_top("loss");
    p.add_top("prob");
    if (variant == 1) {
      p.mutable_loss_param()->set_ignore_label(2);
      p.mutable_loss_param()->set_normalization(LossParameter::FULL);
    }
    if (variant == 2) {
      p.mutable_loss_param()->set_normalization(LossParameter::BATCH_SIZE);
    }
    test::ExpectCpuGpuAgree<Dtype>(p, {&scores, &labels, &h},
                                   {true, false, false});
  }
  // H from a file.
  BlobProto proto;
  h.ToProto(&proto);
  const std::string file = test::MakeTempDir() + "/infogain.binaryproto";
  WriteProtoToBinaryFile(proto, file);
  LayerParameter p = this->Param("InfogainLoss");
  p.mutable_infogain_loss_param()->set_source(file);
  p.mutable_loss_param()->set_normalization(LossParameter::VALID);
  test::ExpectCpuGpuAgree<Dtype>(p, {&scores, &labels}, {true, false});
}

}  // namespace
}  // namespace poseidon
