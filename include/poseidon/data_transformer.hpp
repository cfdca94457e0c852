// DataTransformer: the preprocessing that data layers apply to each example,
// configured by a TransformationParameter:
//
//   out[c][h][w] = (in[c][h + h_off][w' + w_off] - mean[c][h + h_off][...]) *
//                  scale
//
//   scale       (default 1)     multiplies after the mean is subtracted.
//   crop_size   (default 0=off) a crop_size x crop_size window: at a random
//                               offset in TRAIN, centred in TEST.
//   mirror      (default false) flips horizontally (w' = W_out - 1 - w) with
//                               probability 1/2, in both phases, as Caffe.
//   mean_file                   a BlobProto (.binaryproto) of shape
//                               1 x C x H x W of the uncropped input; the mean
//                               is taken at the same position as the pixel.
//   mean_value                  one value for all channels or one per channel.
//                               mean_file and mean_value exclude each other.
//   force_color / force_gray    decode encoded datums as 3 / 1 channels
//                               (default: as stored).
//
// Inputs are Datums (raw uint8 `data`, `float_data`, or an encoded image) and,
// in OpenCV builds, 8-bit cv::Mats (HWC, BGR). Outputs are C x H x W.
// Random choices (crop offset, mirror) come from Poseidon::rng() of the
// calling thread, so a seeded run is reproducible.
//
// Thread safety: none; a transformer is used by one thread at a time (the
// prefetch thread of its data layer after setup).
#ifndef POSEIDON_DATA_TRANSFORMER_HPP_
#define POSEIDON_DATA_TRANSFORMER_HPP_

#include <cstdint>
#include <vector>

#include "poseidon/blob.hpp"
#include "poseidon/common.hpp"
#include "poseidon/proto/caffe.pb.h"

#ifdef USE_OPENCV
namespace cv {
class Mat;
}  // namespace cv
#endif

namespace poseidon {

template <typename Dtype>
class DataTransformer {
 public:
  // Reads the mean file; throws ConfigError for inconsistent parameters and
  // IOError for an unreadable mean file.
  DataTransformer(const TransformationParameter& param, Phase phase);
  POSEIDON_DISABLE_COPY_AND_ASSIGN(DataTransformer);

  // The output shape for one example: {1, C, H', W'} (H' = W' = crop_size
  // when cropping). Throws ShapeError when the example is smaller than the
  // crop or does not match the mean file or mean_value count.
  vector<int> InferBlobShape(const Datum& datum) const;

  // Writes the transformed datum to `out`, which holds
  // product(InferBlobShape(datum)) values.
  void Transform(const Datum& datum, Dtype* out);
  // Same, into a blob whose shape must equal InferBlobShape(datum) (or the
  // same without the leading 1); throws ShapeError otherwise.
  void Transform(const Datum& datum, Blob<Dtype>* blob);
  // A batch: blob is N x C x H' x W' with N == datums.size().
  void Transform(const vector<Datum>& datums, Blob<Dtype>* blob);

#ifdef USE_OPENCV
  vector<int> InferBlobShape(const cv::Mat& image) const;
  void Transform(const cv::Mat& image, Dtype* out);
  void Transform(const cv::Mat& image, Blob<Dtype>* blob);
  void Transform(const vector<cv::Mat>& images, Blob<Dtype>* blob);
#endif

  const TransformationParameter& param() const { return param_; }
  // Whether Transform draws from Poseidon::rng() (mirror, or a crop in the
  // TRAIN phase); when not, skipping an example needs no transform.
  bool draws_random_numbers() const {
    return param_.mirror() || (param_.crop_size() > 0 && phase_ == TRAIN);
  }

 private:
  // Transforms items[i] into example i of `blob` (shape(0) == items.size()),
  // through a one-example view; shared by the Datum and cv::Mat batches.
  template <typename Item>
  void TransformBatch(const vector<Item>& items, const char* what,
                      Blob<Dtype>* blob) {
    const int num = static_cast<int>(items.size());
    POSEIDON_REQUIRE(num > 0 && blob->num_axes() >= 1 && blob->shape(0) == num,
                     ShapeError, "cannot transform ", num, " ", what,
                     " into a blob of shape ", blob->shape_string());
    const int per_example = blob->count(1);
    vector<int> shape = blob->shape();
    shape[0] = 1;
    Blob<Dtype> view(shape);
    for (int i = 0; i < num; ++i) {
      view.set_cpu_data(blob->mutable_cpu_data() + i * per_example);
      Transform(items[i], &view);
    }
  }

  // Chosen for one example.
  struct Window {
    int h_off = 0;
    int w_off = 0;
    int height = 0;  // output size
    int width = 0;
    bool mirror = false;
  };
  // Checks a C x H x W input against crop and mean; throws ShapeError.
  void CheckInput(int channels, int height, int width) const;
  // Output size and, for the random parts, a draw from Poseidon::rng().
  Window ChooseWindow(int height, int width);
  // The transform of a C x H x W input stored channel-major (uint8 pixels
  // or float_data); every input kind is brought to one of these.
  void TransformCHW(const uint8_t* in, int channels, int height, int width,
                    Dtype* out);
  void TransformCHW(const float* in, int channels, int height, int width,
                    Dtype* out);
  template <typename T>
  void TransformCHWImpl(const T* in, int channels, int height, int width,
                        Dtype* out);
  void CheckBlobShape(const vector<int>& want, const Blob<Dtype>& blob) const;
  int RandInt(int n);

  TransformationParameter param_;
  Phase phase_;
  Blob<Dtype> data_mean_;  // filled from mean_file, else empty
  vector<Dtype> mean_values_;
};

}  // namespace poseidon

#endif  // POSEIDON_DATA_TRANSFORMER_HPP_
