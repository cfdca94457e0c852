// Reduction's arithmetic written once against a device: x viewed as
// (num, dim) is reduced along dim (kernels/reduction_kernels.hpp has the
// formulas). On the GPU the two-pass bodies of kernels/reduction_kernels.hpp
// run; on the CPU the loops Reduction has always used (BLAS asum and dot),
// or, with HostPath::kGpuKernel, the GPU's bodies (tests compare the two;
// the sums then differ in order, so only up to rounding). See
// util/block_ops.hpp for HostPath.
#ifndef POSEIDON_UTIL_REDUCE_OPS_HPP_
#define POSEIDON_UTIL_REDUCE_OPS_HPP_

#include <algorithm>

#include "poseidon/blob.hpp"
#include "poseidon/kernels/reduction_kernels.hpp"
#include "poseidon/util/block_ops.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

// How many partial sums the GPU forms per output: enough threads in all
// (about 2^16) to fill the device when there are few outputs, at most 1024
// per output so that the second pass stays short, never more than dim.
inline int ReduceParts(int num, int dim) {
  constexpr int kTargetThreads = 1 << 16;
  constexpr int kMaxParts = 1024;
  if (num <= 0 || dim <= 1) return 1;
  return std::max(1, std::min({dim, kMaxParts, kTargetThreads / num}));
}

// y[n] = scale * sum_i term(x[n, i]) for n < num; `scratch` holds the
// partial sums on the kernel path (resized here; a Blob keeps its memory).
template <typename Dtype>
void ReduceRows(Poseidon::Brew dev, kernels::ReduceOp op, int num, int dim,
                Dtype scale, const Dtype* x, Dtype* y, Blob<Dtype>* scratch,
                HostPath path = HostPath::kCpuLoops) {
  if (num <= 0) return;
  if (dev == Poseidon::CPU && path == HostPath::kCpuLoops) {
    for (int n = 0; n < num; ++n, x += dim) {
      Dtype r = 0;
      switch (op) {
        case kernels::kReduceSum:
          for (int i = 0; i < dim; ++i) r += x[i];
          break;
        case kernels::kReduceAsum:
          r = dim > 0 ? cpu_asum(dim, x) : Dtype(0);
          break;
        case kernels::kReduceSumSq:
          r = dim > 0 ? cpu_dot(dim, x, x) : Dtype(0);
          break;
      }
      y[n] = scale * r;
    }
    return;
  }
  const int parts = ReduceParts(num, dim);
  scratch->Reshape({num * parts});
  Dtype* partial = scratch->mutable_data_on(dev);
  for_each(dev, num * parts,
           kernels::ReducePartial<Dtype>{x, partial, dim, parts, op});
  for_each(dev, num, kernels::ReduceFinish<Dtype>{partial, y, parts, scale});
}

// dx[n, i] = scale * dy[n] * d term(x[n, i]) / dx.
template <typename Dtype>
void ReduceRowsBackward(Poseidon::Brew dev, kernels::ReduceOp op, int num,
                        int dim, Dtype scale, const Dtype* x, const Dtype* dy,
                        Dtype* dx, HostPath path = HostPath::kCpuLoops) {
  if (num <= 0 || dim <= 0) return;
  if (dev == Poseidon::CPU && path == HostPath::kCpuLoops) {
    for (int n = 0; n < num; ++n, x += dim, dx += dim) {
      const Dtype g = scale * dy[n];
      switch (op) {
        case kernels::kReduceSum:
          cpu_set(dim, g, dx);
          break;
        case kernels::kReduceAsum:
          for (int i = 0; i < dim; ++i) {
            dx[i] = x[i] > 0 ? g : (x[i] < 0 ? -g : Dtype(0));
          }
          break;
        case kernels::kReduceSumSq:
          cpu_scale(dim, 2 * g, x, dx);
          break;
      }
    }
    return;
  }
  for_each(dev, num * dim,
           kernels::ReduceBackward<Dtype>{x, dy, dx, dim, op, scale});
}

}  // namespace poseidon

#endif  // POSEIDON_UTIL_REDUCE_OPS_HPP_
