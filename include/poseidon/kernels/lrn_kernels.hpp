// LRN's bodies for Poseidon's own kernels (the CAFFE engine), shared by the
// CPU and the GPU (util/for_each.hpp); see layers/lrn_layer.hpp for the
// formulas. The blob is N x C x H x W with `spatial` = H * W. ACROSS_CHANNELS
// bodies run once per position p = (n, h, w) of N x spatial and slide a
// running window sum along the channels (as the CPU pass does along
// planes); WITHIN_CHANNEL bodies run once per element and sum their
// size x size window directly.
#ifndef POSEIDON_KERNELS_LRN_KERNELS_HPP_
#define POSEIDON_KERNELS_LRN_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// s^-beta; the usual beta = 0.75 takes two square roots, several times
// cheaper than pow (the CPU pass does the same).
template <typename Dtype>
POSEIDON_HD_INLINE Dtype LRNNegativePower(Dtype s, Dtype beta) {
  return beta == Dtype(0.75) ? Dtype(1) / hd::sqrt(s * hd::sqrt(s))
                             : hd::pow(s, -beta);
}

// The offset of channel 0 of position p.
POSEIDON_HD_INLINE int LRNColumnStart(int p, int channels, int spatial) {
  return (p / spatial) * channels * spatial + p % spatial;
}

// ACROSS_CHANNELS: scale = k + alpha_over_size * (window sum of x^2).
template <typename Dtype>
struct LRNScaleAcross {
  static constexpr int kCostPerIndex = 64;
  const Dtype* x;
  Dtype* scale;
  int channels;
  int spatial;
  int size;
  Dtype alpha_over_size;
  Dtype k;
  POSEIDON_HD void operator()(int p) const {
    const int start = LRNColumnStart(p, channels, spatial);
    const Dtype* xp = x + start;
    Dtype* sp = scale + start;
    const int half = (size - 1) / 2;
    Dtype sum = 0;
    for (int c = 0; c < hd::min(half, channels); ++c) {
      sum += xp[c * spatial] * xp[c * spatial];
    }
    for (int c = 0; c < channels; ++c) {
      if (c + half < channels) {
        const Dtype v = xp[(c + half) * spatial];
        sum += v * v;
      }
      if (c - half - 1 >= 0) {
        const Dtype v = xp[(c - half - 1) * spatial];
        sum -= v * v;
      }
      sp[c * spatial] = k + alpha_over_size * sum;
    }
  }
};

// WITHIN_CHANNEL: scale = 1 + alpha_over_area * (sum of x^2 over the
// size x size window centred on the element, clipped to the plane).
template <typename Dtype>
struct LRNScaleWithin {
  static constexpr int kCostPerIndex = 9;
  const Dtype* x;
  Dtype* scale;
  int height;
  int width;
  int size;
  Dtype alpha_over_area;
  POSEIDON_HD void operator()(int i) const {
    const int w = i % width;
    const int h = (i / width) % height;
    const Dtype* plane = x + (i - h * width - w);
    const int half = (size - 1) / 2;
    const int h1 = hd::min(h + half + 1, height);
    const int w1 = hd::min(w + half + 1, width);
    Dtype sum = 0;
    for (int u = hd::max(h - half, 0); u < h1; ++u) {
      for (int v = hd::max(w - half, 0); v < w1; ++v) {
        const Dtype value = plane[u * width + v];
        sum += value * value;
      }
    }
    scale[i] = Dtype(1) + alpha_over_area * sum;
  }
};

// y = x * scale^-beta
template <typename Dtype>
struct LRNOutput {
  const Dtype* x;
  const Dtype* scale;
  Dtype* y;
  Dtype beta;
  POSEIDON_HD void operator()(int i) const {
    y[i] = LRNNegativePower(scale[i], beta) * x[i];
  }
};

// ACROSS_CHANNELS backward:
//   dx = dy * scale^-beta + coeff * x * (window sum of dy * y / scale)
// with coeff = -2 * alpha * beta / size.
template <typename Dtype>
struct LRNBackwardAcross {
  static constexpr int kCostPerIndex = 64;
  const Dtype* x;
  const Dtype* y;
  const Dtype* scale;
  const Dtype* dy;
  Dtype* dx;
  int channels;
  int spatial;
  int size;
  Dtype beta;
  Dtype coeff;
  POSEIDON_HD Dtype Ratio(int offset) const {
    return dy[offset] * y[offset] / scale[offset];
  }
  POSEIDON_HD void operator()(int p) const {
    const int start = LRNColumnStart(p, channels, spatial);
    const int half = (size - 1) / 2;
    Dtype sum = 0;
    for (int c = 0; c < hd::min(half, channels); ++c) {
      sum += Ratio(start + c * spatial);
    }
    for (int c = 0; c < channels; ++c) {
      if (c + half < channels) sum += Ratio(start + (c + half) * spatial);
      if (c - half - 1 >= 0) sum -= Ratio(start + (c - half - 1) * spatial);
      const int at = start + c * spatial;
      dx[at] = dy[at] * LRNNegativePower(scale[at], beta) + coeff * x[at] * sum;
    }
  }
};

// WITHIN_CHANNEL backward, first half: ratio = dy * y / scale.
template <typename Dtype>
struct LRNRatio {
  const Dtype* y;
  const Dtype* dy;
  const Dtype* scale;
  Dtype* ratio;
  POSEIDON_HD void operator()(int i) const {
    ratio[i] = dy[i] * y[i] / scale[i];
  }
};

// WITHIN_CHANNEL backward, second half:
//   dx = dy * scale^-beta + coeff * x * (window sum of ratio)
// with coeff = -2 * alpha * beta / size^2 (the windows are symmetric, so
// the elements whose window holds i are those in i's window).
template <typename Dtype>
struct LRNBackwardWithin {
  static constexpr int kCostPerIndex = 9;
  const Dtype* x;
  const Dtype* scale;
  const Dtype* dy;
  const Dtype* ratio;
  Dtype* dx;
  int height;
  int width;
  int size;
  Dtype beta;
  Dtype coeff;
  POSEIDON_HD void operator()(int i) const {
    const int w = i % width;
    const int h = (i / width) % height;
    const Dtype* plane = ratio + (i - h * width - w);
    const int half = (size - 1) / 2;
    const int h1 = hd::min(h + half + 1, height);
    const int w1 = hd::min(w + half + 1, width);
    Dtype sum = 0;
    for (int u = hd::max(h - half, 0); u < h1; ++u) {
      for (int v = hd::max(w - half, 0); v < w1; ++v) {
        sum += plane[u * width + v];
      }
    }
    dx[i] = dy[i] * LRNNegativePower(scale[i], beta) + coeff * x[i] * sum;
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_LRN_KERNELS_HPP_
