// ELU on either device: the bodies of kernels/neuron_kernels.hpp.
#include "poseidon/layers/elu_layer.hpp"

#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void ELULayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  const Dtype alpha = this->layer_param_.elu_param().alpha();
  const int count = bottom[0]->count();
  if (alpha < 0 && this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    math::copy<Dtype>(dev, count, bottom[0]->data_on(dev),
                      saved_input_.mutable_data_on(dev));
  }
  for_each(dev, count,
           kernels::ELUForward<Dtype>{bottom[0]->data_on(dev),
                                      top[0]->mutable_data_on(dev), alpha});
}

template <typename Dtype>
void ELULayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& top,
                                 const vector<bool>& propagate_down,
                                 const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype alpha = this->layer_param_.elu_param().alpha();
  // The mask comes from the input; in place, the output has the same
  // positives when alpha >= 0 (see the header).
  const Dtype* mask_source = alpha < 0 && this->InPlace(bottom, top)
                                 ? saved_input_.data_on(dev)
                                 : bottom[0]->data_on(dev);
  for_each(dev, bottom[0]->count(),
           kernels::ELUBackward<Dtype>{mask_source, top[0]->data_on(dev),
                                       top[0]->diff_on(dev),
                                       bottom[0]->mutable_diff_on(dev), alpha});
}

INSTANTIATE_CLASS(ELULayer);
REGISTER_LAYER_CLASS(ELU);

}  // namespace poseidon
