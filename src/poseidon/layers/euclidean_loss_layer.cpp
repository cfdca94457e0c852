// EuclideanLossLayer: the difference is computed once in Forward and reused,
// scaled, as both gradients; on either device.
#include "poseidon/layers/euclidean_loss_layer.hpp"

#include "poseidon/kernels/loss_kernels.hpp"
#include "poseidon/util/for_each.hpp"

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
  // An empty batch gives loss 0 rather than 0 / 0.
  reducer_.SetNormalizer(bottom[0]->shape(0));
}

template <typename Dtype>
void EuclideanLossLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                          const vector<Blob<Dtype>*>& bottom,
                                          const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  Dtype* diff = diff_.mutable_data_on(dev);
  math::sub<Dtype>(dev, count, bottom[0]->data_on(dev), bottom[1]->data_on(dev),
                   diff);
  DeviceDot(dev, count, diff, diff, reducer_.mutable_sum(dev));
  reducer_.WriteLoss(dev, top[0]->mutable_data_on(dev), Dtype(2));
}

template <typename Dtype>
void EuclideanLossLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                           const vector<Blob<Dtype>*>& top,
                                           const vector<bool>& propagate_down,
                                           const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0] && !propagate_down[1]) return;
  // {w / N, -w / N}: a gets the first, b the second.
  const Dtype* scales = reducer_.GradientScales(dev, top[0]->diff_on(dev));
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    for_each(
        dev, bottom[i]->count(),
        kernels::ScaleByDeviceScalar<Dtype>{scales + i, diff_.data_on(dev),
                                            bottom[i]->mutable_diff_on(dev)});
  }
}

INSTANTIATE_CLASS(EuclideanLossLayer);
REGISTER_LAYER_CLASS(EuclideanLoss);

}  // namespace poseidon
