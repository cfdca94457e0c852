// Data layer: reading an LMDB of Datums through the prefetch thread, batches
// that wrap around, sharding, and errors raised on the thread. LevelDB and
// the choice of backend: test_data_layer_backends.cpp.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "data_layer_device_check.hpp"
#include "poseidon/layers/data_layer.hpp"
#include "poseidon/util/db.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// A 2 x 3 x 2 datum whose pixels all equal `value`, labelled `value`.
Datum UniformDatum(int value, int channels = 2, int height = 3, int width = 2) {
  Datum d;
  d.set_channels(channels);
  d.set_height(height);
  d.set_width(width);
  d.set_label(value);
  d.set_data(string(channels * height * width, static_cast<char>(value)));
  return d;
}

// Writes the serialized values under keys 00000000, 00000001, ...
string WriteDB(const vector<string>& values) {
  const string path = test::MakeTempDir() + "/db";
  db::Writer writer("lmdb", path);
  for (size_t i = 0; i < values.size(); ++i) {
    writer.Put(db::IndexKey(static_cast<int>(i)), values[i]);
  }
  writer.Finish();
  return path;
}

string WriteUniformDB(int n) {
  vector<string> values;
  for (int i = 0; i < n; ++i)
    values.push_back(UniformDatum(i).SerializeAsString());
  return WriteDB(values);
}

template <typename TypeParam>
class DataLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  DataLayerTest() : data_(new Blob<Dtype>()), label_(new Blob<Dtype>()) {
    top_ = {data_.get(), label_.get()};
  }

  LayerParameter Param(const string& source, int batch_size) {
    LayerParameter p;
    p.set_name("data");
    p.set_type("Data");
    p.mutable_data_param()->set_source(source);
    p.mutable_data_param()->set_batch_size(batch_size);
    p.mutable_data_param()->set_backend(DataParameter::LMDB);
    return p;
  }

  // Labels of the next batch.
  vector<int> NextLabels(Layer<Dtype>* layer) {
    layer->Forward({}, top_);
    vector<int> labels;
    for (int i = 0; i < label_->count(); ++i) {
      labels.push_back(static_cast<int>(label_->cpu_data()[i]));
    }
    return labels;
  }

  std::unique_ptr<Blob<Dtype>> data_;
  std::unique_ptr<Blob<Dtype>> label_;
  vector<Blob<Dtype>*> top_;
};
TYPED_TEST_SUITE(DataLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(DataLayerTest, ReadsBatchesThatWrapAround) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p = this->Param(WriteUniformDB(5), 3);
  p.mutable_transform_param()->set_scale(0.5);
  DataLayer<Dtype> layer(p);
  layer.SetUp({}, this->top_);
  EXPECT_EQ(this->data_->shape(), (vector<int>{3, 2, 3, 2}));
  EXPECT_EQ(this->label_->shape(), (vector<int>{3}));
  const vector<vector<int>> expected{{0, 1, 2}, {3, 4, 0}, {1, 2, 3}};
  for (const auto& want : expected) {
    EXPECT_EQ(this->NextLabels(&layer), want);
    for (int n = 0; n < 3; ++n) {
      for (int j = 0; j < 12; ++j) {
        EXPECT_EQ(this->data_->cpu_data()[n * 12 + j], want[n] * 0.5);
      }
    }
  }
}

// In GPU mode the batches reach the tops on the device (uploaded by the
// prefetch thread) and equal the CPU's, over more batches than are in
// flight; with and without the label top.
TYPED_TEST(DataLayerTest, BatchesOnTheDeviceMatchCpuMode) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p = this->Param(WriteUniformDB(7), 3);
  p.mutable_data_param()->set_prefetch(2);
  p.mutable_transform_param()->set_scale(0.25);
  for (const int tops : {2, 1}) {
    test::ExpectBatchesMatchCpuMode<Dtype>(
        TypeParam::device,
        [&p] { return LayerRegistry<Dtype>::CreateLayer(p); }, tops, 9, true);
  }
}

// The mode may change between SetUp (which fixes the prefetch thread's
// mode) and Forward: a batch loaded on the host is uploaded by Forward, one
// uploaded by the thread is read back on the host.
TYPED_TEST(DataLayerTest, ModeMaySwitchAfterSetUp) {
  using Dtype = typename TypeParam::Dtype;
  const string source = WriteUniformDB(4);
  const Poseidon::Brew dev = TypeParam::device;
  for (const Poseidon::Brew setup_mode : {Poseidon::CPU, dev}) {
    for (const Poseidon::Brew forward_mode : {Poseidon::CPU, dev}) {
      Poseidon::set_mode(setup_mode);
      DataLayer<Dtype> layer(this->Param(source, 3));
      layer.SetUp({}, this->top_);
      Poseidon::set_mode(forward_mode);
      const vector<vector<int>> expected{{0, 1, 2}, {3, 0, 1}, {2, 3, 0}};
      for (const auto& want : expected) {
        EXPECT_EQ(this->NextLabels(&layer), want);
        for (int n = 0; n < 3; ++n) {
          EXPECT_EQ(this->data_->cpu_data()[n * 12 + 5], want[n]);
        }
      }
    }
  }
  Poseidon::set_mode(dev);
}

TYPED_TEST(DataLayerTest, LabelTopIsOptionalAndTypeIsRegistered) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p = this->Param(WriteUniformDB(2), 2);
  p.mutable_data_param()->clear_backend();  // unset: the LMDB is detected
  auto layer = LayerRegistry<Dtype>::CreateLayer(p);
  EXPECT_STREQ(layer->type(), "Data");
  vector<Blob<Dtype>*> top{this->data_.get()};
  layer->SetUp({}, top);
  layer->Forward({}, top);
  EXPECT_EQ(this->data_->shape(), (vector<int>{2, 2, 3, 2}));
  EXPECT_EQ(this->data_->cpu_data()[12], 1);
}

TYPED_TEST(DataLayerTest, ShardsAreDisjointAndCoverTheDatabase) {
  using Dtype = typename TypeParam::Dtype;
  const int n = 7, count = 3;
  const string source = WriteUniformDB(n);
  std::set<int> seen;
  for (int index = 0; index < count; ++index) {
    DataLayer<Dtype> layer(this->Param(source, 1));
    layer.SetShard(index, count);
    layer.SetUp({}, this->top_);
    vector<int> mine;
    for (int i = index; i < n; i += count) mine.push_back(i);
    // One pass over the shard, then it starts again from its first record.
    for (int pass = 0; pass < 2; ++pass) {
      for (int want : mine) {
        const vector<int> got = this->NextLabels(&layer);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0], want) << "shard " << index << " pass " << pass;
        EXPECT_EQ(got[0] % count, index);
        if (pass == 0) {
          EXPECT_TRUE(seen.insert(got[0]).second);
        }
      }
    }
  }
  EXPECT_EQ(static_cast<int>(seen.size()), n);
}

TYPED_TEST(DataLayerTest, ShardErrors) {
  using Dtype = typename TypeParam::Dtype;
  const string source = WriteUniformDB(2);
  DataLayer<Dtype> layer(this->Param(source, 1));
  EXPECT_THROW(layer.SetShard(3, 3), ConfigError);
  EXPECT_THROW(layer.SetShard(-1, 2), ConfigError);
  EXPECT_THROW(layer.SetShard(0, 0), ConfigError);
  layer.SetShard(2, 3);  // a valid shard, but of a 2-record database
  EXPECT_THROW(layer.SetUp({}, this->top_), ConfigError);

  DataLayer<Dtype> started(this->Param(source, 1));
  started.SetUp({}, this->top_);
  EXPECT_THROW(started.SetShard(0, 2), Error);
}

TYPED_TEST(DataLayerTest, RecordOfAnotherSizeIsRethrownNotFatal) {
  using Dtype = typename TypeParam::Dtype;
  vector<string> values;
  for (int i = 0; i < 4; ++i)
    values.push_back(UniformDatum(i).SerializeAsString());
  values.push_back(UniformDatum(4, 1, 3, 3).SerializeAsString());
  DataLayer<Dtype> layer(this->Param(WriteDB(values), 3));
  layer.SetUp({}, this->top_);
  EXPECT_EQ(this->NextLabels(&layer), (vector<int>{0, 1, 2}));
  // The second batch holds records 3 and 4: 4 is 1x3x3, not 2x3x2.
  try {
    layer.Forward({}, this->top_);
    FAIL() << "the odd-sized record was accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(string(e.what()).find("record '00000004'"), string::npos)
        << e.what();
  }
  // The layer stays failed, and is destroyed without hanging.
  EXPECT_THROW(layer.Forward({}, this->top_), ShapeError);
}

TYPED_TEST(DataLayerTest, CorruptRecordIsAnIOError) {
  using Dtype = typename TypeParam::Dtype;
  const vector<string> values{UniformDatum(0).SerializeAsString(),
                              string("\x00\x01garbage", 9)};
  DataLayer<Dtype> layer(this->Param(WriteDB(values), 2));
  layer.SetUp({}, this->top_);
  try {
    layer.Forward({}, this->top_);
    FAIL() << "a corrupt record was accepted";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find("not a valid Datum"), string::npos)
        << e.what();
  }
}

TYPED_TEST(DataLayerTest, ConfigurationErrors) {
  using Dtype = typename TypeParam::Dtype;
  const string source = WriteUniformDB(2);
  {
    DataLayer<Dtype> layer(this->Param(source + "_missing", 2));
    try {
      layer.SetUp({}, this->top_);
      FAIL() << "a missing database was accepted";
    } catch (const IOError& e) {
      EXPECT_NE(string(e.what()).find("cannot open LMDB"), string::npos);
    }
  }
  {
    LayerParameter p = this->Param(source + "_missing", 2);
    p.mutable_data_param()->set_backend(DataParameter::LEVELDB);
    DataLayer<Dtype> layer(p);
    try {
      layer.SetUp({}, this->top_);
      FAIL() << "a missing database was accepted";
    } catch (const IOError& e) {
      EXPECT_NE(
          string(e.what()).find("cannot open LevelDB '" + source + "_missing'"),
          string::npos)
          << e.what();
    }
  }
  {
    DataLayer<Dtype> layer(this->Param(source, 0));
    EXPECT_THROW(layer.SetUp({}, this->top_), ConfigError);
  }
  {
    LayerParameter p = this->Param(source, 2);
    p.mutable_data_param()->set_prefetch(0);
    EXPECT_THROW(DataLayer<Dtype> layer(p), ConfigError);
  }
  {
    LayerParameter p = this->Param(source, 2);
    p.mutable_transform_param()->set_crop_size(5);  // records are 3x2
    DataLayer<Dtype> layer(p);
    EXPECT_THROW(layer.SetUp({}, this->top_), ShapeError);
  }
}

TYPED_TEST(DataLayerTest, SeededRandomCropsRepeat) {
  using Dtype = typename TypeParam::Dtype;
  // Records whose pixels differ, so that crops differ.
  vector<string> values;
  for (int i = 0; i < 3; ++i) {
    Datum d = UniformDatum(i, 1, 4, 4);
    string pixels;
    for (int j = 0; j < 16; ++j) pixels.push_back(static_cast<char>(j + i));
    d.set_data(pixels);
    values.push_back(d.SerializeAsString());
  }
  LayerParameter p = this->Param(WriteDB(values), 2);
  p.set_phase(TRAIN);
  p.mutable_transform_param()->set_crop_size(2);
  p.mutable_transform_param()->set_mirror(true);
  auto run = [&] {
    Poseidon::set_random_seed(5);
    DataLayer<Dtype> layer(p);
    layer.SetUp({}, this->top_);
    vector<Dtype> all;
    for (int i = 0; i < 6; ++i) {
      layer.Forward({}, this->top_);
      all.insert(all.end(), this->data_->cpu_data(),
                 this->data_->cpu_data() + this->data_->count());
    }
    return all;
  };
  EXPECT_EQ(run(), run());
}

TYPED_TEST(DataLayerTest, DestroysWhilePrefetching) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p = this->Param(WriteUniformDB(3), 2);
  p.mutable_data_param()->set_prefetch(2);
  // Each layer is destroyed with its prefetch thread filling the queue
  // (after a batch was taken, or before any was); the batches taken are
  // the database's first records, and the destructions return.
  for (int i = 0; i < 5; ++i) {
    DataLayer<Dtype> layer(p);
    layer.SetUp({}, this->top_);
    if (i % 2) EXPECT_EQ(this->NextLabels(&layer), (vector<int>{0, 1}));
  }
  DataLayer<Dtype> never_set_up(p);
  EXPECT_EQ(this->label_->shape(), (vector<int>{2}));
}

}  // namespace
}  // namespace poseidon
