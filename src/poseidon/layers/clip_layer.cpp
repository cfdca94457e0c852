// Clip on the CPU.
#include "poseidon/layers/clip_layer.hpp"

#include <algorithm>

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
void ClipLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  if (this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    cpu_copy(count, bottom[0]->cpu_data(), saved_input_.mutable_cpu_data());
  }
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int i = 0; i < count; ++i) y[i] = std::max(min_, std::min(x[i], max_));
}

template <typename Dtype>
void ClipLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const Dtype* x = this->InPlace(bottom, top) ? saved_input_.cpu_data()
                                              : bottom[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int i = 0; i < count; ++i) {
    dx[i] = (x[i] >= min_ && x[i] <= max_) ? dy[i] : Dtype(0);
  }
}

INSTANTIATE_CLASS(ClipLayer);
REGISTER_LAYER_CLASS(Clip);

}  // namespace poseidon
