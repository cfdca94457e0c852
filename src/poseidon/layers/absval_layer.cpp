// AbsVal on either device: math::abs forward, kernels/neuron_kernels.hpp
// backward.
#include "poseidon/layers/absval_layer.hpp"

#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void AbsValLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                   const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  if (this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    math::copy<Dtype>(dev, count, bottom[0]->data_on(dev),
                      saved_input_.mutable_data_on(dev));
  }
  math::abs<Dtype>(dev, count, bottom[0]->data_on(dev),
                   top[0]->mutable_data_on(dev));
}

template <typename Dtype>
void AbsValLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                    const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype* x = this->InPlace(bottom, top) ? saved_input_.data_on(dev)
                                              : bottom[0]->data_on(dev);
  for_each(dev, bottom[0]->count(),
           kernels::AbsValBackward<Dtype>{x, top[0]->diff_on(dev),
                                          bottom[0]->mutable_diff_on(dev)});
}

INSTANTIATE_CLASS(AbsValLayer);
REGISTER_LAYER_CLASS(AbsVal);

}  // namespace poseidon
