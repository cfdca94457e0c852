// Layer::SkipBatches on the data layers and exact resume (Note [Exact
// resume] in solver.cpp): a layer told to skip k batches serves what one
// that ran k Forwards serves next, bit for bit, including random crops and
// mirrors, shuffles, shards, wrap-around and file changes; a solver resumed
// from a snapshot (Data layer, Dropout) ends where an uninterrupted one does.
#include <gtest/gtest.h>

#ifdef USE_OPENCV
#include <opencv2/core.hpp>
#endif

#include <fstream>
#include <functional>
#include <memory>

#include "poseidon/util/image_codecs.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/solver.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/db.hpp"
#include "poseidon/util/hdf5.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// A database (LMDB unless told) of n 1 x 4 x 4 datums whose pixels differ
// (so crops and mirrors show), labelled 0..n-1.
string WriteDatumDB(int n, const string& backend = "lmdb") {
  const string path = test::MakeTempDir() + "/db";
  db::Writer writer(backend, path);
  for (int i = 0; i < n; ++i) {
    Datum d;
    d.set_channels(1);
    d.set_height(4);
    d.set_width(4);
    d.set_label(i);
    string pixels;
    for (int j = 0; j < 16; ++j) pixels.push_back(static_cast<char>(7 * i + j));
    d.set_data(pixels);
    writer.Put(db::IndexKey(i), d.SerializeAsString());
  }
  writer.Finish();
  return path;
}

// Everything `batches` Forwards of a layer made from `param` serve after
// `before` Forwards and a SkipBatches(skip), each run from seed 11.
vector<float> Served(const LayerParameter& param, int before, int skip,
                     int batches) {
  Poseidon::set_random_seed(11);
  auto layer = LayerRegistry<float>::CreateLayer(param);
  Blob<float> data, label;
  const vector<Blob<float>*> bottom, top{&data, &label};
  layer->SetUp(bottom, top);
  for (int i = 0; i < before; ++i) layer->Forward(bottom, top);
  layer->SkipBatches(skip);
  vector<float> out;
  for (int i = 0; i < batches; ++i) {
    layer->Forward(bottom, top);
    out.insert(out.end(), data.cpu_data(), data.cpu_data() + data.count());
    out.insert(out.end(), label.cpu_data(), label.cpu_data() + label.count());
  }
  return out;
}

// Skipping k batches == running k Forwards, for several k, and after some
// Forwards already ran (prefetched batches are then dropped first).
void ExpectSkipMatchesForward(const LayerParameter& param) {
  for (int k : {1, 3, 11}) {
    SCOPED_TRACE(StrCat("skip ", k));
    const vector<float> straight = Served(param, k, 0, 4);
    EXPECT_EQ(Served(param, 0, k, 4), straight);
    if (k > 1) EXPECT_EQ(Served(param, 1, k - 1, 4), straight);
  }
}

LayerParameter DataParam(const string& source, int batch) {
  LayerParameter p;
  p.set_name("data");
  p.set_type("Data");
  p.add_top("data");
  p.add_top("label");
  p.mutable_data_param()->set_source(source);
  p.mutable_data_param()->set_batch_size(batch);
  p.mutable_data_param()->set_prefetch(2);
  return p;
}

TEST(DataSkipTest, DataLayerWalksTheDatabase) {
  ExpectSkipMatchesForward(DataParam(WriteDatumDB(5), 3));
}

TEST(DataSkipTest, DataLayerReplaysRandomCropsAndMirrors) {
  LayerParameter p = DataParam(WriteDatumDB(5), 2);
  p.set_phase(TRAIN);
  p.mutable_transform_param()->set_crop_size(3);
  p.mutable_transform_param()->set_mirror(true);
  ExpectSkipMatchesForward(p);
}

TEST(DataSkipTest, DataLayerShard) {
  const string db = WriteDatumDB(7);
  Poseidon::set_data_shard({1, 3, false});
  ExpectSkipMatchesForward(DataParam(db, 2));
  Poseidon::set_data_shard({});
}

// LevelDB keeps no record count: the walk counts the records when first
// needed.
TEST(DataSkipTest, DataLayerShardOfALevelDB) {
  const string db = WriteDatumDB(7, "leveldb");
  ExpectSkipMatchesForward(DataParam(db, 3));
  Poseidon::set_data_shard({2, 3, false});
  ExpectSkipMatchesForward(DataParam(db, 2));
  Poseidon::set_data_shard({});
}

#ifdef USE_OPENCV
TEST(DataSkipTest, ImageDataShufflesAtEachEpoch) {
  const string dir = test::MakeTempDir();
  std::ofstream list(dir + "/list.txt");
  for (int i = 0; i < 4; ++i) {
    cv::Mat image(3, 5, CV_8UC1);
    for (int p = 0; p < 15; ++p) image.data[p] = static_cast<uchar>(i * 20 + p);
    codecs::Write(StrCat(dir, "/", i, ".png"), image);
    list << i << ".png " << i << "\n";
  }
  list.close();
  LayerParameter p;
  p.set_name("images");
  p.set_type("ImageData");
  p.add_top("data");
  p.add_top("label");
  ImageDataParameter* images = p.mutable_image_data_param();
  images->set_source(dir + "/list.txt");
  images->set_root_folder(dir + "/");
  images->set_batch_size(3);
  images->set_is_color(false);
  images->set_shuffle(true);
  ExpectSkipMatchesForward(p);
  p.set_phase(TRAIN);
  p.mutable_transform_param()->set_mirror(true);
  p.mutable_transform_param()->set_crop_size(2);
  ExpectSkipMatchesForward(p);
}
#endif  // USE_OPENCV

TEST(DataSkipTest, Hdf5DataChangesFiles) {
  const string dir = test::MakeTempDir();
  std::ofstream list(dir + "/list.txt");
  for (int f = 0; f < 3; ++f) {
    const string path = StrCat(dir, "/", f, ".h5");
    Hdf5File file = Hdf5File::Create(path);
    const int rows = 2 + f;
    vector<float> data(rows * 2), label(rows);
    for (int i = 0; i < rows * 2; ++i) data[i] = 100.0f * f + i;
    for (int i = 0; i < rows; ++i) label[i] = 10.0f * f + i;
    file.WriteDataset("data", {rows, 2}, data.data());
    file.WriteDataset("label", {rows}, label.data());
    file.Close();
    list << path << "\n";
  }
  list.close();
  LayerParameter p;
  p.set_name("hdf5");
  p.set_type("HDF5Data");
  p.add_top("data");
  p.add_top("label");
  p.mutable_hdf5_data_param()->set_source(dir + "/list.txt");
  p.mutable_hdf5_data_param()->set_batch_size(2);
  ExpectSkipMatchesForward(p);
  p.mutable_hdf5_data_param()->set_shuffle(true);
  ExpectSkipMatchesForward(p);
}

TEST(DataSkipTest, SkipBeforeSetUpIsAnError) {
  LayerParameter p = DataParam(WriteDatumDB(2), 1);
  auto layer = LayerRegistry<float>::CreateLayer(p);
  EXPECT_THROW(layer->SkipBatches(1), Error);
}

// The whole trajectory: a Data layer (random crops), Dropout and momentum;
// 6 iterations straight == 3, snapshot, a fresh solver restored, 3 more;
// with binary and with HDF5 snapshots.
class ResumeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ResumeTest, WithDataAndDropoutIsBitIdentical) {
  const string format = GetParam();
  const string dir = test::MakeTempDir();
  const string db = WriteDatumDB(7);
  const string solver_text = StrCat(R"(
    type: "SGD" base_lr: 0.1 momentum: 0.9 lr_policy: "fixed"
    snapshot_format: )", format, R"(
    random_seed: 5 snapshot_prefix: ")", dir, R"(/snap"
    net_param {
      layer { name: "data" type: "Data" top: "data" top: "label"
        data_param { source: ")", db, R"(" batch_size: 3 }
        transform_param { crop_size: 3 mirror: true scale: 0.01 } }
      layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param { num_output: 6
                              weight_filler { type: "gaussian" std: 0.1 } } }
      layer { name: "drop" type: "Dropout" bottom: "ip1" top: "ip1" }
      layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 7
                              weight_filler { type: "gaussian" std: 0.1 } } }
      layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2"
        bottom: "label" top: "loss" }
    })");
  auto make = [&] {
    SolverParameter param;
    ReadProtoFromTextString(solver_text, "solver", &param);
    return CreateSolver<float>(param);
  };
  auto weights = [](const Solver<float>& s) {
    vector<float> all;
    for (const Blob<float>* b : s.net()->learnable_params()) {
      all.insert(all.end(), b->cpu_data(), b->cpu_data() + b->count());
    }
    return all;
  };
  auto straight = make();
  straight->Step(6);
  {
    auto first = make();
    first->Step(3);
    first->Snapshot();
  }
  // Another seed: everything that matters must come from the snapshot.
  Poseidon::set_random_seed(99);
  auto resumed = make();
  resumed->Restore(
      (dir + "/snap_iter_3.solverstate" + (format == "HDF5" ? ".h5" : ""))
          .c_str());
  resumed->Step(3);
  const vector<float> a = weights(*straight), b = weights(*resumed);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i], b[i]) << "weight " << i << " differs after resuming";
  }
}

INSTANTIATE_TEST_SUITE_P(DataSkipTest, ResumeTest,
                         ::testing::Values("BINARYPROTO", "HDF5"));

}  // namespace
}  // namespace poseidon
