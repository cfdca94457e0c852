// SoftmaxWithLossLayer: runs an internal Softmax layer, then the normalised
// negative log-likelihood of the labels and its gradient.
#include "poseidon/layers/softmax_with_loss_layer.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

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
}

template <typename Dtype>
int SoftmaxWithLossLayer<Dtype>::ReadLabel(const Dtype* labels,
                                           int index) const {
  const int label = static_cast<int>(labels[index]);
  if (has_ignore_label_ && label == ignore_label_) return label;
  const int classes = prob_.shape(softmax_axis_);
  POSEIDON_REQUIRE(label >= 0 && label < classes, ConfigError,
                   "SoftmaxWithLoss: label value ", labels[index],
                   " at position ", index, " is outside [0, ", classes,
                   "); the scores have ", classes, " classes along axis ",
                   softmax_axis_);
  return label;
}

template <typename Dtype>
Dtype SoftmaxWithLossLayer<Dtype>::Normalizer(int valid_count) const {
  return static_cast<Dtype>(
      LossNormalizer(normalization_, outer_num_, inner_num_, valid_count));
}

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::Forward_cpu(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
  softmax_layer_->Forward(softmax_bottom_, softmax_top_);
  const Dtype* prob = prob_.cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  const int channels = prob_.shape(softmax_axis_);
  const int dim = channels * inner_num_;
  double loss = 0;
  int valid_count = 0;
  for (int i = 0; i < outer_num_; ++i) {
    for (int j = 0; j < inner_num_; ++j) {
      const int label = ReadLabel(labels, i * inner_num_ + j);
      if (has_ignore_label_ && label == ignore_label_) continue;
      const Dtype p = prob[i * dim + label * inner_num_ + j];
      loss -= std::log(std::max(p, Dtype(FLT_MIN)));
      ++valid_count;
    }
  }
  top[0]->mutable_cpu_data()[0] =
      static_cast<Dtype>(loss) / Normalizer(valid_count);
}

template <typename Dtype>
void SoftmaxWithLossLayer<Dtype>::Backward_cpu(
    const vector<Blob<Dtype>*>& top, const vector<bool>& propagate_down,
    const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[1], ConfigError,
                   "SoftmaxWithLoss cannot backpropagate to its label input "
                   "(bottom[1]); set propagate_down: false for it");
  if (!propagate_down[0]) return;
  Dtype* bottom_diff = bottom[0]->mutable_cpu_diff();
  cpu_copy(prob_.count(), prob_.cpu_data(), bottom_diff);
  const Dtype* labels = bottom[1]->cpu_data();
  const int channels = prob_.shape(softmax_axis_);
  const int dim = channels * inner_num_;
  int valid_count = 0;
  for (int i = 0; i < outer_num_; ++i) {
    for (int j = 0; j < inner_num_; ++j) {
      const int label = ReadLabel(labels, i * inner_num_ + j);
      Dtype* dx = bottom_diff + i * dim + j;
      if (has_ignore_label_ && label == ignore_label_) {
        for (int c = 0; c < channels; ++c) dx[c * inner_num_] = 0;
      } else {
        dx[label * inner_num_] -= 1;
        ++valid_count;
      }
    }
  }
  const Dtype scale = top[0]->cpu_diff()[0] / Normalizer(valid_count);
  cpu_scal(prob_.count(), scale, bottom_diff);
}

INSTANTIATE_CLASS(SoftmaxWithLossLayer);
REGISTER_LAYER_CLASS(SoftmaxWithLoss);

}  // namespace poseidon
