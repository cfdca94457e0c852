// CIFAR-10 binary batches to Datum databases.
#include "poseidon/util/cifar.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "poseidon/proto/caffe.pb.h"
#include "poseidon/util/db.hpp"
#include "poseidon/util/io.hpp"

namespace poseidon {
namespace {

constexpr int kSide = 32;
constexpr int kChannels = 3;
constexpr size_t kPixels = kChannels * kSide * kSide;
constexpr size_t kRecord = 1 + kPixels;
constexpr int kClasses = 10;

// Appends every record of one batch file to the writer.
void AddBatch(const string& file, db::Writer* writer) {
  const string bytes = ReadFileToString(file);
  POSEIDON_REQUIRE(!bytes.empty() && bytes.size() % kRecord == 0, IOError, "'",
                   file, "' is ", bytes.size(),
                   " bytes, not a whole number of ", kRecord,
                   "-byte CIFAR-10 records");
  Datum datum;
  datum.set_channels(kChannels);
  datum.set_height(kSide);
  datum.set_width(kSide);
  string value;
  const size_t records = bytes.size() / kRecord;
  for (size_t r = 0; r < records; ++r) {
    const char* record = bytes.data() + r * kRecord;
    const int label = static_cast<unsigned char>(record[0]);
    POSEIDON_REQUIRE(label < kClasses, IOError, "'", file, "' record ", r,
                     " has label ", label, "; CIFAR-10 labels are 0-9");
    datum.set_label(label);
    datum.set_data(record + 1, kPixels);
    CHECK(datum.SerializeToString(&value));
    writer->Put(db::IndexKey(writer->count()), value);
  }
  LOG(INFO) << "Read " << records << " records from " << file;
}

int Convert(const vector<string>& files, const string& db_path,
            const string& backend) {
  db::Writer writer(backend, db_path);
  for (const string& file : files) AddBatch(file, &writer);
  writer.Finish();
  return writer.count();
}

}  // namespace

CifarCounts ConvertCifar10ToDB(const string& input_folder,
                               const string& output_folder,
                               const string& backend) {
  // Rejects an unknown backend before any work; "LEVELDB" names the
  // databases as "leveldb" does.
  const string name = db::BackendName(db::ParseBackend(backend));
  if (::mkdir(output_folder.c_str(), 0755) != 0 && errno != EEXIST) {
    POSEIDON_THROW(IOError, "cannot create '", output_folder,
                   "': ", std::strerror(errno));
  }
  vector<string> train_files;
  for (int i = 1; i <= 5; ++i) {
    train_files.push_back(StrCat(input_folder, "/data_batch_", i, ".bin"));
  }
  const vector<string> test_files{input_folder + "/test_batch.bin"};
  // Check every input exists before writing anything.
  vector<string> all_files = train_files;
  all_files.insert(all_files.end(), test_files.begin(), test_files.end());
  for (const string& file : all_files) {
    POSEIDON_REQUIRE(FileExists(file), IOError, "CIFAR-10 batch '", file,
                     "' is missing");
  }
  CifarCounts counts;
  const string prefix = output_folder + "/cifar10_";
  counts.train = Convert(train_files, prefix + "train_" + name, name);
  counts.test = Convert(test_files, prefix + "test_" + name, name);
  return counts;
}

}  // namespace poseidon
