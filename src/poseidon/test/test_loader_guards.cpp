// Guards before allocation in the loaders (issue 16): sizes read from files
// are checked against what the file holds, and against what a blob can
// hold, before any memory is asked for; each bad file gives a
// poseidon::Error naming it. The host allocation limit is lowered in these
// tests, so that a guard that came after the allocation would show as an
// OutOfMemoryError instead of the expected error.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <climits>
#include <fstream>
#include <memory>

#include "poseidon/data_transformer.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/net.hpp"
#include "poseidon/solver.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/alloc_guard.hpp"
#include "poseidon/util/db.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// Lowers the host allocation limit to 1 MB for one test.
class LoaderGuardTest : public ::testing::Test {
 protected:
  LoaderGuardTest() { SetHostAllocationLimit(1 << 20); }
  ~LoaderGuardTest() override { SetHostAllocationLimit(0); }
};

using test::ErrorOf;

TEST_F(LoaderGuardTest, CheckedProduct) {
  EXPECT_EQ(CheckedProduct({2, 3, 4}, 100), 24);
  EXPECT_EQ(CheckedProduct({2, 3, 4}, 23), -1);
  EXPECT_EQ(CheckedProduct({int64_t{1} << 40, int64_t{1} << 40}, INT64_MAX),
            -1);
  EXPECT_EQ(CheckedProduct({0, int64_t{1} << 62, 8}, INT_MAX), 0);
  EXPECT_EQ(CheckedProduct({3, -1}, INT_MAX), -1);
  EXPECT_THROW(RequireAllocatable(2 << 20, "a test"), OutOfMemoryError);
  EXPECT_NO_THROW(RequireAllocatable(1 << 20, "a test"));
}

TEST_F(LoaderGuardTest, HugeStoredBlobIsRefusedBeforeAllocating) {
  BlobProto proto;
  for (int64_t d : {100000, 100000, 100}) proto.mutable_shape()->add_dim(d);
  proto.add_data(1);
  Blob<float> blob;
  EXPECT_THROW(blob.FromProto(proto), IOError);  // over INT_MAX elements
  proto.mutable_shape()->set_dim(2, 1);  // 1e10 -> still over
  EXPECT_THROW(blob.FromProto(proto), IOError);
  proto.mutable_shape()->set_dim(0, 1000);  // 1e8 elements, 1 value
  const string message = ErrorOf([&] { blob.FromProto(proto); });
  EXPECT_NE(message.find("holds 1 values but its shape needs 100000000"),
            string::npos)
      << message;
  // int64 dimensions beyond int are not truncated into small ones.
  BlobProto wide;
  wide.mutable_shape()->add_dim((int64_t{1} << 32) + 2);
  wide.add_data(1);
  wide.add_data(2);
  EXPECT_THROW(blob.FromProto(wide), IOError);
  Blob<float> two({2});
  EXPECT_FALSE(two.ShapeEquals(wide));
}

// A BlobShape's int64 dimensions are checked before they become ints: a
// cast first would wrap -2^32 + 3 to 3 (found by reading the code the
// fuzzers exercise; see docs/reliability.md).
TEST_F(LoaderGuardTest, BlobShapeDimensionsAreCheckedIn64Bits) {
  Blob<float> blob;
  BlobShape shape;
  shape.add_dim(-(int64_t{1} << 32) + 3);
  EXPECT_THROW(blob.Reshape(shape), ShapeError);
  shape.set_dim(0, (int64_t{1} << 32) + 3);
  EXPECT_THROW(blob.Reshape(shape), ShapeError);
  shape.set_dim(0, 3);
  blob.Reshape(shape);
  EXPECT_EQ(blob.count(), 3);
  // Through a net: an Input layer declaring such a shape.
  NetParameter param;
  ReadProtoFromTextString(R"(
    layer { name: "in" type: "Input" top: "x"
            input_param { shape { dim: -4294967293 } } })",
                          "wrapping shape", &param);
  EXPECT_THROW(Net<float> net(param), ShapeError);
}

TEST_F(LoaderGuardTest, StoredBlobErrors) {
  Blob<float> blob;
  BlobProto negative;
  negative.set_num(-1);
  negative.set_channels(2);
  negative.set_height(1);
  negative.set_width(1);
  EXPECT_THROW(blob.FromProto(negative), IOError);
  BlobProto diffs;
  diffs.mutable_shape()->add_dim(3);
  for (int i = 0; i < 3; ++i) diffs.add_data(i);
  diffs.add_diff(1);  // was a CHECK failure (abort)
  EXPECT_THROW(blob.FromProto(diffs), IOError);
  diffs.add_diff(2);
  diffs.add_diff(3);
  blob.FromProto(diffs);
  EXPECT_EQ(blob.cpu_diff()[2], 3);
  BlobProto axes;
  for (int i = 0; i < 40; ++i) axes.mutable_shape()->add_dim(1);
  axes.add_data(0);
  EXPECT_THROW(blob.FromProto(axes), IOError);
}

// A weights file whose layer declares a huge blob: a ShapeError naming the
// file, the layer and both shapes; nothing allocated for the stored shape.
TEST_F(LoaderGuardTest, WeightsFileWithHugeBlobNamesFileAndLayer) {
  NetParameter param;
  ReadProtoFromTextString(R"(
    layer { name: "in" type: "Input" top: "x"
            input_param { shape { dim: 1 dim: 3 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
            inner_product_param { num_output: 2 } })",
                          "net", &param);
  Net<float> net(param);
  NetParameter weights;
  net.ToProto(&weights);
  BlobProto* w = weights.mutable_layer(1)->mutable_blobs(0);
  w->mutable_shape()->set_dim(0, 1 << 30);
  const string file = test::MakeTempDir() + "/huge.caffemodel";
  WriteProtoToBinaryFile(weights, file);
  const string message = ErrorOf([&] { net.CopyTrainedLayersFrom(file); });
  EXPECT_NE(message.find(file), string::npos) << message;
  EXPECT_NE(message.find("layer 'ip'"), string::npos) << message;
  EXPECT_NE(message.find("1073741824 3"), string::npos) << message;
  // The right shape with too few values: an IOError naming file and layer.
  w->mutable_shape()->set_dim(0, 2);
  w->mutable_data()->RemoveLast();
  WriteProtoToBinaryFile(weights, file);
  try {
    net.CopyTrainedLayersFrom(file);
    ADD_FAILURE() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find(file), string::npos) << e.what();
    EXPECT_NE(string(e.what()).find("'ip'"), string::npos) << e.what();
  }
}

TEST_F(LoaderGuardTest, DatumWhoseBytesDisagreeWithItsShape) {
  DataTransformer<float> transformer(TransformationParameter(), TRAIN);
  Datum datum;
  datum.set_channels(3);
  datum.set_height(30000);
  datum.set_width(30000);
  datum.set_data("tiny");
  EXPECT_THROW(transformer.InferBlobShape(datum), IOError);
  datum.clear_data();
  EXPECT_THROW(transformer.InferBlobShape(datum), IOError);  // no float_data
  datum.set_channels(1 << 21);  // 2^21 x 30000 x 30000 overflows
  EXPECT_THROW(transformer.InferBlobShape(datum), IOError);
  datum.set_channels(1);
  datum.set_height(2);
  datum.set_width(2);
  datum.set_data("abcd");
  EXPECT_EQ(transformer.InferBlobShape(datum), (vector<int>{1, 1, 2, 2}));
  datum.set_height(-2);
  datum.set_width(-2);
  EXPECT_THROW(transformer.InferBlobShape(datum), IOError);
}

// Through the Data layer: the error names the LMDB and the record.
TEST_F(LoaderGuardTest, DataLayerNamesTheRecordOfAHugeDatum) {
  const string path = test::MakeTempDir() + "/db";
  {
    db::Writer writer("lmdb", path);
    Datum datum;
    datum.set_channels(3);
    datum.set_height(30000);
    datum.set_width(30000);
    datum.set_data("tiny");
    writer.Put("huge_record", datum.SerializeAsString());
    writer.Finish();
  }
  LayerParameter p;
  p.set_type("Data");
  p.mutable_data_param()->set_source(path);
  p.mutable_data_param()->set_batch_size(1);
  auto layer = LayerRegistry<float>::CreateLayer(p);
  Blob<float> data;
  try {
    layer->SetUp({}, {&data});
    ADD_FAILURE() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find("huge_record"), string::npos) << e.what();
    EXPECT_NE(string(e.what()).find("holds 4 bytes"), string::npos)
        << e.what();
  }
}

// An HDF5 dataset declaring more values than the file holds (HDF5 allows
// that: unwritten values read as the fill value).
TEST_F(LoaderGuardTest, Hdf5DatasetsDeclaringHugeShapes) {
  const string dir = test::MakeTempDir();
  auto write = [&](const string& name, std::vector<hsize_t> dims) {
    const string path = dir + "/" + name;
    const hid_t file =
        H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    for (const char* dataset : {"data", "label"}) {
      std::vector<hsize_t> d =
          string(dataset) == "data" ? dims : std::vector<hsize_t>{dims[0]};
      const hid_t space = H5Screate_simple(static_cast<int>(d.size()),
                                           d.data(), nullptr);
      const hid_t set = H5Dcreate2(file, dataset, H5T_NATIVE_FLOAT, space,
                                   H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      H5Dclose(set);
      H5Sclose(space);
    }
    H5Fclose(file);
    std::ofstream(dir + "/" + name + ".txt") << path << "\n";
    return dir + "/" + name + ".txt";
  };
  auto setup = [](const string& list) {
    LayerParameter p;
    p.set_type("HDF5Data");
    p.add_top("data");
    p.add_top("label");
    p.mutable_hdf5_data_param()->set_source(list);
    p.mutable_hdf5_data_param()->set_batch_size(1);
    auto layer = LayerRegistry<float>::CreateLayer(p);
    Blob<float> data, label;
    layer->SetUp({}, {&data, &label});
  };
  // 1e5 x 1e5 x 10 values: more than any blob holds.
  const string over = write("over.h5", {100000, 100000, 10});
  const string message = ErrorOf([&] { setup(over); });
  EXPECT_NE(message.find("over.h5"), string::npos) << message;
  EXPECT_NE(message.find("more than INT_MAX values"), string::npos) << message;
  // 4e4 x 4e4 values (6.4 GB): over the allocation limit, named.
  const string big = write("big.h5", {40000, 40000});
  try {
    setup(big);
    ADD_FAILURE() << "no error";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(string(e.what()).find("big.h5"), string::npos) << e.what();
  }
  // 2e9 rows of no values: nothing to allocate for the data, but a row
  // order of 16 GB (the fuzzer's find, a smaller one only slow).
  const string empty = write("empty.h5", {2000000000, 0});
  const string why = ErrorOf([&] { setup(empty); });
  EXPECT_NE(why.find("empty.h5' dataset 'data' of shape 2000000000 x 0 holds"),
            string::npos)
      << why;
  EXPECT_NE(why.find("holds samples with no values"), string::npos) << why;
}

TEST_F(LoaderGuardTest, ReadFileToStringChecksBeforeReading) {
  const string dir = test::MakeTempDir();
  EXPECT_THROW(ReadFileToString(dir), IOError);  // a directory
  const string file = dir + "/ten";
  std::ofstream(file) << "0123456789";
  EXPECT_EQ(ReadFileToString(file), "0123456789");
  EXPECT_THROW(ReadFileToString(file, 9), IOError);
  NetParameter param;
  EXPECT_THROW(ReadProtoFromBinaryFile(dir, &param), IOError);
  EXPECT_THROW(ReadProtoFromTextFile(dir, &param), IOError);
}

TEST_F(LoaderGuardTest, SolverStateWithNegativeIterationOrBadCounts) {
  const string dir = test::MakeTempDir();
  SolverParameter param;
  ReadProtoFromTextString(StrCat(R"(
    base_lr: 0.1 lr_policy: "fixed" momentum: 0.9 snapshot_prefix: ")", dir, R"(/s"
    net_param {
      layer { name: "d" type: "DummyData" top: "x" top: "y"
        dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
      layer { name: "ip" type: "InnerProduct" bottom: "x" top: "z"
        inner_product_param { num_output: 2 } }
      layer { name: "loss" type: "SoftmaxWithLoss" bottom: "z" bottom: "y" }
    })"),
                          "solver", &param);
  auto solver = CreateSolver<float>(param);
  solver->Snapshot();
  const string state_file = dir + "/s_iter_0.solverstate";
  SolverState state;
  ReadProtoFromBinaryFile(state_file, &state);
  EXPECT_TRUE(state.has_rng_state());
  SolverState negative = state;
  negative.set_iter(-5);
  WriteProtoToBinaryFile(negative, state_file);
  EXPECT_THROW(solver->Restore(state_file.c_str()), IOError);
  SolverState diffs = state;
  diffs.mutable_history(0)->add_diff(1);  // 1 diff for 6 values
  WriteProtoToBinaryFile(diffs, state_file);
  EXPECT_THROW(solver->Restore(state_file.c_str()), IOError);
  SolverState rng = state;
  rng.set_rng_state("not a generator");
  WriteProtoToBinaryFile(rng, state_file);
  EXPECT_THROW(solver->Restore(state_file.c_str()), IOError);
  WriteProtoToBinaryFile(state, state_file);
  EXPECT_NO_THROW(solver->Restore(state_file.c_str()));
}

}  // namespace
}  // namespace poseidon
