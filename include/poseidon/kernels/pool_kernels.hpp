// Pooling's per-element bodies, shared by the CPU and the GPU
// (util/for_each.hpp); see layers/pooling_layer.hpp for the formulas.
//
// Forward bodies take one index per top element (n, c, ph, pw) and loop
// over its window; backward bodies take one index per bottom element and
// gather from the windows that contain it, in increasing (ph, pw) order,
// which is the order in which the CPU pass adds the same terms, so both
// devices compute the same sums without atomics. Windows are clipped to
// the image as in Caffe; MAX keeps the first maximum in (h, w) order (a
// later equal value or a NaN never replaces it) and records its index
// h * width + w in the plane (-1 for an empty window, whose value is the
// lowest finite number); AVE divides by the window clipped to the padded
// input (Caffe's divisor). Every plane count fits an int.
#ifndef POSEIDON_KERNELS_POOL_KERNELS_HPP_
#define POSEIDON_KERNELS_POOL_KERNELS_HPP_

#include <cfloat>

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

struct PoolShape {
  int height, width;                // bottom plane
  int pooled_height, pooled_width;  // top plane
  int kernel_h, kernel_w;
  int stride_h, stride_w;
  int pad_h, pad_w;

  // The window of top element (ph, pw): rows [h0, h1), columns [w0, w1),
  // clipped to the image.
  POSEIDON_HD void Window(int ph, int pw, int* h0, int* h1, int* w0,
                          int* w1) const {
    const int hstart = ph * stride_h - pad_h;
    const int wstart = pw * stride_w - pad_w;
    *h0 = hd::max(hstart, 0);
    *w0 = hd::max(wstart, 0);
    *h1 = hd::min(hstart + kernel_h, height);
    *w1 = hd::min(wstart + kernel_w, width);
  }
  // Caffe's AVE divisor: the window clipped to the padded input. Each side
  // fits an int (Note [Window sizes in 64 bits]); their product may not.
  POSEIDON_HD int64_t AveArea(int ph, int pw) const {
    const int hstart = ph * stride_h - pad_h;
    const int wstart = pw * stride_w - pad_w;
    return static_cast<int64_t>(hd::min(hstart + kernel_h, height + pad_h) -
                                hstart) *
           (hd::min(wstart + kernel_w, width + pad_w) - wstart);
  }
  // The top rows [*lo, *hi) (or columns) whose windows contain bottom row
  // (column) p.
  POSEIDON_HD static void Covering(int p, int pad, int kernel, int stride,
                                   int pooled, int* lo, int* hi) {
    const int padded = p + pad;
    *lo = padded < kernel ? 0 : (padded - kernel) / stride + 1;
    *hi = hd::min(padded / stride + 1, pooled);
  }
};

POSEIDON_HD_INLINE float LowestValue(float) { return -FLT_MAX; }
POSEIDON_HD_INLINE double LowestValue(double) { return -DBL_MAX; }

// top = max over the window; its plane index goes to `argmax` and/or to
// `mask` (as a Dtype, the mask top), each when not null.
template <typename Dtype>
struct MaxPoolForward {
  const Dtype* bottom;
  Dtype* top;
  int* argmax;
  Dtype* mask;
  PoolShape s;
  POSEIDON_HD void operator()(int t) const {
    const int pw = t % s.pooled_width;
    const int ph = (t / s.pooled_width) % s.pooled_height;
    const int plane = t / (s.pooled_width * s.pooled_height);
    const Dtype* in = bottom + plane * s.height * s.width;
    int h0, h1, w0, w1;
    s.Window(ph, pw, &h0, &h1, &w0, &w1);
    Dtype best = LowestValue(Dtype(0));
    int index = -1;
    if (h0 < h1 && w0 < w1) {
      index = h0 * s.width + w0;
      best = in[index];
      for (int h = h0; h < h1; ++h) {
        for (int w = w0; w < w1; ++w) {
          const Dtype v = in[h * s.width + w];
          if (v > best) {
            best = v;
            index = h * s.width + w;
          }
        }
      }
    }
    top[t] = best;
    if (argmax != nullptr) argmax[t] = index;
    if (mask != nullptr) mask[t] = static_cast<Dtype>(index);
  }
};

// bottom_diff = the sum of the top diffs of the windows that chose this
// element: by `mask` (the mask top) when not null, else by `argmax` (MAX,
// and STOCHASTIC in training).
template <typename Dtype>
struct MaxPoolBackward {
  const Dtype* top_diff;
  const int* argmax;
  const Dtype* mask;
  Dtype* bottom_diff;
  PoolShape s;
  POSEIDON_HD void operator()(int i) const {
    const int w = i % s.width;
    const int h = (i / s.width) % s.height;
    const int plane = i / (s.width * s.height);
    int ph0, ph1, pw0, pw1;
    PoolShape::Covering(h, s.pad_h, s.kernel_h, s.stride_h, s.pooled_height,
                        &ph0, &ph1);
    PoolShape::Covering(w, s.pad_w, s.kernel_w, s.stride_w, s.pooled_width,
                        &pw0, &pw1);
    const int self = h * s.width + w;
    const int offset = plane * s.pooled_height * s.pooled_width;
    Dtype sum = 0;
    for (int ph = ph0; ph < ph1; ++ph) {
      for (int pw = pw0; pw < pw1; ++pw) {
        const int t = offset + ph * s.pooled_width + pw;
        const int chosen =
            mask != nullptr ? static_cast<int>(mask[t]) : argmax[t];
        if (chosen == self) sum += top_diff[t];
      }
    }
    bottom_diff[i] = sum;
  }
};

template <typename Dtype>
struct AvePoolForward {
  const Dtype* bottom;
  Dtype* top;
  PoolShape s;
  POSEIDON_HD void operator()(int t) const {
    const int pw = t % s.pooled_width;
    const int ph = (t / s.pooled_width) % s.pooled_height;
    const int plane = t / (s.pooled_width * s.pooled_height);
    const Dtype* in = bottom + plane * s.height * s.width;
    int h0, h1, w0, w1;
    s.Window(ph, pw, &h0, &h1, &w0, &w1);
    if (h0 >= h1 || w0 >= w1) {
      top[t] = Dtype(0);
      return;
    }
    Dtype sum = 0;
    for (int h = h0; h < h1; ++h) {
      for (int w = w0; w < w1; ++w) sum += in[h * s.width + w];
    }
    top[t] = sum / static_cast<Dtype>(s.AveArea(ph, pw));
  }
};

template <typename Dtype>
struct AvePoolBackward {
  const Dtype* top_diff;
  Dtype* bottom_diff;
  PoolShape s;
  POSEIDON_HD void operator()(int i) const {
    const int w = i % s.width;
    const int h = (i / s.width) % s.height;
    const int plane = i / (s.width * s.height);
    int ph0, ph1, pw0, pw1;
    PoolShape::Covering(h, s.pad_h, s.kernel_h, s.stride_h, s.pooled_height,
                        &ph0, &ph1);
    PoolShape::Covering(w, s.pad_w, s.kernel_w, s.stride_w, s.pooled_width,
                        &pw0, &pw1);
    const Dtype* td = top_diff + plane * s.pooled_height * s.pooled_width;
    Dtype sum = 0;
    for (int ph = ph0; ph < ph1; ++ph) {
      for (int pw = pw0; pw < pw1; ++pw) {
        sum += td[ph * s.pooled_width + pw] /
               static_cast<Dtype>(s.AveArea(ph, pw));
      }
    }
    bottom_diff[i] = sum;
  }
};

// Sum and sum of squares over one window, in (h, w) order.
template <typename Dtype>
POSEIDON_HD_INLINE void WindowSums(const Dtype* in, int width, int h0, int h1,
                                   int w0, int w1, Dtype* sum, Dtype* sum_sq) {
  Dtype s = 0, q = 0;
  for (int h = h0; h < h1; ++h) {
    for (int w = w0; w < w1; ++w) {
      s += in[h * width + w];
      q += in[h * width + w] * in[h * width + w];
    }
  }
  *sum = s;
  *sum_sq = q;
}

// STOCHASTIC in training: the first element of the window whose running
// sum reaches draw * sum (the last one if rounding leaves the threshold
// unreached), with `draws` uniform in [0, 1], one per top element.
template <typename Dtype>
struct StochasticPoolTrain {
  const Dtype* bottom;
  const Dtype* draws;
  Dtype* top;
  int* chosen;
  PoolShape s;
  POSEIDON_HD void operator()(int t) const {
    const int pw = t % s.pooled_width;
    const int ph = (t / s.pooled_width) % s.pooled_height;
    const int plane = t / (s.pooled_width * s.pooled_height);
    const Dtype* in = bottom + plane * s.height * s.width;
    int h0, h1, w0, w1;
    s.Window(ph, pw, &h0, &h1, &w0, &w1);
    Dtype sum = 0;
    for (int h = h0; h < h1; ++h) {
      for (int w = w0; w < w1; ++w) sum += in[h * s.width + w];
    }
    const Dtype threshold = draws[t] * sum;
    int pick = -1;
    Dtype running = 0;
    for (int h = h0; h < h1 && pick < 0; ++h) {
      for (int w = w0; w < w1; ++w) {
        running += in[h * s.width + w];
        if (running >= threshold) {
          pick = h * s.width + w;
          break;
        }
      }
    }
    if (pick < 0) pick = (h1 - 1) * s.width + (w1 - 1);
    chosen[t] = pick;
    top[t] = in[pick];
  }
};

// STOCHASTIC in testing: the probability-weighted average
// sum(x^2) / sum(x), 0 where sum(x) <= 0.
template <typename Dtype>
struct StochasticPoolTest {
  const Dtype* bottom;
  Dtype* top;
  PoolShape s;
  POSEIDON_HD void operator()(int t) const {
    const int pw = t % s.pooled_width;
    const int ph = (t / s.pooled_width) % s.pooled_height;
    const int plane = t / (s.pooled_width * s.pooled_height);
    int h0, h1, w0, w1;
    s.Window(ph, pw, &h0, &h1, &w0, &w1);
    Dtype sum, sum_sq;
    WindowSums(bottom + plane * s.height * s.width, s.width, h0, h1, w0, w1,
               &sum, &sum_sq);
    top[t] = sum > 0 ? sum_sq / sum : Dtype(0);
  }
};

// Its gradient: d/dx_i (S2 / S1) = (2 x_i S1 - S2) / S1^2 summed over the
// windows that contain x_i (windows with S1 <= 0 give nothing).
template <typename Dtype>
struct StochasticPoolTestBackward {
  const Dtype* bottom;
  const Dtype* top_diff;
  Dtype* bottom_diff;
  PoolShape s;
  POSEIDON_HD void operator()(int i) const {
    const int w = i % s.width;
    const int h = (i / s.width) % s.height;
    const int plane = i / (s.width * s.height);
    const Dtype* in = bottom + plane * s.height * s.width;
    const Dtype* td = top_diff + plane * s.pooled_height * s.pooled_width;
    const Dtype x = in[h * s.width + w];
    int ph0, ph1, pw0, pw1;
    PoolShape::Covering(h, s.pad_h, s.kernel_h, s.stride_h, s.pooled_height,
                        &ph0, &ph1);
    PoolShape::Covering(w, s.pad_w, s.kernel_w, s.stride_w, s.pooled_width,
                        &pw0, &pw1);
    Dtype acc = 0;
    for (int ph = ph0; ph < ph1; ++ph) {
      for (int pw = pw0; pw < pw1; ++pw) {
        int h0, h1, w0, w1;
        s.Window(ph, pw, &h0, &h1, &w0, &w1);
        Dtype sum, sum_sq;
        WindowSums(in, s.width, h0, h1, w0, w1, &sum, &sum_sq);
        if (!(sum > 0)) continue;
        const Dtype scale = td[ph * s.pooled_width + pw] / (sum * sum);
        acc += scale * (2 * x * sum - sum_sq);
      }
    }
    bottom_diff[i] = acc;
  }
};

// SPP: copies each sample's `dim` values of one pyramid level into (or
// out of) its slice [offset, offset + dim) of the sample's `per_sample`
// values in the concatenated top. One index per level element.
template <typename Dtype>
struct CopyIntoSlice {
  const Dtype* level;
  Dtype* top;
  int dim, per_sample, offset;
  POSEIDON_HD void operator()(int i) const {
    const int n = i / dim;
    top[n * per_sample + offset + (i - n * dim)] = level[i];
  }
};

template <typename Dtype>
struct CopyFromSlice {
  const Dtype* top;
  Dtype* level;
  int dim, per_sample, offset;
  POSEIDON_HD void operator()(int i) const {
    const int n = i / dim;
    level[i] = top[n * per_sample + offset + (i - n * dim)];
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_POOL_KERNELS_HPP_
