// SplitLayer: tops alias the bottom, backward sums the top diffs.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/kernels/eltwise_kernels.hpp"
#include "poseidon/layers/split_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class SplitLayerTest : public test::MultiDeviceTest<TypeParam> {
  using Dtype = typename TypeParam::Dtype;

 protected:
  SplitLayerTest() {
    test::FillGaussian(&bottom_);
    bottom_vec_ = {&bottom_};
    top_vec_ = {&top_a_, &top_b_, &top_c_};
  }

  LayerParameter Param() const {
    LayerParameter p;
    p.set_type("Split");
    return p;
  }

  Blob<Dtype> bottom_{2, 3, 4, 5};
  Blob<Dtype> top_a_, top_b_, top_c_;
  vector<Blob<Dtype>*> bottom_vec_;
  vector<Blob<Dtype>*> top_vec_;
};

TYPED_TEST_SUITE(SplitLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(SplitLayerTest, TopsAliasBottom) {
  using Dtype = typename TypeParam::Dtype;
  SplitLayer<Dtype> layer(this->Param());
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  for (Blob<Dtype>* top : this->top_vec_) {
    ASSERT_EQ(top->shape(), this->bottom_.shape());
    EXPECT_EQ(top->cpu_data(), this->bottom_.cpu_data());
    for (int i = 0; i < top->count(); ++i) {
      EXPECT_EQ(top->cpu_data()[i], this->bottom_.cpu_data()[i]);
    }
  }
  // Each top keeps its own diff.
  EXPECT_NE(this->top_a_.cpu_diff(), this->top_b_.cpu_diff());
  EXPECT_NE(this->top_a_.cpu_diff(), this->bottom_.cpu_diff());
}

TYPED_TEST(SplitLayerTest, FollowsBottomReshape) {
  using Dtype = typename TypeParam::Dtype;
  SplitLayer<Dtype> layer(this->Param());
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  this->bottom_.Reshape({4, 3, 4, 5});  // larger: new memory
  test::FillGaussian(&this->bottom_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  ASSERT_EQ(this->top_c_.shape(), this->bottom_.shape());
  EXPECT_EQ(this->top_c_.cpu_data(), this->bottom_.cpu_data());
}

TYPED_TEST(SplitLayerTest, BackwardSumsTopDiffs) {
  using Dtype = typename TypeParam::Dtype;
  SplitLayer<Dtype> layer(this->Param());
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  layer.Forward(this->bottom_vec_, this->top_vec_);
  const int n = this->bottom_.count();
  for (int i = 0; i < n; ++i) {
    this->top_a_.mutable_cpu_diff()[i] = i;
    this->top_b_.mutable_cpu_diff()[i] = 0.5 * i;
    this->top_c_.mutable_cpu_diff()[i] = -2;
  }
  layer.Backward(this->top_vec_, {true}, this->bottom_vec_);
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(this->bottom_.cpu_diff()[i], 1.5 * i - 2, 1e-4) << i;
  }
  // propagate_down false leaves the bottom diff alone.
  this->top_a_.mutable_cpu_diff()[0] = 100;
  layer.Backward(this->top_vec_, {false}, this->bottom_vec_);
  EXPECT_NEAR(this->bottom_.cpu_diff()[0], -2, 1e-6);
}

TYPED_TEST(SplitLayerTest, SingleAndTwoTops) {
  using Dtype = typename TypeParam::Dtype;
  for (int tops = 1; tops <= 2; ++tops) {
    vector<Blob<Dtype>*> top(this->top_vec_.begin(),
                             this->top_vec_.begin() + tops);
    SplitLayer<Dtype> layer(this->Param());
    layer.SetUp(this->bottom_vec_, top);
    layer.Forward(this->bottom_vec_, top);
    for (int t = 0; t < tops; ++t) {
      for (int i = 0; i < this->bottom_.count(); ++i) {
        top[t]->mutable_cpu_diff()[i] = (t + 1) * i;
      }
    }
    layer.Backward(top, {true}, this->bottom_vec_);
    const double factor = tops == 1 ? 1 : 3;
    for (int i = 0; i < this->bottom_.count(); ++i) {
      EXPECT_NEAR(this->bottom_.cpu_diff()[i], factor * i, 1e-4);
    }
  }
}

// More tops than one pass of the summing body takes, on awkward shapes,
// against a sum in double in the order of the tops.
TYPED_TEST(SplitLayerTest, ManyTopsMatchDouble) {
  using Dtype = typename TypeParam::Dtype;
  for (const vector<int>& shape :
       {vector<int>{1, 3, 7, 7}, vector<int>{2, 17, 13, 17},
        vector<int>{1, 17, 1, 1}}) {
    for (int tops : {2, 3, kernels::kEltwiseMaxInputs,
                     kernels::kEltwiseMaxInputs + 1, 35}) {
      Blob<Dtype> bottom(shape);
      SCOPED_TRACE(testing::Message()
                   << bottom.shape_string() << ", " << tops << " tops");
      vector<std::unique_ptr<Blob<Dtype>>> blobs;
      vector<Blob<Dtype>*> top_vec;
      for (int t = 0; t < tops; ++t) {
        blobs.emplace_back(new Blob<Dtype>());
        top_vec.push_back(blobs.back().get());
      }
      vector<Blob<Dtype>*> bottom_vec = {&bottom};
      SplitLayer<Dtype> layer(this->Param());
      layer.SetUp(bottom_vec, top_vec);
      layer.Forward(bottom_vec, top_vec);
      for (Blob<Dtype>* t : top_vec) {
        Blob<Dtype> g(shape);
        test::FillGaussian(&g);
        cpu_copy(g.count(), g.cpu_data(), t->mutable_cpu_diff());
      }
      layer.Backward(top_vec, {true}, bottom_vec);
      for (int i = 0; i < bottom.count(); ++i) {
        double sum = 0, mass = 0;
        for (Blob<Dtype>* t : top_vec) {
          sum += t->cpu_diff()[i];
          mass += std::fabs(t->cpu_diff()[i]);
        }
        ASSERT_NEAR(bottom.cpu_diff()[i], sum,
                    (sizeof(Dtype) == 4 ? 1e-6 : 1e-14) * (1 + mass))
            << "element " << i;
      }
    }
  }
}

TYPED_TEST(SplitLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  SplitLayer<Dtype> layer(this->Param());
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(SplitLayerTest, InPlaceIsRejected) {
  using Dtype = typename TypeParam::Dtype;
  SplitLayer<Dtype> layer(this->Param());
  vector<Blob<Dtype>*> top = {&this->top_a_, &this->bottom_};
  EXPECT_THROW(layer.SetUp(this->bottom_vec_, top), ConfigError);
}

TYPED_TEST(SplitLayerTest, BlobCountsAndRegistry) {
  using Dtype = typename TypeParam::Dtype;
  SplitLayer<Dtype> layer(this->Param());
  vector<Blob<Dtype>*> none;
  EXPECT_THROW(layer.SetUp(this->bottom_vec_, none), ConfigError);
  auto created = LayerRegistry<Dtype>::CreateLayer(this->Param());
  EXPECT_STREQ(created->type(), "Split");
}

}  // namespace
}  // namespace poseidon
