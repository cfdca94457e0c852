// SigmoidCrossEntropyLossLayer: stable logistic loss with ignore_label and
// Caffe's normalisation modes, on either device.
#include "poseidon/layers/sigmoid_cross_entropy_loss_layer.hpp"

#include "poseidon/kernels/loss_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::LayerSetUp(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
  LossLayer<Dtype>::LayerSetUp(bottom, top);
  const LossParameter& loss = this->layer_param_.loss_param();
  has_ignore_label_ = loss.has_ignore_label();
  ignore_label_ = loss.ignore_label();
  normalization_ = ResolveNormalization(loss, LossParameter::BATCH_SIZE);
}

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::Reshape(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  POSEIDON_REQUIRE(bottom[0]->count() == bottom[1]->count(), ShapeError,
                   "SigmoidCrossEntropyLoss: scores and targets must have "
                   "the same count, got shapes ",
                   bottom[0]->shape_string(), " and ",
                   bottom[1]->shape_string());
  outer_num_ = bottom[0]->shape(0);
  inner_num_ = bottom[0]->count(1);
  losses_.Reshape({2, bottom[0]->count()});
  reducer_.SetNormalizer(normalization_, outer_num_, inner_num_);
}

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::ForwardOn(
    Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
    const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  Dtype* loss = losses_.mutable_data_on(dev);
  Dtype* valid = loss + count;
  for_each(dev, count,
           kernels::SigmoidCrossEntropyForward<Dtype>{
               bottom[0]->data_on(dev), bottom[1]->data_on(dev), loss, valid,
               has_ignore_label_, ignore_label_});
  reducer_.Sum(dev, count, loss, valid);
  reducer_.WriteLoss(dev, top[0]->mutable_data_on(dev));
}

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::BackwardOn(
    Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
    const vector<bool>& propagate_down, const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[1], ConfigError,
                   "SigmoidCrossEntropyLoss cannot backpropagate to its "
                   "target input (bottom[1]); set propagate_down: false for "
                   "it");
  if (!propagate_down[0]) return;
  const Dtype* scale = reducer_.GradientScales(dev, top[0]->diff_on(dev));
  for_each(
      dev, bottom[0]->count(),
      kernels::SigmoidCrossEntropyBackward<Dtype>{
          bottom[0]->data_on(dev), bottom[1]->data_on(dev), scale,
          bottom[0]->mutable_diff_on(dev), has_ignore_label_, ignore_label_});
}

INSTANTIATE_CLASS(SigmoidCrossEntropyLossLayer);
REGISTER_LAYER_CLASS(SigmoidCrossEntropyLoss);

}  // namespace poseidon
