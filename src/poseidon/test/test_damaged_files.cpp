// Damaged or mismatched files, and a layer whose allocation fails: inputs
// that crashed, hung or were ignored (docs/reliability.md, "Databases,
// weights and tools"): a truncated LMDB, a damaged LevelDB table, weights
// files that fill no layer, an allocation failing inside a layer, a
// solver's empty net file. Each gives an Error naming the database, file or
// layer. The tools' exit statuses are checked by
// scripts/test_damaged_files.sh.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <random>
#include <string>

#include "poseidon/layer.hpp"
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

using test::Contains;

using test::ErrorOf;

using test::ParseNet;

void WriteFile(const string& path, const string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

off_t FileSize(const string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 ? info.st_size : -1;
}

// `n` records of `bytes` bytes each that do not compress (so that LevelDB
// spreads them over many blocks), keyed by IndexKey.
void FillDB(const string& backend, const string& path, int n, int bytes) {
  std::mt19937 gen(7);
  db::Writer writer(backend, path);
  for (int i = 0; i < n; ++i) {
    string value(static_cast<size_t>(bytes), '\0');
    for (char& c : value) c = static_cast<char>(gen());
    writer.Put(db::IndexKey(i), value);
  }
  writer.Finish();
}

// --- LMDB: a data.mdb shorter than its pages in use --------------------

TEST(DamagedFilesTest, TruncatedLmdbIsRefusedAtOpen) {
  const string path = test::MakeTempDir() + "/cut_lmdb";
  FillDB("lmdb", path, 300, 1000);
  const off_t full = FileSize(path + "/data.mdb");
  ASSERT_EQ(::truncate((path + "/data.mdb").c_str(), full / 2), 0);
  for (db::Mode mode : {db::Mode::READ, db::Mode::WRITE}) {
    std::unique_ptr<db::DB> db = db::GetDB("lmdb");
    const string message = ErrorOf([&] { db->Open(path, mode); });
    EXPECT_TRUE(Contains(message, "LMDB '" + path + "' is truncated"));
    EXPECT_TRUE(Contains(message, StrCat("holds ", full / 2, " bytes")));
    EXPECT_TRUE(Contains(message, StrCat("need ", full)));
  }
}

// A file cut while a cursor reads it: an IOError at the next move, not
// SIGBUS (run in a child process, so that a signal fails only this test).
// The child is a fresh run of this test ("threadsafe"), not a fork of a
// process whose other threads (thread pool, prefetch) may hold locks: under
// AddressSanitizer the forked child hung.
TEST(DamagedFilesTest, LmdbTruncatedWhileOpenIsAnErrorNotASignal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const string path = test::MakeTempDir() + "/shrinking_lmdb";
  FillDB("lmdb", path, 300, 1000);
  EXPECT_EXIT(
      {
        std::unique_ptr<db::DB> db = db::GetDB("lmdb");
        db->Open(path, db::Mode::READ);
        std::unique_ptr<db::Cursor> cursor = db->NewCursor();
        const off_t full = FileSize(path + "/data.mdb");
        if (::truncate((path + "/data.mdb").c_str(), full / 2) != 0) {
          std::exit(2);
        }
        string message;
        try {
          for (; cursor->valid(); cursor->Next()) cursor->value();
        } catch (const IOError& e) {
          message = e.what();
        }
        std::fprintf(stderr, "%s\n", message.c_str());
        std::exit(message.find("LMDB '" + path +
                               "' was truncated while open") == string::npos);
      },
      ::testing::ExitedWithCode(0), "truncated while open");
}

// --- LevelDB: a damaged table block -------------------------------------

// LevelDB's iterator steps over a block it cannot read and keeps the error
// in its status: the cursor must throw at that block, naming the database,
// before handing out any record past it.
TEST(DamagedFilesTest, DamagedLevelDBBlockIsAnErrorWhereItIs) {
  const string path = test::MakeTempDir() + "/damaged_leveldb";
  const int n = 400;
  FillDB("leveldb", path, n, 2000);
  {
    // Opening turns the write-ahead log into a table file (.ldb).
    std::unique_ptr<db::DB> db = db::GetDB("leveldb");
    db->Open(path, db::Mode::READ);
  }
  string table;  // the largest table file
  for (const auto& entry : std::filesystem::directory_iterator(path)) {
    const string name = entry.path().string();
    if (entry.path().extension() == ".ldb" &&
        (table.empty() || FileSize(name) > FileSize(table))) {
      table = name;
    }
  }
  ASSERT_FALSE(table.empty()) << "no table file in " << path;
  {
    // Flips bytes in the middle of the table: inside a data block.
    std::fstream file(table, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(FileSize(table) / 2);
    file.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
  }
  std::unique_ptr<db::DB> db = db::GetDB("leveldb");
  db->Open(path, db::Mode::READ);
  int expected = 0;
  string message;
  try {
    for (auto c = db->NewCursor(); c->valid(); c->Next()) {
      ASSERT_EQ(c->key(), db::IndexKey(expected))
          << "the cursor skipped records instead of reporting the damage";
      ++expected;
    }
  } catch (const IOError& e) {
    message = e.what();
  }
  EXPECT_TRUE(Contains(message, "LevelDB '" + path + "'"));
  EXPECT_TRUE(Contains(message, "Corruption"));
  EXPECT_LT(expected, n);
}

// --- Weights files that fill no layer ------------------------------------

const char* kNetA = R"(
name: "a"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 2 dim: 3 } } }
layer { name: "fc_a" type: "InnerProduct" bottom: "data" top: "fc_a"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" } } }
)";

// Another net: its one layer with parameters is named differently.
const char* kNetB = R"(
name: "b"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 2 dim: 3 } } }
layer { name: "fc_b" type: "InnerProduct" bottom: "data" top: "fc_b"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" } } }
)";

// Net a fine-tuned: fc_a kept, a renamed new layer on top.
const char* kNetAFineTuned = R"(
name: "a_tuned"
layer { name: "data" type: "Input" top: "data"
  input_param { shape { dim: 2 dim: 3 } } }
layer { name: "fc_a" type: "InnerProduct" bottom: "data" top: "fc_a"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" } } }
layer { name: "fc_new" type: "InnerProduct" bottom: "fc_a" top: "fc_new"
  inner_product_param { num_output: 2 weight_filler { type: "constant"
    value: 0.5 } } }
)";

// A .caffemodel of net a in `dir`.
string SaveNetA(const string& dir) {
  Net<float> a(ParseNet(kNetA));
  NetParameter trained;
  a.ToProto(&trained);
  const string file = dir + "/a.caffemodel";
  WriteProtoToBinaryFile(trained, file);
  return file;
}

TEST(DamagedFilesTest, EmptyWeightsFileIsAnError) {
  const string file = test::MakeTempDir() + "/empty.caffemodel";
  WriteFile(file, "");
  Net<float> net(ParseNet(kNetA));
  const string message = ErrorOf([&] { net.CopyTrainedLayersFrom(file); });
  EXPECT_TRUE(Contains(message, "weights file '" + file + "' is empty"));
}

// A mean file (BlobProto) given as weights parses as a NetParameter of no
// layers: its fields' numbers mean nothing there.
TEST(DamagedFilesTest, WeightsFileThatIsNotANetIsAnError) {
  const string file = test::MakeTempDir() + "/mean.binaryproto";
  BlobProto mean;
  mean.set_num(1);
  mean.set_channels(1);
  mean.set_height(2);
  mean.set_width(2);
  for (int i = 0; i < 4; ++i) mean.add_data(0.5f);
  WriteProtoToBinaryFile(mean, file);
  Net<float> net(ParseNet(kNetA));
  const string message = ErrorOf([&] { net.CopyTrainedLayersFrom(file); });
  EXPECT_TRUE(
      Contains(message, "weights file '" + file + "' is not a trained net"));
}

TEST(DamagedFilesTest, WeightsOfAnotherNetAreAnErrorNamingBoth) {
  const string file = SaveNetA(test::MakeTempDir());
  Net<float> b(ParseNet(kNetB));
  const float before = b.layer_by_name("fc_b")->blobs()[0]->cpu_data()[0];
  const string message = ErrorOf([&] { b.CopyTrainedLayersFrom(file); });
  EXPECT_TRUE(Contains(
      message, "weights file '" + file + "' matches no layer of net 'b'"));
  EXPECT_TRUE(Contains(message, "'fc_a'"));
  EXPECT_TRUE(Contains(message, "'fc_b'"));
  EXPECT_EQ(b.layer_by_name("fc_b")->blobs()[0]->cpu_data()[0], before);
}

// Caffe's rule stays: a fine-tuned net with some layers renamed takes the
// weights of the layers that kept their names.
TEST(DamagedFilesTest, FineTuningWithRenamedLayersStillCopiesTheRest) {
  const string file = SaveNetA(test::MakeTempDir());
  NetParameter stored;
  ReadProtoFromBinaryFile(file, &stored);
  Net<float> tuned(ParseNet(kNetAFineTuned));
  EXPECT_NO_THROW(tuned.CopyTrainedLayersFrom(file));
  const auto& fc_a = tuned.layer_by_name("fc_a")->blobs()[0];
  for (int i = 0; i < fc_a->count(); ++i) {
    EXPECT_EQ(fc_a->cpu_data()[i], stored.layer(1).blobs(0).data(i)) << i;
  }
  EXPECT_EQ(tuned.layer_by_name("fc_new")->blobs()[0]->cpu_data()[0], 0.5f);
}

// In-memory copies (between nets a program built) keep Caffe's leniency.
TEST(DamagedFilesTest, CopyFromANetParameterStaysLenient) {
  Net<float> a(ParseNet(kNetA));
  NetParameter trained;
  a.ToProto(&trained);
  Net<float> b(ParseNet(kNetB));
  EXPECT_NO_THROW(b.CopyTrainedLayersFrom(trained));
}

TEST(DamagedFilesTest, Hdf5WeightsOfAnotherNetAreAnError) {
  const string file = test::MakeTempDir() + "/a.h5";
  Net<float> a(ParseNet(kNetA));
  try {
    a.ToHDF5(file);
  } catch (const ConfigError&) {
    GTEST_SKIP() << "this build has no HDF5";
  }
  Net<float> b(ParseNet(kNetB));
  const string message = ErrorOf([&] { b.CopyTrainedLayersFrom(file); });
  EXPECT_TRUE(Contains(
      message, "HDF5 weights file '" + file + "' matches no layer of net 'b'"));
  Net<float> tuned(ParseNet(kNetAFineTuned));
  EXPECT_NO_THROW(tuned.CopyTrainedLayersFrom(file));
}

// --- Allocations failing inside a layer ----------------------------------

// Throws std::bad_alloc from its set-up, as a layer whose std::vector or
// new[] cannot get memory does.
template <typename Dtype>
class BadAllocTestLayer final : public Layer<Dtype> {
 public:
  explicit BadAllocTestLayer(const LayerParameter& param)
      : Layer<Dtype>(param) {}
  const char* type() const override { return "BadAllocTest"; }
  void LayerSetUp(const vector<Blob<Dtype>*>&,
                  const vector<Blob<Dtype>*>&) override {
    throw std::bad_alloc();
  }
  void Reshape(const vector<Blob<Dtype>*>&,
               const vector<Blob<Dtype>*>&) override {}
};

const LayerRegisterer<float> g_bad_alloc_float(
    "BadAllocTest", [](const LayerParameter& param) {
      return std::make_shared<BadAllocTestLayer<float>>(param);
    });

class LayerAllocationFailureTest : public ::testing::Test {
 protected:
  ~LayerAllocationFailureTest() override { SetHostAllocationLimit(0); }
};

TEST_F(LayerAllocationFailureTest, BadAllocInSetUpNamesTheLayer) {
  const NetParameter param = ParseNet(R"(
    name: "greedy_net"
    layer { name: "data" type: "Input" top: "data"
      input_param { shape { dim: 2 dim: 3 } } }
    layer { name: "greedy" type: "BadAllocTest" bottom: "data" top: "out" }
  )");
  string message;
  try {
    Net<float> net(param);
  } catch (const OutOfMemoryError& e) {
    message = e.what();
  }
  EXPECT_TRUE(Contains(message,
                       "layer 'greedy' (BadAllocTest; bottoms "
                       "data: 2 3 (6)"));
  EXPECT_TRUE(Contains(message, "std::bad_alloc"));
}

// The guard refusing a parameter blob (filled in set-up) names the layer
// and the shape, and stays an OutOfMemoryError.
TEST_F(LayerAllocationFailureTest, GuardRefusingParametersNamesTheLayer) {
  SetHostAllocationLimit(1 << 20);
  const NetParameter param = ParseNet(R"(
    name: "wide"
    layer { name: "data" type: "Input" top: "data"
      input_param { shape { dim: 2 dim: 1000 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
      inner_product_param { num_output: 1000
        weight_filler { type: "gaussian" } } }
  )");
  string message;
  try {
    Net<float> net(param);
  } catch (const OutOfMemoryError& e) {
    message = e.what();
  }
  EXPECT_TRUE(Contains(message, "layer 'ip' (InnerProduct"));
  EXPECT_TRUE(Contains(message, "params 1000 1000 (1000000)"));
  EXPECT_TRUE(Contains(message, "4000000 bytes"));
}

// Tops are allocated when first written, in the first Forward: the guard
// refusing one there names the layer and the top's shape too.
TEST_F(LayerAllocationFailureTest, GuardRefusingATopInForwardNamesTheLayer) {
  Net<float> net(ParseNet(R"(
    name: "tall"
    layer { name: "data" type: "Input" top: "data"
      input_param { shape { dim: 512 dim: 512 } } }
    layer { name: "scale" type: "Power" bottom: "data" top: "scaled"
      power_param { scale: 2 } }
  )"));
  net.blob_by_name("data")->mutable_cpu_data();
  SetHostAllocationLimit(64 << 10);
  string message;
  try {
    net.Forward();
  } catch (const OutOfMemoryError& e) {
    message = e.what();
  }
  EXPECT_TRUE(Contains(message,
                       "layer 'scale' (Power; bottoms data: 512 512 "
                       "(262144); tops scaled: 512 512 (262144))"));
  EXPECT_TRUE(Contains(message, "1048576 bytes"));
}

// --- A solver's net file without layers ----------------------------------

TEST(DamagedFilesTest, SolverWithAnEmptyNetFileNamesTheFile) {
  const string dir = test::MakeTempDir();
  const string net_file = dir + "/empty_net.prototxt";
  WriteFile(net_file, "# nothing here\n");
  SolverParameter param;
  param.set_net(net_file);
  param.set_base_lr(0.01f);
  param.set_lr_policy("fixed");
  param.set_max_iter(1);
  param.set_snapshot_prefix(dir + "/snap");
  param.set_solver_mode(SolverParameter::CPU);
  const string message = ErrorOf([&] { CreateSolver<float>(param); });
  EXPECT_TRUE(Contains(message, net_file + ": the file defines no layers"));
}

}  // namespace
}  // namespace poseidon
