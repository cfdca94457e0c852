// SoftmaxLayer: values against a naive double-precision reference over
// several axes, numerical stability, in-place use, gradients, errors;
// CPU/GPU agreement for both GPU engines.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gpu_agreement.hpp"
#include "gradient_checker.hpp"
#include "poseidon/layers/softmax_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// softmax of `x` (shape `shape`) along `axis`, computed directly from the
// definition in double precision, one column at a time.
template <typename Dtype>
vector<double> NaiveSoftmax(const Blob<Dtype>& x, int axis) {
  const int outer = x.count(0, axis);
  const int channels = x.shape(axis);
  const int inner = x.count(axis + 1);
  vector<double> y(x.count());
  const Dtype* data = x.cpu_data();
  for (int o = 0; o < outer; ++o) {
    for (int j = 0; j < inner; ++j) {
      double max = -INFINITY;
      for (int c = 0; c < channels; ++c) {
        max = std::fmax(max, data[(o * channels + c) * inner + j]);
      }
      double sum = 0;
      for (int c = 0; c < channels; ++c) {
        sum += std::exp(data[(o * channels + c) * inner + j] - max);
      }
      for (int c = 0; c < channels; ++c) {
        const int i = (o * channels + c) * inner + j;
        y[i] = std::exp(data[i] - max) / sum;
      }
    }
  }
  return y;
}

template <typename TypeParam>
class SoftmaxLayerTest : public test::MultiDeviceTest<TypeParam> {
  using Dtype = typename TypeParam::Dtype;

 protected:
  SoftmaxLayerTest() {
    test::FillGaussian(&bottom_, 2.0);
    bottom_vec_ = {&bottom_};
    top_vec_ = {&top_};
  }

  static LayerParameter Param(int axis) {
    LayerParameter p;
    p.set_type("Softmax");
    p.mutable_softmax_param()->set_axis(axis);
    return p;
  }

  Blob<Dtype> bottom_{2, 5, 3, 4};
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(SoftmaxLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(SoftmaxLayerTest, ForwardMatchesReferenceOnEveryAxis) {
  using Dtype = typename TypeParam::Dtype;
  const double tol = sizeof(Dtype) == 4 ? 1e-6 : 1e-13;
  for (int axis : {1, 0, 2, 3, -1}) {
    SoftmaxLayer<Dtype> layer(this->Param(axis));
    layer.SetUp(this->bottom_vec_, this->top_vec_);
    ASSERT_EQ(this->top_.shape(), this->bottom_.shape());
    layer.Forward(this->bottom_vec_, this->top_vec_);
    const vector<double> expected =
        NaiveSoftmax(this->bottom_, axis < 0 ? axis + 4 : axis);
    for (int i = 0; i < this->top_.count(); ++i) {
      ASSERT_NEAR(this->top_.cpu_data()[i], expected[i], tol)
          << "axis " << axis << " element " << i;
    }
  }
}

TYPED_TEST(SoftmaxLayerTest, HandComputedValues) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom({1, 3});
  bottom.mutable_cpu_data()[0] = 0;
  bottom.mutable_cpu_data()[1] = std::log(2.0);
  bottom.mutable_cpu_data()[2] = std::log(5.0);
  vector<Blob<Dtype>*> bottom_vec = {&bottom};
  SoftmaxLayer<Dtype> layer(this->Param(1));
  layer.SetUp(bottom_vec, this->top_vec_);
  layer.Forward(bottom_vec, this->top_vec_);
  EXPECT_NEAR(this->top_.cpu_data()[0], 0.125, 1e-6);
  EXPECT_NEAR(this->top_.cpu_data()[1], 0.25, 1e-6);
  EXPECT_NEAR(this->top_.cpu_data()[2], 0.625, 1e-6);
}

TYPED_TEST(SoftmaxLayerTest, LargeInputsStayFinite) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom({2, 3});
  const Dtype values[] = {1000, 1001, 1002, -1000, -1001, -1002};
  std::copy(values, values + 6, bottom.mutable_cpu_data());
  vector<Blob<Dtype>*> bottom_vec = {&bottom};
  SoftmaxLayer<Dtype> layer(this->Param(1));
  layer.SetUp(bottom_vec, this->top_vec_);
  layer.Forward(bottom_vec, this->top_vec_);
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  const double expected[] = {
      std::exp(-2.0) / z, std::exp(-1.0) / z, 1 / z, 1 / z,
      std::exp(-1.0) / z, std::exp(-2.0) / z};
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(this->top_.cpu_data()[i], expected[i], 1e-6) << i;
  }
}

TYPED_TEST(SoftmaxLayerTest, InPlaceMatchesOutOfPlace) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> top_diff(this->bottom_.shape());
  test::FillGaussian(&top_diff);
  SoftmaxLayer<Dtype> layer(this->Param(2));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  cpu_copy(top_diff.count(), top_diff.cpu_data(),
           this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);

  Blob<Dtype> blob;
  blob.CopyFrom(this->bottom_, false, true);
  vector<Blob<Dtype>*> in_place = {&blob};
  SoftmaxLayer<Dtype> layer2(this->Param(2));
  layer2.SetUp(in_place, in_place);
  layer2.Forward(in_place, in_place);
  for (int i = 0; i < blob.count(); ++i) {
    ASSERT_NEAR(blob.cpu_data()[i], this->top_.cpu_data()[i], 1e-7) << i;
  }
  cpu_copy(top_diff.count(), top_diff.cpu_data(), blob.mutable_cpu_diff());
  layer2.Backward(in_place, {true}, in_place);
  for (int i = 0; i < blob.count(); ++i) {
    ASSERT_NEAR(blob.cpu_diff()[i], this->bottom_.cpu_diff()[i], 1e-6) << i;
  }
}

// Long columns of positions: the CPU folds them in blocks of neighbouring
// positions (a partial last block) split over the threads, and walks the
// rows for the element-wise steps. Both passes against direct sums.
TYPED_TEST(SoftmaxLayerTest, LargeBlobMatchesReferenceBothWays) {
  using Dtype = typename TypeParam::Dtype;
  const double tol = sizeof(Dtype) == 4 ? 1e-6 : 1e-13;
  for (const vector<int>& shape :
       {vector<int>{2, 21, 40, 41}, vector<int>{3, 7, 150}}) {
    Blob<Dtype> bottom(shape), top, top_diff(shape);
    test::FillGaussian(&bottom, 2.0);
    test::FillGaussian(&top_diff);
    vector<Blob<Dtype>*> bottom_vec = {&bottom}, top_vec = {&top};
    SoftmaxLayer<Dtype> layer(this->Param(1));
    layer.SetUp(bottom_vec, top_vec);
    layer.Forward(bottom_vec, top_vec);
    const vector<double> y = NaiveSoftmax(bottom, 1);
    for (int i = 0; i < top.count(); ++i) {
      ASSERT_NEAR(top.cpu_data()[i], y[i], tol) << "element " << i;
    }
    cpu_copy(top_diff.count(), top_diff.cpu_data(), top.mutable_cpu_diff());
    layer.Backward(top_vec, {true}, bottom_vec);
    // dx = y (dy - sum_c dy_c y_c), the sum per position.
    const int channels = shape[1];
    const int inner = bottom.count(2);
    const Dtype* dy = top_diff.cpu_data();
    const Dtype* yc = top.cpu_data();
    for (int n = 0; n < shape[0]; ++n) {
      for (int j = 0; j < inner; ++j) {
        double dot = 0;
        for (int c = 0; c < channels; ++c) {
          const int i = (n * channels + c) * inner + j;
          dot += double(dy[i]) * yc[i];
        }
        for (int c = 0; c < channels; ++c) {
          const int i = (n * channels + c) * inner + j;
          ASSERT_NEAR(bottom.cpu_diff()[i], yc[i] * (dy[i] - dot), 10 * tol)
              << "element " << i;
        }
      }
    }
  }
}

TYPED_TEST(SoftmaxLayerTest, GradientChannels) {
  using Dtype = typename TypeParam::Dtype;
  SoftmaxLayer<Dtype> layer(this->Param(1));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(SoftmaxLayerTest, GradientLastAxis) {
  using Dtype = typename TypeParam::Dtype;
  SoftmaxLayer<Dtype> layer(this->Param(-1));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(SoftmaxLayerTest, PropagateDownFalseLeavesBottomDiff) {
  using Dtype = typename TypeParam::Dtype;
  SoftmaxLayer<Dtype> layer(this->Param(1));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  cpu_set(this->bottom_.count(), Dtype(4), this->bottom_.mutable_cpu_diff());
  cpu_set(this->top_.count(), Dtype(1), this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {false}, this->bottom_vec_);
  EXPECT_EQ(this->bottom_.cpu_diff()[0], Dtype(4));
}

TYPED_TEST(SoftmaxLayerTest, AxisOutOfRange) {
  using Dtype = typename TypeParam::Dtype;
  for (int axis : {4, -5}) {
    SoftmaxLayer<Dtype> layer(this->Param(axis));
    EXPECT_THROW(layer.SetUp(this->bottom_vec_, this->top_vec_), ConfigError)
        << axis;
  }
}

template <typename Dtype>
class SoftmaxLayerGPUTest : public ::testing::Test {};
TYPED_TEST_SUITE(SoftmaxLayerGPUTest, test::TestDtypes);

TYPED_TEST(SoftmaxLayerGPUTest, AgreesWithCpuForEachEngineAndAxis) {
  using Dtype = TypeParam;
  if (!test::GpuSkipReason().empty()) {
    GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
  }
  Blob<Dtype> x({3, 7, 2, 5});
  test::FillGaussian(&x, 3.0);
  for (auto engine : {SoftmaxParameter::CAFFE, SoftmaxParameter::CUDNN}) {
    for (int axis : {1, 0, 3}) {
      SCOPED_TRACE(testing::Message()
                   << "engine " << engine << " axis " << axis);
      LayerParameter param;
      param.set_type("Softmax");
      param.mutable_softmax_param()->set_engine(engine);
      param.mutable_softmax_param()->set_axis(axis);
      test::ExpectCpuGpuAgree<Dtype>(param, {&x});
    }
  }
}

}  // namespace
}  // namespace poseidon
