// MNIST idx files (plain or gzipped, read through zlib) to a Datum database.
#include "poseidon/util/mnist.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "poseidon/proto/caffe.pb.h"
#include "poseidon/util/alloc_guard.hpp"
#include "poseidon/util/db.hpp"

namespace poseidon {
namespace {

constexpr uint32_t kImageMagic = 2051;
constexpr uint32_t kLabelMagic = 2049;

// A file read through zlib, which passes uncompressed files through as is.
class IdxFile {
 public:
  explicit IdxFile(const string& path) : path_(path) {
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      POSEIDON_THROW(IOError, "cannot open '", path, "': ",
                     errno != 0 ? std::strerror(errno) : "out of memory");
    }
  }
  ~IdxFile() { gzclose(file_); }
  POSEIDON_DISABLE_COPY_AND_ASSIGN(IdxFile);

  // Reads exactly `size` bytes; `what` names them in the truncation error.
  void Read(void* buffer, size_t size, const string& what) {
    size_t done = 0;
    while (done < size) {
      const int n = gzread(file_, static_cast<char*>(buffer) + done,
                           static_cast<unsigned>(size - done));
      if (n < 0) {
        int code = 0;
        const char* message = gzerror(file_, &code);
        POSEIDON_THROW(IOError, "cannot read '", path_,
                       "': ", code == Z_ERRNO ? std::strerror(errno) : message);
      }
      if (n == 0) {
        POSEIDON_THROW(IOError, "'", path_, "' is truncated: it ends in ",
                       what);
      }
      done += static_cast<size_t>(n);
    }
  }

  uint32_t ReadBigEndian(const string& what) {
    unsigned char b[4];
    Read(b, sizeof(b), what);
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) |
           (uint32_t{b[2]} << 8) | uint32_t{b[3]};
  }

  // Reads the magic number and checks it.
  void ExpectMagic(uint32_t magic, const char* kind) {
    const uint32_t got = ReadBigEndian("the header");
    POSEIDON_REQUIRE(got == magic, IOError, "'", path_, "' is not an MNIST ",
                     kind, " file (magic number ", got, ", expected ", magic,
                     ")");
  }

  const string& path() const { return path_; }

 private:
  string path_;
  gzFile file_ = nullptr;
};

}  // namespace

int ConvertMnistToDB(const string& image_file, const string& label_file,
                     const string& db_path, const string& backend) {
  db::ParseBackend(backend);  // rejects an unknown backend before any work
  IdxFile images(image_file);
  IdxFile labels(label_file);
  images.ExpectMagic(kImageMagic, "image");
  labels.ExpectMagic(kLabelMagic, "label");
  const uint32_t num_images = images.ReadBigEndian("the header");
  const uint32_t num_labels = labels.ReadBigEndian("the header");
  const uint32_t rows = images.ReadBigEndian("the header");
  const uint32_t cols = images.ReadBigEndian("the header");
  POSEIDON_REQUIRE(num_images == num_labels, IOError, "'", image_file,
                   "' holds ", num_images, " images but '", label_file,
                   "' holds ", num_labels, " labels");
  POSEIDON_REQUIRE(rows > 0 && cols > 0 && rows <= 65536 && cols <= 65536,
                   IOError, "'", image_file, "' declares images of ", rows, "x",
                   cols, " pixels");
  POSEIDON_REQUIRE(num_images <= INT32_MAX, IOError, "'", image_file,
                   "' declares ", num_images, " images");
  // A Datum holds at most 2 GB (a protobuf message), and the header's sizes
  // are only a claim until the pixels are read: checked before the image
  // buffer is allocated.
  const uint64_t image_bytes = uint64_t{rows} * cols;
  POSEIDON_REQUIRE(image_bytes <= (uint64_t{1} << 30), IOError, "'",
                   image_file, "' declares images of ", rows, "x", cols,
                   " pixels (", image_bytes,
                   " bytes each); a record may hold at most 1 GiB");
  RequireAllocatable(static_cast<size_t>(image_bytes),
                     StrCat("an image of '", image_file, "' (", rows, "x",
                            cols, " pixels)"));
  LOG(INFO) << "Converting " << num_images << " images of " << rows << "x"
            << cols << " from " << image_file << " to " << db_path;

  db::Writer writer(backend, db_path);
  Datum datum;
  datum.set_channels(1);
  datum.set_height(static_cast<int>(rows));
  datum.set_width(static_cast<int>(cols));
  string pixels(static_cast<size_t>(rows) * cols, '\0');
  string value;
  for (uint32_t i = 0; i < num_images; ++i) {
    const string what = StrCat("image ", i, " of ", num_images);
    images.Read(pixels.data(), pixels.size(), what);
    unsigned char label = 0;
    labels.Read(&label, 1, StrCat("label ", i, " of ", num_labels));
    datum.set_data(pixels);
    datum.set_label(label);
    CHECK(datum.SerializeToString(&value));
    writer.Put(db::IndexKey(static_cast<int>(i)), value);
  }
  writer.Finish();
  return writer.count();
}

}  // namespace poseidon
