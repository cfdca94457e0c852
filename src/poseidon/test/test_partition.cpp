// PartitionDB: a database split into K parts, record i in part i % K, keys
// kept, and each part equal to what the Data layer's shard reads.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <memory>
#include <set>
#include <utility>

#include "poseidon/layers/data_layer.hpp"
#include "poseidon/util/db.hpp"
#include "poseidon/util/partition.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using Records = vector<std::pair<string, string>>;

// A 1 x 2 x 2 Datum with pixels value, value+1, ... labelled `value`.
Datum SmallDatum(int value) {
  Datum d;
  d.set_channels(1);
  d.set_height(2);
  d.set_width(2);
  d.set_label(value);
  string pixels;
  for (int i = 0; i < 4; ++i) pixels.push_back(static_cast<char>(value + i));
  d.set_data(pixels);
  return d;
}

// Record i has key IndexKey(3 * i) (keys that are not just positions) and
// the Datum SmallDatum(i).
string WriteSource(const string& dir, int n) {
  const string path = dir + "/train_lmdb";
  db::Writer writer("lmdb", path);
  for (int i = 0; i < n; ++i) {
    writer.Put(db::IndexKey(3 * i), SmallDatum(i).SerializeAsString());
  }
  writer.Finish();
  return path;
}

Records ReadAll(const string& path) {
  std::unique_ptr<db::DB> db = db::GetDB("lmdb");
  db->Open(path, db::Mode::READ);
  Records records;
  std::unique_ptr<db::Cursor> cursor = db->NewCursor();
  for (cursor->SeekToFirst(); cursor->valid(); cursor->Next()) {
    records.emplace_back(cursor->key(), cursor->value());
  }
  return records;
}

bool Exists(const string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

TEST(PartitionTest, NamesFollowSourceUnderscoreK) {
  EXPECT_EQ(PartitionName("data/train_lmdb", 0), "data/train_lmdb_0");
  EXPECT_EQ(PartitionName("data/train_lmdb/", 2), "data/train_lmdb_2");
}

TEST(PartitionTest, PartsAreDisjointCoverAllAndFollowModulo) {
  const int n = 10, parts = 3;
  const string source = WriteSource(test::MakeTempDir(), n);
  const vector<size_t> counts = PartitionDB(source, parts);
  EXPECT_EQ(counts, (vector<size_t>{4, 3, 3}));

  const Records all = ReadAll(source);
  ASSERT_EQ(all.size(), static_cast<size_t>(n));
  std::set<string> seen;
  for (int k = 0; k < parts; ++k) {
    const Records part = ReadAll(PartitionName(source, k));
    ASSERT_EQ(part.size(), counts[k]) << "part " << k;
    for (size_t j = 0; j < part.size(); ++j) {
      // The j-th record of part k is record k + j * parts of the source.
      const size_t i = k + j * parts;
      EXPECT_EQ(part[j], all[i]) << "part " << k << " record " << j;
      EXPECT_TRUE(seen.insert(part[j].first).second) << part[j].first;
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
}

TEST(PartitionTest, PartsEqualWhatEachDataLayerShardReads) {
  const int n = 11, parts = 3;
  const string source = WriteSource(test::MakeTempDir(), n);
  PartitionDB(source, parts);
  for (int k = 0; k < parts; ++k) {
    LayerParameter p;
    p.set_name("data");
    p.set_type("Data");
    p.mutable_data_param()->set_source(source);
    p.mutable_data_param()->set_batch_size(1);
    DataLayer<float> layer(p);
    layer.SetShard(k, parts);
    Blob<float> data, label;
    const vector<Blob<float>*> top{&data, &label};
    layer.SetUp({}, top);
    const Records part = ReadAll(PartitionName(source, k));
    for (const auto& record : part) {
      layer.Forward({}, top);
      Datum want;
      ASSERT_TRUE(want.ParseFromString(record.second));
      EXPECT_EQ(label.cpu_data()[0], static_cast<float>(want.label()))
          << "part " << k << " key " << record.first;
      for (int c = 0; c < data.count(); ++c) {
        EXPECT_EQ(data.cpu_data()[c],
                  static_cast<float>(static_cast<uint8_t>(want.data()[c])));
      }
    }
  }
}

TEST(PartitionTest, OnePartCopiesEverything) {
  const string source = WriteSource(test::MakeTempDir(), 5);
  EXPECT_EQ(PartitionDB(source, 1), (vector<size_t>{5}));
  EXPECT_EQ(ReadAll(PartitionName(source, 0)), ReadAll(source));
}

TEST(PartitionTest, ErrorsForBadCountMissingSourceAndExistingPart) {
  const string dir = test::MakeTempDir();
  const string source = WriteSource(dir, 4);
  EXPECT_THROW(PartitionDB(source, 0), ConfigError);
  EXPECT_THROW(PartitionDB(source, -2), ConfigError);
  EXPECT_FALSE(Exists(PartitionName(source, 0)));
  EXPECT_THROW(PartitionDB(dir + "/no_such_lmdb", 2), IOError);
  EXPECT_FALSE(Exists(dir + "/no_such_lmdb_0"));

  // Part 1 exists: nothing is written, and the message names it.
  ASSERT_EQ(::mkdir(PartitionName(source, 1).c_str(), 0755), 0);
  try {
    PartitionDB(source, 2);
    FAIL() << "an existing part was overwritten";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find(PartitionName(source, 1)), string::npos)
        << e.what();
  }
  EXPECT_FALSE(Exists(PartitionName(source, 0)));
}

}  // namespace
}  // namespace poseidon
