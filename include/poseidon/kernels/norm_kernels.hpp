// The element-wise and per-channel bodies of MVN and BatchNorm, shared by
// the CPU and the GPU (util/for_each.hpp); see layers/mvn_layer.hpp and
// layers/batch_norm_layer.hpp for the formulas. The reductions between them
// (means over groups or channels) are gemv calls against a ones vector.
//
// MVN views its blob as groups x dim (group g = i / dim). BatchNorm views
// its blob as num x channels x spatial (channel c = (i / spatial) %
// channels).
#ifndef POSEIDON_KERNELS_NORM_KERNELS_HPP_
#define POSEIDON_KERNELS_NORM_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// ---- MVN

// y = x - mean[g], and sq = y^2 when sq is not null; y may be x.
template <typename Dtype>
struct MVNCenter {
  const Dtype* x;
  const Dtype* mean;
  Dtype* y;
  Dtype* sq;
  int dim;
  POSEIDON_HD void operator()(int i) const {
    const Dtype v = x[i] - mean[i / dim];
    y[i] = v;
    if (sq != nullptr) sq[i] = v * v;
  }
};

// std[g] = sqrt(var[g]) + eps
template <typename Dtype>
struct MVNStd {
  const Dtype* var;
  Dtype eps;
  Dtype* std;
  POSEIDON_HD void operator()(int g) const { std[g] = hd::sqrt(var[g]) + eps; }
};

// y /= std[g]
template <typename Dtype>
struct MVNDivide {
  const Dtype* std;
  Dtype* y;
  int dim;
  POSEIDON_HD void operator()(int i) const { y[i] /= std[i / dim]; }
};

// Without variance: dx = dy - mean_dy[g].
// With variance:    dx = (dy - mean_dy[g] - y * mean_y_dy[g]) / std[g].
// dx may be dy.
template <typename Dtype>
struct MVNBackward {
  const Dtype* dy;
  const Dtype* y;
  const Dtype* mean_dy;
  const Dtype* mean_y_dy;
  const Dtype* std;
  Dtype* dx;
  int dim;
  bool normalize_variance;
  POSEIDON_HD void operator()(int i) const {
    const int g = i / dim;
    if (!normalize_variance) {
      dx[i] = dy[i] - mean_dy[g];
      return;
    }
    dx[i] = (dy[i] - mean_dy[g] - y[i] * mean_y_dy[g]) / std[g];
  }
};

// ---- BatchNorm

POSEIDON_HD_INLINE int ChannelOf(int i, int channels, int spatial) {
  return (i / spatial) % channels;
}

// sq = (x - mean[c])^2
template <typename Dtype>
struct BatchNormSquaredDeviation {
  const Dtype* x;
  const Dtype* mean;
  Dtype* sq;
  int channels;
  int spatial;
  POSEIDON_HD void operator()(int i) const {
    const Dtype d = x[i] - mean[ChannelOf(i, channels, spatial)];
    sq[i] = d * d;
  }
};

// With batch statistics, per channel c (run for max(channels, 1) indices
// so that an empty channel axis still counts the batch):
//   inv_std[c] = 1 / sqrt(var[c] + eps)
//   running_mean[c] = maf * running_mean[c] + mean[c]
//   running_var[c]  = maf * running_var[c] + correction * var[c]
//   factor[0]       = maf * factor[0] + 1        (once, by c = 0)
template <typename Dtype>
struct BatchNormUpdateStatistics {
  const Dtype* mean;
  const Dtype* var;
  Dtype* inv_std;
  Dtype* running_mean;
  Dtype* running_var;
  Dtype* factor;
  int channels;
  Dtype eps;
  Dtype maf;
  Dtype correction;
  POSEIDON_HD void operator()(int c) const {
    if (c == 0) factor[0] = factor[0] * maf + Dtype(1);
    if (c >= channels) return;
    inv_std[c] = Dtype(1) / hd::sqrt(var[c] + eps);
    running_mean[c] = mean[c] + maf * running_mean[c];
    running_var[c] = correction * var[c] + maf * running_var[c];
  }
};

// With global statistics, per channel c: s = factor == 0 ? 0 : 1 / factor,
//   mean[c] = s * running_mean[c], var[c] = s * running_var[c],
//   inv_std[c] = 1 / sqrt(var[c] + eps).
// The factor is read on the device, so no pass waits for it.
template <typename Dtype>
struct BatchNormGlobalStatistics {
  const Dtype* running_mean;
  const Dtype* running_var;
  const Dtype* factor;
  Dtype* mean;
  Dtype* var;
  Dtype* inv_std;
  Dtype eps;
  POSEIDON_HD void operator()(int c) const {
    const Dtype f = factor[0];
    const Dtype s = f == Dtype(0) ? Dtype(0) : Dtype(1) / f;
    mean[c] = s * running_mean[c];
    var[c] = s * running_var[c];
    inv_std[c] = Dtype(1) / hd::sqrt(var[c] + eps);
  }
};

// y = x_norm = (x - mean[c]) * inv_std[c]; y may be x.
template <typename Dtype>
struct BatchNormNormalize {
  const Dtype* x;
  const Dtype* mean;
  const Dtype* inv_std;
  Dtype* y;
  Dtype* x_norm;
  int channels;
  int spatial;
  POSEIDON_HD void operator()(int i) const {
    const int c = ChannelOf(i, channels, spatial);
    const Dtype v = (x[i] - mean[c]) * inv_std[c];
    y[i] = v;
    x_norm[i] = v;
  }
};

// Batch statistics: dx = (dy - mean_dy[c] - y * mean_dy_y[c]) * inv_std[c].
// Global statistics (mean_dy null): dx = dy * inv_std[c]. dx may be dy.
template <typename Dtype>
struct BatchNormBackward {
  const Dtype* dy;
  const Dtype* y;
  const Dtype* mean_dy;
  const Dtype* mean_dy_y;
  const Dtype* inv_std;
  Dtype* dx;
  int channels;
  int spatial;
  POSEIDON_HD void operator()(int i) const {
    const int c = ChannelOf(i, channels, spatial);
    if (mean_dy == nullptr) {
      dx[i] = dy[i] * inv_std[c];
      return;
    }
    dx[i] = (dy[i] - mean_dy[c] - y[i] * mean_dy_y[c]) * inv_std[c];
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_NORM_KERNELS_HPP_
