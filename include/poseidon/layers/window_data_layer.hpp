// WindowData ("WindowData"): R-CNN's detection windows (OpenCV builds only;
// the implementation is window_data_layer_opencv.cpp). Each batch samples
// windows at random, with replacement: first the background ones, then
// floor(batch_size * fg_fraction) foreground ones; each window is cut out of
// its image, warped to crop_size x crop_size, optionally mirrored, and has
// the mean subtracted and the scale applied:
//   out[c][h][w] = (pixel[c] - mean) * scale, 0 where there is no pixel.
//
//   top[0] data:  batch_size x C x crop_size x crop_size (C from the first
//                 image of the window file; 1 = gray, 3 = BGR)
//   top[1] label: batch_size (0 for background windows)
//
// The window file (source) repeats, for image i = 0, 1, ...:
//   # i
//   <image path>        (root_folder is prefixed)
//   <channels> <height> <width>
//   <number of windows>
//   <class> <overlap> <x1> <y1> <x2> <y2>    (one line per window)
// A window with overlap >= fg_threshold is foreground (its class must be
// > 0); one with overlap < bg_threshold is background (label 0); the others
// are not used. Corners are inclusive pixel coordinates.
//
// window_data_param:
//   source        the window file (required)
//   batch_size    windows per batch (required, > 0)
//   fg_threshold  (default 0.5), bg_threshold (default 0.5)
//   fg_fraction   (default 0.25) the foreground share of a batch, in [0, 1]
//   context_pad   (default 0) pixels of context around the window in the
//                 warped output: the window is enlarged by
//                 crop_size / (crop_size - 2 context_pad) about its centre;
//                 what falls outside the image stays 0
//   crop_mode     (default "warp") or "square": enlarge the shorter side to
//                 the longer before the context is added
//   cache_images  (default false) keep every image's file bytes in memory
//   root_folder   (default "")
//   scale         (default 1)
// transform_param: crop_size (required, > 0), mirror (flip half the windows
// at random, with the context padding), mean_file (a 1 x C x H x W
// .binaryproto, its centre crop_size x crop_size part used) or mean_value
// (one, or one per channel). As in Caffe, the rest of transform_param is
// not used. window_data_param's own crop_size, mirror and mean_file are
// used when transform_param lacks them, and its scale overrides
// transform_param.scale when set.
//
// Errors: a missing or malformed window file (IOError naming the file and
// the image entry), bad parameters (ConfigError), no windows of a kind the
// batch needs (ConfigError), an unreadable image or a window outside its
// image (IOError naming the image, raised by the Forward that needs it).
// Differs from Caffe, which does not check: image indices must count up
// from 0, and a window must lie in its image (only the context may not).
#ifndef POSEIDON_LAYERS_WINDOW_DATA_LAYER_HPP_
#define POSEIDON_LAYERS_WINDOW_DATA_LAYER_HPP_

#include "poseidon/layers/base_data_layer.hpp"

namespace poseidon {

template <typename Dtype>
class WindowDataLayer final : public BasePrefetchingDataLayer<Dtype> {
 public:
  explicit WindowDataLayer(const LayerParameter& param)
      : BasePrefetchingDataLayer<Dtype>(param) {}
  ~WindowDataLayer() override;

  void DataLayerSetUp(const vector<Blob<Dtype>*>& bottom,
                      const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "WindowData"; }
  int ExactNumTopBlobs() const override { return 2; }

 protected:
  void LoadBatch(Batch<Dtype>* batch) override;

 private:
  struct Image {
    string path;
    int channels = 0;
    Datum cached;  // the encoded file, when cache_images
  };
  struct Window {
    int image = 0;
    int label = 0;
    int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  };

  void ReadWindowFile(const string& source);
  // Warps `window` into example `item` of `data` (zeroed beforehand).
  void WarpWindow(const Window& window, bool mirror, int item, Dtype* data);

  vector<Image> images_;
  vector<Window> fg_windows_;
  vector<Window> bg_windows_;
  int channels_ = 0;
  int crop_size_ = 0;
  bool mirror_ = false;
  Dtype scale_ = 1;
  Blob<Dtype> mean_;           // the mean file, if any
  vector<Dtype> mean_values_;  // one per channel, if given
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_WINDOW_DATA_LAYER_HPP_
