// InfogainLossLayer: an internal Softmax, then the H-weighted negative
// log-likelihood and its gradient, on either device.
#include "poseidon/layers/infogain_loss_layer.hpp"

#include "poseidon/kernels/loss_kernels.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/io.hpp"

namespace poseidon {
namespace {

// Probabilities below this are clamped before the log (Caffe's value).
constexpr double kLogThreshold = 1e-20;

}  // namespace

template <typename Dtype>
void InfogainLossLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                          const vector<Blob<Dtype>*>& top) {
  LossLayer<Dtype>::LayerSetUp(bottom, top);
  const InfogainLossParameter& ip = this->layer_param_.infogain_loss_param();
  if (bottom.size() < 3) {
    POSEIDON_REQUIRE(ip.has_source(), ConfigError,
                     "InfogainLoss needs the infogain matrix, either as a "
                     "third bottom or from infogain_loss_param.source");
    BlobProto proto;
    ReadProtoFromBinaryFile(ip.source(), &proto);
    infogain_.FromProto(proto);
  }
  SoftmaxParameter softmax_param;
  softmax_param.set_axis(ip.axis());
  softmax_bottom_ = {bottom[0]};
  softmax_top_ = {&prob_};
  softmax_layer_ = SetUpInnerSoftmax(this->layer_param_, softmax_param,
                                     softmax_bottom_, softmax_top_);

  const LossParameter& loss = this->layer_param_.loss_param();
  has_ignore_label_ = loss.has_ignore_label();
  ignore_label_ = loss.ignore_label();
  normalization_ = ResolveNormalization(loss, LossParameter::VALID);
}

template <typename Dtype>
void InfogainLossLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  softmax_bottom_[0] = bottom[0];
  softmax_layer_->Reshape(softmax_bottom_, softmax_top_);
  // The softmax layer has validated the axis already.
  axis_ = bottom[0]->CanonicalAxisIndex(
      this->layer_param_.infogain_loss_param().axis());
  outer_num_ = bottom[0]->count(0, axis_);
  inner_num_ = bottom[0]->count(axis_ + 1);
  classes_ = bottom[0]->shape(axis_);
  POSEIDON_REQUIRE(
      static_cast<int64_t>(outer_num_) * inner_num_ == bottom[1]->count(),
      ShapeError, "InfogainLoss: scores of shape ", bottom[0]->shape_string(),
      " with axis ", axis_, " need ",
      static_cast<int64_t>(outer_num_) * inner_num_,
      " labels (one per position outside the axis), but the labels have "
      "shape ",
      bottom[1]->shape_string());
  const Blob<Dtype>& h = bottom.size() > 2 ? *bottom[2] : infogain_;
  POSEIDON_REQUIRE(
      static_cast<int64_t>(classes_) * classes_ == h.count(), ShapeError,
      "InfogainLoss: scores of shape ", bottom[0]->shape_string(), " have ",
      classes_, " classes along axis ", axis_, ", so the infogain matrix ",
      bottom.size() > 2 ? "(bottom[2])" : "(infogain_loss_param.source)",
      " must hold ", classes_, " x ", classes_, " values, but it has shape ",
      h.shape_string());
  if (top.size() > 1) {
    top[1]->ReshapeLike(*bottom[0]);
    top[1]->ShareData(prob_);
  }
  losses_.Reshape({2, outer_num_ * inner_num_});
  row_sum_.Reshape({classes_});
  reducer_.SetNormalizer(normalization_, outer_num_, inner_num_);
}

template <typename Dtype>
void InfogainLossLayer<Dtype>::CheckLabels(const Dtype* labels) const {
  for (int i = 0; i < outer_num_ * inner_num_; ++i) {
    const int label = static_cast<int>(labels[i]);
    if (has_ignore_label_ && label == ignore_label_) continue;
    POSEIDON_REQUIRE(label >= 0 && label < classes_, ConfigError,
                     "InfogainLoss: label value ", labels[i], " at position ",
                     i, " is outside [0, ", classes_, "); the scores have ",
                     classes_, " classes along axis ", axis_);
  }
}

template <typename Dtype>
void InfogainLossLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                         const vector<Blob<Dtype>*>& bottom,
                                         const vector<Blob<Dtype>*>& top) {
  if (CheckLabelsOnHost(dev, *bottom[1])) CheckLabels(bottom[1]->cpu_data());
  softmax_layer_->Forward(softmax_bottom_, softmax_top_);
  const int positions = outer_num_ * inner_num_;
  Dtype* loss = losses_.mutable_data_on(dev);
  Dtype* valid = loss + positions;
  for_each(dev, positions,
           kernels::InfogainLossForward<Dtype>{
               prob_.data_on(dev), bottom[1]->data_on(dev), Matrix(dev, bottom),
               loss, valid, classes_, inner_num_, has_ignore_label_,
               ignore_label_, Dtype(kLogThreshold)});
  reducer_.Sum(dev, positions, loss, valid);
  reducer_.WriteLoss(dev, top[0]->mutable_data_on(dev));
}

template <typename Dtype>
void InfogainLossLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                          const vector<Blob<Dtype>*>& top,
                                          const vector<bool>& propagate_down,
                                          const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[1], ConfigError,
                   "InfogainLoss cannot backpropagate to its label input "
                   "(bottom[1]); set propagate_down: false for it");
  POSEIDON_REQUIRE(propagate_down.size() < 3 || !propagate_down[2], ConfigError,
                   "InfogainLoss cannot backpropagate to its infogain matrix "
                   "input (bottom[2]); set propagate_down: false for it");
  if (!propagate_down[0] || prob_.count() == 0) return;
  const Dtype* h = Matrix(dev, bottom);
  Dtype* row_sum = row_sum_.mutable_data_on(dev);
  math::gemv<Dtype>(dev, CblasNoTrans, classes_, classes_, Dtype(1), h,
                    ones_.Get(dev, classes_), Dtype(0), row_sum);
  const Dtype* scale = reducer_.GradientScales(dev, top[0]->diff_on(dev));
  for_each(dev, prob_.count(),
           kernels::InfogainLossBackward<Dtype>{
               prob_.data_on(dev), bottom[1]->data_on(dev), h, row_sum, scale,
               bottom[0]->mutable_diff_on(dev), classes_, inner_num_,
               has_ignore_label_, ignore_label_});
}

INSTANTIATE_CLASS(InfogainLossLayer);
REGISTER_LAYER_CLASS(InfogainLoss);

}  // namespace poseidon
