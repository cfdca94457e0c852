// Computes the mean image of a database of Datums (as a BlobProto
// .binaryproto for transform_param.mean_file) and prints the per-channel
// means (for transform_param.mean_value).
#include <gflags/gflags.h>

#include <exception>
#include <iostream>
#include <optional>

#include "poseidon/common.hpp"
#include "poseidon/data_transformer.hpp"
#include "poseidon/proto/caffe.pb.h"
#include "poseidon/util/alloc_guard.hpp"
#include "poseidon/util/db.hpp"
#include "poseidon/util/io.hpp"

#ifdef USE_OPENCV
#include "poseidon/util/image_io.hpp"
#endif

DEFINE_string(backend, "lmdb",
              "The backend {lmdb, leveldb} containing the images; a "
              "database that shows its backend is read as what it is.");

namespace poseidon {
namespace {

// Raw pixels of a datum as C x H x W (decoding an encoded one).
Datum Raw(const Datum& datum) {
  if (!datum.encoded()) return datum;
#ifdef USE_OPENCV
  Datum raw;
  CVMatToDatum(DecodeDatumToCVMatNative(datum), &raw);
  raw.set_label(datum.label());
  return raw;
#else
  POSEIDON_THROW(Error, "encoded datums need OpenCV (USE_OPENCV=ON)");
#endif
}

void Run(const string& db_path, const string& output) {
  // See Note [Choosing a backend] in util/db.cpp.
  std::optional<DataParameter::DB> requested;
  const DataParameter::DB flag = db::ParseBackend(FLAGS_backend);
  if (!gflags::GetCommandLineFlagInfoOrDie("backend").is_default) {
    requested = flag;
  }
  std::unique_ptr<db::DB> db = db::GetDB(
      db::ChooseReadBackend(db_path, requested, flag, "compute_image_mean"));
  db->Open(db_path, db::Mode::READ);
  std::unique_ptr<db::Cursor> cursor = db->NewCursor();
  const string where = StrCat(db->name(), " '", db_path, "'");
  POSEIDON_REQUIRE(cursor->valid(), IOError, where, " holds no records");

  // Only for its check of a record's shape against the bytes it holds, made
  // before the sum is sized from the first record's shape.
  const DataTransformer<float> checker(TransformationParameter(), TEST);
  int channels = 0, height = 0, width = 0;
  vector<double> sum;
  int count = 0;
  for (; cursor->valid(); cursor->Next()) {
    Datum encoded;
    POSEIDON_REQUIRE(encoded.ParseFromString(cursor->value()), IOError, where,
                     " record '", cursor->key(), "' is not a valid Datum");
    Datum datum;
    try {
      datum = Raw(encoded);
      checker.InferBlobShape(datum);
    } catch (const Error&) {
      RethrowWithContext(StrCat(where, " record '", cursor->key(), "'"));
    }
    if (count == 0) {
      channels = datum.channels();
      height = datum.height();
      width = datum.width();
      const size_t size = static_cast<size_t>(channels) * height * width;
      RequireAllocatable(size * sizeof(double),
                         StrCat("the sum of ", where, "'s records"));
      sum.assign(size, 0.0);
    }
    POSEIDON_REQUIRE(datum.channels() == channels && datum.height() == height &&
                         datum.width() == width,
                     ShapeError, where, " record '", cursor->key(), "' is ",
                     datum.channels(), "x", datum.height(), "x", datum.width(),
                     " but the first record is ", channels, "x", height, "x",
                     width);
    // InferBlobShape checked that the pixels or floats fill the shape.
    const string& pixels = datum.data();
    if (!pixels.empty()) {
      for (size_t i = 0; i < sum.size(); ++i) {
        sum[i] += static_cast<unsigned char>(pixels[i]);
      }
    } else {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += datum.float_data(i);
    }
    if (++count % 10000 == 0) LOG(INFO) << "Processed " << count << " records";
  }

  BlobProto mean;
  mean.set_num(1);
  mean.set_channels(channels);
  mean.set_height(height);
  mean.set_width(width);
  for (double s : sum) mean.add_data(static_cast<float>(s / count));
  if (!output.empty()) {
    WriteProtoToBinaryFile(mean, output);
    LOG(INFO) << "Wrote the mean of " << count << " records to " << output;
  }
  const int plane = height * width;
  for (int c = 0; c < channels; ++c) {
    double channel_sum = 0;
    for (int i = 0; i < plane; ++i) channel_sum += mean.data(c * plane + i);
    std::cout << "mean_value channel [" << c << "]: " << channel_sum / plane
              << std::endl;
  }
}

}  // namespace
}  // namespace poseidon

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Computes the mean image of a database of Datums.\n"
      "Usage:\n"
      "    compute_image_mean [FLAGS] INPUT_DB [OUTPUT_FILE]\n");
  try {
    poseidon::GlobalInit(&argc, &argv);
    if (argc < 2 || argc > 3) {
      gflags::ShowUsageWithFlagsRestrict(argv[0], "tools/compute_image_mean");
      return 1;
    }
    poseidon::Run(argv[1], argc == 3 ? argv[2] : "");
    return 0;
  } catch (const std::exception& e) {  // poseidon::Error and any other
    std::cerr << "Error: " << e.what() << std::endl;
    return 1;
  }
}
