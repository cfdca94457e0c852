// The shared Reshape of element-wise layers.
#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
void NeuronLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  if (!InPlace(bottom, top)) top[0]->ReshapeLike(*bottom[0]);
}

INSTANTIATE_CLASS(NeuronLayer);

}  // namespace poseidon
