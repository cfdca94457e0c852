// Softmax's bodies for Poseidon's own kernels (the CAFFE engine), shared by
// the CPU and the GPU (util/for_each.hpp); see layers/softmax_layer.hpp for
// the formulas. The data is viewed as outer x channels x inner (row-major),
// softmax taken along channels: a "position" p in [0, outer * inner) is one
// column (n = p / inner, j = p % inner), element i = (n * channels + c) *
// inner + j. Per-position bodies loop over the channels; per-element bodies
// read their position's value from `pos`: Apply(r, j) is the body for row
// r = n * channels + c and column j of the (outer * channels) x inner
// matrix, run by for_each_rows (util/for_each_rows.hpp: on the CPU nested
// loops, the row's position found once per row; on the GPU operator()(i),
// one thread per element).
#ifndef POSEIDON_KERNELS_SOFTMAX_KERNELS_HPP_
#define POSEIDON_KERNELS_SOFTMAX_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// The flat index of channel 0 of position p.
POSEIDON_HD_INLINE int ColumnStart(int p, int channels, int inner) {
  return (p / inner) * channels * inner + p % inner;
}

// Per-position reductions over the channels: Start(i) takes channel 0's
// element i, Combine(acc, i) folds in the element i of the next channel, in
// channel order, and operator()(p) is the whole column (the GPU's one
// thread per position); the CPU folds blocks of neighbouring positions
// channel by channel (SoftmaxLayer's ColumnReduce), the same order per
// position, so the same bits.

// pos[p] = max_c x[p, c]
template <typename Dtype>
struct ChannelMax {
  static constexpr int kCostPerIndex = 32;
  const Dtype* x;
  Dtype* pos;
  int channels;
  int inner;
  POSEIDON_HD Dtype Start(int i) const { return x[i]; }
  POSEIDON_HD Dtype Combine(Dtype acc, int i) const {
    return hd::max(acc, x[i]);
  }
  POSEIDON_HD void operator()(int p) const {
    const int start = ColumnStart(p, channels, inner);
    Dtype m = Start(start);
    for (int c = 1; c < channels; ++c) m = Combine(m, start + c * inner);
    pos[p] = m;
  }
};

// y = exp(x - pos[position]); y may be x.
template <typename Dtype>
struct SubtractExp {
  const Dtype* x;
  const Dtype* pos;
  Dtype* y;
  int channels;
  int inner;
  POSEIDON_HD void Apply(int r, int j) const {
    const int i = r * inner + j;
    y[i] = hd::exp(x[i] - pos[r / channels * inner + j]);
  }
  POSEIDON_HD void operator()(int i) const { Apply(i / inner, i % inner); }
};

// pos[p] = sum_c y[p, c], in channel order.
template <typename Dtype>
struct ChannelSum {
  static constexpr int kCostPerIndex = 32;
  const Dtype* y;
  Dtype* pos;
  int channels;
  int inner;
  POSEIDON_HD Dtype Start(int i) const { return Dtype(0) + y[i]; }
  POSEIDON_HD Dtype Combine(Dtype acc, int i) const { return acc + y[i]; }
  POSEIDON_HD void operator()(int p) const {
    const int start = ColumnStart(p, channels, inner);
    Dtype s = Start(start);
    for (int c = 1; c < channels; ++c) s = Combine(s, start + c * inner);
    pos[p] = s;
  }
};

// y /= pos[position]
template <typename Dtype>
struct ChannelDivide {
  const Dtype* pos;
  Dtype* y;
  int channels;
  int inner;
  POSEIDON_HD void Apply(int r, int j) const {
    y[r * inner + j] /= pos[r / channels * inner + j];
  }
  POSEIDON_HD void operator()(int i) const { Apply(i / inner, i % inner); }
};

// pos[p] = sum_c dy[p, c] * y[p, c], in channel order.
template <typename Dtype>
struct ChannelDot {
  static constexpr int kCostPerIndex = 64;
  const Dtype* dy;
  const Dtype* y;
  Dtype* pos;
  int channels;
  int inner;
  POSEIDON_HD Dtype Start(int i) const { return Dtype(0) + dy[i] * y[i]; }
  POSEIDON_HD Dtype Combine(Dtype acc, int i) const {
    return acc + dy[i] * y[i];
  }
  POSEIDON_HD void operator()(int p) const {
    const int start = ColumnStart(p, channels, inner);
    Dtype s = Start(start);
    for (int c = 1; c < channels; ++c) s = Combine(s, start + c * inner);
    pos[p] = s;
  }
};

// dx = y * (dy - pos[position]); dx may be dy.
template <typename Dtype>
struct SoftmaxGradient {
  const Dtype* y;
  const Dtype* dy;
  const Dtype* pos;
  Dtype* dx;
  int channels;
  int inner;
  POSEIDON_HD void Apply(int r, int j) const {
    const int i = r * inner + j;
    dx[i] = y[i] * (dy[i] - pos[r / channels * inner + j]);
  }
  POSEIDON_HD void operator()(int i) const { Apply(i / inner, i % inner); }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_SOFTMAX_KERNELS_HPP_
