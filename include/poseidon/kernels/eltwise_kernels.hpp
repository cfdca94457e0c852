// Eltwise's element-wise bodies, shared by the CPU and the GPU
// (util/for_each.hpp); see layers/eltwise_layer.hpp for the formulas.
//
// A functor reads up to kEltwiseMaxInputs bottoms, whose pointers it holds
// by value (so the GPU kernel gets them as launch arguments, with nothing
// copied to the device). More bottoms are combined in chunks: the first
// chunk starts from its first input, each later one continues (`resume`)
// from the partial result in y (and, for MAX, the index in `argmax`), so
// every element sees the same operations in the same order as one loop over
// all bottoms would do.
#ifndef POSEIDON_KERNELS_ELTWISE_KERNELS_HPP_
#define POSEIDON_KERNELS_ELTWISE_KERNELS_HPP_

#include "poseidon/kernels/relu_kernels.hpp"
#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

constexpr int kEltwiseMaxInputs = 16;

// y = sum_k coeff[k] * x[k], summed from 0 (or from y when resuming) in the
// order of k.
template <typename Dtype>
struct EltwiseSum {
  const Dtype* x[kEltwiseMaxInputs];
  Dtype coeff[kEltwiseMaxInputs];
  int num;
  bool resume;
  Dtype* y;
  static constexpr int kCostPerIndex = 2;
  POSEIDON_HD void operator()(int i) const {
    Dtype sum = resume ? y[i] : Dtype(0);
    for (int k = 0; k < num; ++k) sum += coeff[k] * x[k][i];
    y[i] = sum;
  }
};

// y = ReLUValue(a + b, slope): a sum of two and the in-place ReLU after it
// in one pass (EltwiseLayer::ForwardWithReLU); y may be a or b.
template <typename Dtype>
struct SumReLU {
  const Dtype* a;
  const Dtype* b;
  Dtype* y;
  Dtype slope;
  POSEIDON_HD void operator()(int i) const {
    y[i] = ReLUValue(a[i] + b[i], slope);
  }
};

// y = prod_k x[k], starting from x[0] (or from y when resuming).
template <typename Dtype>
struct EltwiseProd {
  const Dtype* x[kEltwiseMaxInputs];
  int num;
  bool resume;
  Dtype* y;
  static constexpr int kCostPerIndex = 2;
  POSEIDON_HD void operator()(int i) const {
    int k = 0;
    Dtype prod = resume ? y[i] : x[k++][i];
    for (; k < num; ++k) prod *= x[k][i];
    y[i] = prod;
  }
};

// y = max_k x[k] and argmax = the first k reaching it. Inputs are bottoms
// [first, first + num); without `resume` the first of them is the initial
// maximum, with it the maximum so far is y (and its index argmax).
template <typename Dtype>
struct EltwiseMax {
  const Dtype* x[kEltwiseMaxInputs];
  int num;
  int first;
  bool resume;
  Dtype* y;
  int* argmax;
  static constexpr int kCostPerIndex = 2;
  POSEIDON_HD void operator()(int i) const {
    int k = 0;
    int best;
    Dtype best_value;
    if (resume) {
      best = argmax[i];
      best_value = y[i];
    } else {
      best = first;
      best_value = x[k++][i];
    }
    for (; k < num; ++k) {
      if (x[k][i] > best_value) {
        best = first + k;
        best_value = x[k][i];
      }
    }
    argmax[i] = best;
    y[i] = best_value;
  }
};

// MAX backward for bottom k: dx = dy where k gave the maximum, else 0.
template <typename Dtype>
struct EltwiseMaxBackward {
  const Dtype* dy;
  const int* argmax;
  Dtype* dx;
  int k;
  POSEIDON_HD void operator()(int i) const {
    dx[i] = argmax[i] == k ? dy[i] : Dtype(0);
  }
};

// SUM backward for up to kEltwiseMaxInputs bottoms in one pass over dy:
// dx[k] = coeff[k] * dy. Each element of dy is read before any dx of that
// element is written, so one dx may be dy (an in-place bottom) as long as
// no later chunk reads dy (the layer puts that bottom in the last chunk).
template <typename Dtype>
struct EltwiseSumBackward {
  const Dtype* dy;
  Dtype* dx[kEltwiseMaxInputs];
  Dtype coeff[kEltwiseMaxInputs];
  int num;
  static constexpr int kCostPerIndex = 2;
  POSEIDON_HD void operator()(int i) const {
    const Dtype g = dy[i];
    for (int k = 0; k < num; ++k) dx[k][i] = coeff[k] * g;
  }
};

// PROD backward with stable_prod_grad for one bottom k: dx = dy times the
// other bottoms' values, multiplied in the order of the bottoms (x holds
// them without x_k; later chunks resume from dx).
template <typename Dtype>
struct EltwiseProdBackward {
  const Dtype* x[kEltwiseMaxInputs];
  int num;
  bool resume;
  const Dtype* dy;
  Dtype* dx;
  static constexpr int kCostPerIndex = 2;
  POSEIDON_HD void operator()(int i) const {
    Dtype v = resume ? dx[i] : dy[i];
    for (int k = 0; k < num; ++k) v *= x[k][i];
    dx[i] = v;
  }
};

// PROD backward without stable_prod_grad: dx_k = dy * y / x_k.
template <typename Dtype>
struct EltwiseProdQuotientBackward {
  const Dtype* dy;
  const Dtype* y;
  const Dtype* xk;
  Dtype* dx;
  POSEIDON_HD void operator()(int i) const { dx[i] = dy[i] * y[i] / xk[i]; }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_ELTWISE_KERNELS_HPP_
