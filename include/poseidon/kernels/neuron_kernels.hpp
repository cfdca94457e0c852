// The element-wise bodies of the neuron layers (AbsVal, BNLL, Clip, ELU,
// Exp, Log, Power, PReLU, Sigmoid, TanH, Threshold, Swish, Dropout), shared
// by the CPU and the GPU (util/for_each.hpp). Each layer's header has its
// formulas; the expressions here are exactly those the CPU passes computed
// before they were written once for both devices, so CPU results are
// unchanged bit for bit. ReLU's are in relu_kernels.hpp.
#ifndef POSEIDON_KERNELS_NEURON_KERNELS_HPP_
#define POSEIDON_KERNELS_NEURON_KERNELS_HPP_

#include "poseidon/kernels/channel_kernels.hpp"
#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// ---- AbsVal (forward is math::abs) -----------------------------------------

// dx = sign(x) * dy, sign(0) = 0.
template <typename Dtype>
struct AbsValBackward {
  const Dtype* x;
  const Dtype* dy;
  Dtype* dx;
  POSEIDON_HD void operator()(int i) const { dx[i] = hd::sign(x[i]) * dy[i]; }
};

// ---- BNLL -------------------------------------------------------------------

// y = max(x, 0) + log1p(exp(-|x|)): softplus without overflow.
template <typename Dtype>
struct BNLLForward {
  const Dtype* x;
  Dtype* y;
  POSEIDON_HD void operator()(int i) const {
    y[i] = hd::max(x[i], Dtype(0)) + hd::log1p(hd::exp(-hd::abs(x[i])));
  }
};

// dx = dy * sigmoid(x) = dy * (1 - exp(-y)), via expm1 for tiny y.
template <typename Dtype>
struct BNLLBackward {
  const Dtype* y;
  const Dtype* dy;
  Dtype* dx;
  POSEIDON_HD void operator()(int i) const {
    dx[i] = -dy[i] * hd::expm1(-y[i]);
  }
};

// ---- Clip -------------------------------------------------------------------

template <typename Dtype>
struct ClipForward {
  const Dtype* x;
  Dtype* y;
  Dtype lo;
  Dtype hi;
  POSEIDON_HD void operator()(int i) const {
    y[i] = hd::max(lo, hd::min(x[i], hi));
  }
};

// dx = dy inside [lo, hi] (bounds included), 0 outside.
template <typename Dtype>
struct ClipBackward {
  const Dtype* x;
  const Dtype* dy;
  Dtype* dx;
  Dtype lo;
  Dtype hi;
  POSEIDON_HD void operator()(int i) const {
    dx[i] = (x[i] >= lo && x[i] <= hi) ? dy[i] : Dtype(0);
  }
};

// ---- ELU --------------------------------------------------------------------

template <typename Dtype>
struct ELUForward {
  const Dtype* x;
  Dtype* y;
  Dtype alpha;
  POSEIDON_HD void operator()(int i) const {
    y[i] = x[i] > 0 ? x[i] : alpha * hd::expm1(x[i]);
  }
};

// dx = dy where the mask source (x, or y in place with alpha >= 0) is > 0,
// else dy * (y + alpha).
template <typename Dtype>
struct ELUBackward {
  const Dtype* mask_source;
  const Dtype* y;
  const Dtype* dy;
  Dtype* dx;
  Dtype alpha;
  POSEIDON_HD void operator()(int i) const {
    dx[i] = mask_source[i] > 0 ? dy[i] : dy[i] * (y[i] + alpha);
  }
};

// ---- Exp --------------------------------------------------------------------

// y = exp(log_base * (shift + scale * x)).
template <typename Dtype>
struct ExpForward {
  const Dtype* x;
  Dtype* y;
  Dtype log_base;
  Dtype scale;
  Dtype shift;
  static constexpr int kCostPerIndex = 4;  // exp() is not a load/store
  POSEIDON_HD void operator()(int i) const {
    y[i] = hd::exp(log_base * (shift + scale * x[i]));
  }
};

// dx = dy * y * factor, factor = ln(base) * scale.
template <typename Dtype>
struct ExpBackward {
  const Dtype* y;
  const Dtype* dy;
  Dtype* dx;
  Dtype factor;
  POSEIDON_HD void operator()(int i) const { dx[i] = dy[i] * y[i] * factor; }
};

// ---- Log --------------------------------------------------------------------

// y = ln(shift + scale * x) * base_scale, base_scale = 1 / ln(base).
template <typename Dtype>
struct LogForward {
  const Dtype* x;
  Dtype* y;
  Dtype base_scale;
  Dtype scale;
  Dtype shift;
  static constexpr int kCostPerIndex = 4;
  POSEIDON_HD void operator()(int i) const {
    y[i] = hd::log(shift + scale * x[i]) * base_scale;
  }
};

// dx = dy * numerator / (shift + scale * x), numerator = scale * base_scale.
template <typename Dtype>
struct LogBackward {
  const Dtype* x;
  const Dtype* dy;
  Dtype* dx;
  Dtype numerator;
  Dtype scale;
  Dtype shift;
  POSEIDON_HD void operator()(int i) const {
    dx[i] = dy[i] * numerator / (shift + scale * x[i]);
  }
};

// ---- Power ------------------------------------------------------------------
// The cases where y or dy/dx do not depend on x are math::set / math::scale.

// power == 1: y = shift + scale * x.
template <typename Dtype>
struct PowerLinearForward {
  const Dtype* x;
  Dtype* y;
  Dtype scale;
  Dtype shift;
  POSEIDON_HD void operator()(int i) const { y[i] = shift + scale * x[i]; }
};

// y = (shift + scale * x)^power.
template <typename Dtype>
struct PowerForward {
  const Dtype* x;
  Dtype* y;
  Dtype power;
  Dtype scale;
  Dtype shift;
  static constexpr int kCostPerIndex = 4;
  POSEIDON_HD void operator()(int i) const {
    y[i] = hd::pow(shift + scale * x[i], power);
  }
};

// power == 2: dx = dy * diff_scale * (shift + scale * x).
template <typename Dtype>
struct PowerSquareBackward {
  const Dtype* x;
  const Dtype* dy;
  Dtype* dx;
  Dtype diff_scale;
  Dtype scale;
  Dtype shift;
  POSEIDON_HD void operator()(int i) const {
    dx[i] = dy[i] * diff_scale * (shift + scale * x[i]);
  }
};

// dx = dy * diff_scale * (shift + scale * x)^(power - 1).
template <typename Dtype>
struct PowerBackward {
  const Dtype* x;
  const Dtype* dy;
  Dtype* dx;
  Dtype diff_scale;
  Dtype exponent;  // power - 1
  Dtype scale;
  Dtype shift;
  static constexpr int kCostPerIndex = 4;
  POSEIDON_HD void operator()(int i) const {
    dx[i] = dy[i] * diff_scale * hd::pow(shift + scale * x[i], exponent);
  }
};

// ---- PReLU (channel functors, see channel_kernels.hpp) ------------------

// y = x > 0 ? x : a[d] * x.
template <typename Dtype>
struct PReLUForward {
  const Dtype* x;
  const Dtype* slope;
  Dtype* y;
  POSEIDON_HD Dtype At(int d) const { return slope[d]; }
  POSEIDON_HD void Apply(int i, Dtype a) const {
    y[i] = x[i] > 0 ? x[i] : a * x[i];
  }
};

// dx = x > 0 ? dy : a[d] * dy.
template <typename Dtype>
struct PReLUBackward {
  const Dtype* x;
  const Dtype* dy;
  const Dtype* slope;
  Dtype* dx;
  POSEIDON_HD Dtype At(int d) const { return slope[d]; }
  POSEIDON_HD void Apply(int i, Dtype a) const {
    dx[i] = x[i] > 0 ? dy[i] : a * dy[i];
  }
};

// The device form of the slope gradient's first reduction: for each j in
// [0, stride) (a position within one sample: channel and spatial index),
// sums[j] = sum over the `outer` samples n of the terms
// dy * x where x <= 0, at element n * stride + j. The channel sums are then
// one gemv (ChannelReducer). The CPU pass sums per row in double instead.
template <typename Dtype>
struct PReLUSlopeTerms {
  const Dtype* x;
  const Dtype* dy;
  Dtype* sums;
  int outer;
  int stride;
  static constexpr int kCostPerIndex = 8;
  POSEIDON_HD void operator()(int j) const {
    Dtype sum = 0;
    for (int n = 0; n < outer; ++n) {
      const int k = n * stride + j;
      sum += x[k] <= 0 ? dy[k] * x[k] : Dtype(0);
    }
    sums[j] = sum;
  }
};

// ---- Sigmoid, TanH ----------------------------------------------------------
// kCostPerIndex 4: blobs from 2^14 elements are split over the thread pool,
// as the CPU loops did before they became functors.

// y = 0.5 * tanh(0.5 * x) + 0.5: the logistic function without overflow.
template <typename Dtype>
struct SigmoidForward {
  const Dtype* x;
  Dtype* y;
  static constexpr int kCostPerIndex = 4;
  POSEIDON_HD void operator()(int i) const {
    y[i] = Dtype(0.5) * hd::tanh(Dtype(0.5) * x[i]) + Dtype(0.5);
  }
};

template <typename Dtype>
struct SigmoidBackward {
  const Dtype* y;
  const Dtype* dy;
  Dtype* dx;
  static constexpr int kCostPerIndex = 4;
  POSEIDON_HD void operator()(int i) const {
    dx[i] = dy[i] * y[i] * (Dtype(1) - y[i]);
  }
};

template <typename Dtype>
struct TanHForward {
  const Dtype* x;
  Dtype* y;
  static constexpr int kCostPerIndex = 4;
  POSEIDON_HD void operator()(int i) const { y[i] = hd::tanh(x[i]); }
};

template <typename Dtype>
struct TanHBackward {
  const Dtype* y;
  const Dtype* dy;
  Dtype* dx;
  static constexpr int kCostPerIndex = 4;
  POSEIDON_HD void operator()(int i) const {
    dx[i] = dy[i] * (Dtype(1) - y[i] * y[i]);
  }
};

// ---- Threshold (backward is math::set to 0) ---------------------------------

template <typename Dtype>
struct ThresholdForward {
  const Dtype* x;
  Dtype* y;
  Dtype threshold;
  POSEIDON_HD void operator()(int i) const {
    y[i] = x[i] > threshold ? Dtype(1) : Dtype(0);
  }
};

// ---- Swish ------------------------------------------------------------------

// s = sigmoid(beta * x) (kept for Backward), y = x * s.
template <typename Dtype>
struct SwishForward {
  const Dtype* x;
  Dtype* s;
  Dtype* y;
  Dtype beta;
  static constexpr int kCostPerIndex = 4;
  POSEIDON_HD void operator()(int i) const {
    const Dtype v = x[i];
    const Dtype sig = Dtype(0.5) * hd::tanh(Dtype(0.5) * beta * v) + Dtype(0.5);
    s[i] = sig;
    y[i] = v * sig;
  }
};

// dx = dy * (beta * y + s * (1 - beta * y)).
template <typename Dtype>
struct SwishBackward {
  const Dtype* s;
  const Dtype* y;
  const Dtype* dy;
  Dtype* dx;
  Dtype beta;
  POSEIDON_HD void operator()(int i) const {
    const Dtype beta_y = beta * y[i];
    dx[i] = dy[i] * (beta_y + s[i] * (Dtype(1) - beta_y));
  }
};

// ---- Dropout ----------------------------------------------------------------

// out = mask ? in * scale : 0, for Forward (in = x) and Backward (in = dy).
template <typename Dtype>
struct DropoutMask {
  const Dtype* in;
  const unsigned int* mask;
  Dtype* out;
  Dtype scale;
  POSEIDON_HD void operator()(int i) const {
    out[i] = mask[i] ? in[i] * scale : Dtype(0);
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_NEURON_KERNELS_HPP_
