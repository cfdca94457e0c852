// ELU on the CPU.
#include "poseidon/layers/elu_layer.hpp"

#include <cmath>

namespace poseidon {

template <typename Dtype>
void ELULayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  const Dtype alpha = this->layer_param_.elu_param().alpha();
  const int count = bottom[0]->count();
  if (alpha < 0 && this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    cpu_copy(count, bottom[0]->cpu_data(), saved_input_.mutable_cpu_data());
  }
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int i = 0; i < count; ++i) {
    y[i] = x[i] > 0 ? x[i] : alpha * std::expm1(x[i]);
  }
}

template <typename Dtype>
void ELULayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype alpha = this->layer_param_.elu_param().alpha();
  const int count = bottom[0]->count();
  // The mask comes from the input; in place, the output has the same
  // positives when alpha >= 0 (see the header).
  const Dtype* mask_source = bottom[0]->cpu_data();
  if (alpha < 0 && this->InPlace(bottom, top)) {
    mask_source = saved_input_.cpu_data();
  }
  const Dtype* y = top[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int i = 0; i < count; ++i) {
    dx[i] = mask_source[i] > 0 ? dy[i] : dy[i] * (y[i] + alpha);
  }
}

INSTANTIATE_CLASS(ELULayer);
REGISTER_LAYER_CLASS(ELU);

}  // namespace poseidon
