// MVNLayer: CPU/GPU agreement in every mode (its CPU tests are in
// test_utility_layers2.cpp).
#include <gtest/gtest.h>

#include <vector>

#include "gpu_agreement.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

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
