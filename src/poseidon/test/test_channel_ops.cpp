// The GPU arithmetic of the channel layers (Bias, Scale, PReLU), run on the
// CPU: the one-thread-per-element index mapping of channel functors
// (ChannelElements) against the CPU's row walk, ChannelReducer's gemv sums
// against a plain sum, and the layers' device-side gradient functions
// (PReLUSlopeGradientOnDevice, ScaleGradientOnDevice, BiasGradient's
// reducer path) against the CPU passes. Also MaskBuffer.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "poseidon/kernels/channel_kernels.hpp"
#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/layers/bias_layer.hpp"
#include "poseidon/layers/prelu_layer.hpp"
#include "poseidon/layers/scale_layer.hpp"
#include "poseidon/util/channel_ops.hpp"
#include "poseidon/util/mask_buffer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename Dtype>
class ChannelOpsTest : public ::testing::Test {
 protected:
  ChannelOpsTest() {
    Poseidon::set_mode(Poseidon::CPU);
    Poseidon::set_random_seed(1701);
  }
};

TYPED_TEST_SUITE(ChannelOpsTest, test::TestDtypes);

// (outer, dim, inner) views: degenerate axes, and one large enough for the
// CPU's row walk to split over the thread pool.
const vector<vector<int>> kViews = {{2, 3, 5},    {1, 4, 7}, {3, 1, 6},
                                    {5, 4, 1},    {1, 1, 9}, {1, 5, 1},
                                    {4, 16, 1100}};

// Runs `f` (writing through its member `out`) by the GPU's mapping with
// cpu_for_each and by the CPU's row walk, and expects identical results.
template <typename Dtype, typename F>
void ExpectSameMapping(const vector<int>& v, F f, Dtype* F::*out) {
  const int count = v[0] * v[1] * v[2];
  vector<Dtype> by_element(count), by_row(count);
  f.*out = by_element.data();
  cpu_for_each(count, kernels::ChannelElements<F>{f, v[1], v[2]});
  f.*out = by_row.data();
  cpu_channel_for_each(v[0], v[1], v[2], f);
  for (int i = 0; i < count; ++i) {
    ASSERT_EQ(by_element[i], by_row[i])
        << "element " << i << " of view " << v[0] << "x" << v[1] << "x" << v[2];
  }
}

TYPED_TEST(ChannelOpsTest, ElementMappingMatchesRowWalk) {
  using Dtype = TypeParam;
  for (const vector<int>& v : kViews) {
    const int count = v[0] * v[1] * v[2];
    Blob<Dtype> x({count}), dy({count}), s({v[1]}), b({v[1]});
    for (Blob<Dtype>* blob : {&x, &dy, &s, &b}) test::FillGaussian(blob);
    const Dtype* px = x.cpu_data();
    const Dtype* pdy = dy.cpu_data();
    const Dtype* ps = s.cpu_data();
    const Dtype* pb = b.cpu_data();

    using kernels::BiasForward;
    using kernels::PReLUBackward;
    using kernels::PReLUForward;
    using kernels::ScaleBiasForward;
    using kernels::ScaleForward;
    ExpectSameMapping(v, BiasForward<Dtype>{px, pb, nullptr},
                      &BiasForward<Dtype>::y);
    ExpectSameMapping(v, ScaleForward<Dtype>{px, ps, nullptr},
                      &ScaleForward<Dtype>::y);
    ExpectSameMapping(v, ScaleBiasForward<Dtype>{px, ps, pb, nullptr},
                      &ScaleBiasForward<Dtype>::y);
    ExpectSameMapping(v, PReLUForward<Dtype>{px, ps, nullptr},
                      &PReLUForward<Dtype>::y);
    ExpectSameMapping(v, PReLUBackward<Dtype>{px, pdy, ps, nullptr},
                      &PReLUBackward<Dtype>::dx);
  }
}

// out[d] = beta * out[d] + sum over (o, i), in double.
template <typename Dtype>
vector<double> ChannelSums(const vector<int>& v, const Dtype* in, double beta,
                           const Dtype* out) {
  vector<double> sums(v[1]);
  for (int d = 0; d < v[1]; ++d) sums[d] = beta * out[d];
  for (int o = 0; o < v[0]; ++o) {
    for (int d = 0; d < v[1]; ++d) {
      for (int i = 0; i < v[2]; ++i) sums[d] += in[(o * v[1] + d) * v[2] + i];
    }
  }
  return sums;
}

template <typename Dtype>
void ExpectNearAll(const vector<double>& expected, const Dtype* actual,
                   const char* what) {
  const double tol = sizeof(Dtype) == 4 ? 1e-4 : 1e-10;
  for (size_t d = 0; d < expected.size(); ++d) {
    EXPECT_NEAR(actual[d], expected[d], tol * (1 + std::fabs(expected[d])))
        << what << " at " << d;
  }
}

TYPED_TEST(ChannelOpsTest, ReducerSumsOverOuterAndInner) {
  using Dtype = TypeParam;
  ChannelReducer<Dtype> reducer;  // one for all views: buffers grow, shrink
  for (const vector<int>& v : kViews) {
    SCOPED_TRACE(::testing::Message() << v[0] << "x" << v[1] << "x" << v[2]);
    Blob<Dtype> in({v[0] * v[1] * v[2]}), out({v[1]});
    test::FillGaussian(&in);
    test::FillGaussian(&out);
    for (double beta : {1.0, 0.0, 0.5}) {
      const vector<double> expected =
          ChannelSums(v, in.cpu_data(), beta, out.cpu_data());
      reducer.Sum(Poseidon::CPU, v[0], v[1], v[2], in.cpu_data(), Dtype(beta),
                  out.mutable_cpu_data());
      ExpectNearAll(expected, out.cpu_data(), "channel sum");
    }
  }
}

// BiasGradient's GPU path is the reducer; against its CPU path.
TYPED_TEST(ChannelOpsTest, BiasGradientDeviceFormMatchesCpu) {
  using Dtype = TypeParam;
  ChannelReducer<Dtype> reducer;
  for (const vector<int>& v : kViews) {
    const AxisBroadcast view{v[0], v[1], v[2]};
    Blob<Dtype> dy({v[0] * v[1] * v[2]}), db({v[1]});
    test::FillGaussian(&dy);
    for (bool accumulate : {true, false}) {
      test::FillGaussian(&db);
      vector<Dtype> cpu(db.cpu_data(), db.cpu_data() + v[1]);
      BiasGradient(Poseidon::CPU, view, dy.cpu_data(), accumulate, &reducer,
                   cpu.data());
      reducer.Sum(Poseidon::CPU, v[0], v[1], v[2], dy.cpu_data(),
                  accumulate ? Dtype(1) : Dtype(0), db.mutable_cpu_data());
      ExpectNearAll(vector<double>(cpu.begin(), cpu.end()), db.cpu_data(),
                    "bias gradient");
    }
  }
}

// Runs a PReLU layer's CPU backward and expects PReLUSlopeGradientOnDevice,
// run on the CPU, to accumulate the same slope gradient.
TYPED_TEST(ChannelOpsTest, PReLUSlopeGradientDeviceFormMatchesCpu) {
  using Dtype = TypeParam;
  for (const vector<int>& shape :
       {vector<int>{2, 3, 4, 5}, vector<int>{7, 3}, vector<int>{1, 3, 6},
        vector<int>{8, 16, 33}}) {
    for (bool shared : {false, true}) {
      SCOPED_TRACE(::testing::Message() << shared << " " << shape[0]);
      LayerParameter param;
      param.set_type("PReLU");
      param.mutable_prelu_param()->set_channel_shared(shared);
      param.mutable_prelu_param()->mutable_filler()->set_type("gaussian");
      PReLULayer<Dtype> layer(param);
      Blob<Dtype> bottom(shape), top;
      test::FillGaussian(&bottom);
      vector<Blob<Dtype>*> bottom_vec = {&bottom}, top_vec = {&top};
      layer.SetUp(bottom_vec, top_vec);
      layer.Forward(bottom_vec, top_vec);
      Blob<Dtype> dy(shape);
      test::FillGaussian(&dy);
      cpu_copy(dy.count(), dy.cpu_data(), top.mutable_cpu_diff());
      Blob<Dtype>& slopes = *layer.blobs()[0];
      test::FillGaussian(&slopes);  // the initial diff: both accumulate
      cpu_copy(slopes.count(), slopes.cpu_data(), slopes.mutable_cpu_diff());
      vector<Dtype> initial(slopes.cpu_diff(),
                            slopes.cpu_diff() + slopes.count());
      layer.Backward(top_vec, {false}, bottom_vec);

      const int outer = shape[0];
      const int dim = shared ? 1 : shape[1];
      const int inner = bottom.count(1) / dim;
      Blob<Dtype> terms;
      ChannelReducer<Dtype> reducer;
      PReLUSlopeGradientOnDevice(Poseidon::CPU, outer, dim, inner,
                                 bottom.cpu_data(), dy.cpu_data(), &terms,
                                 &reducer, initial.data());
      ExpectNearAll(
          vector<double>(slopes.cpu_diff(), slopes.cpu_diff() + slopes.count()),
          initial.data(), "slope gradient");
    }
  }
}

// Runs a Scale layer's CPU backward (learned scale: accumulates; scale from
// bottom[1]: overwrites) and expects ScaleGradientOnDevice, run on the CPU,
// to give the same scale gradient.
TYPED_TEST(ChannelOpsTest, ScaleGradientDeviceFormMatchesCpu) {
  using Dtype = TypeParam;
  for (bool learned : {true, false}) {
    SCOPED_TRACE(learned);
    LayerParameter param;
    param.set_type("Scale");
    param.mutable_scale_param()->mutable_filler()->set_type("gaussian");
    ScaleLayer<Dtype> layer(param);
    Blob<Dtype> bottom({3, 4, 5, 6}), scale({4}), top;
    test::FillGaussian(&bottom);
    test::FillGaussian(&scale);
    vector<Blob<Dtype>*> bottom_vec = {&bottom};
    if (!learned) bottom_vec.push_back(&scale);
    vector<Blob<Dtype>*> top_vec = {&top};
    layer.SetUp(bottom_vec, top_vec);
    layer.Forward(bottom_vec, top_vec);
    Blob<Dtype> dy(bottom.shape());
    test::FillGaussian(&dy);
    cpu_copy(dy.count(), dy.cpu_data(), top.mutable_cpu_diff());
    Blob<Dtype>& s = learned ? *layer.blobs()[0] : scale;
    test::FillGaussian(&s);  // diff below is the initial one
    cpu_copy(4, s.cpu_data(), s.mutable_cpu_diff());
    vector<Dtype> device(s.cpu_diff(), s.cpu_diff() + 4);
    layer.Backward(top_vec, vector<bool>(bottom_vec.size(), true), bottom_vec);

    Blob<Dtype> product(bottom.shape());
    ChannelReducer<Dtype> reducer;
    ScaleGradientOnDevice(Poseidon::CPU, AxisBroadcast{3, 4, 30}, dy.cpu_data(),
                          bottom.cpu_data(), product.mutable_cpu_data(),
                          learned, &reducer, device.data());
    ExpectNearAll(vector<double>(s.cpu_diff(), s.cpu_diff() + 4), device.data(),
                  "scale gradient");
  }
}

TEST(MaskBufferTest, KeepsCapacityAndData) {
  MaskBuffer<unsigned int> mask;
  EXPECT_EQ(mask.count(), 0);
  mask.Resize(0);
  EXPECT_NE(mask.mutable_data_on(Poseidon::CPU), nullptr);
  mask.Resize(10);
  unsigned int* data = mask.mutable_data_on(Poseidon::CPU);
  for (int i = 0; i < 10; ++i) data[i] = 3 * i;
  mask.Resize(4);  // within the capacity: same memory, same values
  EXPECT_EQ(mask.count(), 4);
  EXPECT_EQ(mask.data_on(Poseidon::CPU), data);
  EXPECT_EQ(mask.data_on(Poseidon::CPU)[3], 9u);
  mask.Resize(10);
  EXPECT_EQ(mask.data_on(Poseidon::CPU)[9], 27u);
  mask.Resize(1000);
  EXPECT_EQ(mask.count(), 1000);
  mask.mutable_data_on(Poseidon::CPU)[999] = 1;
  EXPECT_EQ(mask.data_on(Poseidon::CPU)[999], 1u);
}

}  // namespace
}  // namespace poseidon
