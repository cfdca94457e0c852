// The bodies of MVN and BatchNorm, shared by the CPU and the GPU
// (util/for_each.hpp); see layers/mvn_layer.hpp and
// layers/batch_norm_layer.hpp for the formulas.
//
// Both layers view their blob as rows of `row_len` contiguous values that
// share one statistic: MVN's groups (rows x dim, statistic of row r at r),
// BatchNorm's (num * channels) x spatial planes (statistic of channel
// r % channels).
//
// Sums over a row take two steps. The partial-sum bodies below run once per
// (row, part): part p of a row sums its elements p, p + parts, p + 2 parts,
// ... With one part per row (the CPU: see RowParts) that is one contiguous
// loop per row, the rows split over the thread pool; with many (the GPU),
// neighbouring threads read neighbouring elements and there are enough of
// them to fill the device. The layers then add the parts up with a gemv
// against a ones vector. Each part adds in short vectorizable blocks whose
// totals accumulate in double (Note [Blocked sums]).
//
// Element-wise bodies run once per row (`spans`, RowSpans): a whole row
// per index on the CPU (no division per element, a loop that vectorizes),
// one element per index on the GPU (neighbouring threads, neighbouring
// elements).
#ifndef POSEIDON_KERNELS_NORM_KERNELS_HPP_
#define POSEIDON_KERNELS_NORM_KERNELS_HPP_

#include "poseidon/kernels/blocked_sums.hpp"
#include "poseidon/kernels/relu_kernels.hpp"
#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// ---- how rows are split over indices

// Parts per row for the partial sums: 1 on the CPU; on the GPU enough for
// about kGpuSumThreads threads in all, at most 1024 per row and never more
// than the row has elements.
constexpr int kGpuSumThreads = 1 << 17;
POSEIDON_HD_INLINE int RowParts(bool on_gpu, int rows, int row_len) {
  if (!on_gpu || rows <= 0 || row_len <= 1) return 1;
  return hd::max(1, hd::min(hd::min(row_len, 1024), kGpuSumThreads / rows));
}

// The elements [begin, end) of row `row` that one index covers.
struct RowSpan {
  int row;
  int begin;
  int end;
};

// rows x row_len elements split into `chunk` elements of one row per index,
// `per_row` indices per row, `count` indices in all.
struct RowSpans {
  int row_len;
  int chunk;
  int per_row;
  int count;
  POSEIDON_HD RowSpan Of(int i) const {
    const int row = i / per_row;
    const int start = (i - row * per_row) * chunk;
    const int base = row * row_len;
    return {row, base + start, base + hd::min(start + chunk, row_len)};
  }
};

// Elements per index on the CPU: whole rows up to this length.
constexpr int kCpuRowChunk = 4096;
POSEIDON_HD_INLINE RowSpans MakeRowSpans(bool on_gpu, int rows, int row_len) {
  const int chunk = on_gpu ? 1 : hd::max(1, hd::min(row_len, kCpuRowChunk));
  const int per_row = (row_len + chunk - 1) / chunk;
  return {row_len, chunk, per_row, rows * per_row};
}

// ---- terms for BlockedSums (kernels/blocked_sums.hpp): {(x[k] - m)^2}
// and {x[k] - m, (x[k] - m)^2}.

template <typename Dtype>
struct TermSquaredDeviation {
  const Dtype* x;
  Dtype m;
  POSEIDON_HD_INLINE void operator()(int k, Dtype* v) const {
    const Dtype d = x[k] - m;
    v[0] = d * d;
  }
};
template <typename Dtype>
struct TermShiftedMoments {
  const Dtype* x;
  Dtype m;
  POSEIDON_HD_INLINE void operator()(int k, Dtype* v) const {
    const Dtype d = x[k] - m;
    v[0] = d;
    v[1] = d * d;
  }
};

// ---- partial sums (index i = row * parts + part)

// The first element of part `part` of row `row` and how many it has.
POSEIDON_HD_INLINE int PartFirst(int row, int part, int row_len) {
  return row * row_len + part;
}
POSEIDON_HD_INLINE int PartCount(int part, int parts, int row_len) {
  return (row_len - part + parts - 1) / parts;
}

// sum_x[i] = sum of x over the part's elements, and sum_xy[i] that of x * y
// when y is not null (Note [Blocked sums]).
template <typename Dtype>
struct RowPartialSums {
  static constexpr int kCostPerIndex = 1024;
  const Dtype* x;
  const Dtype* y;
  Dtype* sum_x;
  Dtype* sum_xy;
  int row_len;
  int parts;
  POSEIDON_HD void operator()(int i) const {
    const int row = i / parts;
    const int part = i - row * parts;
    const int first = PartFirst(row, part, row_len);
    const int n = PartCount(part, parts, row_len);
    double acc[2] = {0, 0};
    if (y == nullptr) {
      BlockedSums<1, Dtype>(TermX<Dtype>{x}, first, n, parts, acc);
      sum_x[i] = static_cast<Dtype>(acc[0]);
      return;
    }
    BlockedSums<2, Dtype>(TermXAndXY<Dtype>{x, y}, first, n, parts, acc);
    sum_x[i] = static_cast<Dtype>(acc[0]);
    sum_xy[i] = static_cast<Dtype>(acc[1]);
  }
};

// out[i] = sum of (x - center[row % center_mod])^2 over the part's
// elements (center_mod: the rows for MVN's one value per row, the channels
// for BatchNorm's one per channel).
template <typename Dtype>
struct RowPartialSquaredDeviations {
  static constexpr int kCostPerIndex = 1024;
  const Dtype* x;
  const Dtype* center;
  Dtype* out;
  int row_len;
  int parts;
  int center_mod;
  POSEIDON_HD void operator()(int i) const {
    const int row = i / parts;
    const int part = i - row * parts;
    double acc[1] = {0};
    BlockedSums<1, Dtype>(
        TermSquaredDeviation<Dtype>{x, center[row % center_mod]},
        PartFirst(row, part, row_len), PartCount(part, parts, row_len), parts,
        acc);
    out[i] = static_cast<Dtype>(acc[0]);
  }
};

// sum_d[i] and sum_d2[i]: the sums of d and d^2 over the part's elements,
// d = x - shift with shift = x[(row % shift_mod) * row_len], the first
// element of row row % shift_mod (for BatchNorm's (item, channel) rows,
// channel c's first element in item 0: one shift per channel). Shifting by
// a value of the data keeps E[d^2] - E[d]^2 free of the cancellation that
// E[x^2] - E[x]^2 suffers when the mean is large against the spread.
template <typename Dtype>
struct RowPartialShiftedMoments {
  static constexpr int kCostPerIndex = 1024;
  const Dtype* x;
  Dtype* sum_d;
  Dtype* sum_d2;
  int row_len;
  int parts;
  int shift_mod;
  POSEIDON_HD void operator()(int i) const {
    const int row = i / parts;
    const int part = i - row * parts;
    double acc[2] = {0, 0};
    BlockedSums<2, Dtype>(
        TermShiftedMoments<Dtype>{x, x[(row % shift_mod) * row_len]},
        PartFirst(row, part, row_len), PartCount(part, parts, row_len), parts,
        acc);
    sum_d[i] = static_cast<Dtype>(acc[0]);
    sum_d2[i] = static_cast<Dtype>(acc[1]);
  }
};

// ---- MVN

// std[g] = sqrt(var[g]) + eps
template <typename Dtype>
struct MVNStd {
  const Dtype* var;
  Dtype eps;
  Dtype* std;
  POSEIDON_HD void operator()(int g) const { std[g] = hd::sqrt(var[g]) + eps; }
};

// y = x - mean[row], divided by std[row] when std is not null; y may be x.
template <typename Dtype>
struct MVNNormalize {
  static constexpr int kCostPerIndex = kCpuRowChunk;
  const Dtype* x;
  const Dtype* mean;
  const Dtype* std;
  Dtype* y;
  RowSpans spans;
  POSEIDON_HD void operator()(int i) const {
    const RowSpan s = spans.Of(i);
    const Dtype m = mean[s.row];
    if (std == nullptr) {
      for (int k = s.begin; k < s.end; ++k) y[k] = x[k] - m;
      return;
    }
    const Dtype d = std[s.row];
    for (int k = s.begin; k < s.end; ++k) y[k] = (x[k] - m) / d;
  }
};

// Without variance (y null): dx = dy - mean_dy[row].
// With variance: dx = (dy - mean_dy[row] - y * mean_y_dy[row]) / std[row].
// dx may be dy.
template <typename Dtype>
struct MVNBackward {
  static constexpr int kCostPerIndex = kCpuRowChunk;
  const Dtype* dy;
  const Dtype* y;
  const Dtype* mean_dy;
  const Dtype* mean_y_dy;
  const Dtype* std;
  Dtype* dx;
  RowSpans spans;
  POSEIDON_HD void operator()(int i) const {
    const RowSpan s = spans.Of(i);
    const Dtype m = mean_dy[s.row];
    if (y == nullptr) {
      for (int k = s.begin; k < s.end; ++k) dx[k] = dy[k] - m;
      return;
    }
    const Dtype my = mean_y_dy[s.row];
    const Dtype d = std[s.row];
    for (int k = s.begin; k < s.end; ++k) {
      dx[k] = (dy[k] - m - y[k] * my) / d;
    }
  }
};

// ---- BatchNorm

// With batch statistics, per channel c (run for max(channels, 1) indices
// so that an empty channel axis still counts the batch), from the moments
// about shift_c = x[c * spatial] (RowPartialShiftedMoments; 0 when x is
// null, an empty batch) that mean and var hold on entry:
//   mean[c] = shift_c + E[d],   var[c] = max(E[d^2] - E[d]^2, 0)
//   inv_std[c] = 1 / sqrt(var[c] + eps)
//   running_mean[c] = maf * running_mean[c] + mean[c]
//   running_var[c]  = maf * running_var[c] + correction * var[c]
//   factor[0]       = maf * factor[0] + 1        (once, by c = 0)
template <typename Dtype>
struct BatchNormUpdateStatistics {
  const Dtype* x;
  int spatial;
  Dtype* mean;
  Dtype* var;
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
    const double shift = x == nullptr ? 0.0 : x[c * spatial];
    const double e1 = mean[c];
    const double e2 = var[c];
    const double v = e2 - e1 * e1;
    mean[c] = static_cast<Dtype>(shift + e1);
    var[c] = static_cast<Dtype>(v > 0 ? v : 0.0);
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
  static constexpr int kCostPerIndex = kCpuRowChunk;
  const Dtype* x;
  const Dtype* mean;
  const Dtype* inv_std;
  Dtype* y;
  Dtype* x_norm;
  int channels;
  RowSpans spans;
  // A Scale folded in (CPU; Note [BatchNorm + Scale] in net_fold.cpp):
  // y = scale[c] * x_norm + bias[c] (bias null: none). Null: y = x_norm.
  const Dtype* scale = nullptr;
  const Dtype* bias = nullptr;
  // With a scale: an in-place ReLU after the Scale folded in too, y =
  // ReLUValue(scale[c] * x_norm + bias[c], relu_slope) (Note [BatchNorm +
  // Scale + ReLU] in net_fold.cpp).
  bool relu = false;
  Dtype relu_slope = 0;
  POSEIDON_HD void operator()(int i) const {
    const RowSpan s = spans.Of(i);
    const int c = s.row % channels;
    const Dtype m = mean[c];
    const Dtype inv = inv_std[c];
    if (scale == nullptr) {
      for (int k = s.begin; k < s.end; ++k) {
        const Dtype v = (x[k] - m) * inv;
        y[k] = v;
        x_norm[k] = v;
      }
      return;
    }
    const Dtype g = scale[c];
    const Dtype b = bias == nullptr ? Dtype(0) : bias[c];
    if (relu) {
      for (int k = s.begin; k < s.end; ++k) {
        const Dtype v = (x[k] - m) * inv;
        x_norm[k] = v;
        const Dtype scaled = v * g + b;
        y[k] = ReLUValue(scaled, relu_slope);
      }
      return;
    }
    for (int k = s.begin; k < s.end; ++k) {
      const Dtype v = (x[k] - m) * inv;
      x_norm[k] = v;
      y[k] = v * g + b;
    }
  }
};

// Batch statistics: dx = (dy - mean_dy[c] - y * mean_dy_y[c]) * inv_std[c].
// Global statistics (mean_dy null): dx = dy * inv_std[c]. dx may be dy.
template <typename Dtype>
struct BatchNormBackward {
  static constexpr int kCostPerIndex = kCpuRowChunk;
  const Dtype* dy;
  const Dtype* y;
  const Dtype* mean_dy;
  const Dtype* mean_dy_y;
  const Dtype* inv_std;
  Dtype* dx;
  int channels;
  RowSpans spans;
  POSEIDON_HD void operator()(int i) const {
    const RowSpan s = spans.Of(i);
    const int c = s.row % channels;
    const Dtype inv = inv_std[c];
    if (mean_dy == nullptr) {
      for (int k = s.begin; k < s.end; ++k) dx[k] = dy[k] * inv;
      return;
    }
    const Dtype m = mean_dy[c];
    const Dtype my = mean_dy_y[c];
    for (int k = s.begin; k < s.end; ++k) {
      dx[k] = (dy[k] - m - y[k] * my) * inv;
    }
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_NORM_KERNELS_HPP_
