// Embed's lookup as a body for the GPU (and, in tests, the CPU; see
// util/for_each.hpp). The weight gradient is kernels::SegmentSum
// (copy_kernels.hpp); the bias gradient a gemv.
#ifndef POSEIDON_KERNELS_EMBED_KERNELS_HPP_
#define POSEIDON_KERNELS_EMBED_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// y[m, j] = W[index[m], j] (+ b[j] when bias is not null), W of shape
// (K, N); i runs over y (M x N). The index values are integers in [0, K),
// checked on the host before the call. W + b is what the CPU's copy then
// axpy gives, bit for bit.
template <typename Dtype>
struct EmbedForward {
  const Dtype* index;
  const Dtype* weight;
  const Dtype* bias;
  Dtype* y;
  int num_output;
  POSEIDON_HD void operator()(int i) const {
    const int m = i / num_output;
    const int j = i - m * num_output;
    const Dtype w = weight[static_cast<int>(index[m]) * num_output + j];
    y[i] = bias != nullptr ? w + bias[j] : w;
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_EMBED_KERNELS_HPP_
