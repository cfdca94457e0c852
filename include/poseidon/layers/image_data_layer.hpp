// ImageData ("ImageData"): reads images listed in a text file, one
// "<path> <integer label>" per line (OpenCV builds only; the implementation is
// image_data_layer_opencv.cpp), transforms them (transform_param) and outputs
// batches, looping over the list.
//
//   top[0] data:  batch_size x C x H x W (C = 3 if is_color else 1; H x W the
//                 resized or stored size of the first image of each batch,
//                 after cropping)
//   top[1] label: batch_size (optional)
//
// image_data_param:
//   source       the list file (required)
//   root_folder  (default "") prefixed to every listed path
//   batch_size   (default 1)
//   shuffle      (default false) shuffle the list at setup and after each
//                pass, with Poseidon's RNG
//   new_height, new_width (default 0 = keep) resize every image; give both
//   is_color     (default true) 3-channel BGR, else gray
//   rand_skip    (default 0) skip a random number in [0, rand_skip) of
//                entries at the start
// data_param.prefetch (default 4) sets the number of batches loaded ahead.
//
// Errors: a malformed list line names the list file and line; an unreadable
// image names its path (raised by the Forward that needs it).
#ifndef POSEIDON_LAYERS_IMAGE_DATA_LAYER_HPP_
#define POSEIDON_LAYERS_IMAGE_DATA_LAYER_HPP_

#include <utility>

#include "poseidon/layers/base_data_layer.hpp"

namespace poseidon {

template <typename Dtype>
class ImageDataLayer final : public BasePrefetchingDataLayer<Dtype> {
 public:
  explicit ImageDataLayer(const LayerParameter& param)
      : BasePrefetchingDataLayer<Dtype>(param) {}
  ~ImageDataLayer() override;

  void DataLayerSetUp(const vector<Blob<Dtype>*>& bottom,
                      const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "ImageData"; }

 protected:
  void LoadBatch(Batch<Dtype>* batch) override;
  // Without random transforms: moves through the list (reshuffling at its
  // end as loading would) without reading images.
  void SkipLoads(uint64_t batches) override;

 private:
  // Fisher-Yates with the calling thread's Poseidon::rng().
  void ShuffleImages();
  string ImagePath(size_t line) const;

  vector<std::pair<string, int>> lines_;
  size_t line_id_ = 0;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_IMAGE_DATA_LAYER_HPP_
