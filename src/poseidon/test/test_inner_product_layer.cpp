// InnerProductLayer: shapes for every axis, forward against a naive
// matrix product, the transposed weight layout, gradients and errors.
#include <gtest/gtest.h>

#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/inner_product_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

LayerParameter IPParam(int num_output, int axis = 1, bool transpose = false,
                       bool bias = true) {
  LayerParameter param;
  param.set_type("InnerProduct");
  InnerProductParameter* p = param.mutable_inner_product_param();
  p->set_num_output(num_output);
  p->set_axis(axis);
  p->set_transpose(transpose);
  p->set_bias_term(bias);
  p->mutable_weight_filler()->set_type("gaussian");
  p->mutable_bias_filler()->set_type("gaussian");
  return param;
}

template <typename TypeParam>
class InnerProductLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  // top[m][n] = sum_k bottom[m][k] * W(n, k) + bias[n], with W read in the
  // layer's storage order.
  void CheckForward(const vector<int>& shape, int axis, bool transpose,
                    bool bias) {
    Blob<Dtype> bottom(shape), top;
    test::FillGaussian(&bottom);
    InnerProductLayer<Dtype> layer(IPParam(3, axis, transpose, bias));
    layer.SetUp({&bottom}, {&top});
    layer.Forward({&bottom}, {&top});
    const int a = axis < 0 ? axis + bottom.num_axes() : axis;
    const int M = bottom.count(0, a), K = bottom.count(a), N = 3;
    vector<int> want_shape(shape.begin(), shape.begin() + a);
    want_shape.push_back(N);
    ASSERT_EQ(top.shape(), want_shape);
    const Dtype* w = layer.blobs()[0]->cpu_data();
    for (int m = 0; m < M; ++m) {
      for (int n = 0; n < N; ++n) {
        double sum = bias ? layer.blobs()[1]->cpu_data()[n] : 0;
        for (int k = 0; k < K; ++k) {
          const Dtype wnk = transpose ? w[k * N + n] : w[n * K + k];
          sum += bottom.cpu_data()[m * K + k] * wnk;
        }
        EXPECT_NEAR(top.cpu_data()[m * N + n], sum, 1e-4)
            << "row " << m << " output " << n;
      }
    }
  }
};

TYPED_TEST_SUITE(InnerProductLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(InnerProductLayerTest, SetupShapes) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 4, 5), top;
  struct Case {
    int axis;
    bool transpose;
    vector<int> top_shape, weight_shape;
  };
  const Case cases[] = {
      {1, false, {2, 10}, {10, 60}},       {1, true, {2, 10}, {60, 10}},
      {-1, false, {2, 3, 4, 10}, {10, 5}}, {2, false, {2, 3, 10}, {10, 20}},
      {0, false, {10}, {10, 120}},
  };
  for (const Case& c : cases) {
    InnerProductLayer<Dtype> layer(IPParam(10, c.axis, c.transpose));
    layer.SetUp({&bottom}, {&top});
    EXPECT_EQ(top.shape(), c.top_shape) << "axis " << c.axis;
    EXPECT_EQ(layer.blobs()[0]->shape(), c.weight_shape) << "axis " << c.axis;
    EXPECT_EQ(layer.blobs()[1]->shape(), vector<int>{10});
  }
  InnerProductLayer<Dtype> no_bias(IPParam(10, 1, false, false));
  no_bias.SetUp({&bottom}, {&top});
  EXPECT_EQ(no_bias.blobs().size(), 1u);
}

TYPED_TEST(InnerProductLayerTest, RegisteredInFactory) {
  using Dtype = typename TypeParam::Dtype;
  auto layer = LayerRegistry<Dtype>::CreateLayer(IPParam(2));
  EXPECT_STREQ(layer->type(), "InnerProduct");
}

TYPED_TEST(InnerProductLayerTest, HandComputed) {
  using Dtype = typename TypeParam::Dtype;
  // x = [[1, 2], [3, 4]], W = [[1, 0], [1, -1], [0.5, 2]], b = [0, 1, -1]
  Blob<Dtype> bottom({2, 2}), top;
  const Dtype x[] = {1, 2, 3, 4};
  std::copy(x, x + 4, bottom.mutable_cpu_data());
  InnerProductLayer<Dtype> layer(IPParam(3));
  layer.SetUp({&bottom}, {&top});
  const Dtype w[] = {1, 0, 1, -1, 0.5, 2};
  const Dtype b[] = {0, 1, -1};
  std::copy(w, w + 6, layer.blobs()[0]->mutable_cpu_data());
  std::copy(b, b + 3, layer.blobs()[1]->mutable_cpu_data());
  layer.Forward({&bottom}, {&top});
  const Dtype expected[] = {1, 0, 3.5, 3, 0, 8.5};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(top.cpu_data()[i], expected[i], 1e-6);
}

TYPED_TEST(InnerProductLayerTest, Forward) {
  this->CheckForward({2, 3, 4, 5}, 1, false, true);
  this->CheckForward({2, 3, 4, 5}, 1, true, true);
  this->CheckForward({2, 3, 4, 5}, -1, false, true);
  this->CheckForward({2, 3, 4, 5}, 2, true, false);
}

TYPED_TEST(InnerProductLayerTest, TransposeMatchesTransposedWeights) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 2, 2), top, top_t;
  test::FillGaussian(&bottom);
  InnerProductLayer<Dtype> layer(IPParam(4));
  layer.SetUp({&bottom}, {&top});
  InnerProductLayer<Dtype> layer_t(IPParam(4, 1, true));
  layer_t.SetUp({&bottom}, {&top_t});
  const int K = 12, N = 4;
  for (int n = 0; n < N; ++n) {
    for (int k = 0; k < K; ++k) {
      layer_t.blobs()[0]->mutable_cpu_data()[k * N + n] =
          layer.blobs()[0]->cpu_data()[n * K + k];
    }
  }
  layer_t.blobs()[1]->CopyFrom(*layer.blobs()[1]);
  layer.Forward({&bottom}, {&top});
  layer_t.Forward({&bottom}, {&top_t});
  for (int i = 0; i < top.count(); ++i) {
    EXPECT_NEAR(top.cpu_data()[i], top_t.cpu_data()[i], 1e-5);
  }
}

TYPED_TEST(InnerProductLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 4, 5), top;
  test::FillGaussian(&bottom);
  InnerProductLayer<Dtype> layer(IPParam(10));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(InnerProductLayerTest, GradientTranspose) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 4, 5), top;
  test::FillGaussian(&bottom);
  InnerProductLayer<Dtype> layer(IPParam(10, 1, true));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(InnerProductLayerTest, GradientLastAxisNoBias) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 4, 5), top;
  test::FillGaussian(&bottom);
  InnerProductLayer<Dtype> layer(IPParam(3, -1, false, false));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(InnerProductLayerTest, ParamDiffsAccumulate) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom({3, 4}), top;
  test::FillGaussian(&bottom);
  InnerProductLayer<Dtype> layer(IPParam(2));
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  cpu_set(top.count(), Dtype(1), top.mutable_cpu_diff());
  for (auto& b : layer.blobs())
    cpu_set(b->count(), Dtype(0), b->mutable_cpu_diff());
  layer.Backward({&top}, {true}, {&bottom});
  layer.Backward({&top}, {true}, {&bottom});
  // d bias = 2 passes * 3 rows of ones; dW[n][k] = 2 * sum_m x[m][k].
  EXPECT_NEAR(layer.blobs()[1]->cpu_diff()[0], 6, 1e-6);
  for (int k = 0; k < 4; ++k) {
    double col = 0;
    for (int m = 0; m < 3; ++m) col += bottom.cpu_data()[m * 4 + k];
    EXPECT_NEAR(layer.blobs()[0]->cpu_diff()[k], 2 * col, 1e-5);
  }
}

TYPED_TEST(InnerProductLayerTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 4, 5), top;
  {
    InnerProductLayer<Dtype> layer(IPParam(0));
    EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ConfigError);
  }
  {
    InnerProductLayer<Dtype> layer(IPParam(2, 4));
    EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ConfigError);
    InnerProductLayer<Dtype> neg(IPParam(2, -5));
    EXPECT_THROW(neg.SetUp({&bottom}, {&top}), ConfigError);
  }
  {
    InnerProductLayer<Dtype> layer(IPParam(2));
    layer.SetUp({&bottom}, {&top});
    Blob<Dtype> other(2, 3, 4, 6);
    try {
      layer.Forward({&other}, {&top});
      ADD_FAILURE() << "60-input weights accepted a 72-input bottom";
    } catch (const ShapeError& e) {
      EXPECT_NE(string(e.what()).find("2 3 4 6"), string::npos) << e.what();
    }
  }
  {
    LayerParameter param = IPParam(2);
    Blob<Dtype> w({2, 59}), b({2});
    w.ToProto(param.add_blobs());
    b.ToProto(param.add_blobs());
    InnerProductLayer<Dtype> layer(param);
    EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ShapeError);
  }
}

}  // namespace
}  // namespace poseidon
