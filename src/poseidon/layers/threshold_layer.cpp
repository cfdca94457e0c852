// Threshold on the CPU.
#include "poseidon/layers/threshold_layer.hpp"

namespace poseidon {

template <typename Dtype>
void ThresholdLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                        const vector<Blob<Dtype>*>& top) {
  const Dtype threshold = this->layer_param_.threshold_param().threshold();
  const int count = bottom[0]->count();
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int i = 0; i < count; ++i) y[i] = x[i] > threshold ? 1 : 0;
}

template <typename Dtype>
void ThresholdLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                         const vector<bool>& propagate_down,
                                         const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  cpu_set(bottom[0]->count(), Dtype(0), bottom[0]->mutable_cpu_diff());
}

INSTANTIATE_CLASS(ThresholdLayer);
REGISTER_LAYER_CLASS(Threshold);

}  // namespace poseidon
