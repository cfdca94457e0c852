// Exp on either device: the bodies of kernels/neuron_kernels.hpp.
#include "poseidon/layers/exp_layer.hpp"

#include <cmath>

#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void ExpLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  const ExpParameter& param = this->layer_param_.exp_param();
  const float base = param.base();
  POSEIDON_REQUIRE(base == -1.0f || (base > 0 && std::isfinite(base)),
                   ConfigError, "Exp: exp_param.base must be -1 (for e) or ",
                   "a finite number > 0, got ", base);
  log_base_ = base == -1.0f ? Dtype(1) : Dtype(std::log(double(base)));
  scale_ = param.scale();
  shift_ = param.shift();
}

template <typename Dtype>
void ExpLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  for_each(dev, bottom[0]->count(),
           kernels::ExpForward<Dtype>{bottom[0]->data_on(dev),
                                      top[0]->mutable_data_on(dev), log_base_,
                                      scale_, shift_});
}

template <typename Dtype>
void ExpLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& top,
                                 const vector<bool>& propagate_down,
                                 const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  for_each(dev, bottom[0]->count(),
           kernels::ExpBackward<Dtype>{
               top[0]->data_on(dev), top[0]->diff_on(dev),
               bottom[0]->mutable_diff_on(dev), log_base_ * scale_});
}

INSTANTIATE_CLASS(ExpLayer);
REGISTER_LAYER_CLASS(Exp);

}  // namespace poseidon
