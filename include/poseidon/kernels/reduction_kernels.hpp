// Reduction's bodies for the GPU (and, in tests, the CPU; see
// util/for_each.hpp): x viewed as (num, dim) is reduced row by row in two
// passes, each index computing one output, so the result does not depend on
// thread scheduling. See layers/reduction_layer.hpp for the formulas and
// util/reduce_ops.hpp for how they are called.
#ifndef POSEIDON_KERNELS_REDUCTION_KERNELS_HPP_
#define POSEIDON_KERNELS_REDUCTION_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// What is summed: x, |x| or x^2 (MEAN is SUM with a scale of coeff / dim).
enum ReduceOp { kReduceSum = 0, kReduceAsum = 1, kReduceSumSq = 2 };

template <typename Dtype>
POSEIDON_HD_INLINE Dtype ReduceTerm(int op, Dtype v) {
  return op == kReduceAsum ? hd::abs(v) : (op == kReduceSumSq ? v * v : v);
}

// Pass 1: partial[n, p] = sum over i = p, p + parts, p + 2 parts, ... < dim
// of term(x[n, i]); i runs over (num x parts). Neighbouring p read
// neighbouring elements, so the GPU's loads coalesce.
template <typename Dtype>
struct ReducePartial {
  const Dtype* x;
  Dtype* partial;
  int dim;
  int parts;
  int op;
  static constexpr int kCostPerIndex = 16;
  POSEIDON_HD void operator()(int i) const {
    const int n = i / parts;
    const int p = i - n * parts;
    const Dtype* row = x + n * dim;
    Dtype sum = 0;
    for (int k = p; k < dim; k += parts) sum += ReduceTerm(op, row[k]);
    partial[i] = sum;
  }
};

// Pass 2: y[n] = scale * sum_p partial[n, p]; n runs over num.
template <typename Dtype>
struct ReduceFinish {
  const Dtype* partial;
  Dtype* y;
  int parts;
  Dtype scale;
  POSEIDON_HD void operator()(int n) const {
    const Dtype* row = partial + n * parts;
    Dtype sum = 0;
    for (int p = 0; p < parts; ++p) sum += row[p];
    y[n] = scale * sum;
  }
};

// dx[n, i] = g * d term / dx with g = scale * dy[n]: g (SUM, MEAN),
// sign(x) g with sign(0) = 0 (ASUM), 2 g x (SUMSQ), as the CPU loops
// compute it; i runs over (num x dim).
template <typename Dtype>
struct ReduceBackward {
  const Dtype* x;
  const Dtype* dy;
  Dtype* dx;
  int dim;
  int op;
  Dtype scale;
  POSEIDON_HD void operator()(int i) const {
    const Dtype g = scale * dy[i / dim];
    if (op == kReduceSum) {
      dx[i] = g;
    } else if (op == kReduceAsum) {
      const Dtype v = x[i];
      dx[i] = v > 0 ? g : (v < 0 ? -g : Dtype(0));
    } else {
      dx[i] = (2 * g) * x[i];
    }
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_REDUCTION_KERNELS_HPP_
