// LRNLayer: window sums of squares across channels (a running sum over whole
// planes, so the inner loops run over contiguous memory) or within each
// plane (a separable box sum), then the power; images split over
// ParallelFor for large blobs.
#include "poseidon/layers/lrn_layer.hpp"

#include <algorithm>
#include <cmath>

#include "poseidon/util/parallel.hpp"

namespace poseidon {
namespace {

// out = s^-beta. The usual beta = 0.75 takes two square roots, several
// times cheaper than pow.
template <typename Dtype>
void NegativePower(size_t n, const Dtype* s, Dtype beta, Dtype* out) {
  if (beta == Dtype(0.75)) {
    for (size_t i = 0; i < n; ++i) {
      out[i] = Dtype(1) / std::sqrt(s[i] * std::sqrt(s[i]));
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) out[i] = std::pow(s[i], -beta);
}

// Blobs with fewer elements stay on the calling thread.
constexpr size_t kMinParallelCount = 1 << 15;

}  // namespace

template <typename Dtype>
void LRNLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  const LRNParameter& p = this->layer_param_.lrn_param();
  POSEIDON_REQUIRE(p.local_size() % 2 == 1 && p.local_size() < (1u << 20),
                   ConfigError, "lrn_param.local_size must be odd and ",
                   "positive, got ", static_cast<int32_t>(p.local_size()));
  size_ = static_cast<int>(p.local_size());
  alpha_ = p.alpha();
  beta_ = p.beta();
  k_ = p.k();
  across_channels_ = p.norm_region() == LRNParameter::ACROSS_CHANNELS;
}

template <typename Dtype>
void LRNLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                              const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(bottom[0]->num_axes() == 4, ShapeError,
                   "LRN needs a 4-D bottom (num, channels, height, width), "
                   "got shape ",
                   bottom[0]->shape_string());
  POSEIDON_REQUIRE(bottom[0] != top[0], ConfigError, "LRN cannot run in place");
  num_ = bottom[0]->shape(0);
  channels_ = bottom[0]->shape(1);
  height_ = bottom[0]->shape(2);
  width_ = bottom[0]->shape(3);
  top[0]->ReshapeLike(*bottom[0]);
  scale_.ReshapeLike(*bottom[0]);
}

template <typename Dtype>
template <typename Fn>
void LRNLayer<Dtype>::ForImages(const Fn& fn) {
  const size_t image = static_cast<size_t>(channels_) * height_ * width_;
  const int workers = image * num_ < kMinParallelCount
                          ? 1
                          : std::max(1, ParallelForWorkers(num_));
  if (scratch_.size() < 3 * image * workers) {
    scratch_.resize(3 * image * workers);
  }
  if (workers == 1) {
    fn(0, num_, scratch_.data());
    return;
  }
  ParallelFor(num_, [&](int begin, int end, int w) {
    fn(begin, end, scratch_.data() + 3 * image * w);
  });
}

template <typename Dtype>
void LRNLayer<Dtype>::WindowSum(const Dtype* in, Dtype coeff, Dtype offset,
                                Dtype* out, Dtype* scratch) const {
  const int half = (size_ - 1) / 2;
  const int plane = height_ * width_;
  if (across_channels_) {
    // running[s] = sum of in[c'][s] for c' in the window of channel c.
    Dtype* running = scratch;
    std::fill(running, running + plane, Dtype(0));
    for (int c = 0; c < std::min(half, channels_); ++c) {
      const Dtype* add = in + static_cast<size_t>(c) * plane;
      for (int s = 0; s < plane; ++s) running[s] += add[s];
    }
    for (int c = 0; c < channels_; ++c) {
      if (c + half < channels_) {
        const Dtype* add = in + static_cast<size_t>(c + half) * plane;
        for (int s = 0; s < plane; ++s) running[s] += add[s];
      }
      if (c - half - 1 >= 0) {
        const Dtype* sub = in + static_cast<size_t>(c - half - 1) * plane;
        for (int s = 0; s < plane; ++s) running[s] -= sub[s];
      }
      Dtype* o = out + static_cast<size_t>(c) * plane;
      for (int s = 0; s < plane; ++s) o[s] = offset + coeff * running[s];
    }
    return;
  }
  // Separable box sum per plane: rows into scratch, then columns.
  Dtype* rows = scratch;
  for (int c = 0; c < channels_; ++c) {
    const Dtype* x = in + static_cast<size_t>(c) * plane;
    Dtype* o = out + static_cast<size_t>(c) * plane;
    for (int h = 0; h < height_; ++h) {
      for (int w = 0; w < width_; ++w) {
        Dtype sum = 0;
        const int w1 = std::min(w + half + 1, width_);
        for (int v = std::max(w - half, 0); v < w1; ++v) {
          sum += x[h * width_ + v];
        }
        rows[h * width_ + w] = sum;
      }
    }
    for (int h = 0; h < height_; ++h) {
      Dtype* orow = o + h * width_;
      std::fill(orow, orow + width_, Dtype(0));
      const int h1 = std::min(h + half + 1, height_);
      for (int u = std::max(h - half, 0); u < h1; ++u) {
        const Dtype* r = rows + u * width_;
        for (int w = 0; w < width_; ++w) orow[w] += r[w];
      }
      for (int w = 0; w < width_; ++w) orow[w] = offset + coeff * orow[w];
    }
  }
}

template <typename Dtype>
void LRNLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  const size_t image = static_cast<size_t>(channels_) * height_ * width_;
  const Dtype area = across_channels_ ? Dtype(size_) : Dtype(size_ * size_);
  const Dtype offset = across_channels_ ? k_ : Dtype(1);
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  Dtype* scale = scale_.mutable_cpu_data();
  ForImages([&](int begin, int end, Dtype* scratch) {
    Dtype* squares = scratch;
    for (int n = begin; n < end; ++n) {
      const Dtype* xn = x + n * image;
      for (size_t i = 0; i < image; ++i) squares[i] = xn[i] * xn[i];
      Dtype* sn = scale + n * image;
      WindowSum(squares, alpha_ / area, offset, sn, scratch + image);
      Dtype* yn = y + n * image;
      NegativePower(image, sn, beta_, yn);
      for (size_t i = 0; i < image; ++i) yn[i] *= xn[i];
    }
  });
}

template <typename Dtype>
void LRNLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const size_t image = static_cast<size_t>(channels_) * height_ * width_;
  const Dtype area = across_channels_ ? Dtype(size_) : Dtype(size_ * size_);
  const Dtype coeff = -2 * alpha_ * beta_ / area;
  const Dtype* x = bottom[0]->cpu_data();
  const Dtype* y = top[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  const Dtype* scale = scale_.cpu_data();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  ForImages([&](int begin, int end, Dtype* scratch) {
    Dtype* ratio = scratch;
    Dtype* window = scratch + image;
    Dtype* tmp = scratch + 2 * image;
    for (int n = begin; n < end; ++n) {
      const size_t off = n * image;
      for (size_t i = 0; i < image; ++i) {
        ratio[i] = dy[off + i] * y[off + i] / scale[off + i];
      }
      WindowSum(ratio, Dtype(1), Dtype(0), window, tmp);
      NegativePower(image, scale + off, beta_, ratio);
      for (size_t i = 0; i < image; ++i) {
        dx[off + i] = dy[off + i] * ratio[i] + coeff * x[off + i] * window[i];
      }
    }
  });
}

INSTANTIATE_CLASS(LRNLayer);
REGISTER_LAYER_CLASS(LRN);

}  // namespace poseidon
