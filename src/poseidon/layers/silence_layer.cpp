// SilenceLayer: a sink; its only work is clearing the diffs it is asked for.
#include "poseidon/layers/silence_layer.hpp"

namespace poseidon {

template <typename Dtype>
void SilenceLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                     const vector<Blob<Dtype>*>& top,
                                     const vector<bool>& propagate_down,
                                     const vector<Blob<Dtype>*>& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    math::set<Dtype>(dev, bottom[i]->count(), Dtype(0),
                     bottom[i]->mutable_diff_on(dev));
  }
}

INSTANTIATE_CLASS(SilenceLayer);
REGISTER_LAYER_CLASS(Silence);

}  // namespace poseidon
