// Sufficient factors: the math of sufficient factor broadcasting (SFB),
// independent of how the factors travel. For an InnerProduct layer with M
// outputs and N inputs, one worker's weight gradient over its K input rows is
//   dW = U^T V    (M x N),  U = top diff (K x M),  V = bottom data (K x N),
// and its bias gradient is the column sums of U. Peers exchange (U, V),
// K (M + N) numbers, instead of dW, M N numbers; each peer rebuilds the sum
// over all P peers locally:
//   dW = sum_p U_p^T V_p,    db = sum_p sum_k U_p[k, :].
// This equals the gradient InnerProductLayer computes for the P batches
// concatenated in peer order.
//
// Determinism: peers are added in the order given (pass them in rank order),
// one GEMM each, so ranks with the same BLAS build and CPU get the same bits.
// Factors already contiguous across peers ([U_0; U_1; ...]) can be passed as
// one SufficientFactors with rows = sum K_p: one GEMM, a different rounding;
// every rank must use the same form.
//
// Pure functions; any thread may call them on its own buffers.
#ifndef POSEIDON_DISTRIBUTED_SUFFICIENT_FACTOR_HPP_
#define POSEIDON_DISTRIBUTED_SUFFICIENT_FACTOR_HPP_

#include <vector>

namespace poseidon {
namespace dist {

// How the layer stores its weights (InnerProduct's `transpose`).
enum class WeightLayout {
  kOutputsByInputs,  // M x N, InnerProduct's default (num_output x inputs)
  kInputsByOutputs,  // N x M, InnerProduct with transpose: true
};

// One peer's factors; the caller owns the memory.
template <typename Dtype>
struct SufficientFactors {
  int rows = 0;              // K: input rows of this peer
  const Dtype* u = nullptr;  // rows x M, row-major: the layer's top diff
  const Dtype* v = nullptr;  // rows x N, row-major: the layer's bottom data
};

// weight_diff (M x N or N x M, per `layout`) and bias_diff (M; may be null)
// receive sum_p U_p^T V_p and the column sums of the U_p: added to their
// contents when `accumulate` (Caffe's param-diff semantics), else written.
template <typename Dtype>
void SumSufficientFactors(const std::vector<SufficientFactors<Dtype>>& peers,
                          int M, int N, WeightLayout layout, bool accumulate,
                          Dtype* weight_diff, Dtype* bias_diff);

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_SUFFICIENT_FACTOR_HPP_
