// Swish on either device: the bodies of kernels/neuron_kernels.hpp.
#include "poseidon/layers/swish_layer.hpp"

#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void SwishLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  NeuronLayer<Dtype>::Reshape(bottom, top);
  sigmoid_output_.ReshapeLike(*bottom[0]);
}

template <typename Dtype>
void SwishLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  const Dtype beta = this->layer_param_.swish_param().beta();
  for_each(dev, bottom[0]->count(),
           kernels::SwishForward<Dtype>{bottom[0]->data_on(dev),
                                        sigmoid_output_.mutable_data_on(dev),
                                        top[0]->mutable_data_on(dev), beta});
}

template <typename Dtype>
void SwishLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                   const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype beta = this->layer_param_.swish_param().beta();
  for_each(dev, bottom[0]->count(),
           kernels::SwishBackward<Dtype>{
               sigmoid_output_.data_on(dev), top[0]->data_on(dev),
               top[0]->diff_on(dev), bottom[0]->mutable_diff_on(dev), beta});
}

INSTANTIATE_CLASS(SwishLayer);
REGISTER_LAYER_CLASS(Swish);

}  // namespace poseidon
