// util/db: LMDB round trips, key order, map growth, errors, the Writer.
#include <gtest/gtest.h>

#include <thread>

#include "poseidon/util/db.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using db::DB;
using db::Mode;

TEST(DBTest, WriteAndReadBackInKeyOrder) {
  const string path = test::MakeTempDir() + "/db";
  {
    DB out;
    out.Open(path, Mode::NEW);
    auto txn = out.NewTransaction();
    txn->Put("b", "two");
    txn->Put("c", "three");
    txn->Put("a", "one");
    txn->Commit();
    txn->Put("b", "TWO");  // overwrites
    txn->Commit();
  }
  DB in;
  in.Open(path, Mode::READ);
  EXPECT_EQ(in.Size(), 3u);
  auto cursor = in.NewCursor();
  vector<string> keys, values;
  for (cursor->SeekToFirst(); cursor->valid(); cursor->Next()) {
    keys.push_back(cursor->key());
    values.push_back(cursor->value());
  }
  EXPECT_EQ(keys, (vector<string>{"a", "b", "c"}));
  EXPECT_EQ(values, (vector<string>{"one", "TWO", "three"}));
  cursor->SeekToFirst();
  ASSERT_TRUE(cursor->valid());
  EXPECT_EQ(cursor->key(), "a");
}

TEST(DBTest, WriteModeAddsToAnExistingDatabase) {
  const string path = test::MakeTempDir() + "/db";
  {
    DB out;
    out.Open(path, Mode::NEW);
    auto txn = out.NewTransaction();
    txn->Put("1", "x");
    txn->Commit();
  }
  {
    DB out;
    out.Open(path, Mode::WRITE);
    auto txn = out.NewTransaction();
    txn->Put("2", "y");
    txn->Commit();
  }
  DB in;
  in.Open(path, Mode::READ);
  EXPECT_EQ(in.Size(), 2u);
}

TEST(DBTest, SeveralReadersShareADatabase) {
  const string path = test::MakeTempDir() + "/db";
  {
    DB out;
    out.Open(path, Mode::NEW);
    auto txn = out.NewTransaction();
    for (int i = 0; i < 10; ++i) txn->Put(db::IndexKey(i), std::to_string(i));
    txn->Commit();
  }
  DB a, b;
  a.Open(path, Mode::READ);
  b.Open(path, Mode::READ);
  auto ca = a.NewCursor();
  auto cb = b.NewCursor();
  // A cursor made on this thread is used on another (MDB_NOTLS).
  int count = 0;
  std::thread reader([&] {
    for (; ca->valid(); ca->Next()) ++count;
  });
  reader.join();
  EXPECT_EQ(count, 10);
  ASSERT_TRUE(cb->valid());
  EXPECT_EQ(cb->value(), "0");
}

TEST(DBTest, MapGrowsWhenFull) {
  // LMDB's default map is 10 MB; one commit of 16 MB must grow it.
  const string path = test::MakeTempDir() + "/db";
  const string value(1 << 20, 'x');
  {
    DB out;
    out.Open(path, Mode::NEW);
    auto txn = out.NewTransaction();
    for (int i = 0; i < 16; ++i) txn->Put(db::IndexKey(i), value);
    txn->Commit();
  }
  DB in;
  in.Open(path, Mode::READ);
  EXPECT_EQ(in.Size(), 16u);
  auto cursor = in.NewCursor();
  EXPECT_EQ(cursor->value().size(), value.size());
}

TEST(DBTest, MissingDatabaseIsAnIOError) {
  const string path = test::MakeTempDir() + "/absent";
  DB in;
  try {
    in.Open(path, Mode::READ);
    FAIL() << "opening a missing database succeeded";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find("cannot open LMDB '" + path + "'"),
              string::npos)
        << e.what();
    EXPECT_NE(string(e.what()).find("No such file"), string::npos) << e.what();
  }
}

TEST(DBTest, NewRefusesAnExistingPath) {
  const string path = test::MakeTempDir();
  DB out;
  EXPECT_THROW(out.Open(path, Mode::NEW), IOError);
}

TEST(DBTest, OnlyLMDBIsSupported) {
  EXPECT_NE(db::GetDB(DataParameter::LMDB), nullptr);
  EXPECT_NE(db::GetDB("lmdb"), nullptr);
  try {
    db::GetDB(DataParameter::LEVELDB);
    FAIL() << "LEVELDB accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(string(e.what()).find("LMDB"), string::npos) << e.what();
  }
  EXPECT_THROW(db::GetDB("leveldb"), ConfigError);
}

TEST(DBTest, WriterCommitsAndRemovesUnfinishedDatabases) {
  const string dir = test::MakeTempDir();
  {
    db::Writer writer("lmdb", dir + "/done", /*commit_every=*/2);
    for (int i = 0; i < 5; ++i) writer.Put(db::IndexKey(i), "v");
    writer.Finish();
    EXPECT_EQ(writer.count(), 5);
  }
  DB in;
  in.Open(dir + "/done", Mode::READ);
  EXPECT_EQ(in.Size(), 5u);
  {
    db::Writer writer("lmdb", dir + "/abandoned", 2);
    writer.Put("k", "v");
  }
  EXPECT_FALSE(FileExists(dir + "/abandoned"));
  EXPECT_EQ(db::IndexKey(42), "00000042");
}

}  // namespace
}  // namespace poseidon
