// Power on the CPU.
#include "poseidon/layers/power_layer.hpp"

#include <cmath>

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
void PowerLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  Dtype* y = top[0]->mutable_cpu_data();
  if (diff_scale_ == Dtype(0)) {
    // y does not depend on x: the power or the scale is 0.
    const Dtype value =
        power_ == Dtype(0) ? Dtype(1) : Dtype(std::pow(shift_, power_));
    cpu_set(count, value, y);
    return;
  }
  if (GradientNeedsInput() && this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    cpu_copy(count, bottom[0]->cpu_data(), saved_input_.mutable_cpu_data());
  }
  const Dtype* x = bottom[0]->cpu_data();
  if (power_ == Dtype(1)) {
    for (int i = 0; i < count; ++i) y[i] = shift_ + scale_ * x[i];
  } else {
    for (int i = 0; i < count; ++i) {
      y[i] = std::pow(shift_ + scale_ * x[i], power_);
    }
  }
}

template <typename Dtype>
void PowerLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                     const vector<bool>& propagate_down,
                                     const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  if (!GradientNeedsInput()) {
    // dy/dx is the constant power * scale (0 when y ignores x).
    cpu_scale(count, diff_scale_, dy, dx);
    return;
  }
  const Dtype* x = this->InPlace(bottom, top) ? saved_input_.cpu_data()
                                              : bottom[0]->cpu_data();
  if (power_ == Dtype(2)) {
    for (int i = 0; i < count; ++i) {
      dx[i] = dy[i] * diff_scale_ * (shift_ + scale_ * x[i]);
    }
  } else {
    const Dtype exponent = power_ - Dtype(1);
    for (int i = 0; i < count; ++i) {
      dx[i] = dy[i] * diff_scale_ *
              Dtype(std::pow(shift_ + scale_ * x[i], exponent));
    }
  }
}

INSTANTIATE_CLASS(PowerLayer);
REGISTER_LAYER_CLASS(Power);

}  // namespace poseidon
