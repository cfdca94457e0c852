// Power on either device: the bodies of kernels/neuron_kernels.hpp.
#include "poseidon/layers/power_layer.hpp"

#include <cmath>

#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void PowerLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const PowerParameter& param = this->layer_param_.power_param();
  power_ = param.power();
  scale_ = param.scale();
  shift_ = param.shift();
  diff_scale_ = power_ * scale_;
}

template <typename Dtype>
void PowerLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  Dtype* y = top[0]->mutable_data_on(dev);
  if (diff_scale_ == Dtype(0)) {
    // y does not depend on x: the power or the scale is 0.
    const Dtype value =
        power_ == Dtype(0) ? Dtype(1) : Dtype(std::pow(shift_, power_));
    math::set<Dtype>(dev, count, value, y);
    return;
  }
  if (GradientNeedsInput() && this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    math::copy<Dtype>(dev, count, bottom[0]->data_on(dev),
                      saved_input_.mutable_data_on(dev));
  }
  const Dtype* x = bottom[0]->data_on(dev);
  if (power_ == Dtype(1)) {
    for_each(dev, count,
             kernels::PowerLinearForward<Dtype>{x, y, scale_, shift_});
  } else {
    for_each(dev, count,
             kernels::PowerForward<Dtype>{x, y, power_, scale_, shift_});
  }
}

template <typename Dtype>
void PowerLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                   const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const Dtype* dy = top[0]->diff_on(dev);
  Dtype* dx = bottom[0]->mutable_diff_on(dev);
  if (!GradientNeedsInput()) {
    // dy/dx is the constant power * scale (0 when y ignores x).
    math::scale<Dtype>(dev, count, diff_scale_, dy, dx);
    return;
  }
  const Dtype* x = this->InPlace(bottom, top) ? saved_input_.data_on(dev)
                                              : bottom[0]->data_on(dev);
  if (power_ == Dtype(2)) {
    for_each(dev, count,
             kernels::PowerSquareBackward<Dtype>{x, dy, dx, diff_scale_, scale_,
                                                 shift_});
  } else {
    for_each(dev, count,
             kernels::PowerBackward<Dtype>{x, dy, dx, diff_scale_,
                                           power_ - Dtype(1), scale_, shift_});
  }
}

INSTANTIATE_CLASS(PowerLayer);
REGISTER_LAYER_CLASS(Power);

}  // namespace poseidon
