// Input and DummyData layers.
#include <gtest/gtest.h>

#include <memory>

#include "poseidon/layers/dummy_data_layer.hpp"
#include "poseidon/layers/input_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

void AddShape(BlobShape* shape, const vector<int>& dims) {
  for (int d : dims) shape->add_dim(d);
}

template <typename TypeParam>
class InputLayersTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  InputLayersTest() : a_(new Blob<Dtype>()), b_(new Blob<Dtype>()) {
    top_ = {a_.get(), b_.get()};
  }

  std::unique_ptr<Blob<Dtype>> a_;
  std::unique_ptr<Blob<Dtype>> b_;
  vector<Blob<Dtype>*> top_;
};
TYPED_TEST_SUITE(InputLayersTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(InputLayersTest, InputShapesSharedOrPerTop) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p;
  p.set_type("Input");
  AddShape(p.mutable_input_param()->add_shape(), {2, 3});
  auto shared = LayerRegistry<Dtype>::CreateLayer(p);
  shared->SetUp({}, this->top_);
  EXPECT_EQ(this->a_->shape(), (vector<int>{2, 3}));
  EXPECT_EQ(this->b_->shape(), (vector<int>{2, 3}));

  AddShape(p.mutable_input_param()->add_shape(), {4});
  InputLayer<Dtype> per_top(p);
  per_top.SetUp({}, this->top_);
  EXPECT_EQ(this->b_->shape(), (vector<int>{4}));
  // Forward leaves the caller's values alone.
  this->b_->mutable_cpu_data()[3] = 7;
  per_top.Forward({}, this->top_);
  EXPECT_EQ(this->b_->cpu_data()[3], 7);

  AddShape(p.mutable_input_param()->add_shape(), {5});
  InputLayer<Dtype> too_many(p);
  EXPECT_THROW(too_many.SetUp({}, this->top_), ConfigError);

  InputLayer<Dtype> unshaped{LayerParameter()};
  unshaped.SetUp({}, this->top_);
  EXPECT_EQ(this->b_->shape(), (vector<int>{4}));
}

TYPED_TEST(InputLayersTest, DummyDataDefaultsToZeros) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p;
  p.set_type("DummyData");
  AddShape(p.mutable_dummy_data_param()->add_shape(), {2, 3});
  auto layer = LayerRegistry<Dtype>::CreateLayer(p);
  vector<Blob<Dtype>*> top{this->a_.get()};
  this->a_->Reshape({6});
  for (int i = 0; i < 6; ++i) this->a_->mutable_cpu_data()[i] = 5;
  layer->SetUp({}, top);
  EXPECT_EQ(this->a_->shape(), (vector<int>{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(this->a_->cpu_data()[i], 0);
}

TYPED_TEST(InputLayersTest, DummyDataRefillsOnlyNonConstantTops) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p;
  DummyDataParameter* dp = p.mutable_dummy_data_param();
  // Legacy shapes: num once for both tops, the rest per top.
  dp->add_num(2);
  dp->add_channels(1);
  dp->add_channels(3);
  dp->add_height(1);
  dp->add_height(1);
  dp->add_width(4);
  dp->add_width(1);
  FillerParameter* constant = dp->add_data_filler();
  constant->set_type("constant");
  constant->set_value(3);
  FillerParameter* uniform = dp->add_data_filler();
  uniform->set_type("uniform");
  uniform->set_min(1);
  uniform->set_max(2);
  DummyDataLayer<Dtype> layer(p);
  layer.SetUp({}, this->top_);
  EXPECT_EQ(this->a_->shape(), (vector<int>{2, 1, 1, 4}));
  EXPECT_EQ(this->b_->shape(), (vector<int>{2, 3, 1, 1}));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(this->a_->cpu_data()[i], 3);
  for (int i = 0; i < 6; ++i) {
    EXPECT_GE(this->b_->cpu_data()[i], 1);
    EXPECT_LE(this->b_->cpu_data()[i], 2);
  }
  // Overwrite both: the constant top keeps the change, the uniform one is
  // refilled.
  this->a_->mutable_cpu_data()[0] = -1;
  for (int i = 0; i < 6; ++i) this->b_->mutable_cpu_data()[i] = -1;
  layer.Forward({}, this->top_);
  EXPECT_EQ(this->a_->cpu_data()[0], -1);
  for (int i = 0; i < 6; ++i) EXPECT_GE(this->b_->cpu_data()[i], 1);
}

TYPED_TEST(InputLayersTest, DummyDataConfigurationErrors) {
  using Dtype = typename TypeParam::Dtype;
  {
    LayerParameter p;
    AddShape(p.mutable_dummy_data_param()->add_shape(), {2});
    p.mutable_dummy_data_param()->add_num(2);
    DummyDataLayer<Dtype> layer(p);
    EXPECT_THROW(layer.SetUp({}, this->top_), ConfigError);
  }
  {
    LayerParameter p;
    DummyDataParameter* dp = p.mutable_dummy_data_param();
    for (int i = 0; i < 3; ++i) AddShape(dp->add_shape(), {2});
    DummyDataLayer<Dtype> layer(p);
    EXPECT_THROW(layer.SetUp({}, this->top_), ConfigError);
  }
  {
    LayerParameter p;
    DummyDataParameter* dp = p.mutable_dummy_data_param();
    AddShape(dp->add_shape(), {2});
    for (int i = 0; i < 3; ++i) dp->add_data_filler();
    DummyDataLayer<Dtype> layer(p);
    EXPECT_THROW(layer.SetUp({}, this->top_), ConfigError);
  }
  {
    LayerParameter p;
    p.mutable_dummy_data_param()->add_num(2);  // channels etc. missing
    DummyDataLayer<Dtype> layer(p);
    EXPECT_THROW(layer.SetUp({}, this->top_), ConfigError);
  }
  {
    LayerParameter p;
    AddShape(p.mutable_dummy_data_param()->add_shape(), {2});
    p.mutable_dummy_data_param()->add_data_filler()->set_type("nonsense");
    DummyDataLayer<Dtype> layer(p);
    EXPECT_THROW(layer.SetUp({}, this->top_), ConfigError);
  }
}

}  // namespace
}  // namespace poseidon
