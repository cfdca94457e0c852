// The WindowData layer: detection windows warped out of images with OpenCV.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <utility>

#include "poseidon/layers/window_data_layer.hpp"
#include "poseidon/util/image_io.hpp"
#include "poseidon/util/io.hpp"

namespace poseidon {

template <typename Dtype>
WindowDataLayer<Dtype>::~WindowDataLayer() {
  // The prefetch thread reads images_ and the windows, destroyed before the
  // base.
  this->StopPrefetch();
}

template <typename Dtype>
void WindowDataLayer<Dtype>::ReadWindowFile(const string& source) {
  const WindowDataParameter& param = this->layer_param_.window_data_param();
  std::ifstream in(source);
  POSEIDON_REQUIRE(in.is_open(), IOError, "cannot open window file '", source,
                   "'");
  string hashtag;
  while (in >> hashtag) {
    const int index = static_cast<int>(images_.size());
    const string where =
        StrCat("window file '", source, "', image entry ", index);
    int read_index = -1;
    POSEIDON_REQUIRE(
        hashtag == "#" && (in >> read_index) && read_index == index, IOError,
        where, ": expected the line '# ", index, "'");
    Image image;
    int height = 0, width = 0, num_windows = 0;
    POSEIDON_REQUIRE(
        in >> image.path >> image.channels >> height >> width >> num_windows,
        IOError, where,
        ": expected the image path, channels, height, width and the number "
        "of windows");
    POSEIDON_REQUIRE(image.channels == 1 || image.channels == 3, IOError, where,
                     ": channels must be 1 or 3 (got ", image.channels, ")");
    POSEIDON_REQUIRE(num_windows >= 0, IOError, where,
                     ": negative number of windows ", num_windows);
    image.path = param.root_folder() + image.path;
    for (int k = 0; k < num_windows; ++k) {
      Window window;
      window.image = index;
      float overlap = 0;
      POSEIDON_REQUIRE(in >> window.label >> overlap >> window.x1 >>
                           window.y1 >> window.x2 >> window.y2,
                       IOError, where, ", window ", k,
                       ": expected 'class overlap x1 y1 x2 y2'");
      POSEIDON_REQUIRE(window.x1 <= window.x2 && window.y1 <= window.y2,
                       IOError, where, ", window ", k, ": corners (", window.x1,
                       ", ", window.y1, ") to (", window.x2, ", ", window.y2,
                       ") enclose nothing");
      if (overlap >= param.fg_threshold()) {
        POSEIDON_REQUIRE(window.label > 0, IOError, where, ", window ", k,
                         ": a foreground window (overlap ", overlap,
                         ") needs a class > 0, got ", window.label);
        fg_windows_.push_back(window);
      } else if (overlap < param.bg_threshold()) {
        window.label = 0;
        bg_windows_.push_back(window);
      }
    }
    if (param.cache_images()) {
      image.cached.set_data(ReadFileToString(image.path));
      image.cached.set_encoded(true);
    }
    images_.push_back(std::move(image));
  }
  POSEIDON_REQUIRE(!images_.empty(), IOError, "window file '", source,
                   "' lists no images");
}

template <typename Dtype>
void WindowDataLayer<Dtype>::DataLayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                            const vector<Blob<Dtype>*>& top) {
  const WindowDataParameter& param = this->layer_param_.window_data_param();
  const TransformationParameter& transform = this->transform_param_;
  POSEIDON_REQUIRE(!param.source().empty(), ConfigError,
                   "window_data_param.source is required");
  const int batch_size = static_cast<int>(param.batch_size());
  POSEIDON_REQUIRE(batch_size > 0, ConfigError,
                   "window_data_param.batch_size must be positive (got ",
                   param.batch_size(), ")");
  crop_size_ = static_cast<int>(
      transform.crop_size() > 0 ? transform.crop_size() : param.crop_size());
  POSEIDON_REQUIRE(crop_size_ > 0, ConfigError,
                   "WindowData needs transform_param.crop_size > 0");
  mirror_ = transform.mirror() || param.mirror();
  scale_ =
      static_cast<Dtype>(param.has_scale() ? param.scale() : transform.scale());
  POSEIDON_REQUIRE(param.fg_fraction() >= 0 && param.fg_fraction() <= 1,
                   ConfigError,
                   "window_data_param.fg_fraction must be in "
                   "[0, 1] (got ",
                   param.fg_fraction(), ")");
  POSEIDON_REQUIRE(param.crop_mode() == "warp" || param.crop_mode() == "square",
                   ConfigError,
                   "window_data_param.crop_mode must be \"warp\" or "
                   "\"square\" (got \"",
                   param.crop_mode(), "\")");
  POSEIDON_REQUIRE(2 * static_cast<int64_t>(param.context_pad()) < crop_size_,
                   ConfigError, "window_data_param.context_pad ",
                   param.context_pad(), " leaves nothing of crop_size ",
                   crop_size_);

  ReadWindowFile(param.source());
  channels_ = images_[0].channels;
  const int num_fg = static_cast<int>(batch_size * param.fg_fraction());
  POSEIDON_REQUIRE(num_fg == 0 || !fg_windows_.empty(), ConfigError,
                   "window file '", param.source(),
                   "' has no foreground windows (overlap >= fg_threshold ",
                   param.fg_threshold(), "), and a batch takes ", num_fg);
  POSEIDON_REQUIRE(num_fg == batch_size || !bg_windows_.empty(), ConfigError,
                   "window file '", param.source(),
                   "' has no background windows (overlap < bg_threshold ",
                   param.bg_threshold(), "), and a batch takes ",
                   batch_size - num_fg);
  LOG(INFO) << "WindowData: " << images_.size() << " images, "
            << fg_windows_.size() << " foreground and " << bg_windows_.size()
            << " background windows";

  const string mean_file =
      transform.has_mean_file() ? transform.mean_file() : param.mean_file();
  if (!mean_file.empty()) {
    POSEIDON_REQUIRE(transform.mean_value_size() == 0, ConfigError,
                     "WindowData: give either a mean file or mean_value, "
                     "not both");
    BlobProto proto;
    ReadProtoFromBinaryFile(mean_file, &proto);
    mean_.FromProto(proto);
    POSEIDON_REQUIRE(mean_.num_axes() == 4 && mean_.shape(0) == 1 &&
                         mean_.shape(1) == channels_ &&
                         mean_.shape(2) >= crop_size_ &&
                         mean_.shape(3) >= crop_size_,
                     ShapeError, "WindowData: mean file '", mean_file,
                     "' has shape ", mean_.shape_string(), "; need 1 x ",
                     channels_, " x H x W with H, W >= crop_size ", crop_size_);
  } else if (transform.mean_value_size() > 0) {
    const int n = transform.mean_value_size();
    POSEIDON_REQUIRE(n == 1 || n == channels_, ConfigError,
                     "WindowData: give 1 or ", channels_,
                     " mean_value entries (got ", n, ")");
    for (int c = 0; c < channels_; ++c) {
      mean_values_.push_back(
          static_cast<Dtype>(transform.mean_value(n == 1 ? 0 : c)));
    }
  }

  const vector<int> shape{batch_size, channels_, crop_size_, crop_size_};
  const vector<int> label_shape{batch_size};
  top[0]->Reshape(shape);
  top[1]->Reshape(label_shape);
  for (auto& batch : this->prefetch_) {
    batch->data_.Reshape(shape);
    batch->label_.Reshape(label_shape);
  }
  LOG(INFO) << "WindowData output: " << top[0]->shape_string();
}

template <typename Dtype>
void WindowDataLayer<Dtype>::WarpWindow(const Window& window, bool mirror,
                                        int item, Dtype* data) {
  const WindowDataParameter& param = this->layer_param_.window_data_param();
  const Image& image = images_[window.image];
  cv::Mat img;
  if (param.cache_images()) {
    try {
      img = DecodeDatumToCVMat(image.cached, image.channels == 3);
    } catch (const IOError& e) {
      POSEIDON_THROW(IOError, "image '", image.path, "': ", e.what());
    }
  } else {
    img = ReadImageToCVMat(image.path, 0, 0, image.channels == 3);
  }
  POSEIDON_REQUIRE(img.channels() == channels_, IOError, "image '", image.path,
                   "' has ", img.channels(),
                   " channels, the window file's first image ", channels_);

  int x1 = window.x1, y1 = window.y1, x2 = window.x2, y2 = window.y2;
  const int crop = crop_size_;
  cv::Size size(crop, crop);
  int pad_h = 0, pad_w = 0;
  const bool square = param.crop_mode() == "square";
  if (param.context_pad() > 0 || square) {
    // Enlarge the window about its centre so that, warped to crop x crop,
    // it has context_pad pixels of context on each side.
    const double context_scale =
        static_cast<double>(crop) / (crop - 2.0 * param.context_pad());
    double half_h = (y2 - y1 + 1) / 2.0;
    double half_w = (x2 - x1 + 1) / 2.0;
    const double center_x = x1 + half_w;
    const double center_y = y1 + half_h;
    if (square) half_h = half_w = std::max(half_h, half_w);
    x1 = static_cast<int>(std::round(center_x - half_w * context_scale));
    x2 = static_cast<int>(std::round(center_x + half_w * context_scale));
    y1 = static_cast<int>(std::round(center_y - half_h * context_scale));
    y2 = static_cast<int>(std::round(center_y + half_h * context_scale));
    // Clip to the image; what lies outside becomes zero padding.
    const int full_h = y2 - y1 + 1;
    const int full_w = x2 - x1 + 1;
    int pad_x1 = std::max(0, -x1);
    int pad_y1 = std::max(0, -y1);
    int pad_x2 = std::max(0, x2 - img.cols + 1);
    const int pad_y2 = std::max(0, y2 - img.rows + 1);
    x1 += pad_x1;
    x2 -= pad_x2;
    y1 += pad_y1;
    y2 -= pad_y2;
    POSEIDON_REQUIRE(x1 <= x2 && y1 <= y2, IOError, "image '", image.path,
                     "' (", img.cols, " x ", img.rows,
                     ") holds nothing of "
                     "the window (",
                     window.x1, ", ", window.y1, ") to (", window.x2, ", ",
                     window.y2, ")");
    const double scale_x = static_cast<double>(crop) / full_w;
    const double scale_y = static_cast<double>(crop) / full_h;
    size.width = static_cast<int>(std::round((x2 - x1 + 1) * scale_x));
    size.height = static_cast<int>(std::round((y2 - y1 + 1) * scale_y));
    pad_x1 = static_cast<int>(std::round(pad_x1 * scale_x));
    pad_x2 = static_cast<int>(std::round(pad_x2 * scale_x));
    pad_y1 = static_cast<int>(std::round(pad_y1 * scale_y));
    pad_h = pad_y1;
    pad_w = mirror ? pad_x2 : pad_x1;
    // Rounding may leave the warped part a pixel too large.
    size.height = std::min(size.height, crop - pad_h);
    size.width = std::min(size.width, crop - pad_w);
  } else {
    POSEIDON_REQUIRE(x1 >= 0 && y1 >= 0 && x2 < img.cols && y2 < img.rows,
                     IOError, "image '", image.path, "' (", img.cols, " x ",
                     img.rows, ") does not contain the window (", x1, ", ", y1,
                     ") to (", x2, ", ", y2, ")");
  }
  if (size.width <= 0 || size.height <= 0) return;  // all padding

  cv::Mat warped;
  cv::resize(img(cv::Rect(x1, y1, x2 - x1 + 1, y2 - y1 + 1)), warped, size, 0,
             0, cv::INTER_LINEAR);
  if (mirror) cv::flip(warped, warped, 1);

  const Dtype* mean = mean_.count() > 0 ? mean_.cpu_data() : nullptr;
  const int mean_h = mean ? mean_.shape(2) : 0;
  const int mean_w = mean ? mean_.shape(3) : 0;
  const int off_h = (mean_h - crop) / 2 + pad_h;
  const int off_w = (mean_w - crop) / 2 + pad_w;
  for (int c = 0; c < channels_; ++c) {
    for (int h = 0; h < warped.rows; ++h) {
      const uchar* row = warped.ptr<uchar>(h);
      Dtype* out =
          data + ((item * channels_ + c) * crop + h + pad_h) * crop + pad_w;
      for (int w = 0; w < warped.cols; ++w) {
        Dtype m = 0;
        if (mean) {
          m = mean[(c * mean_h + h + off_h) * mean_w + w + off_w];
        } else if (!mean_values_.empty()) {
          m = mean_values_[c];
        }
        out[w] = (static_cast<Dtype>(row[w * channels_ + c]) - m) * scale_;
      }
    }
  }
}

template <typename Dtype>
void WindowDataLayer<Dtype>::LoadBatch(Batch<Dtype>* batch) {
  const WindowDataParameter& param = this->layer_param_.window_data_param();
  const int batch_size = static_cast<int>(param.batch_size());
  Dtype* data = batch->data_.mutable_cpu_data();
  Dtype* label = batch->label_.mutable_cpu_data();
  cpu_set(batch->data_.count(), Dtype(0), data);
  const int num_fg = static_cast<int>(batch_size * param.fg_fraction());
  // Background windows first, then foreground, as in Caffe.
  int item = 0;
  for (const vector<Window>* windows : {&bg_windows_, &fg_windows_}) {
    const int n = windows == &fg_windows_ ? num_fg : batch_size - num_fg;
    for (int k = 0; k < n; ++k, ++item) {
      const Window& window = (*windows)[Poseidon::rng()() % windows->size()];
      const bool mirror = mirror_ && Poseidon::rng()() % 2;
      WarpWindow(window, mirror, item, data);
      label[item] = static_cast<Dtype>(window.label);
    }
  }
}

INSTANTIATE_CLASS(WindowDataLayer);
REGISTER_LAYER_CLASS(WindowData);

}  // namespace poseidon
