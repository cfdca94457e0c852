// MVNLayer: the GPU's bodies run on the CPU against the CPU pass, and
// CPU/GPU agreement, in every mode (the other CPU tests are in
// test_utility_layers2.cpp).
#include <gtest/gtest.h>

#include <vector>

#include "gpu_agreement.hpp"
#include "poseidon/layers/mvn_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename Dtype>
class MVNKernelsTest : public ::testing::Test {};
TYPED_TEST_SUITE(MVNKernelsTest, test::TestDtypes);

TYPED_TEST(MVNKernelsTest, MatchCpuPassInEveryMode) {
  using Dtype = TypeParam;
  const double tol = sizeof(Dtype) == 4 ? 2e-5 : 1e-12;
  Blob<Dtype> x({3, 4, 5, 6});
  test::FillGaussian(&x, 2.0);
  for (int i = 0; i < x.count(); ++i) x.mutable_cpu_data()[i] += i % 7;
  Blob<Dtype> dy(x.shape());
  test::FillGaussian(&dy);
  for (bool variance : {true, false}) {
    for (bool across : {false, true}) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "normalize_variance " << variance
                     << " across_channels " << across
                     << (in_place ? " in place" : ""));
        LayerParameter param;
        param.set_type("MVN");
        param.mutable_mvn_param()->set_normalize_variance(variance);
        param.mutable_mvn_param()->set_across_channels(across);
        Blob<Dtype> ref_bottom, ref_top, bottom, separate_top;
        ref_bottom.CopyFrom(x, false, true);
        bottom.CopyFrom(x, false, true);
        Blob<Dtype>* top = in_place ? &bottom : &separate_top;
        MVNLayer<Dtype> ref(param), layer(param);
        ref.SetUp({&ref_bottom}, {&ref_top});
        layer.SetUp({&bottom}, {top});
        ref.Forward({&ref_bottom}, {&ref_top});
        layer.ForwardWithKernels(Poseidon::CPU, {&bottom}, {top});
        for (int i = 0; i < x.count(); ++i) {
          ASSERT_NEAR(top->cpu_data()[i], ref_top.cpu_data()[i], tol)
              << "y" << i;
        }
        cpu_copy(dy.count(), dy.cpu_data(), ref_top.mutable_cpu_diff());
        cpu_copy(dy.count(), dy.cpu_data(), top->mutable_cpu_diff());
        ref.Backward({&ref_top}, {true}, {&ref_bottom});
        layer.BackwardWithKernels(Poseidon::CPU, {top}, {true}, {&bottom});
        for (int i = 0; i < x.count(); ++i) {
          ASSERT_NEAR(bottom.cpu_diff()[i], ref_bottom.cpu_diff()[i], tol)
              << "dx" << i;
        }
      }
    }
  }
}

template <typename Dtype>
class MVNLayerGPUTest : public ::testing::Test {};
TYPED_TEST_SUITE(MVNLayerGPUTest, test::TestDtypes);

TYPED_TEST(MVNLayerGPUTest, AgreesWithCpuInEveryMode) {
  using Dtype = TypeParam;
  if (!test::GpuSkipReason().empty()) {
    GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
  }
  Blob<Dtype> x({3, 4, 5, 6});
  test::FillGaussian(&x, 2.0);
  for (int i = 0; i < x.count(); ++i) x.mutable_cpu_data()[i] += i % 7;
  for (bool variance : {true, false}) {
    for (bool across : {false, true}) {
      SCOPED_TRACE(testing::Message() << "normalize_variance " << variance
                                      << " across_channels " << across);
      LayerParameter param;
      param.set_type("MVN");
      param.mutable_mvn_param()->set_normalize_variance(variance);
      param.mutable_mvn_param()->set_across_channels(across);
      param.mutable_mvn_param()->set_eps(1e-6f);
      test::ExpectCpuGpuAgree<Dtype>(param, {&x});
    }
  }
}

}  // namespace
}  // namespace poseidon
