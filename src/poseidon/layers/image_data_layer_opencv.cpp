// The ImageData layer: images from a list file, decoded with OpenCV.
#include <opencv2/core.hpp>

#include "poseidon/layers/image_data_layer.hpp"
#include "poseidon/util/image_io.hpp"

namespace poseidon {

template <typename Dtype>
ImageDataLayer<Dtype>::~ImageDataLayer() {
  // The prefetch thread reads lines_, which is destroyed before the base.
  this->StopPrefetch();
}

template <typename Dtype>
string ImageDataLayer<Dtype>::ImagePath(size_t line) const {
  return this->layer_param_.image_data_param().root_folder() +
         lines_[line].first;
}

template <typename Dtype>
void ImageDataLayer<Dtype>::ShuffleImages() {
  for (size_t i = lines_.size(); i > 1; --i) {
    const size_t j = Poseidon::rng()() % i;
    std::swap(lines_[i - 1], lines_[j]);
  }
}

template <typename Dtype>
void ImageDataLayer<Dtype>::DataLayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                           const vector<Blob<Dtype>*>& top) {
  const ImageDataParameter& param = this->layer_param_.image_data_param();
  POSEIDON_REQUIRE(!param.source().empty(), ConfigError,
                   "image_data_param.source is required");
  const int new_height = static_cast<int>(param.new_height());
  const int new_width = static_cast<int>(param.new_width());
  POSEIDON_REQUIRE((new_height > 0) == (new_width > 0), ConfigError,
                   "image_data_param: give both new_height and new_width or "
                   "neither (got ",
                   new_height, " and ", new_width, ")");
  const int batch_size = static_cast<int>(param.batch_size());
  POSEIDON_REQUIRE(batch_size > 0, ConfigError,
                   "image_data_param.batch_size must be positive (got ",
                   param.batch_size(), ")");

  lines_ = ReadImageList(param.source());
  LOG(INFO) << "Read " << lines_.size() << " images from " << param.source();
  if (param.shuffle()) ShuffleImages();
  line_id_ = 0;
  if (param.rand_skip() > 0) {
    line_id_ = (Poseidon::rng()() % param.rand_skip()) % lines_.size();
    LOG(INFO) << "Skipping the first " << line_id_ << " images";
  }

  // The first image fixes the output shape.
  const cv::Mat image = ReadImageToCVMat(ImagePath(line_id_), new_height,
                                         new_width, param.is_color());
  vector<int> shape;
  try {
    shape = this->data_transformer_->InferBlobShape(image);
  } catch (const Error&) {
    RethrowWithContext(StrCat("image '", ImagePath(line_id_), "'"));
  }
  this->transformed_data_.Reshape(shape);
  shape[0] = batch_size;
  top[0]->Reshape(shape);
  for (auto& batch : this->prefetch_) batch->data_.Reshape(shape);
  LOG(INFO) << "ImageData layer output: " << top[0]->shape_string();
  if (this->output_labels_) {
    const vector<int> label_shape{batch_size};
    top[1]->Reshape(label_shape);
    for (auto& batch : this->prefetch_) batch->label_.Reshape(label_shape);
  }
}

template <typename Dtype>
void ImageDataLayer<Dtype>::LoadBatch(Batch<Dtype>* batch) {
  const ImageDataParameter& param = this->layer_param_.image_data_param();
  const int batch_size = static_cast<int>(param.batch_size());
  for (int i = 0; i < batch_size; ++i) {
    const string path = ImagePath(line_id_);
    const cv::Mat image =
        ReadImageToCVMat(path, static_cast<int>(param.new_height()),
                         static_cast<int>(param.new_width()), param.is_color());
    try {
      if (i == 0) {
        vector<int> shape = this->data_transformer_->InferBlobShape(image);
        this->transformed_data_.Reshape(shape);
        shape[0] = batch_size;
        batch->data_.Reshape(shape);
      }
      this->transformed_data_.set_cpu_data(batch->data_.mutable_cpu_data() +
                                           batch->data_.offset(i));
      this->data_transformer_->Transform(image, &this->transformed_data_);
    } catch (const ShapeError& e) {
      POSEIDON_THROW(ShapeError, "image '", path, "': ", e.what());
    }
    if (this->output_labels_) {
      batch->label_.mutable_cpu_data()[i] =
          static_cast<Dtype>(lines_[line_id_].second);
    }
    if (++line_id_ == lines_.size()) {
      line_id_ = 0;
      if (param.shuffle()) ShuffleImages();
    }
  }
}

template <typename Dtype>
void ImageDataLayer<Dtype>::SkipLoads(uint64_t batches) {
  if (this->data_transformer_->draws_random_numbers()) {
    BasePrefetchingDataLayer<Dtype>::SkipLoads(batches);
    return;
  }
  const ImageDataParameter& param = this->layer_param_.image_data_param();
  const uint64_t size = lines_.size();
  uint64_t left = batches * static_cast<uint64_t>(param.batch_size());
  if (!param.shuffle()) {
    line_id_ = static_cast<size_t>((line_id_ + left % size) % size);
    return;
  }
  while (left >= size - line_id_) {  // to the end of the list: reshuffle
    left -= size - line_id_;
    line_id_ = 0;
    ShuffleImages();
  }
  line_id_ += static_cast<size_t>(left);
}

INSTANTIATE_CLASS(ImageDataLayer);
REGISTER_LAYER_CLASS(ImageData);

}  // namespace poseidon
