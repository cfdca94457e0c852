// BNLL on either device: the bodies of kernels/neuron_kernels.hpp.
#include "poseidon/layers/bnll_layer.hpp"

#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void BNLLLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  for_each(dev, bottom[0]->count(),
           kernels::BNLLForward<Dtype>{bottom[0]->data_on(dev),
                                       top[0]->mutable_data_on(dev)});
}

template <typename Dtype>
void BNLLLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& top,
                                  const vector<bool>& propagate_down,
                                  const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  // Needs only y (see the header), so in place needs nothing kept.
  for_each(
      dev, bottom[0]->count(),
      kernels::BNLLBackward<Dtype>{top[0]->data_on(dev), top[0]->diff_on(dev),
                                   bottom[0]->mutable_diff_on(dev)});
}

INSTANTIATE_CLASS(BNLLLayer);
REGISTER_LAYER_CLASS(BNLL);

}  // namespace poseidon
