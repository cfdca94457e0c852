// BatchNorm with batch statistics against a straightforward reference
// computed here in double (two passes: mean, then squared deviations) on
// awkward shapes, in place and not: the output, the running statistics and
// dE/dx. Also: a large mean against a unit spread (the one-pass moments
// must not cancel) and bitwise agreement across thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "poseidon/layers/batch_norm_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// The reference: per-channel mean and biased variance, y and dE/dx.
struct Reference {
  vector<double> mean, var, y, dx;
};

template <typename Dtype>
Reference ReferenceBatchNorm(const Blob<Dtype>& x, const vector<Dtype>& dy,
                             double eps) {
  const int num = x.shape(0);
  const int channels = x.num_axes() > 1 ? x.shape(1) : 1;
  const int spatial = x.count() / (num * channels);
  const double m = static_cast<double>(num) * spatial;
  Reference r;
  r.mean.assign(channels, 0);
  r.var.assign(channels, 0);
  r.y.assign(x.count(), 0);
  r.dx.assign(x.count(), 0);
  const Dtype* v = x.cpu_data();
  auto at = [&](int n, int c, int s) {
    return (n * channels + c) * spatial + s;
  };
  for (int c = 0; c < channels; ++c) {
    for (int n = 0; n < num; ++n) {
      for (int s = 0; s < spatial; ++s) r.mean[c] += v[at(n, c, s)];
    }
    r.mean[c] /= m;
    for (int n = 0; n < num; ++n) {
      for (int s = 0; s < spatial; ++s) {
        const double d = v[at(n, c, s)] - r.mean[c];
        r.var[c] += d * d;
      }
    }
    r.var[c] /= m;
    const double inv_std = 1 / std::sqrt(r.var[c] + eps);
    double mean_dy = 0, mean_dy_y = 0;
    for (int n = 0; n < num; ++n) {
      for (int s = 0; s < spatial; ++s) {
        const int i = at(n, c, s);
        r.y[i] = (v[i] - r.mean[c]) * inv_std;
        mean_dy += dy[i];
        mean_dy_y += dy[i] * r.y[i];
      }
    }
    mean_dy /= m;
    mean_dy_y /= m;
    for (int n = 0; n < num; ++n) {
      for (int s = 0; s < spatial; ++s) {
        const int i = at(n, c, s);
        r.dx[i] = (dy[i] - mean_dy - r.y[i] * mean_dy_y) * inv_std;
      }
    }
  }
  return r;
}

template <typename Dtype>
class BatchNormReferenceTest : public ::testing::Test {
 protected:
  static LayerParameter TrainParam() {
    LayerParameter param;
    param.set_type("BatchNorm");
    param.set_phase(TRAIN);
    return param;
  }
};
TYPED_TEST_SUITE(BatchNormReferenceTest, test::TestDtypes);

TYPED_TEST(BatchNormReferenceTest, AwkwardShapesForwardAndBackward) {
  using Dtype = TypeParam;
  const bool is_float = sizeof(Dtype) == 4;
  const vector<vector<int>> shapes = {
      {1, 3, 7, 7}, {2, 17, 13, 17}, {1, 17, 1, 1},
      {5, 3, 1, 1}, {3, 3, 2, 300},  {4, 17},
      {9}};
  for (const vector<int>& shape : shapes) {
    for (bool in_place : {false, true}) {
      Blob<Dtype> x(shape);
      SCOPED_TRACE(x.shape_string() + (in_place ? " in place" : ""));
      test::FillGaussian(&x, 2.0);
      // Channel means from -3 to 12, so the shift matters.
      const int channels = x.num_axes() > 1 ? x.shape(1) : 1;
      const int spatial = x.count() / (x.shape(0) * channels);
      for (int i = 0; i < x.count(); ++i) {
        x.mutable_cpu_data()[i] += Dtype((i / spatial) % channels) - 3;
      }
      Blob<Dtype> dy_blob(shape);
      test::FillGaussian(&dy_blob);
      const vector<Dtype> dy(dy_blob.cpu_data(),
                             dy_blob.cpu_data() + dy_blob.count());
      const Reference ref = ReferenceBatchNorm(x, dy, 1e-5);

      Blob<Dtype> io, top;
      io.CopyFrom(x, false, true);
      vector<Blob<Dtype>*> bottom_vec = {&io};
      vector<Blob<Dtype>*> top_vec = {in_place ? &io : &top};
      BatchNormLayer<Dtype> layer(this->TrainParam());
      layer.SetUp(bottom_vec, top_vec);
      layer.Forward(bottom_vec, top_vec);
      Blob<Dtype>* out = top_vec[0];
      const double ytol = is_float ? 5e-4 : 1e-9;
      for (int i = 0; i < x.count(); ++i) {
        ASSERT_NEAR(out->cpu_data()[i], ref.y[i], ytol) << "y element " << i;
      }
      const double m = static_cast<double>(x.count()) / channels;
      const double correction = m > 1 ? m / (m - 1) : 1;
      const double stol = is_float ? 2e-5 : 1e-12;
      for (int c = 0; c < channels; ++c) {
        EXPECT_NEAR(layer.blobs()[0]->cpu_data()[c], ref.mean[c],
                    stol * (1 + std::abs(ref.mean[c])))
            << "running mean, channel " << c;
        EXPECT_NEAR(layer.blobs()[1]->cpu_data()[c], correction * ref.var[c],
                    stol * (1 + ref.var[c]))
            << "running variance, channel " << c;
      }
      EXPECT_EQ(layer.blobs()[2]->cpu_data()[0], Dtype(1));

      // Backward: in place, dE/dy is overwritten by dE/dx; and a later
      // in-place layer may have overwritten the top's data.
      if (in_place) cpu_set(io.count(), Dtype(7), io.mutable_cpu_data());
      cpu_copy(x.count(), dy.data(), out->mutable_cpu_diff());
      layer.Backward(top_vec, {true}, bottom_vec);
      const double dtol = is_float ? 2e-4 : 1e-9;
      for (int i = 0; i < x.count(); ++i) {
        ASSERT_NEAR(io.cpu_diff()[i], ref.dx[i],
                    dtol * (1 + std::abs(ref.dx[i])))
            << "dx element " << i;
      }
    }
  }
}

// float data with mean 1e4 and unit spread: E[x^2] - E[x]^2 in float would
// be noise (E[x^2] ~ 1e8 carries ~8 units of rounding); the moments about a
// value of the data keep the variance to float accuracy.
TYPED_TEST(BatchNormReferenceTest, LargeMeanKeepsVarianceAccurate) {
  using Dtype = TypeParam;
  Blob<Dtype> x({8, 3, 9, 11});
  test::FillGaussian(&x);
  for (int i = 0; i < x.count(); ++i) {
    // Spreads 1, 2, 0.5 by channel; means 1e4, -2e4, 1e4 + 3.
    const int c = (i / 99) % 3;
    const double spread[] = {1, 2, 0.5}, mean[] = {1e4, -2e4, 1e4 + 3};
    x.mutable_cpu_data()[i] =
        static_cast<Dtype>(mean[c] + spread[c] * x.cpu_data()[i]);
  }
  const vector<Dtype> dy(x.count(), Dtype(0));
  const Reference ref = ReferenceBatchNorm(x, dy, 1e-5);
  Blob<Dtype> top;
  vector<Blob<Dtype>*> bottom_vec = {&x}, top_vec = {&top};
  BatchNormLayer<Dtype> layer(this->TrainParam());
  layer.SetUp(bottom_vec, top_vec);
  layer.Forward(bottom_vec, top_vec);
  const double m = 8 * 9 * 11;
  for (int c = 0; c < 3; ++c) {
    const double var = layer.blobs()[1]->cpu_data()[c] * (m - 1) / m;
    EXPECT_NEAR(var, ref.var[c], 1e-4 * ref.var[c]) << "channel " << c;
    EXPECT_NEAR(layer.blobs()[0]->cpu_data()[c], ref.mean[c],
                3e-7 * std::abs(ref.mean[c]))
        << "channel " << c;
  }
  for (int i = 0; i < x.count(); ++i) {
    ASSERT_NEAR(top.cpu_data()[i], ref.y[i], 2e-3) << "element " << i;
  }
}

// The same batch gives the same bits with 1 and 2 threads: every sum is
// added in an order fixed by the shape.
TYPED_TEST(BatchNormReferenceTest, SameBitsForAnyThreadCount) {
  using Dtype = TypeParam;
  const int saved = Poseidon::num_threads();
  vector<vector<Dtype>> results;
  for (int threads : {1, 2}) {
    Poseidon::set_num_threads(threads);
    Poseidon::set_random_seed(3);
    Blob<Dtype> x({4, 16, 40, 40}), top;
    test::FillGaussian(&x, 3.0);
    vector<Blob<Dtype>*> bottom_vec = {&x}, top_vec = {&top};
    BatchNormLayer<Dtype> layer(this->TrainParam());
    layer.SetUp(bottom_vec, top_vec);
    layer.Forward(bottom_vec, top_vec);
    test::FillGaussian(&top, 1.0);  // data as the diff's source
    cpu_copy(top.count(), top.cpu_data(), top.mutable_cpu_diff());
    layer.Backward(top_vec, {true}, bottom_vec);
    vector<Dtype> r(x.cpu_diff(), x.cpu_diff() + x.count());
    r.insert(r.end(), layer.blobs()[1]->cpu_data(),
             layer.blobs()[1]->cpu_data() + 16);
    results.push_back(r);
  }
  Poseidon::set_num_threads(saved);
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) {
    ASSERT_EQ(results[0][i], results[1][i]) << "value " << i;
  }
}

}  // namespace
}  // namespace poseidon
