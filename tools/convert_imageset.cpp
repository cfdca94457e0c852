// Converts a set of images listed in a file ("<path> <label>" per line,
// paths relative to ROOTFOLDER) into a database of Datums, raw or encoded.
#include <gflags/gflags.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <iostream>
#include <utility>

#include "poseidon/common.hpp"
#include "poseidon/proto/caffe.pb.h"
#include "poseidon/util/db.hpp"
#include "poseidon/util/image_io.hpp"

DEFINE_bool(gray, false, "Read the images as grayscale.");
DEFINE_bool(shuffle, false, "Shuffle the order of the images.");
DEFINE_string(backend, "lmdb",
              "The backend {lmdb, leveldb} for storing the result.");
DEFINE_int32(resize_width, 0, "Resize images to this width (with height).");
DEFINE_int32(resize_height, 0, "Resize images to this height (with width).");
DEFINE_bool(check_size, false, "Check that all datums have the same size.");
DEFINE_bool(encoded, false,
            "Store the images encoded (as in their files, or encode_type).");
DEFINE_string(encode_type, "",
              "Encode the images in this format ('png', 'jpg', ...); implies "
              "--encoded.");

namespace poseidon {
namespace {

// The lower-case extension of a path ("" if none).
string Extension(const string& path) {
  const size_t dot = path.rfind('.');
  if (dot == string::npos || path.find('/', dot) != string::npos) return "";
  string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext;
}

// The channels x height x width of a datum, decoding it if encoded.
string DatumSize(const Datum& datum) {
  if (!datum.encoded()) {
    return StrCat(datum.channels(), "x", datum.height(), "x", datum.width());
  }
  const cv::Mat image = DecodeDatumToCVMatNative(datum);
  return StrCat(image.channels(), "x", image.rows, "x", image.cols);
}

int Run(const string& root, const string& list_file, const string& db_path) {
  POSEIDON_REQUIRE(FLAGS_resize_height >= 0 && FLAGS_resize_width >= 0 &&
                       (FLAGS_resize_height > 0) == (FLAGS_resize_width > 0),
                   ConfigError,
                   "--resize_height and --resize_width must both be positive "
                   "or both 0");
  const bool encoded = FLAGS_encoded || !FLAGS_encode_type.empty();
  auto lines = ReadImageList(list_file);
  if (FLAGS_shuffle) {
    for (size_t i = lines.size(); i > 1; --i) {
      std::swap(lines[i - 1], lines[Poseidon::rng()() % i]);
    }
  }
  LOG(INFO) << "Converting " << lines.size() << " images listed in "
            << list_file;

  db::Writer writer(FLAGS_backend, db_path);
  Datum datum;
  string value;
  string first_size;
  int skipped = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const string& path = lines[i].first;
    // Without --encode_type, each image keeps its own file format.
    const string encoding = !encoded                     ? ""
                            : !FLAGS_encode_type.empty() ? FLAGS_encode_type
                                                         : Extension(path);
    POSEIDON_REQUIRE(!encoded || !encoding.empty(), ConfigError,
                     "cannot tell the format of '", path,
                     "' from its name; give --encode_type");
    try {
      ReadImageToDatum(root + path, lines[i].second, FLAGS_resize_height,
                       FLAGS_resize_width, !FLAGS_gray, encoding, &datum);
    } catch (const IOError& e) {
      LOG(WARNING) << "Skipping an unreadable image: " << e.what();
      ++skipped;
      continue;
    }
    if (FLAGS_check_size) {
      const string size = DatumSize(datum);
      if (first_size.empty()) first_size = size;
      POSEIDON_REQUIRE(size == first_size, ShapeError, "image '", root + path,
                       "' is ", size, " but the first image is ", first_size,
                       " (--check_size)");
    }
    CHECK(datum.SerializeToString(&value));
    writer.Put(db::IndexKey(static_cast<int>(i)) + "_" + path, value);
  }
  POSEIDON_REQUIRE(writer.count() > 0, IOError, "none of the ", lines.size(),
                   " images listed in '", list_file, "' could be read");
  writer.Finish();
  if (skipped > 0) {
    LOG(WARNING) << "Skipped " << skipped << " unreadable images";
  }
  return writer.count();
}

}  // namespace
}  // namespace poseidon

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Converts a set of images to a database of Datums.\n"
      "Usage:\n"
      "    convert_imageset [FLAGS] ROOTFOLDER/ LISTFILE DB_NAME\n"
      "LISTFILE holds one '<path> <label>' per line; paths are appended to "
      "ROOTFOLDER/ as written.\n");
  try {
    poseidon::GlobalInit(&argc, &argv);
    if (argc != 4) {
      gflags::ShowUsageWithFlagsRestrict(argv[0], "tools/convert_imageset");
      return 1;
    }
    const int count = poseidon::Run(argv[1], argv[2], argv[3]);
    LOG(INFO) << "Wrote " << count << " images to " << argv[3];
    return 0;
  } catch (const std::exception& e) {  // poseidon::Error and any other
    std::cerr << "Error: " << e.what() << std::endl;
    return 1;
  }
}
