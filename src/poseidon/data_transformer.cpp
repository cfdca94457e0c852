// DataTransformer for Datums; the cv::Mat entry points live in
// data_transformer_opencv.cpp.
#include "poseidon/data_transformer.hpp"

#include <climits>
#include <cstdint>

#include "poseidon/util/alloc_guard.hpp"
#include "poseidon/util/io.hpp"

#ifdef USE_OPENCV
#include <opencv2/core.hpp>

#include "poseidon/util/image_io.hpp"
#endif

namespace poseidon {
namespace {

string DatumShape(const Datum& d) {
  return StrCat(d.channels(), "x", d.height(), "x", d.width());
}

// The number of values of a raw (not encoded) datum, after checking that
// its shape is positive, agrees with the bytes or floats it holds, and fits
// a blob; throws IOError otherwise. Everything that sizes memory from a
// datum's shape comes after this check.
size_t CheckedRawCount(const Datum& datum) {
  POSEIDON_REQUIRE(datum.channels() > 0 && datum.height() > 0 &&
                       datum.width() > 0,
                   IOError, "datum has no valid shape (", DatumShape(datum),
                   ")");
  // Three positive ints: the product fits an int64.
  const int64_t count = CheckedProduct(
      {datum.channels(), datum.height(), datum.width()}, INT64_MAX);
  if (!datum.data().empty()) {
    POSEIDON_REQUIRE(static_cast<int64_t>(datum.data().size()) == count,
                     IOError, "datum of shape ", DatumShape(datum), " holds ",
                     datum.data().size(), " bytes of pixels instead of ",
                     count);
  } else {
    POSEIDON_REQUIRE(datum.float_data_size() == count, IOError,
                     "datum of shape ", DatumShape(datum), " holds ",
                     datum.float_data_size(), " float_data values instead of ",
                     count);
  }
  // Only reachable with a float_data or data field of over 2 G entries.
  POSEIDON_REQUIRE(count <= INT_MAX, IOError, "datum of shape ",
                   DatumShape(datum), " has ", count,
                   " values, more than a blob holds (INT_MAX)");
  return static_cast<size_t>(count);
}

#ifdef USE_OPENCV
// Decodes as force_color / force_gray ask, else with the stored channels.
cv::Mat Decode(const Datum& datum, const TransformationParameter& param) {
  if (param.force_color() || param.force_gray()) {
    return DecodeDatumToCVMat(datum, param.force_color());
  }
  return DecodeDatumToCVMatNative(datum);
}
#endif

}  // namespace

template <typename Dtype>
DataTransformer<Dtype>::DataTransformer(const TransformationParameter& param,
                                        Phase phase)
    : param_(param), phase_(phase) {
  POSEIDON_REQUIRE(!(param_.force_color() && param_.force_gray()), ConfigError,
                   "transform_param: force_color and force_gray exclude each "
                   "other");
  if (param_.has_mean_file()) {
    POSEIDON_REQUIRE(param_.mean_value_size() == 0, ConfigError,
                     "transform_param: give either mean_file or mean_value, "
                     "not both");
    BlobProto proto;
    ReadProtoFromBinaryFile(param_.mean_file(), &proto);
    try {
      data_mean_.FromProto(proto);
    } catch (const Error&) {
      RethrowWithContext(StrCat("mean file '", param_.mean_file(), "'"));
    }
    LOG(INFO) << "Loaded mean " << data_mean_.shape_string() << " from "
              << param_.mean_file();
  }
  for (float v : param_.mean_value()) mean_values_.push_back(v);
}

template <typename Dtype>
int DataTransformer<Dtype>::RandInt(int n) {
  CHECK_GT(n, 0);
  return static_cast<int>(Poseidon::rng()() % static_cast<uint32_t>(n));
}

template <typename Dtype>
void DataTransformer<Dtype>::CheckInput(int channels, int height,
                                        int width) const {
  const int crop = static_cast<int>(param_.crop_size());
  POSEIDON_REQUIRE(
      crop <= height && crop <= width, ShapeError, "transform_param.crop_size ",
      crop, " exceeds the input size ", channels, "x", height, "x", width);
  if (param_.has_mean_file()) {
    const bool same = data_mean_.num_axes() <= 4 && data_mean_.num() == 1 &&
                      data_mean_.channels() == channels &&
                      data_mean_.height() == height &&
                      data_mean_.width() == width;
    POSEIDON_REQUIRE(same, ShapeError, "transform_param.mean_file '",
                     param_.mean_file(), "' has shape ",
                     data_mean_.shape_string(), " but the input is 1x",
                     channels, "x", height, "x", width);
  }
  const int nmean = static_cast<int>(mean_values_.size());
  POSEIDON_REQUIRE(nmean <= 1 || nmean == channels, ShapeError,
                   "transform_param.mean_value has ", nmean,
                   " values but the input has ", channels,
                   " channels (give one value, or one per channel)");
}

template <typename Dtype>
typename DataTransformer<Dtype>::Window DataTransformer<Dtype>::ChooseWindow(
    int height, int width) {
  Window win;
  win.height = height;
  win.width = width;
  const int crop = static_cast<int>(param_.crop_size());
  if (crop > 0) {
    win.height = win.width = crop;
    if (phase_ == TRAIN) {
      win.h_off = RandInt(height - crop + 1);
      win.w_off = RandInt(width - crop + 1);
    } else {
      win.h_off = (height - crop) / 2;
      win.w_off = (width - crop) / 2;
    }
  }
  win.mirror = param_.mirror() && RandInt(2) == 1;
  return win;
}

template <typename Dtype>
template <typename T>
void DataTransformer<Dtype>::TransformCHWImpl(const T* in, int channels,
                                              int height, int width,
                                              Dtype* out) {
  CheckInput(channels, height, width);
  const Window win = ChooseWindow(height, width);
  const Dtype scale = param_.scale();
  const Dtype* mean = param_.has_mean_file() ? data_mean_.cpu_data() : nullptr;
  for (int c = 0; c < channels; ++c) {
    Dtype channel_mean = 0;
    if (!mean_values_.empty()) {
      channel_mean = mean_values_[mean_values_.size() == 1 ? 0 : c];
    }
    for (int h = 0; h < win.height; ++h) {
      const int in_row = (c * height + h + win.h_off) * width + win.w_off;
      Dtype* out_row = out + (c * win.height + h) * win.width;
      for (int w = 0; w < win.width; ++w) {
        const int in_index = in_row + w;
        Dtype v = static_cast<Dtype>(in[in_index]);
        v -= mean != nullptr ? mean[in_index] : channel_mean;
        out_row[win.mirror ? win.width - 1 - w : w] = v * scale;
      }
    }
  }
}

template <typename Dtype>
void DataTransformer<Dtype>::TransformCHW(const uint8_t* in, int channels,
                                          int height, int width, Dtype* out) {
  TransformCHWImpl(in, channels, height, width, out);
}

template <typename Dtype>
void DataTransformer<Dtype>::TransformCHW(const float* in, int channels,
                                          int height, int width, Dtype* out) {
  TransformCHWImpl(in, channels, height, width, out);
}

template <typename Dtype>
vector<int> DataTransformer<Dtype>::InferBlobShape(const Datum& datum) const {
  if (datum.encoded()) {
#ifdef USE_OPENCV
    return InferBlobShape(Decode(datum, param_));
#else
    POSEIDON_THROW(Error,
                   "encoded datums need OpenCV (build with "
                   "USE_OPENCV=ON)");
#endif
  }
  CheckedRawCount(datum);
  const int c = datum.channels(), h = datum.height(), w = datum.width();
  CheckInput(c, h, w);
  const int crop = static_cast<int>(param_.crop_size());
  return {1, c, crop > 0 ? crop : h, crop > 0 ? crop : w};
}

template <typename Dtype>
void DataTransformer<Dtype>::Transform(const Datum& datum, Dtype* out) {
  if (datum.encoded()) {
#ifdef USE_OPENCV
    Transform(Decode(datum, param_), out);
    return;
#else
    POSEIDON_THROW(Error,
                   "encoded datums need OpenCV (build with "
                   "USE_OPENCV=ON)");
#endif
  }
  CheckedRawCount(datum);
  const int c = datum.channels(), h = datum.height(), w = datum.width();
  if (!datum.data().empty()) {
    TransformCHW(reinterpret_cast<const uint8_t*>(datum.data().data()), c, h, w,
                 out);
  } else {
    TransformCHW(datum.float_data().data(), c, h, w, out);
  }
}

template <typename Dtype>
void DataTransformer<Dtype>::CheckBlobShape(const vector<int>& want,
                                            const Blob<Dtype>& blob) const {
  const vector<int> without_num(want.begin() + 1, want.end());
  POSEIDON_REQUIRE(blob.shape() == want || blob.shape() == without_num,
                   ShapeError, "the transformed example has shape ",
                   Blob<Dtype>(want).shape_string(),
                   " but the destination blob has shape ", blob.shape_string());
}

template <typename Dtype>
void DataTransformer<Dtype>::Transform(const Datum& datum, Blob<Dtype>* blob) {
  if (datum.encoded()) {
#ifdef USE_OPENCV
    // Decode once, then check and transform the image.
    Transform(Decode(datum, param_), blob);
    return;
#endif
  }
  CheckBlobShape(InferBlobShape(datum), *blob);
  Transform(datum, blob->mutable_cpu_data());
}

template <typename Dtype>
void DataTransformer<Dtype>::Transform(const vector<Datum>& datums,
                                       Blob<Dtype>* blob) {
  TransformBatch(datums, "datums", blob);
}

INSTANTIATE_CLASS(DataTransformer);

}  // namespace poseidon
