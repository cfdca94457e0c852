// DataTransformer entry points for 8-bit OpenCV images (HWC, BGR or gray).
#include <opencv2/core.hpp>

#include "poseidon/data_transformer.hpp"

namespace poseidon {

template <typename Dtype>
vector<int> DataTransformer<Dtype>::InferBlobShape(const cv::Mat& image) const {
  const int c = image.channels(), h = image.rows, w = image.cols;
  POSEIDON_REQUIRE(h > 0 && w > 0, ShapeError,
                   "cannot transform an empty "
                   "image");
  CheckInput(c, h, w);
  const int crop = static_cast<int>(param_.crop_size());
  return {1, c, crop > 0 ? crop : h, crop > 0 ? crop : w};
}

template <typename Dtype>
void DataTransformer<Dtype>::Transform(const cv::Mat& image, Dtype* out) {
  POSEIDON_REQUIRE(image.depth() == CV_8U, ShapeError,
                   "only 8-bit images can be transformed (OpenCV depth ",
                   image.depth(), ")");
  const int channels = image.channels(), height = image.rows,
            width = image.cols;
  POSEIDON_REQUIRE(height > 0 && width > 0, ShapeError,
                   "cannot transform an empty image");
  // Reorder HWC to CHW so one body serves images and Datums.
  vector<uint8_t> chw(static_cast<size_t>(channels) * height * width);
  for (int h = 0; h < height; ++h) {
    const uchar* row = image.ptr<uchar>(h);
    for (int w = 0; w < width; ++w) {
      for (int c = 0; c < channels; ++c) {
        chw[(static_cast<size_t>(c) * height + h) * width + w] =
            row[w * channels + c];
      }
    }
  }
  TransformCHW(chw.data(), channels, height, width, out);
}

template <typename Dtype>
void DataTransformer<Dtype>::Transform(const cv::Mat& image,
                                       Blob<Dtype>* blob) {
  CheckBlobShape(InferBlobShape(image), *blob);
  Transform(image, blob->mutable_cpu_data());
}

template <typename Dtype>
void DataTransformer<Dtype>::Transform(const vector<cv::Mat>& images,
                                       Blob<Dtype>* blob) {
  TransformBatch(images, "images", blob);
}

// The class is instantiated in data_transformer.cpp, which does not see these
// definitions; instantiate them here member by member.
#define POSEIDON_INSTANTIATE_MAT_MEMBERS(Dtype)                               \
  template vector<int> DataTransformer<Dtype>::InferBlobShape(const cv::Mat&) \
      const;                                                                  \
  template void DataTransformer<Dtype>::Transform(const cv::Mat&, Dtype*);    \
  template void DataTransformer<Dtype>::Transform(const cv::Mat&,             \
                                                  Blob<Dtype>*);              \
  template void DataTransformer<Dtype>::Transform(const vector<cv::Mat>&,     \
                                                  Blob<Dtype>*)

POSEIDON_INSTANTIATE_MAT_MEMBERS(float);
POSEIDON_INSTANTIATE_MAT_MEMBERS(double);

}  // namespace poseidon
