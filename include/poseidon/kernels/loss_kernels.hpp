// The loss layers' bodies, shared by the CPU and the GPU
// (util/for_each.hpp); see each layers/*_loss_layer.hpp for the formulas.
// Forward bodies write one loss term (and, where items can be ignored, a
// 1/0 "valid" flag) per item; LossReducer (layers/loss_layer.hpp) sums them
// on the device and writes the normalised loss. Backward bodies write the
// bottom diff already scaled by loss_weight / Z, read from device memory
// (`scale`, see LossReducer::GradientScales), so no pass waits for the host.
//
// Labels are Dtype values cast to int. The host checks them where it can
// (layers/loss_layer.hpp, CheckLabelsOnHost); a body never reads outside a
// blob for a label it was not able to check: such an item's loss is NaN
// (NaNLoss), its gradient that of a label matching no class.
//
// Classification losses view their scores as outer x channels x inner: a
// position p in [0, outer * inner) has label labels[p] and its class c
// score at (p / inner * channels + c) * inner + p % inner.
#ifndef POSEIDON_KERNELS_LOSS_KERNELS_HPP_
#define POSEIDON_KERNELS_LOSS_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

template <typename Dtype>
POSEIDON_HD_INLINE Dtype NaNLoss() {
  return hd::sqrt(Dtype(-1));
}

// The flat index of class c of position p.
POSEIDON_HD_INLINE int ClassIndex(int p, int c, int channels, int inner) {
  return (p / inner * channels + c) * inner + p % inner;
}

// The class c and position p of element i (two divisions).
POSEIDON_HD_INLINE void ClassAndPosition(int i, int channels, int inner, int* c,
                                         int* p) {
  const int q = i / inner;  // n * channels + c
  const int n = q / channels;
  *c = q - n * channels;
  *p = n * inner + (i - q * inner);
}

// ---- normalisation (LossReducer)

// loss[0] = sum[0] / Z / divisor, Z = max(1, count[0]) when count is not
// null (VALID), else fixed_z (already >= 1).
template <typename Dtype>
struct NormalizedLoss {
  const Dtype* sum;
  const Dtype* count;
  Dtype fixed_z;
  Dtype divisor;
  Dtype* loss;
  POSEIDON_HD void operator()(int) const {
    const Dtype z = count != nullptr ? hd::max(Dtype(1), count[0]) : fixed_z;
    loss[0] = sum[0] / z / divisor;
  }
};

// scale[0] = w / Z, scale[1] = -w / Z with w = weight[0] (the loss
// weight, top[0]'s diff) and Z as in NormalizedLoss.
template <typename Dtype>
struct GradientScales {
  const Dtype* weight;
  const Dtype* count;
  Dtype fixed_z;
  Dtype* scale;
  POSEIDON_HD void operator()(int) const {
    const Dtype z = count != nullptr ? hd::max(Dtype(1), count[0]) : fixed_z;
    scale[0] = weight[0] / z;
    scale[1] = -weight[0] / z;
  }
};

// y = scale[0] * x; y may be x.
template <typename Dtype>
struct ScaleByDeviceScalar {
  const Dtype* scale;
  const Dtype* x;
  Dtype* y;
  POSEIDON_HD void operator()(int i) const { y[i] = scale[0] * x[i]; }
};

// ---- SoftmaxWithLoss

// Per position: loss = -log(max(prob[label], min_prob)), valid = 1; an
// ignored label gives loss 0, valid 0.
template <typename Dtype>
struct SoftmaxLossForward {
  const Dtype* prob;
  const Dtype* labels;
  Dtype* loss;
  Dtype* valid;
  int channels;
  int inner;
  bool has_ignore;
  int ignore;
  Dtype min_prob;
  POSEIDON_HD void operator()(int p) const {
    const int label = static_cast<int>(labels[p]);
    if (has_ignore && label == ignore) {
      loss[p] = 0;
      valid[p] = 0;
      return;
    }
    valid[p] = 1;
    if (label < 0 || label >= channels) {
      loss[p] = NaNLoss<Dtype>();
      return;
    }
    const Dtype pr = prob[ClassIndex(p, label, channels, inner)];
    loss[p] = -hd::log(hd::max(pr, min_prob));
  }
};

// Per element: dx = scale[0] * (prob - [c == label]), 0 where ignored.
template <typename Dtype>
struct SoftmaxLossBackward {
  const Dtype* prob;
  const Dtype* labels;
  const Dtype* scale;
  Dtype* dx;
  int channels;
  int inner;
  bool has_ignore;
  int ignore;
  POSEIDON_HD void operator()(int i) const {
    int c, p;
    ClassAndPosition(i, channels, inner, &c, &p);
    const int label = static_cast<int>(labels[p]);
    if (has_ignore && label == ignore) {
      dx[i] = 0;
      return;
    }
    dx[i] = scale[0] * (prob[i] - (c == label ? Dtype(1) : Dtype(0)));
  }
};

// ---- InfogainLoss

// Per position: loss = -sum_c H[label, c] * log(max(prob[c], min_prob)),
// valid = 1; ignored: 0, 0.
template <typename Dtype>
struct InfogainLossForward {
  static constexpr int kCostPerIndex = 32;
  const Dtype* prob;
  const Dtype* labels;
  const Dtype* h;
  Dtype* loss;
  Dtype* valid;
  int channels;
  int inner;
  bool has_ignore;
  int ignore;
  Dtype min_prob;
  POSEIDON_HD void operator()(int p) const {
    const int label = static_cast<int>(labels[p]);
    if (has_ignore && label == ignore) {
      loss[p] = 0;
      valid[p] = 0;
      return;
    }
    valid[p] = 1;
    if (label < 0 || label >= channels) {
      loss[p] = NaNLoss<Dtype>();
      return;
    }
    const Dtype* row = h + label * channels;
    Dtype sum = 0;
    for (int c = 0; c < channels; ++c) {
      const Dtype pr = prob[ClassIndex(p, c, channels, inner)];
      sum -= row[c] * hd::log(hd::max(pr, min_prob));
    }
    loss[p] = sum;
  }
};

// Per element: dx = scale[0] * (prob * row_sum[label] - H[label, c]), 0
// where ignored.
template <typename Dtype>
struct InfogainLossBackward {
  const Dtype* prob;
  const Dtype* labels;
  const Dtype* h;
  const Dtype* row_sum;
  const Dtype* scale;
  Dtype* dx;
  int channels;
  int inner;
  bool has_ignore;
  int ignore;
  POSEIDON_HD void operator()(int i) const {
    int c, p;
    ClassAndPosition(i, channels, inner, &c, &p);
    const int label = static_cast<int>(labels[p]);
    if (has_ignore && label == ignore) {
      dx[i] = 0;
      return;
    }
    if (label < 0 || label >= channels) {
      dx[i] = NaNLoss<Dtype>();
      return;
    }
    dx[i] = scale[0] * (prob[i] * row_sum[label] - h[label * channels + c]);
  }
};

// ---- MultinomialLogisticLoss (num x dim probabilities)

// Per sample: loss = -log(max(prob[n, label], min_prob)).
template <typename Dtype>
struct MultinomialLossForward {
  const Dtype* prob;
  const Dtype* labels;
  Dtype* loss;
  int dim;
  Dtype min_prob;
  POSEIDON_HD void operator()(int n) const {
    const int label = static_cast<int>(labels[n]);
    if (label < 0 || label >= dim) {
      loss[n] = NaNLoss<Dtype>();
      return;
    }
    loss[n] = -hd::log(hd::max(prob[n * dim + label], min_prob));
  }
};

// Per element: dx = -scale[0] / max(prob, min_prob) at the label, else 0.
template <typename Dtype>
struct MultinomialLossBackward {
  const Dtype* prob;
  const Dtype* labels;
  const Dtype* scale;
  Dtype* dx;
  int dim;
  Dtype min_prob;
  POSEIDON_HD void operator()(int i) const {
    const int label = static_cast<int>(labels[i / dim]);
    dx[i] =
        i % dim == label ? -scale[0] / hd::max(prob[i], min_prob) : Dtype(0);
  }
};

// ---- SigmoidCrossEntropyLoss (element-wise)

// loss = max(x, 0) - x t + log(1 + exp(-|x|)), valid = 1; ignored: 0, 0.
template <typename Dtype>
struct SigmoidCrossEntropyForward {
  const Dtype* x;
  const Dtype* t;
  Dtype* loss;
  Dtype* valid;
  bool has_ignore;
  int ignore;
  POSEIDON_HD void operator()(int i) const {
    if (has_ignore && static_cast<int>(t[i]) == ignore) {
      loss[i] = 0;
      valid[i] = 0;
      return;
    }
    const Dtype v = x[i];
    loss[i] = hd::max(v, Dtype(0)) - v * t[i] + hd::log1p(hd::exp(-hd::abs(v)));
    valid[i] = 1;
  }
};

// dx = scale[0] * (sigmoid(x) - t), 0 where ignored; the sigmoid without
// overflow for large |x|.
template <typename Dtype>
struct SigmoidCrossEntropyBackward {
  const Dtype* x;
  const Dtype* t;
  const Dtype* scale;
  Dtype* dx;
  bool has_ignore;
  int ignore;
  POSEIDON_HD void operator()(int i) const {
    if (has_ignore && static_cast<int>(t[i]) == ignore) {
      dx[i] = 0;
      return;
    }
    const Dtype e = hd::exp(-hd::abs(x[i]));
    const Dtype s = x[i] >= 0 ? Dtype(1) / (1 + e) : e / (1 + e);
    dx[i] = scale[0] * (s - t[i]);
  }
};

// ---- HingeLoss (num x dim scores)

// m = max(0, 1 + s x), s = -1 at the label, else +1.
template <typename Dtype>
struct HingeMargin {
  const Dtype* x;
  const Dtype* labels;
  Dtype* margin;
  int dim;
  POSEIDON_HD void operator()(int i) const {
    const int label = static_cast<int>(labels[i / dim]);
    if (label < 0 || label >= dim) {
      margin[i] = NaNLoss<Dtype>();
      return;
    }
    const Dtype v = i % dim == label ? -x[i] : x[i];
    margin[i] = hd::max(Dtype(0), Dtype(1) + v);
  }
};

// dx = scale[0] * s * [m > 0] (L1) or scale[0] * s * 2m (L2).
template <typename Dtype>
struct HingeBackward {
  const Dtype* x;
  const Dtype* labels;
  const Dtype* scale;
  Dtype* dx;
  int dim;
  bool l1;
  POSEIDON_HD void operator()(int i) const {
    const bool at_label = i % dim == static_cast<int>(labels[i / dim]);
    const Dtype sign = at_label ? Dtype(-1) : Dtype(1);
    const Dtype m = hd::max(Dtype(0), Dtype(1) + sign * x[i]);
    const Dtype g = l1 ? (m > 0 ? Dtype(1) : Dtype(0)) : 2 * m;
    dx[i] = scale[0] * sign * g;
  }
};

// ---- ContrastiveLoss (num pairs of dim-vectors, diff = a - b)

// Per pair, from dist_sq = ||a - b||^2:
//   similar: dist_sq; dissimilar: max(margin - dist_sq, 0) (legacy) or
//   max(margin - sqrt(dist_sq), 0)^2.
template <typename Dtype>
struct ContrastiveLossForward {
  const Dtype* dist_sq;
  const Dtype* similar;
  Dtype* loss;
  Dtype margin;
  bool legacy;
  POSEIDON_HD void operator()(int n) const {
    if (static_cast<int>(similar[n]) != 0) {
      loss[n] = dist_sq[n];
    } else if (legacy) {
      loss[n] = hd::max(margin - dist_sq[n], Dtype(0));
    } else {
      const Dtype gap = hd::max(margin - hd::sqrt(dist_sq[n]), Dtype(0));
      loss[n] = gap * gap;
    }
  }
};

// Per element, with alpha = scale[0] (+w / N for a, -w / N for b):
//   similar: alpha * diff
//   dissimilar legacy:  -alpha * diff when margin - dist_sq > 0, else 0
//   dissimilar default: -alpha * gap / (dist + 1e-4) * diff when
//                       gap = margin - dist > 0, else 0.
template <typename Dtype>
struct ContrastiveLossBackward {
  const Dtype* diff;
  const Dtype* dist_sq;
  const Dtype* similar;
  const Dtype* scale;
  Dtype* dx;
  int dim;
  Dtype margin;
  bool legacy;
  POSEIDON_HD void operator()(int i) const {
    const int n = i / dim;
    const Dtype alpha = scale[0];
    Dtype coeff = 0;
    if (static_cast<int>(similar[n]) != 0) {
      coeff = alpha;
    } else if (legacy) {
      if (margin - dist_sq[n] > 0) coeff = -alpha;
    } else {
      const Dtype dist = hd::sqrt(dist_sq[n]);
      const Dtype gap = margin - dist;
      if (gap > 0) coeff = -alpha * gap / (dist + Dtype(1e-4));
    }
    dx[i] = coeff * diff[i];
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_LOSS_KERNELS_HPP_
