// util/db: the same round trips over both backends (LMDB and LevelDB, real
// databases on disk), sharing between readers, snapshots, backend names and
// detection, and the errors of missing, corrupt and locked databases.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "captured_warnings.hpp"
#include "poseidon/util/db.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using db::Mode;

struct LMDBBackend {
  static constexpr const char* kName = "lmdb";
  static constexpr const char* kShown = "LMDB";
  static constexpr DataParameter::DB kEnum = DataParameter::LMDB;
};
struct LevelDBBackend {
  static constexpr const char* kName = "leveldb";
  static constexpr const char* kShown = "LevelDB";
  static constexpr DataParameter::DB kEnum = DataParameter::LEVELDB;
};

struct BackendNames {
  template <typename T>
  static std::string GetName(int) {
    return T::kShown;
  }
};

template <typename Backend>
class DBTest : public ::testing::Test {
 protected:
  std::unique_ptr<db::DB> NewDB() { return db::GetDB(Backend::kName); }

  // A new database at `path` holding `records` (key, value) pairs.
  void Fill(const string& path, const vector<std::pair<string, string>>& kv) {
    auto out = NewDB();
    out->Open(path, Mode::NEW);
    auto txn = out->NewTransaction();
    for (const auto& [key, value] : kv) txn->Put(key, value);
    txn->Commit();
  }

  static vector<string> Keys(db::Cursor* cursor) {
    vector<string> keys;
    for (cursor->SeekToFirst(); cursor->valid(); cursor->Next()) {
      keys.push_back(cursor->key());
    }
    return keys;
  }
};
using Backends = ::testing::Types<LMDBBackend, LevelDBBackend>;
TYPED_TEST_SUITE(DBTest, Backends, BackendNames);

TYPED_TEST(DBTest, WriteAndReadBackInKeyOrder) {
  const string path = test::MakeTempDir() + "/db";
  {
    auto out = this->NewDB();
    out->Open(path, Mode::NEW);
    EXPECT_STREQ(out->name(), TypeParam::kShown);
    EXPECT_EQ(out->source(), path);
    auto txn = out->NewTransaction();
    txn->Put("b", "two");
    txn->Put("c", "three");
    txn->Put("a", "one");
    txn->Commit();
    txn->Put("b", "TWO");  // overwrites
    txn->Commit();
  }
  EXPECT_EQ(db::DetectBackend(path), TypeParam::kEnum);
  auto in = this->NewDB();
  in->Open(path, Mode::READ);
  EXPECT_EQ(in->Size(), 3u);
  auto cursor = in->NewCursor();
  ASSERT_TRUE(cursor->valid());  // a new cursor is on the first record
  EXPECT_EQ(cursor->key(), "a");
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

TYPED_TEST(DBTest, KeysComeInByteOrderWhateverTheWriteOrder) {
  const string path = test::MakeTempDir() + "/db";
  vector<std::pair<string, string>> kv;
  for (int i = 0; i < 300; ++i) {
    const int k = (i * 37) % 300;  // a permutation of 0..299
    kv.emplace_back(db::IndexKey(k), string(1 + k % 7, 'a' + k % 26));
  }
  kv.emplace_back(string("\xff\x01", 2), "high byte");
  this->Fill(path, kv);
  auto in = this->NewDB();
  in->Open(path, Mode::READ);
  const vector<string> keys = this->Keys(in->NewCursor().get());
  ASSERT_EQ(keys.size(), 301u);
  for (int k = 0; k < 300; ++k) EXPECT_EQ(keys[k], db::IndexKey(k));
  EXPECT_EQ(keys[300], string("\xff\x01", 2));
}

TYPED_TEST(DBTest, WriteModeAddsToAnExistingDatabase) {
  const string path = test::MakeTempDir() + "/db";
  this->Fill(path, {{"1", "x"}});
  {
    auto out = this->NewDB();
    out->Open(path, Mode::WRITE);
    auto txn = out->NewTransaction();
    txn->Put("2", "y");
    txn->Commit();
  }
  auto in = this->NewDB();
  in->Open(path, Mode::READ);
  EXPECT_EQ(in->Size(), 2u);
  // WRITE does not create a database.
  auto out = this->NewDB();
  EXPECT_THROW(out->Open(path + "_absent", Mode::WRITE), IOError);
  EXPECT_FALSE(FileExists(path + "_absent"));
}

// Two readers of one database in one process, with a cursor used on another
// thread, and a third through another spelling of the path: LevelDB allows
// one opening per process, so this needs the shared handle.
TYPED_TEST(DBTest, SeveralReadersShareADatabase) {
  const string dir = test::MakeTempDir();
  const string path = dir + "/db";
  vector<std::pair<string, string>> kv;
  for (int i = 0; i < 10; ++i)
    kv.emplace_back(db::IndexKey(i), std::to_string(i));
  this->Fill(path, kv);
  auto a = this->NewDB();
  auto b = this->NewDB();
  a->Open(path, Mode::READ);
  b->Open(path, Mode::READ);
  auto ca = a->NewCursor();
  auto cb = b->NewCursor();
  int count = 0;
  std::thread reader([&] {
    for (; ca->valid(); ca->Next()) ++count;
  });
  reader.join();
  EXPECT_EQ(count, 10);
  ASSERT_TRUE(cb->valid());
  EXPECT_EQ(cb->value(), "0");
  // Closing one reader leaves the other working, and a third may join.
  ca.reset();
  a->Close();
  cb->Next();
  ASSERT_TRUE(cb->valid());
  EXPECT_EQ(cb->value(), "1");
  auto c = this->NewDB();
  c->Open(dir + "/./db/", Mode::READ);
  EXPECT_EQ(c->Size(), 10u);
  cb.reset();
  b->Close();
  c->Close();
  // With every reader gone the database can be written again.
  auto out = this->NewDB();
  out->Open(path, Mode::WRITE);
}

// A cursor reads the database as it was when the cursor was made.
TYPED_TEST(DBTest, CursorReadsASnapshot) {
  const string path = test::MakeTempDir() + "/db";
  auto db = this->NewDB();
  db->Open(path, Mode::NEW);
  auto txn = db->NewTransaction();
  txn->Put("a", "1");
  txn->Put("c", "3");
  txn->Commit();
  auto cursor = db->NewCursor();
  // LMDB lets a thread hold one transaction at a time: write on another.
  std::thread writer([&] {
    txn->Put("b", "2");
    txn->Put("a", "changed");
    txn->Commit();
  });
  writer.join();
  EXPECT_EQ(this->Keys(cursor.get()), (vector<string>{"a", "c"}));
  cursor->SeekToFirst();
  EXPECT_EQ(cursor->value(), "1");
  cursor.reset();
  auto fresh = db->NewCursor();
  EXPECT_EQ(this->Keys(fresh.get()), (vector<string>{"a", "b", "c"}));
  fresh->SeekToFirst();
  EXPECT_EQ(fresh->value(), "changed");
}

TYPED_TEST(DBTest, LargeCommitsFit) {
  // 16 MB in one commit: LMDB's default map is 10 MB and must grow.
  const string path = test::MakeTempDir() + "/db";
  const string value(1 << 20, 'x');
  vector<std::pair<string, string>> kv;
  for (int i = 0; i < 16; ++i) kv.emplace_back(db::IndexKey(i), value);
  this->Fill(path, kv);
  auto in = this->NewDB();
  in->Open(path, Mode::READ);
  EXPECT_EQ(in->Size(), 16u);
  auto cursor = in->NewCursor();
  EXPECT_EQ(cursor->value(), value);
}

TYPED_TEST(DBTest, EmptyDatabaseHasNoRecords) {
  const string path = test::MakeTempDir() + "/db";
  this->Fill(path, {});
  auto in = this->NewDB();
  in->Open(path, Mode::READ);
  EXPECT_EQ(in->Size(), 0u);
  EXPECT_FALSE(in->NewCursor()->valid());
}

TYPED_TEST(DBTest, MissingDatabaseIsAnIOError) {
  const string path = test::MakeTempDir() + "/absent";
  auto in = this->NewDB();
  try {
    in->Open(path, Mode::READ);
    FAIL() << "opening a missing database succeeded";
  } catch (const IOError& e) {
    const string what = e.what();
    EXPECT_NE(
        what.find(StrCat("cannot open ", TypeParam::kShown, " '", path, "'")),
        string::npos)
        << what;
    EXPECT_NE(what.find("No such file"), string::npos) << what;
  }
  // Nothing was created on the way.
  EXPECT_FALSE(FileExists(path));
}

TYPED_TEST(DBTest, NewRefusesAnExistingPath) {
  const string path = test::MakeTempDir();
  auto out = this->NewDB();
  try {
    out->Open(path, Mode::NEW);
    FAIL() << "NEW over an existing directory succeeded";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find("already exists"), string::npos)
        << e.what();
  }
}

TYPED_TEST(DBTest, WriterCommitsAndRemovesUnfinishedDatabases) {
  const string dir = test::MakeTempDir();
  {
    db::Writer writer(TypeParam::kName, dir + "/done", /*commit_every=*/2);
    for (int i = 0; i < 5; ++i) writer.Put(db::IndexKey(i), "v");
    writer.Finish();
    EXPECT_EQ(writer.count(), 5);
  }
  auto in = this->NewDB();
  in->Open(dir + "/done", Mode::READ);
  EXPECT_EQ(in->Size(), 5u);
  {
    db::Writer writer(TypeParam::kName, dir + "/abandoned", 2);
    for (int i = 0; i < 5; ++i) writer.Put(db::IndexKey(i), "v");
  }
  EXPECT_FALSE(FileExists(dir + "/abandoned"));
  // A file of the user's in the directory is never removed.
  {
    db::Writer writer(TypeParam::kName, dir + "/kept", 2);
    writer.Put("k", "v");
    std::ofstream(dir + "/kept/notes.txt") << "mine";
  }
  EXPECT_TRUE(FileExists(dir + "/kept/notes.txt"));
  EXPECT_EQ(db::DetectBackend(dir + "/kept"), std::nullopt);
  EXPECT_EQ(db::IndexKey(42), "00000042");
}

TEST(DBBackendTest, NamesAndEnums) {
  EXPECT_STREQ(db::GetDB(DataParameter::LMDB)->name(), "LMDB");
  EXPECT_STREQ(db::GetDB(DataParameter::LEVELDB)->name(), "LevelDB");
  EXPECT_STREQ(db::GetDB("lmdb")->name(), "LMDB");
  EXPECT_STREQ(db::GetDB("leveldb")->name(), "LevelDB");
  EXPECT_STREQ(db::GetDB("LEVELDB")->name(), "LevelDB");
  EXPECT_EQ(db::ParseBackend("LMDB"), DataParameter::LMDB);
  EXPECT_EQ(db::BackendName(DataParameter::LEVELDB), "leveldb");
  EXPECT_EQ(db::BackendName(DataParameter::LMDB), "lmdb");
  try {
    db::GetDB("rocksdb");
    FAIL() << "an unknown backend was accepted";
  } catch (const ConfigError& e) {
    const string what = e.what();
    EXPECT_NE(what.find("'rocksdb'"), string::npos) << what;
    EXPECT_NE(what.find("lmdb or leveldb"), string::npos) << what;
  }
}

// See Note [Choosing a backend].
TEST(DBBackendTest, DetectionAndChoice) {
  const string dir = test::MakeTempDir();
  db::Writer("lmdb", dir + "/an_lmdb").Finish();
  db::Writer("leveldb", dir + "/a_leveldb").Finish();
  std::filesystem::create_directory(dir + "/empty");
  EXPECT_EQ(db::DetectBackend(dir + "/an_lmdb"), DataParameter::LMDB);
  EXPECT_EQ(db::DetectBackend(dir + "/a_leveldb"), DataParameter::LEVELDB);
  EXPECT_EQ(db::DetectBackend(dir + "/empty"), std::nullopt);
  EXPECT_EQ(db::DetectBackend(dir + "/absent"), std::nullopt);

  using DP = DataParameter;
  test::CapturedWarnings log;
  // Unset: what the directory holds, silently; else the fallback.
  EXPECT_EQ(db::ChooseReadBackend(dir + "/an_lmdb", std::nullopt, DP::LEVELDB,
                                  "test"),
            DP::LMDB);
  EXPECT_EQ(
      db::ChooseReadBackend(dir + "/a_leveldb", std::nullopt, DP::LMDB, "test"),
      DP::LEVELDB);
  EXPECT_EQ(
      db::ChooseReadBackend(dir + "/absent", std::nullopt, DP::LEVELDB, "test"),
      DP::LEVELDB);
  EXPECT_EQ(log.text(), "");
  // Set and right; set but nothing to tell: as asked.
  EXPECT_EQ(
      db::ChooseReadBackend(dir + "/an_lmdb", DP::LMDB, DP::LEVELDB, "test"),
      DP::LMDB);
  EXPECT_EQ(
      db::ChooseReadBackend(dir + "/empty", DP::LMDB, DP::LEVELDB, "test"),
      DP::LMDB);
  EXPECT_EQ(log.text(), "");
  // Set but wrong: what is there, with a warning naming both.
  EXPECT_EQ(db::ChooseReadBackend(dir + "/a_leveldb", DP::LMDB, DP::LMDB,
                                  "Data layer 'mnist'"),
            DP::LEVELDB);
  const string warning = log.text();
  for (const string& part :
       {string("Data layer 'mnist'"), string("backend LMDB was asked for"),
        dir + "/a_leveldb", string("holds a LEVELDB database"),
        string("CURRENT")}) {
    EXPECT_NE(warning.find(part), string::npos) << part << " in " << warning;
  }
}

// Note [LevelDB locks]: a process that has a LevelDB open for writing
// cannot also read it, and the other way round; nothing is damaged.
TEST(LevelDBTest, OneProcessCannotReadAndWriteADatabaseAtOnce) {
  const string path = test::MakeTempDir() + "/db";
  auto out = db::GetDB("leveldb");
  out->Open(path, Mode::NEW);
  auto in = db::GetDB("leveldb");
  try {
    in->Open("./" + std::filesystem::relative(path).string(), Mode::READ);
    FAIL() << "a reader opened a database open for writing";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find("open for writing"), string::npos)
        << e.what();
  }
  out->Close();
  in->Open(path, Mode::READ);
  auto again = db::GetDB("leveldb");
  EXPECT_THROW(again->Open(path, Mode::WRITE), IOError);
  EXPECT_THROW(in->NewTransaction(), IOError);
}

// Another process cannot open a LevelDB this one has open: a tool run on it
// fails with LevelDB's lock error and the hint, exit status 1.
TEST(LevelDBTest, AnotherProcessGetsTheLockErrorWithAHint) {
  const string tool = test::BinaryDir() + "/tools/compute_image_mean";
  if (!std::ifstream(tool).good()) GTEST_SKIP() << tool << " not built";
  const string dir = test::MakeTempDir();
  const string path = dir + "/db";
  Datum datum;
  datum.set_channels(1);
  datum.set_height(1);
  datum.set_width(2);
  datum.set_data("\x01\x03", 2);
  {
    db::Writer writer("leveldb", path);
    writer.Put(db::IndexKey(0), datum.SerializeAsString());
    writer.Finish();
  }
  const string command =
      tool + " " + path + " > " + dir + "/out.txt 2> " + dir + "/err.txt";
  {
    auto held = db::GetDB("leveldb");
    held->Open(path, Mode::READ);
    const int status = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 1);
    const string err = ReadFileToString(dir + "/err.txt");
    EXPECT_NE(err.find("Error: cannot open LevelDB '" + path + "'"),
              string::npos)
        << err;
    EXPECT_NE(err.find("one process at a time"), string::npos) << err;
  }
  // Closed here, the tool reads it.
  ASSERT_EQ(std::system(command.c_str()), 0);
  EXPECT_NE(
      ReadFileToString(dir + "/out.txt").find("mean_value channel [0]: 2"),
      string::npos);
}

// Damage gives an IOError naming the database, never a crash or a silent
// end: a CURRENT file that names no manifest, and a damaged table.
TEST(LevelDBTest, CorruptDatabaseIsAnIOError) {
  const string dir = test::MakeTempDir();
  const string path = dir + "/db";
  {
    db::Writer writer("leveldb", path);
    for (int i = 0; i < 2000; ++i) {
      writer.Put(db::IndexKey(i), string(500, static_cast<char>('a' + i % 26)));
    }
    writer.Finish();
  }
  {
    // A first reader turns the write-ahead log into a table.
    auto in = db::GetDB("leveldb");
    in->Open(path, Mode::READ);
    EXPECT_EQ(in->Size(), 2000u);
  }
  string table;
  for (const auto& entry : std::filesystem::directory_iterator(path)) {
    if (entry.path().extension() == ".ldb") table = entry.path().string();
  }
  ASSERT_FALSE(table.empty()) << "no table file in " << path;
  // Overwrite bytes in the middle of the table's data blocks.
  {
    std::fstream f(table, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(table) / 3));
    f.write(string(64, '\x5a').data(), 64);
  }
  {
    auto in = db::GetDB("leveldb");
    in->Open(path, Mode::READ);
    try {
      auto cursor = in->NewCursor();
      while (cursor->valid()) cursor->Next();
      FAIL() << "a damaged table was read to the end";
    } catch (const IOError& e) {
      const string what = e.what();
      EXPECT_NE(what.find("cannot read from LevelDB '" + path + "'"),
                string::npos)
          << what;
      EXPECT_NE(what.find("Corruption"), string::npos) << what;
    }
  }

  const string other = dir + "/other";
  db::Writer("leveldb", other).Finish();
  WriteFileAtomically(other + "/CURRENT", "MANIFEST-999999\n");
  auto in = db::GetDB("leveldb");
  try {
    in->Open(other, Mode::READ);
    FAIL() << "a database without its manifest opened";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find("cannot open LevelDB '" + other + "'"),
              string::npos)
        << e.what();
  }
  // A directory of something else: LevelDB's files are not created in it.
  const string lmdb = dir + "/an_lmdb";
  db::Writer("lmdb", lmdb).Finish();
  try {
    in->Open(lmdb, Mode::READ);
    FAIL() << "an LMDB opened as LevelDB";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find("no CURRENT file"), string::npos)
        << e.what();
    EXPECT_NE(string(e.what()).find("read it with backend LMDB"), string::npos)
        << e.what();
  }
  EXPECT_FALSE(FileExists(lmdb + "/LOCK"));
}

}  // namespace
}  // namespace poseidon
