// Threshold on either device: the body of kernels/neuron_kernels.hpp.
#include "poseidon/layers/threshold_layer.hpp"

#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void ThresholdLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                      const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  const Dtype threshold = this->layer_param_.threshold_param().threshold();
  for_each(
      dev, bottom[0]->count(),
      kernels::ThresholdForward<Dtype>{
          bottom[0]->data_on(dev), top[0]->mutable_data_on(dev), threshold});
}

template <typename Dtype>
void ThresholdLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                       const vector<Blob<Dtype>*>& top,
                                       const vector<bool>& propagate_down,
                                       const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  math::set<Dtype>(dev, bottom[0]->count(), Dtype(0),
                   bottom[0]->mutable_diff_on(dev));
}

INSTANTIATE_CLASS(ThresholdLayer);
REGISTER_LAYER_CLASS(Threshold);

}  // namespace poseidon
