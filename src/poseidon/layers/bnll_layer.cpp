// BNLL on the CPU.
#include "poseidon/layers/bnll_layer.hpp"

#include <algorithm>
#include <cmath>

namespace poseidon {

template <typename Dtype>
void BNLLLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int i = 0; i < count; ++i) {
    y[i] = std::max(x[i], Dtype(0)) + std::log1p(std::exp(-std::fabs(x[i])));
  }
}

template <typename Dtype>
void BNLLLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const Dtype* y = top[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int i = 0; i < count; ++i) {
    // sigmoid(x) = 1 - exp(-y); expm1 keeps it accurate when y is tiny.
    dx[i] = -dy[i] * std::expm1(-y[i]);
  }
}

INSTANTIATE_CLASS(BNLLLayer);
REGISTER_LAYER_CLASS(BNLL);

}  // namespace poseidon
