// MNIST idx and CIFAR-10 conversion to LMDB and LevelDB (util/mnist,
// util/cifar), on tiny files written here, gzipped with zlib or plain.
#include <gtest/gtest.h>
#include <zlib.h>

#include <functional>

#include "poseidon/util/alloc_guard.hpp"
#include "poseidon/util/cifar.hpp"
#include "poseidon/util/db.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/mnist.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

string BigEndian(uint32_t v) {
  string s(4, '\0');
  for (int i = 0; i < 4; ++i)
    s[i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  return s;
}

void WriteGzip(const string& path, const string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// Three 2x3 images, pixel j of image i = 10 * i + j, labels 7, 8, 9.
string ImageBytes(uint32_t magic = 2051, uint32_t count = 3) {
  string s = BigEndian(magic) + BigEndian(count) + BigEndian(2) + BigEndian(3);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 6; ++j) s.push_back(static_cast<char>(10 * i + j));
  return s;
}

string LabelBytes(uint32_t count = 3) {
  return BigEndian(2049) + BigEndian(count) + string("\x07\x08\x09", 3);
}

// The records of the database at `path`, which must be of `backend`.
vector<Datum> ReadAll(const string& path, const string& backend = "lmdb") {
  EXPECT_EQ(db::DetectBackend(path), db::ParseBackend(backend)) << path;
  std::unique_ptr<db::DB> in = db::GetDB(backend);
  in->Open(path, db::Mode::READ);
  vector<Datum> datums;
  for (auto cursor = in->NewCursor(); cursor->valid(); cursor->Next()) {
    datums.emplace_back();
    EXPECT_TRUE(datums.back().ParseFromString(cursor->value()));
    EXPECT_EQ(cursor->key(), db::IndexKey(static_cast<int>(datums.size()) - 1));
  }
  return datums;
}

using test::ErrorOf;

TEST(ConvertMnistTest, GzippedAndPlainFilesConvert) {
  const string dir = test::MakeTempDir();
  WriteGzip(dir + "/images.gz", ImageBytes());
  WriteGzip(dir + "/labels.gz", LabelBytes());
  EXPECT_EQ(ConvertMnistToDB(dir + "/images.gz", dir + "/labels.gz",
                             dir + "/gz_lmdb"),
            3);
  WriteFileAtomically(dir + "/images", ImageBytes());
  WriteFileAtomically(dir + "/labels", LabelBytes());
  EXPECT_EQ(
      ConvertMnistToDB(dir + "/images", dir + "/labels", dir + "/plain_lmdb"),
      3);
  EXPECT_EQ(ConvertMnistToDB(dir + "/images.gz", dir + "/labels.gz",
                             dir + "/gz_leveldb", "leveldb"),
            3);
  for (const char* db : {"/gz_lmdb", "/plain_lmdb", "/gz_leveldb"}) {
    const vector<Datum> datums =
        ReadAll(dir + db, string(db).find("leveldb") != string::npos ? "leveldb"
                                                                     : "lmdb");
    ASSERT_EQ(datums.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(datums[i].channels(), 1);
      EXPECT_EQ(datums[i].height(), 2);
      EXPECT_EQ(datums[i].width(), 3);
      EXPECT_EQ(datums[i].label(), 7 + i);
      ASSERT_EQ(datums[i].data().size(), 6u);
      for (int j = 0; j < 6; ++j)
        EXPECT_EQ(static_cast<int>(datums[i].data()[j]), 10 * i + j);
    }
  }
  // The database exists now: converting again must not overwrite it.
  EXPECT_THROW(
      ConvertMnistToDB(dir + "/images", dir + "/labels", dir + "/plain_lmdb"),
      IOError);
  EXPECT_THROW(ConvertMnistToDB(dir + "/images", dir + "/labels",
                                dir + "/gz_leveldb", "leveldb"),
               IOError);
  EXPECT_EQ(ReadAll(dir + "/gz_leveldb", "leveldb").size(), 3u);
}

TEST(ConvertMnistTest, BadInputsAreNamedAndLeaveNoDatabase) {
  const string dir = test::MakeTempDir();
  const string images = dir + "/images.gz", labels = dir + "/labels.gz";
  const string out = dir + "/out_lmdb";
  WriteGzip(labels, LabelBytes());

  WriteGzip(images, ImageBytes(2049));  // a label file's magic
  string error =
      ErrorOf<IOError>([&] { ConvertMnistToDB(images, labels, out); });
  EXPECT_NE(error.find("'" + images + "' is not an MNIST image file"),
            string::npos)
      << error;

  WriteGzip(images, ImageBytes(2051, 4));
  error = ErrorOf<IOError>([&] { ConvertMnistToDB(images, labels, out); });
  EXPECT_NE(error.find("holds 4 images"), string::npos) << error;

  // Declares 3 images but holds 2.5.
  WriteGzip(images, ImageBytes().substr(0, 16 + 15));
  error = ErrorOf<IOError>([&] { ConvertMnistToDB(images, labels, out); });
  EXPECT_NE(error.find("is truncated"), string::npos) << error;
  EXPECT_FALSE(FileExists(out));

  error = ErrorOf<IOError>(
      [&] { ConvertMnistToDB(dir + "/absent.gz", labels, out); });
  EXPECT_NE(error.find("absent.gz"), string::npos) << error;
  EXPECT_THROW(ConvertMnistToDB(images, labels, out, "rocksdb"), ConfigError);
  // A LevelDB whose conversion fails is removed too.
  error = ErrorOf<IOError>([&] {
    ConvertMnistToDB(images, labels, dir + "/out_leveldb", "leveldb");
  });
  EXPECT_NE(error.find("is truncated"), string::npos) << error;
  EXPECT_FALSE(FileExists(dir + "/out_leveldb"));
}

// The header's image size is a claim: 65536 x 65536 (4 GiB an image) or an
// image over what one allocation may take is refused before the buffer for
// one image is allocated (issue 35).
TEST(ConvertMnistTest, HugeDeclaredImagesAreRefusedBeforeAllocating) {
  const string dir = test::MakeTempDir();
  const string images = dir + "/images", labels = dir + "/labels";
  WriteFileAtomically(labels, LabelBytes(1));
  WriteFileAtomically(images, BigEndian(2051) + BigEndian(1) +
                                  BigEndian(65536) + BigEndian(65536) +
                                  string(4, '\0'));
  string error =
      ErrorOf<IOError>([&] { ConvertMnistToDB(images, labels, dir + "/a"); });
  EXPECT_NE(error.find("65536x65536 pixels (4294967296 bytes each)"),
            string::npos)
      << error;
  EXPECT_FALSE(FileExists(dir + "/a"));
  WriteFileAtomically(images, BigEndian(2051) + BigEndian(1) +
                                  BigEndian(20000) + BigEndian(20000) +
                                  string(4, '\0'));
  SetHostAllocationLimit(size_t{64} << 20);
  try {
    ConvertMnistToDB(images, labels, dir + "/b");
    ADD_FAILURE() << "a 400 MB image under a 64 MB limit was allocated";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(string(e.what()).find("20000x20000"), string::npos) << e.what();
  }
  SetHostAllocationLimit(0);
  EXPECT_FALSE(FileExists(dir + "/b"));
}

TEST(ConvertCifarTest, BatchesBecomeTrainAndTestDatabases) {
  const string in = test::MakeTempDir();
  auto record = [](int label, int seed) {
    string r(1, static_cast<char>(label));
    for (int i = 0; i < 3072; ++i) r.push_back(static_cast<char>(seed + i));
    return r;
  };
  for (int b = 1; b <= 5; ++b) {
    WriteFileAtomically(in + "/data_batch_" + std::to_string(b) + ".bin",
                        record(b, b) + record(0, 100));
  }
  WriteFileAtomically(in + "/test_batch.bin", record(9, 7));
  const string out = test::MakeTempDir() + "/cifar";
  const CifarCounts counts = ConvertCifar10ToDB(in, out);
  EXPECT_EQ(counts.train, 10);
  EXPECT_EQ(counts.test, 1);
  const vector<Datum> train = ReadAll(out + "/cifar10_train_lmdb");
  ASSERT_EQ(train.size(), 10u);
  EXPECT_EQ(train[2].label(), 2);  // first record of data_batch_2
  EXPECT_EQ(train[2].channels(), 3);
  EXPECT_EQ(train[2].height(), 32);
  EXPECT_EQ(train[2].width(), 32);
  EXPECT_EQ(static_cast<int>(train[2].data()[5]), 2 + 5);
  const vector<Datum> test = ReadAll(out + "/cifar10_test_lmdb");
  ASSERT_EQ(test.size(), 1u);
  EXPECT_EQ(test[0].label(), 9);
  // Caffe's db_type spelled either way; the same records in LevelDB.
  const string out_leveldb = test::MakeTempDir() + "/cifar";
  EXPECT_EQ(ConvertCifar10ToDB(in, out_leveldb, "LEVELDB").train, 10);
  const vector<Datum> train_leveldb =
      ReadAll(out_leveldb + "/cifar10_train_leveldb", "leveldb");
  ASSERT_EQ(train_leveldb.size(), train.size());
  for (size_t i = 0; i < train.size(); ++i) {
    EXPECT_EQ(train_leveldb[i].SerializeAsString(),
              train[i].SerializeAsString())
        << "record " << i;
  }
  EXPECT_EQ(ReadAll(out_leveldb + "/cifar10_test_leveldb", "leveldb").size(),
            1u);

  const string out2 = test::MakeTempDir() + "/cifar";
  WriteFileAtomically(in + "/test_batch.bin", record(10, 0));
  string error = ErrorOf<IOError>([&] { ConvertCifar10ToDB(in, out2); });
  EXPECT_NE(error.find("label 10"), string::npos) << error;
  WriteFileAtomically(in + "/test_batch.bin", "short");
  error =
      ErrorOf<IOError>([&] { ConvertCifar10ToDB(in, test::MakeTempDir()); });
  EXPECT_NE(error.find("test_batch.bin' is 5 bytes"), string::npos) << error;
  std::remove((in + "/data_batch_3.bin").c_str());
  error =
      ErrorOf<IOError>([&] { ConvertCifar10ToDB(in, test::MakeTempDir()); });
  EXPECT_NE(error.find("data_batch_3.bin' is missing"), string::npos) << error;
}

}  // namespace
}  // namespace poseidon
