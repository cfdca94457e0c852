// ReLU on the CPU.
#include "poseidon/layers/relu_layer.hpp"

namespace poseidon {

template <typename Dtype>
void ReLULayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const Dtype slope = this->layer_param_.relu_param().negative_slope();
  const int count = bottom[0]->count();
  if (slope < 0 && this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    cpu_copy(count, bottom[0]->cpu_data(), saved_input_.mutable_cpu_data());
  }
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int i = 0; i < count; ++i) {
    y[i] = x[i] > 0 ? x[i] : slope * x[i];
  }
}

template <typename Dtype>
void ReLULayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype slope = this->layer_param_.relu_param().negative_slope();
  const int count = bottom[0]->count();
  // The gradient mask comes from the input; in place, the output has the
  // same signs when the slope is >= 0 (see the header).
  const Dtype* sign_source = bottom[0]->cpu_data();
  if (this->InPlace(bottom, top) && slope < 0) {
    sign_source = saved_input_.cpu_data();
  }
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int i = 0; i < count; ++i) {
    dx[i] = sign_source[i] > 0 ? dy[i] : slope * dy[i];
  }
}

INSTANTIATE_CLASS(ReLULayer);
REGISTER_LAYER_CLASS(ReLU);

}  // namespace poseidon
