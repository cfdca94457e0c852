// Clip on either device: the bodies of kernels/neuron_kernels.hpp.
#include "poseidon/layers/clip_layer.hpp"

#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void ClipLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  const ClipParameter& param = this->layer_param_.clip_param();
  POSEIDON_REQUIRE(param.has_min() && param.has_max(), ConfigError,
                   "Clip needs both clip_param.min and clip_param.max",
                   param.has_min() ? "" : " (min is missing)",
                   param.has_max() ? "" : " (max is missing)");
  POSEIDON_REQUIRE(param.min() <= param.max(), ConfigError,
                   "Clip: clip_param.min (", param.min(),
                   ") must not exceed clip_param.max (", param.max(), ")");
  min_ = param.min();
  max_ = param.max();
}

template <typename Dtype>
void ClipLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  if (this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    math::copy<Dtype>(dev, count, bottom[0]->data_on(dev),
                      saved_input_.mutable_data_on(dev));
  }
  for_each(
      dev, count,
      kernels::ClipForward<Dtype>{bottom[0]->data_on(dev),
                                  top[0]->mutable_data_on(dev), min_, max_});
}

template <typename Dtype>
void ClipLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& top,
                                  const vector<bool>& propagate_down,
                                  const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype* x = this->InPlace(bottom, top) ? saved_input_.data_on(dev)
                                              : bottom[0]->data_on(dev);
  for_each(dev, bottom[0]->count(),
           kernels::ClipBackward<Dtype>{x, top[0]->diff_on(dev),
                                        bottom[0]->mutable_diff_on(dev), min_,
                                        max_});
}

INSTANTIATE_CLASS(ClipLayer);
REGISTER_LAYER_CLASS(Clip);

}  // namespace poseidon
