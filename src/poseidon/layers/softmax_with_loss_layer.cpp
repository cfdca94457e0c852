// SoftmaxWithLossLayer: runs an internal Softmax layer, then the normalised
// negative log-likelihood of the labels and its gradient, on either device.
#include "poseidon/layers/softmax_with_loss_layer.hpp"

#include <cfloat>

#include "poseidon/kernels/loss_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                             const vector<Blob<Dtype>*>& top) {
  LossLayer<Dtype>::LayerSetUp(bottom, top);
  softmax_bottom_ = {bottom[0]};
  softmax_top_ = {&prob_};
  softmax_layer_ =
      SetUpInnerSoftmax(this->layer_param_, this->layer_param_.softmax_param(),
                        softmax_bottom_, softmax_top_);

  const LossParameter& loss = this->layer_param_.loss_param();
  has_ignore_label_ = loss.has_ignore_label();
  ignore_label_ = loss.ignore_label();
  normalization_ = ResolveNormalization(loss, LossParameter::VALID);
}

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                          const vector<Blob<Dtype>*>& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  softmax_bottom_[0] = bottom[0];
  softmax_layer_->Reshape(softmax_bottom_, softmax_top_);
  const int num_axes = bottom[0]->num_axes();
  const int axis = this->layer_param_.softmax_param().axis();
  // The softmax layer has validated the axis already.
  softmax_axis_ = axis < 0 ? axis + num_axes : axis;
  outer_num_ = bottom[0]->count(0, softmax_axis_);
  inner_num_ = bottom[0]->count(softmax_axis_ + 1);
  POSEIDON_REQUIRE(
      static_cast<int64_t>(outer_num_) * inner_num_ == bottom[1]->count(),
      ShapeError, "SoftmaxWithLoss: scores of shape ",
      bottom[0]->shape_string(), " with softmax axis ", softmax_axis_, " need ",
      static_cast<int64_t>(outer_num_) * inner_num_,
      " labels (one per position outside the axis), but the labels have "
      "shape ",
      bottom[1]->shape_string());
  if (top.size() > 1) {
    top[1]->ReshapeLike(*bottom[0]);
    top[1]->ShareData(prob_);
  }
  losses_.Reshape({2, outer_num_ * inner_num_});
  reducer_.SetNormalizer(normalization_, outer_num_, inner_num_);
}

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::CheckLabels(const Dtype* labels) const {
  const int classes = prob_.shape(softmax_axis_);
  for (int i = 0; i < outer_num_ * inner_num_; ++i) {
    const int label = static_cast<int>(labels[i]);
    if (has_ignore_label_ && label == ignore_label_) continue;
    POSEIDON_REQUIRE(label >= 0 && label < classes, ConfigError,
                     "SoftmaxWithLoss: label value ", labels[i],
                     " at position ", i, " is outside [0, ", classes,
                     "); the scores have ", classes, " classes along axis ",
                     softmax_axis_);
  }
}

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                            const vector<Blob<Dtype>*>& bottom,
                                            const vector<Blob<Dtype>*>& top) {
  if (CheckLabelsOnHost(dev, *bottom[1])) CheckLabels(bottom[1]->cpu_data());
  softmax_layer_->Forward(softmax_bottom_, softmax_top_);
  const int positions = outer_num_ * inner_num_;
  Dtype* loss = losses_.mutable_data_on(dev);
  Dtype* valid = loss + positions;
  for_each(dev, positions,
           kernels::SoftmaxLossForward<Dtype>{
               prob_.data_on(dev), bottom[1]->data_on(dev), loss, valid,
               prob_.shape(softmax_axis_), inner_num_, has_ignore_label_,
               ignore_label_, Dtype(FLT_MIN)});
  reducer_.Sum(dev, positions, loss, valid);
  reducer_.WriteLoss(dev, top[0]->mutable_data_on(dev));
}

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::BackwardOn(
    Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
    const vector<bool>& propagate_down, const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[1], ConfigError,
                   "SoftmaxWithLoss cannot backpropagate to its label input "
                   "(bottom[1]); set propagate_down: false for it");
  if (!propagate_down[0]) return;
  const Dtype* scale = reducer_.GradientScales(dev, top[0]->diff_on(dev));
  for_each(dev, prob_.count(),
           kernels::SoftmaxLossBackward<Dtype>{
               prob_.data_on(dev), bottom[1]->data_on(dev), scale,
               bottom[0]->mutable_diff_on(dev), prob_.shape(softmax_axis_),
               inner_num_, has_ignore_label_, ignore_label_});
}

INSTANTIATE_CLASS(SoftmaxWithLossLayer);
REGISTER_LAYER_CLASS(SoftmaxWithLoss);

}  // namespace poseidon
