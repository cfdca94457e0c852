// Log on the CPU.
#include "poseidon/layers/log_layer.hpp"

#include <cmath>

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
void LogLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  if (this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    cpu_copy(count, bottom[0]->cpu_data(), saved_input_.mutable_cpu_data());
  }
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int i = 0; i < count; ++i) {
    y[i] = std::log(shift_ + scale_ * x[i]) * base_scale_;
  }
}

template <typename Dtype>
void LogLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const Dtype numerator = scale_ * base_scale_;
  const Dtype* x = this->InPlace(bottom, top) ? saved_input_.cpu_data()
                                              : bottom[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int i = 0; i < count; ++i) {
    dx[i] = dy[i] * numerator / (shift_ + scale_ * x[i]);
  }
}

INSTANTIATE_CLASS(LogLayer);
REGISTER_LAYER_CLASS(Log);

}  // namespace poseidon
