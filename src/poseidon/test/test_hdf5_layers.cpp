// HDF5Data and HDF5Output: real .h5 files written and read back with the
// HDF5 C API in a temporary directory (USE_HDF5 builds only).
#ifdef USE_HDF5

#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "data_layer_device_check.hpp"
#include "poseidon/layers/hdf5_data_layer.hpp"
#include "poseidon/layers/hdf5_output_layer.hpp"
#include "poseidon/net.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using std::unique_ptr;

// One dataset to write: stored as `file_type`, given as doubles.
struct Dataset {
  string name;
  hid_t file_type;
  vector<hsize_t> dims;  // empty: a scalar
  vector<double> values;
};

void WriteH5(const string& path, const vector<Dataset>& datasets) {
  const hid_t file =
      H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  CHECK_GE(file, 0) << path;
  for (const Dataset& d : datasets) {
    const hid_t space = d.dims.empty()
                            ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(d.dims.size()),
                                               d.dims.data(), nullptr);
    const hid_t dataset = H5Dcreate2(file, d.name.c_str(), d.file_type, space,
                                     H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK_GE(dataset, 0) << path << " " << d.name;
    if (!d.values.empty()) {
      CHECK_GE(H5Dwrite(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL,
                        H5P_DEFAULT, d.values.data()),
               0);
    }
    H5Dclose(dataset);
    H5Sclose(space);
  }
  CHECK_GE(H5Fclose(file), 0);
}

// A dataset read back: its dims, values as doubles and stored element size.
struct ReadBack {
  vector<hsize_t> dims;
  vector<double> values;
  size_t element_size = 0;
  H5T_class_t type_class = H5T_NO_CLASS;
};

ReadBack ReadH5(const string& path, const string& name) {
  ReadBack out;
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  CHECK_GE(file, 0) << path;
  const hid_t dataset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  CHECK_GE(dataset, 0) << path << " " << name;
  const hid_t space = H5Dget_space(dataset);
  out.dims.resize(H5Sget_simple_extent_ndims(space));
  H5Sget_simple_extent_dims(space, out.dims.data(), nullptr);
  out.values.resize(H5Sget_simple_extent_npoints(space));
  CHECK_GE(H5Dread(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                   out.values.data()),
           0);
  const hid_t type = H5Dget_type(dataset);
  out.element_size = H5Tget_size(type);
  out.type_class = H5Tget_class(type);
  H5Tclose(type);
  H5Sclose(space);
  H5Dclose(dataset);
  H5Fclose(file);
  return out;
}

// The sample at position s of the test data set: "data" is 2 x 1 x 2 with
// values 10 s + k, "label" is 1 value, s.
constexpr int kDataDim = 4;
double DataValue(int s, int k) { return 10.0 * s + k; }

// Rows [first, first + rows) of the test data set, with the given stored
// types.
vector<Dataset> Samples(int first, int rows, hid_t data_type,
                        hid_t label_type) {
  Dataset data{"data", data_type, {hsize_t(rows), 2, 1, 2}, {}};
  Dataset label{"label", label_type, {hsize_t(rows), 1}, {}};
  for (int s = first; s < first + rows; ++s) {
    for (int k = 0; k < kDataDim; ++k) data.values.push_back(DataValue(s, k));
    label.values.push_back(s);
  }
  return {data, label};
}

// Sets the calling thread's data shard and restores the default.
class ScopedDataShard {
 public:
  explicit ScopedDataShard(const Poseidon::DataShard& shard) {
    Poseidon::set_data_shard(shard);
  }
  ~ScopedDataShard() { Poseidon::set_data_shard({0, 1, false}); }
};

template <typename TypeParam>
class HDF5LayersTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  // a.h5 holds samples 0..2 (data float32, label int32), b.h5 samples 3..4
  // (data float64, label uint8); list.txt lists both.
  HDF5LayersTest()
      : dir_(test::MakeTempDir() + "/"),
        data_(new Blob<Dtype>()),
        label_(new Blob<Dtype>()) {
    WriteH5(dir_ + "a.h5", Samples(0, 3, H5T_IEEE_F32LE, H5T_STD_I32LE));
    WriteH5(dir_ + "b.h5", Samples(3, 2, H5T_IEEE_F64BE, H5T_STD_U8LE));
    List("list.txt", {"a.h5", "b.h5"});
    top_ = {data_.get(), label_.get()};
  }

  // Writes a list file of paths in dir_ (blank lines and spaces around
  // names are ignored by the layer) and returns its path.
  string List(const string& name, const vector<string>& files) {
    string text;
    for (const string& f : files) text += "  " + dir_ + f + " \n\n";
    WriteFileAtomically(dir_ + name, text);
    return dir_ + name;
  }

  LayerParameter DataParam(int batch_size, const string& list = "list.txt",
                           bool shuffle = false) {
    LayerParameter p;
    p.set_name("h5");
    p.set_type("HDF5Data");
    p.add_top("data");
    p.add_top("label");
    HDF5DataParameter* hp = p.mutable_hdf5_data_param();
    hp->set_source(dir_ + list);
    hp->set_batch_size(batch_size);
    hp->set_shuffle(shuffle);
    return p;
  }

  // The labels of the next batch (checking each sample's data against its
  // label).
  vector<int> Next(Layer<Dtype>* layer) {
    layer->Forward({}, top_);
    vector<int> labels;
    const int batch = label_->shape(0);
    for (int i = 0; i < batch; ++i) {
      const int s = static_cast<int>(label_->cpu_data()[i]);
      for (int k = 0; k < kDataDim; ++k) {
        EXPECT_EQ(data_->cpu_data()[i * kDataDim + k], DataValue(s, k))
            << "sample " << s << " element " << k;
      }
      labels.push_back(s);
    }
    return labels;
  }

  // Reads `n` samples one at a time.
  vector<int> Read(Layer<Dtype>* layer, int n) {
    vector<int> labels;
    for (int i = 0; i < n; ++i) labels.push_back(Next(layer)[0]);
    return labels;
  }

  // SetUp with `param` is expected to throw E with `text` in the message.
  template <typename E>
  void ExpectSetUpError(const LayerParameter& param, const string& text) {
    HDF5DataLayer<Dtype> layer(param);
    try {
      layer.SetUp({}, top_);
      ADD_FAILURE() << "no error; expected one mentioning " << text;
    } catch (const E& e) {
      EXPECT_NE(string(e.what()).find(text), string::npos) << e.what();
    }
  }

  string dir_;
  unique_ptr<Blob<Dtype>> data_;
  unique_ptr<Blob<Dtype>> label_;
  vector<Blob<Dtype>*> top_;
};
TYPED_TEST_SUITE(HDF5LayersTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(HDF5LayersTest, ReadsExactValuesAndWrapsAcrossFiles) {
  using Dtype = typename TypeParam::Dtype;
  auto layer = LayerRegistry<Dtype>::CreateLayer(this->DataParam(2));
  EXPECT_STREQ(layer->type(), "HDF5Data");
  layer->SetUp({}, this->top_);
  EXPECT_EQ(this->data_->shape(), (vector<int>{2, 2, 1, 2}));
  EXPECT_EQ(this->label_->shape(), (vector<int>{2, 1}));
  const vector<vector<int>> expected{{0, 1}, {2, 3}, {4, 0}, {1, 2}, {3, 4}};
  for (const auto& batch : expected) {
    EXPECT_EQ(this->Next(layer.get()), batch);
  }
}

TYPED_TEST(HDF5LayersTest, OneTopAndBatchLargerThanTheData) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p = this->DataParam(7);
  p.clear_top();
  p.add_top("label");
  HDF5DataLayer<Dtype> layer(p);
  vector<Blob<Dtype>*> top{this->label_.get()};
  layer.SetUp({}, top);
  layer.Forward({}, top);
  const vector<Dtype> expected{0, 1, 2, 3, 4, 0, 1};
  EXPECT_EQ(
      vector<Dtype>(this->label_->cpu_data(), this->label_->cpu_data() + 7),
      expected);
}

TYPED_TEST(HDF5LayersTest, ShuffleIsAPermutationPerPassAndReproducible) {
  using Dtype = typename TypeParam::Dtype;
  auto read = [this](int64_t seed) {
    Poseidon::set_random_seed(seed);
    HDF5DataLayer<Dtype> layer(this->DataParam(1, "list.txt", true));
    layer.SetUp({}, this->top_);
    return this->Read(&layer, 20);
  };
  const vector<int> first = read(1701);
  const vector<int> sorted{0, 1, 2, 3, 4};
  bool any_reordered = false;
  for (int pass = 0; pass < 4; ++pass) {
    vector<int> samples(first.begin() + 5 * pass, first.begin() + 5 * pass + 5);
    any_reordered |= samples != sorted;
    // A file is read whole before the next: a's rows 0..2 stay together.
    const bool a_first = samples[0] < 3;
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(samples[i] < 3, a_first ? i < 3 : i >= 2) << "pass " << pass;
    }
    std::sort(samples.begin(), samples.end());
    EXPECT_EQ(samples, sorted) << "pass " << pass << " is no permutation";
  }
  EXPECT_TRUE(any_reordered);
  EXPECT_EQ(read(1701), first);
  EXPECT_NE(read(42), first);
}

// In GPU mode (a host pass into the tops) the next reader finds the
// batches on the device; shuffled from the same seed.
TYPED_TEST(HDF5LayersTest, BatchesOnTheDeviceMatchCpuMode) {
  using Dtype = typename TypeParam::Dtype;
  const LayerParameter p = this->DataParam(2, "list.txt", true);
  test::ExpectBatchesMatchCpuMode<Dtype>(
      TypeParam::device, [&p] { return LayerRegistry<Dtype>::CreateLayer(p); },
      2, 7, false);
}

TYPED_TEST(HDF5LayersTest, ShardsAreDisjointAndCoverTheData) {
  using Dtype = typename TypeParam::Dtype;
  for (bool shuffle : {false, true}) {
    for (int count : {2, 3}) {
      std::multiset<int> all;
      for (int index = 0; index < count; ++index) {
        HDF5DataLayer<Dtype> layer(this->DataParam(1, "list.txt", shuffle));
        layer.SetShard(index, count);
        layer.SetUp({}, this->top_);
        const int mine = (5 - index + count - 1) / count;
        const vector<int> samples = this->Read(&layer, 2 * mine);
        for (int i = 0; i < mine; ++i) {
          EXPECT_EQ(samples[i] % count, index)
              << "shard " << index << " of " << count << " read sample "
              << samples[i];
          all.insert(samples[i]);
        }
        // The second pass reads the same samples again.
        EXPECT_EQ(std::multiset<int>(samples.begin(), samples.begin() + mine),
                  std::multiset<int>(samples.begin() + mine, samples.end()));
      }
      EXPECT_EQ(all, (std::multiset<int>{0, 1, 2, 3, 4}))
          << count << " shards, shuffle " << shuffle;
    }
  }
}

TYPED_TEST(HDF5LayersTest, TakesTheThreadsDataShard) {
  using Dtype = typename TypeParam::Dtype;
  ScopedDataShard shard({1, 2, false});
  HDF5DataLayer<Dtype> layer(this->DataParam(1));
  EXPECT_EQ(layer.shard().index, 1);
  EXPECT_EQ(layer.shard().count, 2);
  layer.SetUp({}, this->top_);
  EXPECT_EQ(this->Read(&layer, 3), (vector<int>{1, 3, 1}));
}

TYPED_TEST(HDF5LayersTest, PartitionedShardReadsItsOwnList) {
  using Dtype = typename TypeParam::Dtype;
  this->List("list.txt_1", {"b.h5"});
  HDF5DataLayer<Dtype> layer(this->DataParam(1));
  layer.SetShard(1, 2, /*partitioned=*/true);
  layer.SetUp({}, this->top_);
  EXPECT_EQ(this->Read(&layer, 3), (vector<int>{3, 4, 3}));

  HDF5DataLayer<Dtype> missing(this->DataParam(1));
  missing.SetShard(0, 2, /*partitioned=*/true);
  EXPECT_THROW(missing.SetUp({}, this->top_), IOError);
}

TYPED_TEST(HDF5LayersTest, ShardErrors) {
  using Dtype = typename TypeParam::Dtype;
  HDF5DataLayer<Dtype> layer(this->DataParam(1));
  EXPECT_THROW(layer.SetShard(2, 2), ConfigError);
  EXPECT_THROW(layer.SetShard(-1, 2), ConfigError);
  layer.SetShard(5, 6);
  try {
    layer.SetUp({}, this->top_);
    ADD_FAILURE() << "shard 5 of 6 got samples from 5";
  } catch (const ConfigError& e) {
    EXPECT_NE(string(e.what()).find("gets no samples"), string::npos)
        << e.what();
  }
  HDF5DataLayer<Dtype> done(this->DataParam(1));
  done.SetUp({}, this->top_);
  EXPECT_THROW(done.SetShard(0, 2), Error);
}

TYPED_TEST(HDF5LayersTest, ParameterErrors) {
  LayerParameter p = this->DataParam(1);
  p.mutable_hdf5_data_param()->clear_source();
  this->template ExpectSetUpError<ConfigError>(p, "source");
  p = this->DataParam(0);
  this->template ExpectSetUpError<ConfigError>(p, "batch_size");
  p = this->DataParam(1);
  p.mutable_transform_param()->set_scale(2);
  this->template ExpectSetUpError<ConfigError>(p, "transform_param");
  p = this->DataParam(1);
  p.clear_top();
  p.add_top("data");
  this->template ExpectSetUpError<ConfigError>(p, "names 1 tops but 2");
}

TYPED_TEST(HDF5LayersTest, FileErrorsNameTheFile) {
  const string dir = this->dir_;
  this->template ExpectSetUpError<IOError>(this->DataParam(1, "nope.txt"),
                                           dir + "nope.txt");
  WriteFileAtomically(dir + "blank.txt", "\n  \n");
  this->template ExpectSetUpError<IOError>(this->DataParam(1, "blank.txt"),
                                           "lists no HDF5 files");
  this->List("missing.txt", {"a.h5", "gone.h5"});
  this->template ExpectSetUpError<IOError>(this->DataParam(1, "missing.txt"),
                                           dir + "gone.h5");
  WriteFileAtomically(dir + "text.h5", "not hdf5");
  this->List("text.txt", {"text.h5"});
  this->template ExpectSetUpError<IOError>(this->DataParam(1, "text.txt"),
                                           "'" + dir +
                                               "text.h5' is not an "
                                               "HDF5 file");
}

TYPED_TEST(HDF5LayersTest, DatasetErrorsNameFileAndDataset) {
  const string dir = this->dir_;
  auto expect = [this, &dir](const vector<Dataset>& datasets,
                             const string& text) {
    WriteH5(dir + "bad.h5", datasets);
    this->List("bad.txt", {"a.h5", "bad.h5"});
    this->template ExpectSetUpError<IOError>(this->DataParam(1, "bad.txt"),
                                             text);
  };
  vector<Dataset> good = Samples(0, 2, H5T_IEEE_F32LE, H5T_STD_I32LE);
  // No "label" dataset.
  expect({good[0]}, "HDF5 file '" + dir + "bad.h5' has no dataset 'label'");
  // Datasets of one file with different row counts.
  expect({good[0], Samples(0, 3, H5T_IEEE_F32LE, H5T_STD_I32LE)[1]},
         "'" + dir +
             "bad.h5': dataset 'label' has 3 rows but dataset "
             "'data' has 2");
  // A sample shape (and rank) other than the first file's.
  expect({Dataset{"data", H5T_IEEE_F32LE, {2, 4}, vector<double>(8, 1.0)},
          good[1]},
         "'" + dir +
             "bad.h5' dataset 'data' holds samples of shape 4 (rank "
             "1), but '" +
             dir +
             "a.h5' holds samples of shape 2 x 1 x 2 (rank "
             "3)");
  // No rows.
  expect({Dataset{"data", H5T_IEEE_F32LE, {0, 2, 1, 2}, {}}, good[1]},
         "dataset 'data' holds no samples");
  // A scalar.
  expect({Dataset{"data", H5T_IEEE_F32LE, {}, {1.0}}, good[1]},
         "'" + dir + "bad.h5' dataset 'data' has no dimensions");
  // Strings.
  const hid_t string_type = H5Tcopy(H5T_C_S1);
  H5Tset_size(string_type, 4);
  WriteH5(dir + "bad.h5", {Dataset{"data", string_type, {2}, {}}, good[1]});
  H5Tclose(string_type);
  this->List("bad.txt", {"bad.h5"});
  this->template ExpectSetUpError<IOError>(
      this->DataParam(1, "bad.txt"),
      "'" + dir + "bad.h5' dataset 'data' holds string values");
}

TYPED_TEST(HDF5LayersTest, OutputWritesDataAndLabelAsCaffeDoes) {
  using Dtype = typename TypeParam::Dtype;
  const string file = this->dir_ + "out.h5";
  LayerParameter p;
  p.set_type("HDF5Output");
  p.mutable_hdf5_output_param()->set_file_name(file);
  WriteFileAtomically(file, "old contents");
  auto layer = LayerRegistry<Dtype>::CreateLayer(p);
  EXPECT_STREQ(layer->type(), "HDF5Output");
  Blob<Dtype> data(vector<int>{3, 2, 2, 2});
  Blob<Dtype> label(vector<int>{3});
  const vector<Blob<Dtype>*> bottom{&data, &label};
  layer->SetUp(bottom, {});
  // SetUp truncated the file to an empty HDF5 file.
  EXPECT_GT(H5Fis_hdf5(file.c_str()), 0);

  for (int round = 0; round < 2; ++round) {
    test::FillGaussian(&data);
    for (int i = 0; i < 3; ++i) label.mutable_cpu_data()[i] = 7 * round + i;
    layer->Forward(bottom, {});
    const ReadBack d = ReadH5(file, "data");
    EXPECT_EQ(d.dims, (vector<hsize_t>{3, 2, 2, 2}));
    EXPECT_EQ(d.type_class, H5T_FLOAT);
    EXPECT_EQ(d.element_size, sizeof(Dtype));
    for (int i = 0; i < data.count(); ++i) {
      EXPECT_EQ(d.values[i], data.cpu_data()[i]) << "round " << round;
    }
    const ReadBack l = ReadH5(file, "label");
    EXPECT_EQ(l.dims, (vector<hsize_t>{3, 1, 1, 1}));
    EXPECT_EQ(l.values,
              (vector<double>{7.0 * round, 7.0 * round + 1, 7.0 * round + 2}));
  }
  // No temporary files are left behind.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(this->dir_)) {
    files += entry.path().filename().string().rfind("out.h5", 0) == 0;
  }
  EXPECT_EQ(files, 1);
}

TYPED_TEST(HDF5LayersTest, OutputReadsBackThroughHDF5Data) {
  using Dtype = typename TypeParam::Dtype;
  const string file = this->dir_ + "round.h5";
  LayerParameter p;
  p.set_type("HDF5Output");
  p.mutable_hdf5_output_param()->set_file_name(file);
  HDF5OutputLayer<Dtype> output(p);
  Blob<Dtype> data(vector<int>{4, 3});
  Blob<Dtype> label(vector<int>{4, 2, 1, 1, 2});  // 5-D keeps its shape
  test::FillGaussian(&data);
  test::FillGaussian(&label);
  const vector<Blob<Dtype>*> bottom{&data, &label};
  output.SetUp(bottom, {});
  output.Forward(bottom, {});

  this->List("round.txt", {"round.h5"});
  HDF5DataLayer<Dtype> input(this->DataParam(4, "round.txt"));
  input.SetUp({}, this->top_);
  EXPECT_EQ(this->data_->shape(), (vector<int>{4, 3, 1, 1}));
  EXPECT_EQ(this->label_->shape(), label.shape());
  input.Forward({}, this->top_);
  for (int i = 0; i < data.count(); ++i) {
    EXPECT_EQ(this->data_->cpu_data()[i], data.cpu_data()[i]);
  }
  for (int i = 0; i < label.count(); ++i) {
    EXPECT_EQ(this->label_->cpu_data()[i], label.cpu_data()[i]);
  }
}

// Bottoms on the device (in GPU mode) are written as they are; Backward
// zeroes the diffs it is asked for on the mode's device.
TYPED_TEST(HDF5LayersTest, OutputWritesBottomsFromTheDevice) {
  using Dtype = typename TypeParam::Dtype;
  const Poseidon::Brew dev = TypeParam::device;
  const string file = this->dir_ + "device.h5";
  LayerParameter p;
  p.set_type("HDF5Output");
  p.mutable_hdf5_output_param()->set_file_name(file);
  HDF5OutputLayer<Dtype> output(p);
  Blob<Dtype> data(vector<int>{3, 4});
  Blob<Dtype> label(vector<int>{3});
  test::FillGaussian(&data);
  test::FillGaussian(&label);
  const vector<Dtype> want(data.cpu_data(), data.cpu_data() + data.count());
  const vector<Blob<Dtype>*> bottom{&data, &label};
  output.SetUp(bottom, {});
  // The newest copy on `dev` (the host copy becomes stale on the GPU).
  data.mutable_data_on(dev);
  label.mutable_data_on(dev);
  output.Forward(bottom, {});
  const ReadBack d = ReadH5(file, "data");
  ASSERT_EQ(d.values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(d.values[i], want[i]);

  cpu_set(data.count(), Dtype(3), data.mutable_cpu_diff());
  cpu_set(label.count(), Dtype(3), label.mutable_cpu_diff());
  output.Backward({}, {true, false}, bottom);
  EXPECT_EQ(data.asum_diff(), Dtype(0));
  EXPECT_EQ(label.asum_diff(), Dtype(3 * label.count()));
}

TYPED_TEST(HDF5LayersTest, OutputErrors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> data(vector<int>{3, 2});
  Blob<Dtype> label(vector<int>{3});
  Blob<Dtype> short_label(vector<int>{2});
  LayerParameter p;
  p.set_type("HDF5Output");
  {
    HDF5OutputLayer<Dtype> layer(p);
    EXPECT_THROW(layer.SetUp({&data, &label}, {}), ConfigError);
  }
  const string unwritable = this->dir_ + "no/such/dir/out.h5";
  p.mutable_hdf5_output_param()->set_file_name(unwritable);
  {
    HDF5OutputLayer<Dtype> layer(p);
    try {
      layer.SetUp({&data, &label}, {});
      ADD_FAILURE() << "created " << unwritable;
    } catch (const IOError& e) {
      EXPECT_NE(string(e.what()).find(unwritable), string::npos) << e.what();
    }
  }
  p.mutable_hdf5_output_param()->set_file_name(this->dir_ + "out.h5");
  {
    HDF5OutputLayer<Dtype> layer(p);
    EXPECT_THROW(layer.SetUp({&data, &short_label}, {}), ShapeError);
    EXPECT_THROW(layer.SetUp({&data}, {}), ConfigError);
  }
}

// HDF5Data -> InnerProduct -> EuclideanLoss trained with SGD: the data is
// y = A x + b for a fixed A, b, so the loss must fall.
TYPED_TEST(HDF5LayersTest, TrainsANetFromHDF5Data) {
  using Dtype = typename TypeParam::Dtype;
  const int kRows = 8;
  vector<Dataset> parts[2];
  for (int part = 0; part < 2; ++part) {
    const int rows = part == 0 ? 5 : 3;
    Dataset x{"x", H5T_IEEE_F32LE, {hsize_t(rows), 3}, {}};
    Dataset y{"y", H5T_IEEE_F64LE, {hsize_t(rows), 2}, {}};
    for (int r = 0; r < rows; ++r) {
      const int s = part * 5 + r;
      double in[3];
      for (int k = 0; k < 3; ++k) {
        in[k] = std::sin(0.9 * s + 1.7 * k);
        x.values.push_back(in[k]);
      }
      y.values.push_back(0.5 * in[0] - 0.3 * in[1] + 0.2 * in[2] + 0.1);
      y.values.push_back(-0.4 * in[0] + 0.6 * in[2] - 0.2);
    }
    parts[part] = {x, y};
  }
  WriteH5(this->dir_ + "train0.h5", parts[0]);
  WriteH5(this->dir_ + "train1.h5", parts[1]);
  const string list = this->List("train.txt", {"train0.h5", "train1.h5"});

  SolverParameter param;
  ReadProtoFromTextString(
      StrCat("train_net_param { name: 'h5net' "
             "layer { name: 'in' type: 'HDF5Data' top: 'x' top: 'y' "
             "  hdf5_data_param { source: '",
             list, "' batch_size: ", kRows,
             " } } "
             "layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'p' "
             "  inner_product_param { num_output: 2 "
             "    weight_filler { type: 'gaussian' std: 0.1 } } } "
             "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'p' "
             "  bottom: 'y' top: 'loss' } } "
             "base_lr: 0.2 lr_policy: 'fixed' momentum: 0.9 max_iter: 100 "
             "random_seed: 1701 display: 0 snapshot_after_train: false"),
      "hdf5 solver", &param);
  unique_ptr<Solver<Dtype>> solver = CreateSolver<Dtype>(param);
  Net<Dtype>* net = solver->net().get();
  EXPECT_EQ(net->blob_by_name("x")->shape(), (vector<int>{kRows, 3}));
  EXPECT_EQ(net->blob_by_name("y")->shape(), (vector<int>{kRows, 2}));
  Dtype before = 0;
  net->Forward(&before);
  solver->Step(60);
  Dtype after = 0;
  net->Forward(&after);
  EXPECT_GT(before, 0.01);
  EXPECT_LT(after, before * 0.05) << "before " << before << " after " << after;
}

}  // namespace
}  // namespace poseidon

#endif  // USE_HDF5
