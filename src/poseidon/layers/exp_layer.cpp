// Exp on the CPU.
#include "poseidon/layers/exp_layer.hpp"

#include <cmath>

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
void ExpLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int i = 0; i < count; ++i) {
    y[i] = std::exp(log_base_ * (shift_ + scale_ * x[i]));
  }
}

template <typename Dtype>
void ExpLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const Dtype factor = log_base_ * scale_;
  const Dtype* y = top[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int i = 0; i < count; ++i) dx[i] = dy[i] * y[i] * factor;
}

INSTANTIATE_CLASS(ExpLayer);
REGISTER_LAYER_CLASS(Exp);

}  // namespace poseidon
