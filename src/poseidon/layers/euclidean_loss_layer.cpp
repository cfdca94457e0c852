// EuclideanLossLayer: the difference is computed once in Forward and reused,
// scaled, as both gradients.
#include "poseidon/layers/euclidean_loss_layer.hpp"

#include <algorithm>

namespace poseidon {

template <typename Dtype>
void EuclideanLossLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                        const vector<Blob<Dtype>*>& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  POSEIDON_REQUIRE(bottom[0]->count() == bottom[1]->count(), ShapeError,
                   "EuclideanLoss needs inputs with the same number of "
                   "elements, got shapes ",
                   bottom[0]->shape_string(), " and ",
                   bottom[1]->shape_string());
  diff_.ReshapeLike(*bottom[0]);
}

template <typename Dtype>
Dtype EuclideanLossLayer<Dtype>::BatchSize(const Blob<Dtype>& a) const {
  // An empty batch gives loss 0 rather than 0 / 0.
  return static_cast<Dtype>(std::max(a.shape(0), 1));
}

template <typename Dtype>
void EuclideanLossLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                            const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  cpu_sub(count, bottom[0]->cpu_data(), bottom[1]->cpu_data(),
          diff_.mutable_cpu_data());
  const Dtype dot = cpu_dot(count, diff_.cpu_data(), diff_.cpu_data());
  top[0]->mutable_cpu_data()[0] = dot / BatchSize(*bottom[0]) / Dtype(2);
}

template <typename Dtype>
void EuclideanLossLayer<Dtype>::Backward_cpu(
    const vector<Blob<Dtype>*>& top, const vector<bool>& propagate_down,
    const vector<Blob<Dtype>*>& bottom) {
  const Dtype scale = top[0]->cpu_diff()[0] / BatchSize(*bottom[0]);
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    cpu_scale(bottom[i]->count(), i == 0 ? scale : -scale, diff_.cpu_data(),
              bottom[i]->mutable_cpu_diff());
  }
}

INSTANTIATE_CLASS(EuclideanLossLayer);
REGISTER_LAYER_CLASS(EuclideanLoss);

}  // namespace poseidon
