// PoolingLayer: parameter checks, Caffe's output-size rule, and plain loops
// over windows for each pooling method.
#include "poseidon/layers/pooling_layer.hpp"

#include <algorithm>
#include <climits>
#include <cmath>

namespace poseidon {
namespace {

int ToInt(const char* field, uint32_t value) {
  POSEIDON_REQUIRE(value <= static_cast<uint32_t>(INT_MAX), ConfigError,
                   "pooling_param.", field, " must be non-negative, got ",
                   static_cast<int32_t>(value));
  return static_cast<int>(value);
}

// Reads `name` (one value for both axes) or name_h and name_w.
void ReadPair(const char* name, bool has_both, uint32_t both, bool has_h,
              uint32_t h, bool has_w, uint32_t w, int* out_h, int* out_w) {
  const string n(name);
  if (has_h || has_w) {
    POSEIDON_REQUIRE(!has_both, ConfigError, "pooling_param: give ", n, " or ",
                     n, "_h/", n, "_w, not both");
    POSEIDON_REQUIRE(has_h && has_w, ConfigError, "pooling_param.", n,
                     "_h and ", n, "_w must be given together");
    *out_h = ToInt((n + "_h").c_str(), h);
    *out_w = ToInt((n + "_w").c_str(), w);
  } else {
    *out_h = *out_w = ToInt(name, both);
  }
}

// Number of windows along one axis before Caffe's last-window rule.
int PooledSize(int size, int kernel, int pad, int stride, bool ceil_mode) {
  const double span = static_cast<double>(size + 2 * pad - kernel) / stride;
  return static_cast<int>(ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
}

}  // namespace

template <typename Dtype>
void PoolingLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                     const vector<Blob<Dtype>*>& top) {
  const PoolingParameter& p = this->layer_param_.pooling_param();
  method_ = p.pool();
  global_pooling_ = p.global_pooling();
  const bool has_kernel =
      p.has_kernel_size() || p.has_kernel_h() || p.has_kernel_w();
  if (global_pooling_) {
    POSEIDON_REQUIRE(!has_kernel, ConfigError,
                     "pooling_param: global_pooling takes the bottom's whole "
                     "plane as the window; do not set kernel_size or "
                     "kernel_h/kernel_w");
  } else {
    POSEIDON_REQUIRE(has_kernel, ConfigError,
                     "pooling_param.kernel_size (or kernel_h and kernel_w) "
                     "is required unless global_pooling is set");
    ReadPair("kernel_size", p.has_kernel_size(), p.kernel_size(),
             p.has_kernel_h(), p.kernel_h(), p.has_kernel_w(), p.kernel_w(),
             &kernel_h_, &kernel_w_);
    POSEIDON_REQUIRE(kernel_h_ > 0 && kernel_w_ > 0, ConfigError,
                     "pooling_param: kernel size must be positive, got ",
                     kernel_h_, " x ", kernel_w_);
  }
  ReadPair("pad", p.has_pad(), p.pad(), p.has_pad_h(), p.pad_h(), p.has_pad_w(),
           p.pad_w(), &pad_h_, &pad_w_);
  ReadPair("stride", p.has_stride(), p.stride(), p.has_stride_h(), p.stride_h(),
           p.has_stride_w(), p.stride_w(), &stride_h_, &stride_w_);
  POSEIDON_REQUIRE(stride_h_ > 0 && stride_w_ > 0, ConfigError,
                   "pooling_param: stride must be positive, got ", stride_h_,
                   " x ", stride_w_);
  if (global_pooling_) {
    POSEIDON_REQUIRE(
        pad_h_ == 0 && pad_w_ == 0 && stride_h_ == 1 && stride_w_ == 1,
        ConfigError,
        "pooling_param: global_pooling needs pad 0 and stride 1 "
        "(got pad ",
        pad_h_, " x ", pad_w_, ", stride ", stride_h_, " x ", stride_w_, ")");
  }
  if (pad_h_ != 0 || pad_w_ != 0) {
    POSEIDON_REQUIRE(
        method_ == PoolingParameter::MAX || method_ == PoolingParameter::AVE,
        ConfigError,
        "pooling_param: padding is supported for MAX and AVE "
        "pooling only");
    POSEIDON_REQUIRE(
        global_pooling_ || (pad_h_ < kernel_h_ && pad_w_ < kernel_w_),
        ConfigError, "pooling_param: pad (", pad_h_, " x ", pad_w_,
        ") must be smaller than the kernel (", kernel_h_, " x ", kernel_w_,
        ")");
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(bottom[0]->num_axes() == 4, ShapeError,
                   "Pooling needs a 4-D bottom (num, channels, height, "
                   "width), got shape ",
                   bottom[0]->shape_string());
  num_ = bottom[0]->shape(0);
  channels_ = bottom[0]->shape(1);
  height_ = bottom[0]->shape(2);
  width_ = bottom[0]->shape(3);
  if (global_pooling_) {
    kernel_h_ = height_;
    kernel_w_ = width_;
  }
  const bool ceil_mode =
      this->layer_param_.pooling_param().round_mode() == PoolingParameter::CEIL;
  pooled_height_ = PooledSize(height_, kernel_h_, pad_h_, stride_h_, ceil_mode);
  pooled_width_ = PooledSize(width_, kernel_w_, pad_w_, stride_w_, ceil_mode);
  if (pad_h_ != 0 || pad_w_ != 0) {
    if ((pooled_height_ - 1) * stride_h_ >= height_ + pad_h_) --pooled_height_;
    if ((pooled_width_ - 1) * stride_w_ >= width_ + pad_w_) --pooled_width_;
  }
  POSEIDON_REQUIRE(
      pooled_height_ > 0 && pooled_width_ > 0, ShapeError, "Pooling: a ",
      kernel_h_, " x ", kernel_w_, " kernel with pad ", pad_h_, " x ", pad_w_,
      " and stride ", stride_h_, " x ", stride_w_,
      " leaves no output for bottom of shape ", bottom[0]->shape_string());
  const vector<int> top_shape = {num_, channels_, pooled_height_,
                                 pooled_width_};
  for (Blob<Dtype>* t : top) t->Reshape(top_shape);
  if (method_ != PoolingParameter::AVE) chosen_.resize(top[0]->count());
}

template <typename Dtype>
void PoolingLayer<Dtype>::Window(int ph, int pw, int* h0, int* h1, int* w0,
                                 int* w1) const {
  const int hstart = ph * stride_h_ - pad_h_;
  const int wstart = pw * stride_w_ - pad_w_;
  *h0 = std::max(hstart, 0);
  *w0 = std::max(wstart, 0);
  *h1 = std::min(hstart + kernel_h_, height_);
  *w1 = std::min(wstart + kernel_w_, width_);
}

// The AVE divisor: the window clipped to the padded input, so padding counts
// but the part of a window past the padding does not (Caffe's rule).
template <typename Dtype>
int PoolingLayer<Dtype>::AveArea(int ph, int pw) const {
  const int hstart = ph * stride_h_ - pad_h_;
  const int wstart = pw * stride_w_ - pad_w_;
  return (std::min(hstart + kernel_h_, height_ + pad_h_) - hstart) *
         (std::min(wstart + kernel_w_, width_ + pad_w_) - wstart);
}

template <typename Dtype>
void PoolingLayer<Dtype>::ForwardMax(const Dtype* bottom, Dtype* top,
                                     Dtype* mask) {
  const int plane = height_ * width_;
  const int top_plane = pooled_height_ * pooled_width_;
  int* chosen = chosen_.data();
  for (int nc = 0; nc < num_ * channels_; ++nc) {
    const Dtype* in = bottom + static_cast<size_t>(nc) * plane;
    for (int ph = 0; ph < pooled_height_; ++ph) {
      for (int pw = 0; pw < pooled_width_; ++pw) {
        int h0, h1, w0, w1;
        Window(ph, pw, &h0, &h1, &w0, &w1);
        int best = h0 * width_ + w0;
        for (int h = h0; h < h1; ++h) {
          for (int w = w0; w < w1; ++w) {
            if (in[h * width_ + w] > in[best]) best = h * width_ + w;
          }
        }
        const int t = ph * pooled_width_ + pw;
        top[t] = in[best];
        if (mask != nullptr) {
          mask[t] = static_cast<Dtype>(best);
        } else {
          chosen[t] = best;
        }
      }
    }
    top += top_plane;
    if (mask != nullptr) {
      mask += top_plane;
    } else {
      chosen += top_plane;
    }
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::ForwardAve(const Dtype* bottom, Dtype* top) const {
  const int plane = height_ * width_;
  for (int nc = 0; nc < num_ * channels_; ++nc) {
    const Dtype* in = bottom + static_cast<size_t>(nc) * plane;
    for (int ph = 0; ph < pooled_height_; ++ph) {
      for (int pw = 0; pw < pooled_width_; ++pw) {
        const int area = AveArea(ph, pw);
        int h0, h1, w0, w1;
        Window(ph, pw, &h0, &h1, &w0, &w1);
        Dtype sum = 0;
        for (int h = h0; h < h1; ++h) {
          for (int w = w0; w < w1; ++w) sum += in[h * width_ + w];
        }
        *top++ = sum / area;
      }
    }
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::ForwardStochastic(const Dtype* bottom, Dtype* top) {
  const int plane = height_ * width_;
  const bool train = this->phase_ == TRAIN;
  vector<Dtype> draws;
  if (train) {
    draws.resize(chosen_.size());
    rng_uniform<Dtype>(static_cast<int>(draws.size()), Dtype(0), Dtype(1),
                       draws.data());
  }
  size_t t = 0;
  for (int nc = 0; nc < num_ * channels_; ++nc) {
    const Dtype* in = bottom + static_cast<size_t>(nc) * plane;
    for (int ph = 0; ph < pooled_height_; ++ph) {
      for (int pw = 0; pw < pooled_width_; ++pw, ++t) {
        int h0, h1, w0, w1;
        Window(ph, pw, &h0, &h1, &w0, &w1);
        Dtype sum = 0, sum_sq = 0;
        for (int h = h0; h < h1; ++h) {
          for (int w = w0; w < w1; ++w) {
            sum += in[h * width_ + w];
            sum_sq += in[h * width_ + w] * in[h * width_ + w];
          }
        }
        if (!train) {
          top[t] = sum > 0 ? sum_sq / sum : Dtype(0);
          continue;
        }
        // The first element whose running sum reaches draw * sum; the last
        // one if rounding leaves the threshold unreached.
        const Dtype threshold = draws[t] * sum;
        int pick = -1;
        Dtype running = 0;
        for (int h = h0; h < h1 && pick < 0; ++h) {
          for (int w = w0; w < w1; ++w) {
            running += in[h * width_ + w];
            if (running >= threshold) {
              pick = h * width_ + w;
              break;
            }
          }
        }
        if (pick < 0) pick = (h1 - 1) * width_ + (w1 - 1);
        chosen_[t] = pick;
        top[t] = in[pick];
      }
    }
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  const Dtype* in = bottom[0]->cpu_data();
  Dtype* out = top[0]->mutable_cpu_data();
  switch (method_) {
    case PoolingParameter::MAX:
      ForwardMax(in, out,
                 top.size() > 1 ? top[1]->mutable_cpu_data() : nullptr);
      break;
    case PoolingParameter::AVE:
      ForwardAve(in, out);
      break;
    case PoolingParameter::STOCHASTIC:
      ForwardStochastic(in, out);
      break;
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::BackwardStochasticTest(const Dtype* top_diff,
                                                 const Dtype* bottom,
                                                 Dtype* bottom_diff) const {
  // d/dx_i (S2 / S1) = (2 x_i S1 - S2) / S1^2, S1 = sum x, S2 = sum x^2.
  const int plane = height_ * width_;
  size_t t = 0;
  for (int nc = 0; nc < num_ * channels_; ++nc) {
    const Dtype* in = bottom + static_cast<size_t>(nc) * plane;
    Dtype* diff = bottom_diff + static_cast<size_t>(nc) * plane;
    for (int ph = 0; ph < pooled_height_; ++ph) {
      for (int pw = 0; pw < pooled_width_; ++pw, ++t) {
        int h0, h1, w0, w1;
        Window(ph, pw, &h0, &h1, &w0, &w1);
        Dtype sum = 0, sum_sq = 0;
        for (int h = h0; h < h1; ++h) {
          for (int w = w0; w < w1; ++w) {
            sum += in[h * width_ + w];
            sum_sq += in[h * width_ + w] * in[h * width_ + w];
          }
        }
        if (!(sum > 0)) continue;
        const Dtype scale = top_diff[t] / (sum * sum);
        for (int h = h0; h < h1; ++h) {
          for (int w = w0; w < w1; ++w) {
            diff[h * width_ + w] +=
                scale * (2 * in[h * width_ + w] * sum - sum_sq);
          }
        }
      }
    }
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                       const vector<bool>& propagate_down,
                                       const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype* top_diff = top[0]->cpu_diff();
  Dtype* bottom_diff = bottom[0]->mutable_cpu_diff();
  cpu_set(bottom[0]->count(), Dtype(0), bottom_diff);
  const int plane = height_ * width_;
  const int top_plane = pooled_height_ * pooled_width_;
  const int planes = num_ * channels_;
  if (method_ == PoolingParameter::STOCHASTIC && this->phase_ != TRAIN) {
    BackwardStochasticTest(top_diff, bottom[0]->cpu_data(), bottom_diff);
    return;
  }
  if (method_ == PoolingParameter::AVE) {
    for (int nc = 0; nc < planes; ++nc) {
      Dtype* diff = bottom_diff + static_cast<size_t>(nc) * plane;
      for (int ph = 0; ph < pooled_height_; ++ph) {
        for (int pw = 0; pw < pooled_width_; ++pw) {
          const int area = AveArea(ph, pw);
          int h0, h1, w0, w1;
          Window(ph, pw, &h0, &h1, &w0, &w1);
          const Dtype g = *top_diff++ / area;
          for (int h = h0; h < h1; ++h) {
            for (int w = w0; w < w1; ++w) diff[h * width_ + w] += g;
          }
        }
      }
    }
    return;
  }
  // MAX, and STOCHASTIC in training: route each top diff to its element.
  const bool use_mask = method_ == PoolingParameter::MAX && top.size() > 1;
  const Dtype* mask = use_mask ? top[1]->cpu_data() : nullptr;
  for (int nc = 0; nc < planes; ++nc) {
    Dtype* diff = bottom_diff + static_cast<size_t>(nc) * plane;
    const size_t base = static_cast<size_t>(nc) * top_plane;
    for (int t = 0; t < top_plane; ++t) {
      const int index =
          use_mask ? static_cast<int>(mask[base + t]) : chosen_[base + t];
      diff[index] += top_diff[base + t];
    }
  }
}

INSTANTIATE_CLASS(PoolingLayer);
REGISTER_LAYER_CLASS(Pooling);

}  // namespace poseidon
