// MemoryData layer: Reset() arrays, AddDatumVector(), batch wrapping, errors.
#include <gtest/gtest.h>

#include <memory>

#include "data_layer_device_check.hpp"
#include "poseidon/layers/memory_data_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class MemoryDataLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  MemoryDataLayerTest() : data_(new Blob<Dtype>()), label_(new Blob<Dtype>()) {
    top_ = {data_.get(), label_.get()};
    param_.set_type("MemoryData");
    MemoryDataParameter* mp = param_.mutable_memory_data_param();
    mp->set_batch_size(2);
    mp->set_channels(1);
    mp->set_height(2);
    mp->set_width(3);
  }

  LayerParameter param_;
  std::unique_ptr<Blob<Dtype>> data_;
  std::unique_ptr<Blob<Dtype>> label_;
  vector<Blob<Dtype>*> top_;
};
TYPED_TEST_SUITE(MemoryDataLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(MemoryDataLayerTest, ServesResetArraysInBatches) {
  using Dtype = typename TypeParam::Dtype;
  auto layer = LayerRegistry<Dtype>::CreateLayer(this->param_);
  auto* memory = dynamic_cast<MemoryDataLayer<Dtype>*>(layer.get());
  ASSERT_NE(memory, nullptr);
  layer->SetUp({}, this->top_);
  EXPECT_EQ(this->data_->shape(), (vector<int>{2, 1, 2, 3}));
  EXPECT_EQ(this->label_->shape(), (vector<int>{2}));

  const int n = 6, size = 6;
  vector<Dtype> data(n * size), labels(n);
  for (int i = 0; i < n * size; ++i) data[i] = i;
  for (int i = 0; i < n; ++i) labels[i] = 10 + i;
  memory->Reset(data.data(), labels.data(), n);
  // Batches 0-1, 2-3, 4-5, then 0-1 again.
  for (int step = 0; step < 4; ++step) {
    layer->Forward({}, this->top_);
    const int first = (step % 3) * 2;
    for (int j = 0; j < 2 * size; ++j) {
      EXPECT_EQ(this->data_->cpu_data()[j], first * size + j);
    }
    EXPECT_EQ(this->label_->cpu_data()[0], 10 + first);
    EXPECT_EQ(this->label_->cpu_data()[1], 11 + first);
  }
}

// In GPU mode (a host pass: the arrays are host memory) the next reader
// finds the batches on the device.
TYPED_TEST(MemoryDataLayerTest, BatchesOnTheDeviceMatchCpuMode) {
  using Dtype = typename TypeParam::Dtype;
  const int n = 6, size = 6;
  vector<Dtype> data(n * size), labels(n);
  for (int i = 0; i < n * size; ++i) data[i] = static_cast<Dtype>(0.5 * i);
  for (int i = 0; i < n; ++i) labels[i] = static_cast<Dtype>(10 + i);
  const LayerParameter p = this->param_;
  test::ExpectBatchesMatchCpuMode<Dtype>(
      TypeParam::device, [&p] { return LayerRegistry<Dtype>::CreateLayer(p); },
      2, 5, false,
      [&](Layer<Dtype>* layer) {
        dynamic_cast<MemoryDataLayer<Dtype>*>(layer)->Reset(data.data(),
                                                            labels.data(), n);
      });
}

TYPED_TEST(MemoryDataLayerTest, ResetErrors) {
  using Dtype = typename TypeParam::Dtype;
  MemoryDataLayer<Dtype> layer(this->param_);
  vector<Dtype> data(36), labels(6);
  EXPECT_THROW(layer.Reset(data.data(), labels.data(), 2), Error);  // no SetUp
  layer.SetUp({}, this->top_);
  EXPECT_THROW(layer.Forward({}, this->top_), Error);  // no data yet
  EXPECT_THROW(layer.Reset(data.data(), labels.data(), 5), ConfigError);
  EXPECT_THROW(layer.Reset(data.data(), labels.data(), 0), ConfigError);
  EXPECT_THROW(layer.Reset(nullptr, labels.data(), 2), ConfigError);
  layer.Reset(data.data(), labels.data(), 6);
  layer.set_batch_size(3);
  layer.Forward({}, this->top_);
  EXPECT_EQ(this->data_->shape(0), 3);
  EXPECT_THROW(layer.set_batch_size(4), ConfigError);

  LayerParameter with_transform = this->param_;
  with_transform.mutable_transform_param()->set_scale(2);
  MemoryDataLayer<Dtype> transforming(with_transform);
  transforming.SetUp({}, this->top_);
  EXPECT_THROW(transforming.Reset(data.data(), labels.data(), 2), ConfigError);

  LayerParameter missing = this->param_;
  missing.mutable_memory_data_param()->clear_width();
  MemoryDataLayer<Dtype> incomplete(missing);
  EXPECT_THROW(incomplete.SetUp({}, this->top_), ConfigError);
  vector<Blob<Dtype>*> one_top{this->data_.get()};
  MemoryDataLayer<Dtype> needs_two(this->param_);
  EXPECT_THROW(needs_two.SetUp({}, one_top), ConfigError);
}

TYPED_TEST(MemoryDataLayerTest, AddDatumVectorTransforms) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p = this->param_;
  p.mutable_transform_param()->set_scale(0.5);
  MemoryDataLayer<Dtype> layer(p);
  layer.SetUp({}, this->top_);
  vector<Datum> datums;
  for (int i = 0; i < 4; ++i) {
    Datum d;
    d.set_channels(1);
    d.set_height(2);
    d.set_width(3);
    d.set_label(i);
    d.set_data(string(6, static_cast<char>(2 * i)));
    datums.push_back(d);
  }
  layer.AddDatumVector(datums);
  // Not yet served: adding more is refused.
  EXPECT_THROW(layer.AddDatumVector(datums), Error);
  layer.Forward({}, this->top_);
  EXPECT_EQ(this->data_->data_at(1, 0, 1, 2), 1);  // datum 1: 2 * 0.5
  EXPECT_EQ(this->label_->cpu_data()[1], 1);
  layer.Forward({}, this->top_);
  EXPECT_EQ(this->data_->data_at(0, 0, 0, 0), 2);  // datum 2
  layer.AddDatumVector(datums);  // the first set was served once

  datums.pop_back();
  layer.Forward({}, this->top_);
  layer.Forward({}, this->top_);
  EXPECT_THROW(layer.AddDatumVector(datums), ConfigError);  // 3 of batch 2
  datums.pop_back();
  datums[0].set_height(3);
  datums[0].set_data(string(9, 'a'));
  EXPECT_THROW(layer.AddDatumVector(datums), ShapeError);
}

}  // namespace
}  // namespace poseidon
