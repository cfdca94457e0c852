// BatchNorm: forward against per-channel statistics computed here, the
// running-average update, global-statistics mode, and finite-difference
// gradients in both modes; CPU/GPU agreement.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_agreement.hpp"
#include "gradient_checker.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/batch_norm_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// Per-channel mean and biased variance of a (N, C, spatial...) blob.
template <typename Dtype>
void NaiveStats(const Blob<Dtype>& blob, vector<double>* mean,
                vector<double>* var) {
  const int num = blob.shape(0);
  const int channels = blob.shape(1);
  const int spatial = blob.count(2);
  mean->assign(channels, 0);
  var->assign(channels, 0);
  for (int c = 0; c < channels; ++c) {
    for (int n = 0; n < num; ++n) {
      for (int s = 0; s < spatial; ++s) {
        (*mean)[c] += blob.cpu_data()[(n * channels + c) * spatial + s];
      }
    }
    (*mean)[c] /= num * spatial;
    for (int n = 0; n < num; ++n) {
      for (int s = 0; s < spatial; ++s) {
        const double d =
            blob.cpu_data()[(n * channels + c) * spatial + s] - (*mean)[c];
        (*var)[c] += d * d;
      }
    }
    (*var)[c] /= num * spatial;
  }
}

template <typename TypeParam>
class BatchNormLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  BatchNormLayerTest() : bottom_({2, 3, 4, 5}) {
    FillShifted(&bottom_);
    bottom_vec_ = {&bottom_};
    top_vec_ = {&top_};
  }

  // Gaussian values with a different mean and spread per channel, so that
  // normalisation has something to do.
  static void FillShifted(Blob<Dtype>* blob) {
    test::FillGaussian(blob);
    const int channels = blob->shape(1);
    const int spatial = blob->count(2);
    Dtype* data = blob->mutable_cpu_data();
    for (int i = 0; i < blob->count(); ++i) {
      const int c = (i / spatial) % channels;
      data[i] = data[i] * (1 + c) + Dtype(2) * c - 1;
    }
  }

  static LayerParameter Param(Phase phase) {
    LayerParameter param;
    param.set_type("BatchNorm");
    param.set_phase(phase);
    return param;
  }

  // Expects top == (bottom - mean_c) / sqrt(var_c + eps).
  void ExpectNormalised(const Blob<Dtype>& bottom, const Blob<Dtype>& top,
                        const vector<double>& mean, const vector<double>& var,
                        double eps, double tol) {
    const int channels = bottom.shape(1);
    const int spatial = bottom.count(2);
    for (int i = 0; i < bottom.count(); ++i) {
      const int c = (i / spatial) % channels;
      const double expected =
          (bottom.cpu_data()[i] - mean[c]) / std::sqrt(var[c] + eps);
      EXPECT_NEAR(top.cpu_data()[i], expected, tol) << "element " << i;
    }
  }

  Blob<Dtype> bottom_;
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(BatchNormLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(BatchNormLayerTest, SetUpBlobsAndDefaults) {
  using Dtype = typename TestFixture::Dtype;
  BatchNormLayer<Dtype> layer(this->Param(TRAIN));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), this->bottom_.shape());
  ASSERT_EQ(layer.blobs().size(), 3u);
  EXPECT_EQ(layer.blobs()[0]->shape(), vector<int>{3});
  EXPECT_EQ(layer.blobs()[1]->shape(), vector<int>{3});
  EXPECT_EQ(layer.blobs()[2]->shape(), vector<int>{1});
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(layer.param_propagate_down(i)) << "blob " << i;
    EXPECT_EQ(layer.blobs()[i]->asum_data(), 0) << "blob " << i;
  }
  const BatchNormParameter defaults;
  EXPECT_FLOAT_EQ(defaults.moving_average_fraction(), 0.999f);
  EXPECT_FLOAT_EQ(defaults.eps(), 1e-5f);
}

TYPED_TEST(BatchNormLayerTest, TrainForwardMatchesNaiveStatistics) {
  using Dtype = typename TestFixture::Dtype;
  BatchNormLayer<Dtype> layer(this->Param(TRAIN));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  vector<double> mean, var;
  NaiveStats(this->bottom_, &mean, &var);
  this->ExpectNormalised(this->bottom_, this->top_, mean, var, 1e-5, 1e-4);
  // And the output's own statistics are (0, ~1).
  vector<double> out_mean, out_var;
  NaiveStats(this->top_, &out_mean, &out_var);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(out_mean[c], 0, 1e-5);
    EXPECT_NEAR(out_var[c], 1, 1e-3);
  }
}

TYPED_TEST(BatchNormLayerTest, TrainForward2D) {
  using Dtype = typename TestFixture::Dtype;
  Blob<Dtype> bottom({6, 4});
  test::FillGaussian(&bottom, 3.0);
  vector<Blob<Dtype>*> bottom_vec = {&bottom};
  LayerParameter param = this->Param(TRAIN);
  param.mutable_batch_norm_param()->set_eps(1e-3f);
  BatchNormLayer<Dtype> layer(param);
  layer.SetUp(bottom_vec, this->top_vec_);
  EXPECT_EQ(layer.blobs()[0]->shape(), vector<int>{4});
  layer.Forward(bottom_vec, this->top_vec_);
  vector<double> mean, var;
  NaiveStats(bottom, &mean, &var);
  this->ExpectNormalised(bottom, this->top_, mean, var, 1e-3, 1e-4);
}

TYPED_TEST(BatchNormLayerTest, RunningAveragesAfterTwoIterations) {
  using Dtype = typename TestFixture::Dtype;
  LayerParameter param = this->Param(TRAIN);
  param.mutable_batch_norm_param()->set_moving_average_fraction(0.9f);
  BatchNormLayer<Dtype> layer(param);
  layer.SetUp(this->bottom_vec_, this->top_vec_);

  vector<double> mean1, var1, mean2, var2;
  NaiveStats(this->bottom_, &mean1, &var1);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  Blob<Dtype> second(this->bottom_.shape());
  this->FillShifted(&second);
  vector<Blob<Dtype>*> second_vec = {&second};
  NaiveStats(second, &mean2, &var2);
  layer.Forward(second_vec, this->top_vec_);

  const double maf = static_cast<Dtype>(0.9f);
  const double m = 2 * 4 * 5;
  const double correction = m / (m - 1);
  EXPECT_NEAR(layer.blobs()[2]->cpu_data()[0], 1 * maf + 1, 1e-6);
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(layer.blobs()[0]->cpu_data()[c], maf * mean1[c] + mean2[c],
                1e-5);
    EXPECT_NEAR(layer.blobs()[1]->cpu_data()[c],
                maf * correction * var1[c] + correction * var2[c], 1e-4);
  }

  // The same layer in global mode now normalises with the running averages.
  LayerParameter global = this->Param(TEST);
  BatchNormLayer<Dtype> test_layer(global);
  test_layer.SetUp(this->bottom_vec_, this->top_vec_);
  for (int i = 0; i < 3; ++i) {
    test_layer.blobs()[i]->CopyFrom(*layer.blobs()[i]);
  }
  test_layer.Forward(this->bottom_vec_, this->top_vec_);
  const double factor = layer.blobs()[2]->cpu_data()[0];
  vector<double> gmean(3), gvar(3);
  for (int c = 0; c < 3; ++c) {
    gmean[c] = layer.blobs()[0]->cpu_data()[c] / factor;
    gvar[c] = layer.blobs()[1]->cpu_data()[c] / factor;
  }
  this->ExpectNormalised(this->bottom_, this->top_, gmean, gvar, 1e-5, 1e-4);
}

TYPED_TEST(BatchNormLayerTest, SingleElementChannelsSkipBesselCorrection) {
  using Dtype = typename TestFixture::Dtype;
  Blob<Dtype> bottom({1, 2});
  bottom.mutable_cpu_data()[0] = 3;
  bottom.mutable_cpu_data()[1] = -4;
  vector<Blob<Dtype>*> bottom_vec = {&bottom};
  BatchNormLayer<Dtype> layer(this->Param(TRAIN));
  layer.SetUp(bottom_vec, this->top_vec_);
  layer.Forward(bottom_vec, this->top_vec_);
  EXPECT_EQ(this->top_.cpu_data()[0], 0);
  EXPECT_EQ(this->top_.cpu_data()[1], 0);
  EXPECT_EQ(layer.blobs()[0]->cpu_data()[0], 3);
  EXPECT_EQ(layer.blobs()[0]->cpu_data()[1], -4);
  EXPECT_EQ(layer.blobs()[1]->asum_data(), 0);
}

TYPED_TEST(BatchNormLayerTest, GlobalStatsForward) {
  using Dtype = typename TestFixture::Dtype;
  // Default in TEST phase; stated explicitly in TRAIN phase.
  for (Phase phase : {TEST, TRAIN}) {
    LayerParameter param = this->Param(phase);
    if (phase == TRAIN) {
      param.mutable_batch_norm_param()->set_use_global_stats(true);
    }
    BatchNormLayer<Dtype> layer(param);
    layer.SetUp(this->bottom_vec_, this->top_vec_);
    const Dtype sums[] = {2, -4, 6};
    const Dtype sq_sums[] = {8, 2, 0.5};
    for (int c = 0; c < 3; ++c) {
      layer.blobs()[0]->mutable_cpu_data()[c] = sums[c];
      layer.blobs()[1]->mutable_cpu_data()[c] = sq_sums[c];
    }
    layer.blobs()[2]->mutable_cpu_data()[0] = 2;
    layer.Forward(this->bottom_vec_, this->top_vec_);
    vector<double> mean = {1, -2, 3}, var = {4, 1, 0.25};
    this->ExpectNormalised(this->bottom_, this->top_, mean, var, 1e-5, 1e-4);
    // Nothing is updated in global mode.
    EXPECT_EQ(layer.blobs()[2]->cpu_data()[0], 2);
    EXPECT_EQ(layer.blobs()[0]->cpu_data()[1], -4);
  }
}

TYPED_TEST(BatchNormLayerTest, GlobalStatsWithZeroFactorUseZeroStatistics) {
  using Dtype = typename TestFixture::Dtype;
  BatchNormLayer<Dtype> layer(this->Param(TEST));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  cpu_set(3, Dtype(5), layer.blobs()[0]->mutable_cpu_data());
  layer.Forward(this->bottom_vec_, this->top_vec_);
  this->ExpectNormalised(this->bottom_, this->top_, {0, 0, 0}, {0, 0, 0}, 1e-5,
                         1e-2);
}

TYPED_TEST(BatchNormLayerTest, TrainGradient) {
  using Dtype = typename TestFixture::Dtype;
  BatchNormLayer<Dtype> layer(this->Param(TRAIN));
  test::GradientChecker<Dtype> checker(1e-3, 2e-3);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(BatchNormLayerTest, TrainGradient2D) {
  using Dtype = typename TestFixture::Dtype;
  Blob<Dtype> bottom({5, 3});
  test::FillGaussian(&bottom);
  vector<Blob<Dtype>*> bottom_vec = {&bottom};
  BatchNormLayer<Dtype> layer(this->Param(TRAIN));
  test::GradientChecker<Dtype> checker(1e-3, 2e-3);
  checker.CheckGradient(&layer, bottom_vec, this->top_vec_);
}

TYPED_TEST(BatchNormLayerTest, GlobalStatsGradient) {
  using Dtype = typename TestFixture::Dtype;
  BatchNormLayer<Dtype> layer(this->Param(TEST));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  for (int c = 0; c < 3; ++c) {
    layer.blobs()[0]->mutable_cpu_data()[c] = c;
    layer.blobs()[1]->mutable_cpu_data()[c] = 1 + c;
  }
  layer.blobs()[2]->mutable_cpu_data()[0] = 1;
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradientAfterSetUp(&layer, this->bottom_vec_, this->top_vec_,
                                  -1);
}

TYPED_TEST(BatchNormLayerTest, InPlaceMatchesOutOfPlace) {
  using Dtype = typename TestFixture::Dtype;
  BatchNormLayer<Dtype> layer(this->Param(TRAIN));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  Blob<Dtype> top_diff(this->top_.shape());  // values in data
  test::FillGaussian(&top_diff);
  cpu_copy(top_diff.count(), top_diff.cpu_data(),
           this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);

  Blob<Dtype> io;
  io.CopyFrom(this->bottom_, false, true);
  vector<Blob<Dtype>*> io_vec = {&io};
  BatchNormLayer<Dtype> in_place(this->Param(TRAIN));
  in_place.SetUp(io_vec, io_vec);
  in_place.Forward(io_vec, io_vec);
  // A later in-place layer overwriting the top must not disturb Backward.
  vector<Dtype> normalised(io.cpu_data(), io.cpu_data() + io.count());
  cpu_set(io.count(), Dtype(7), io.mutable_cpu_data());
  cpu_copy(top_diff.count(), top_diff.cpu_data(), io.mutable_cpu_diff());
  in_place.Backward(io_vec, {true}, io_vec);
  for (int i = 0; i < io.count(); ++i) {
    EXPECT_NEAR(normalised[i], this->top_.cpu_data()[i], 1e-6);
    EXPECT_NEAR(io.cpu_diff()[i], this->bottom_.cpu_diff()[i], 1e-5);
  }
}

TYPED_TEST(BatchNormLayerTest, RejectsChannelChange) {
  using Dtype = typename TestFixture::Dtype;
  BatchNormLayer<Dtype> layer(this->Param(TRAIN));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  Blob<Dtype> other({2, 4, 4, 5});
  vector<Blob<Dtype>*> other_vec = {&other};
  try {
    layer.Forward(other_vec, this->top_vec_);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("2 4 4 5 (160)"), std::string::npos)
        << e.what();
  }
}

TYPED_TEST(BatchNormLayerTest, RejectsMismatchedStoredBlobs) {
  using Dtype = typename TestFixture::Dtype;
  LayerParameter param = this->Param(TEST);
  Blob<Dtype> wrong({4});
  for (int i = 0; i < 2; ++i) wrong.ToProto(param.add_blobs());
  Blob<Dtype> factor({1});
  factor.ToProto(param.add_blobs());
  BatchNormLayer<Dtype> layer(param);
  EXPECT_THROW(layer.SetUp(this->bottom_vec_, this->top_vec_), ShapeError);

  LayerParameter too_few = this->Param(TEST);
  factor.ToProto(too_few.add_blobs());
  BatchNormLayer<Dtype> layer2(too_few);
  EXPECT_THROW(layer2.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
}

TYPED_TEST(BatchNormLayerTest, Registered) {
  using Dtype = typename TestFixture::Dtype;
  auto layer = LayerRegistry<Dtype>::CreateLayer(this->Param(TRAIN));
  EXPECT_STREQ(layer->type(), "BatchNorm");
}

template <typename Dtype>
class BatchNormLayerGPUTest : public ::testing::Test {};
TYPED_TEST_SUITE(BatchNormLayerGPUTest, test::TestDtypes);

// Batch statistics (4-D and 2-D bottoms) and global statistics from stored
// running sums.
TYPED_TEST(BatchNormLayerGPUTest, AgreesWithCpu) {
  using Dtype = TypeParam;
  if (!test::GpuSkipReason().empty()) {
    GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
  }
  Blob<Dtype> x({3, 4, 5, 6});
  test::FillGaussian(&x);
  for (int i = 0; i < x.count(); ++i) {
    x.mutable_cpu_data()[i] += (i / 30) % 4;  // a different mean per channel
  }
  Blob<Dtype> flat({7, 5});
  test::FillGaussian(&flat, 2.0);
  LayerParameter train;
  train.set_type("BatchNorm");
  train.set_phase(TRAIN);
  train.mutable_batch_norm_param()->set_moving_average_fraction(0.9f);
  test::ExpectCpuGpuAgree<Dtype>(train, {&x});
  test::ExpectCpuGpuAgree<Dtype>(train, {&flat});

  // Global statistics: the running sums travel in the parameter.
  LayerParameter global;
  global.set_type("BatchNorm");
  global.set_phase(TEST);
  Blob<Dtype> sums({4}), sq_sums({4}), factor({1});
  test::FillGaussian(&sums);
  test::FillUniform(&sq_sums, 1.0, 3.0);
  factor.mutable_cpu_data()[0] = 2;
  sums.ToProto(global.add_blobs());
  sq_sums.ToProto(global.add_blobs());
  factor.ToProto(global.add_blobs());
  test::ExpectCpuGpuAgree<Dtype>(global, {&x});
}

}  // namespace
}  // namespace poseidon
