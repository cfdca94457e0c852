// Rebuilding a summed InnerProduct gradient from sufficient factors.
#include "poseidon/distributed/sufficient_factor.hpp"

#include "poseidon/util/math_functions.hpp"

namespace poseidon {
namespace dist {

template <typename Dtype>
void SumSufficientFactors(const std::vector<SufficientFactors<Dtype>>& peers,
                          int M, int N, WeightLayout layout, bool accumulate,
                          Dtype* weight_diff, Dtype* bias_diff) {
  CHECK(M > 0 && N > 0) << "SFB gradient of " << M << " x " << N;
  CHECK(weight_diff != nullptr);
  if (!accumulate) {
    cpu_set(M * N, Dtype(0), weight_diff);
    if (bias_diff != nullptr) cpu_set(M, Dtype(0), bias_diff);
  }
  for (const SufficientFactors<Dtype>& p : peers) {
    CHECK_GE(p.rows, 0);
    if (p.rows == 0) continue;
    CHECK(p.u != nullptr && p.v != nullptr);
    if (layout == WeightLayout::kOutputsByInputs) {
      // dW (M x N) += U^T (M x K) * V (K x N)
      cpu_gemm<Dtype>(CblasTrans, CblasNoTrans, M, N, p.rows, Dtype(1), p.u,
                      p.v, Dtype(1), weight_diff);
    } else {
      // dW (N x M) += V^T (N x K) * U (K x M)
      cpu_gemm<Dtype>(CblasTrans, CblasNoTrans, N, M, p.rows, Dtype(1), p.v,
                      p.u, Dtype(1), weight_diff);
    }
    if (bias_diff != nullptr) {
      // Row by row, in order: a fixed summation order for every rank.
      for (int k = 0; k < p.rows; ++k) {
        const Dtype* row = p.u + static_cast<size_t>(k) * M;
        for (int m = 0; m < M; ++m) bias_diff[m] += row[m];
      }
    }
  }
}

template void SumSufficientFactors<float>(
    const std::vector<SufficientFactors<float>>&, int, int, WeightLayout, bool,
    float*, float*);
template void SumSufficientFactors<double>(
    const std::vector<SufficientFactors<double>>&, int, int, WeightLayout, bool,
    double*, double*);

}  // namespace dist
}  // namespace poseidon
