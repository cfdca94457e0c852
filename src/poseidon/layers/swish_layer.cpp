// Swish on the CPU.
#include "poseidon/layers/swish_layer.hpp"

#include <cmath>

namespace poseidon {

template <typename Dtype>
void SwishLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  NeuronLayer<Dtype>::Reshape(bottom, top);
  sigmoid_output_.ReshapeLike(*bottom[0]);
}

template <typename Dtype>
void SwishLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const Dtype beta = this->layer_param_.swish_param().beta();
  const int count = bottom[0]->count();
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* s = sigmoid_output_.mutable_cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int i = 0; i < count; ++i) {
    // The logistic function written with tanh, which cannot overflow.
    s[i] = Dtype(0.5) * std::tanh(Dtype(0.5) * beta * x[i]) + Dtype(0.5);
    y[i] = x[i] * s[i];
  }
}

template <typename Dtype>
void SwishLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                     const vector<bool>& propagate_down,
                                     const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype beta = this->layer_param_.swish_param().beta();
  const int count = bottom[0]->count();
  const Dtype* s = sigmoid_output_.cpu_data();
  const Dtype* y = top[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int i = 0; i < count; ++i) {
    const Dtype beta_y = beta * y[i];
    dx[i] = dy[i] * (beta_y + s[i] * (Dtype(1) - beta_y));
  }
}

INSTANTIATE_CLASS(SwishLayer);
REGISTER_LAYER_CLASS(Swish);

}  // namespace poseidon
