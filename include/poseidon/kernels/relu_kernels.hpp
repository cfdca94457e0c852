// ReLU's element-wise bodies, shared by the CPU and the GPU
// (util/for_each.hpp); see layers/relu_layer.hpp for the formulas.
#ifndef POSEIDON_KERNELS_RELU_KERNELS_HPP_
#define POSEIDON_KERNELS_RELU_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// max(v, 0) + slope * min(v, 0): no branch, so the CPU loop vectorizes.
// ReLUForward's body, and a BatchNorm's with a ReLU folded in
// (BatchNormNormalize).
template <typename Dtype>
POSEIDON_HD_INLINE Dtype ReLUValue(Dtype v, Dtype slope) {
  return hd::max(v, Dtype(0)) + slope * hd::min(v, Dtype(0));
}

// y = max(x, 0) + slope * min(x, 0): no branch, so the CPU loop vectorizes.
template <typename Dtype>
struct ReLUForward {
  const Dtype* x;
  Dtype* y;
  Dtype slope;
  POSEIDON_HD void operator()(int i) const { y[i] = ReLUValue(x[i], slope); }
};

// dx = dy * (x > 0 ? 1 : slope), the sign taken from `x` (the input, or the
// output in place when slope >= 0).
template <typename Dtype>
struct ReLUBackward {
  const Dtype* x;
  const Dtype* dy;
  Dtype* dx;
  Dtype slope;
  POSEIDON_HD void operator()(int i) const {
    const Dtype positive = x[i] > 0 ? Dtype(1) : Dtype(0);
    dx[i] = dy[i] * (positive + slope * (Dtype(1) - positive));
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_RELU_KERNELS_HPP_
