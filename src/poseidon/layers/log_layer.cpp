// Log on either device: the bodies of kernels/neuron_kernels.hpp.
#include "poseidon/layers/log_layer.hpp"

#include <cmath>

#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void LogLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  const LogParameter& param = this->layer_param_.log_param();
  const float base = param.base();
  POSEIDON_REQUIRE(
      base == -1.0f || (base > 0 && base != 1.0f && std::isfinite(base)),
      ConfigError, "Log: log_param.base must be -1 (for e) or a finite ",
      "number > 0 other than 1, got ", base);
  base_scale_ = base == -1.0f ? Dtype(1) : Dtype(1.0 / std::log(double(base)));
  scale_ = param.scale();
  shift_ = param.shift();
}

template <typename Dtype>
void LogLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  if (this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    math::copy<Dtype>(dev, count, bottom[0]->data_on(dev),
                      saved_input_.mutable_data_on(dev));
  }
  for_each(dev, count,
           kernels::LogForward<Dtype>{bottom[0]->data_on(dev),
                                      top[0]->mutable_data_on(dev), base_scale_,
                                      scale_, shift_});
}

template <typename Dtype>
void LogLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& top,
                                 const vector<bool>& propagate_down,
                                 const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype* x = this->InPlace(bottom, top) ? saved_input_.data_on(dev)
                                              : bottom[0]->data_on(dev);
  for_each(dev, bottom[0]->count(),
           kernels::LogBackward<Dtype>{x, top[0]->diff_on(dev),
                                       bottom[0]->mutable_diff_on(dev),
                                       scale_ * base_scale_, scale_, shift_});
}

INSTANTIATE_CLASS(LogLayer);
REGISTER_LAYER_CLASS(Log);

}  // namespace poseidon
