// ContrastiveLossLayer: pairwise squared distances, then the margin loss, on
// either device.
#include "poseidon/layers/contrastive_loss_layer.hpp"

#include "poseidon/kernels/loss_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void ContrastiveLossLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                          const vector<Blob<Dtype>*>& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  POSEIDON_REQUIRE(bottom[0]->shape() == bottom[1]->shape(), ShapeError,
                   "ContrastiveLoss: the two feature inputs must have the "
                   "same shape, got ",
                   bottom[0]->shape_string(), " and ",
                   bottom[1]->shape_string());
  num_ = bottom[0]->shape(0);
  dim_ = num_ > 0 ? bottom[0]->count() / num_ : 0;
  POSEIDON_REQUIRE(bottom[2]->count() == num_, ShapeError,
                   "ContrastiveLoss: features of shape ",
                   bottom[0]->shape_string(), " need ", num_,
                   " similarity labels (one per pair), but bottom[2] has "
                   "shape ",
                   bottom[2]->shape_string());
  diff_.ReshapeLike(*bottom[0]);
  diff_sq_.ReshapeLike(*bottom[0]);
  dist_sq_.Reshape({num_});
  losses_.Reshape({num_});
  // loss = sum / N / 2 (see WriteLoss in ForwardOn).
  reducer_.SetNormalizer(num_);
}

template <typename Dtype>
void ContrastiveLossLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                            const vector<Blob<Dtype>*>& bottom,
                                            const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  Dtype* diff = diff_.mutable_data_on(dev);
  Dtype* dist_sq = dist_sq_.mutable_data_on(dev);
  math::sub<Dtype>(dev, count, bottom[0]->data_on(dev), bottom[1]->data_on(dev),
                   diff);
  if (dim_ > 0) {
    Dtype* sq = diff_sq_.mutable_data_on(dev);
    math::sqr<Dtype>(dev, count, diff, sq);
    math::gemv<Dtype>(dev, CblasNoTrans, num_, dim_, Dtype(1), sq,
                      ones_.Get(dev, dim_), Dtype(0), dist_sq);
  } else {
    math::set<Dtype>(dev, num_, Dtype(0), dist_sq);
  }
  const auto& p = this->layer_param_.contrastive_loss_param();
  Dtype* loss = losses_.mutable_data_on(dev);
  for_each(dev, num_,
           kernels::ContrastiveLossForward<Dtype>{
               dist_sq, bottom[2]->data_on(dev), loss,
               static_cast<Dtype>(p.margin()), p.legacy_version()});
  reducer_.Sum(dev, num_, loss, nullptr);
  reducer_.WriteLoss(dev, top[0]->mutable_data_on(dev), Dtype(2));
}

template <typename Dtype>
void ContrastiveLossLayer<Dtype>::BackwardOn(
    Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
    const vector<bool>& propagate_down, const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[2], ConfigError,
                   "ContrastiveLoss cannot backpropagate to its similarity "
                   "labels (bottom[2]); set propagate_down: false for it");
  if (!propagate_down[0] && !propagate_down[1]) return;
  const auto& p = this->layer_param_.contrastive_loss_param();
  // {w / N, -w / N}: a gets the first, b the second.
  const Dtype* scales = reducer_.GradientScales(dev, top[0]->diff_on(dev));
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    for_each(
        dev, bottom[i]->count(),
        kernels::ContrastiveLossBackward<Dtype>{
            diff_.data_on(dev), dist_sq_.data_on(dev), bottom[2]->data_on(dev),
            scales + i, bottom[i]->mutable_diff_on(dev), dim_,
            static_cast<Dtype>(p.margin()), p.legacy_version()});
  }
}

INSTANTIATE_CLASS(ContrastiveLossLayer);
REGISTER_LAYER_CLASS(ContrastiveLoss);

}  // namespace poseidon
