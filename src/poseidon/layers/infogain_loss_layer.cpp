// InfogainLossLayer: an internal Softmax, then the H-weighted negative
// log-likelihood and its gradient.
#include "poseidon/layers/infogain_loss_layer.hpp"

#include <algorithm>
#include <cmath>

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
}

template <typename Dtype>
int InfogainLossLayer<Dtype>::ReadLabel(const Dtype* labels, int index) const {
  const int label = static_cast<int>(labels[index]);
  if (Ignored(label)) return label;
  POSEIDON_REQUIRE(label >= 0 && label < classes_, ConfigError,
                   "InfogainLoss: label value ", labels[index], " at position ",
                   index, " is outside [0, ", classes_, "); the scores have ",
                   classes_, " classes along axis ", axis_);
  return label;
}

template <typename Dtype>
Dtype InfogainLossLayer<Dtype>::Normalizer(int valid_count) const {
  return static_cast<Dtype>(
      LossNormalizer(normalization_, outer_num_, inner_num_, valid_count));
}

template <typename Dtype>
void InfogainLossLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                           const vector<Blob<Dtype>*>& top) {
  softmax_layer_->Forward(softmax_bottom_, softmax_top_);
  const Dtype* prob = prob_.cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  const Dtype* h = Matrix(bottom);
  const int dim = classes_ * inner_num_;
  double loss = 0;
  int valid_count = 0;
  for (int i = 0; i < outer_num_; ++i) {
    for (int j = 0; j < inner_num_; ++j) {
      const int label = ReadLabel(labels, i * inner_num_ + j);
      if (Ignored(label)) continue;
      const Dtype* row = h + label * classes_;
      for (int c = 0; c < classes_; ++c) {
        const Dtype p = prob[i * dim + c * inner_num_ + j];
        loss -= row[c] * std::log(std::max(p, Dtype(kLogThreshold)));
      }
      ++valid_count;
    }
  }
  top[0]->mutable_cpu_data()[0] =
      static_cast<Dtype>(loss) / Normalizer(valid_count);
}

template <typename Dtype>
void InfogainLossLayer<Dtype>::Backward_cpu(
    const vector<Blob<Dtype>*>& top, const vector<bool>& propagate_down,
    const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[1], ConfigError,
                   "InfogainLoss cannot backpropagate to its label input "
                   "(bottom[1]); set propagate_down: false for it");
  POSEIDON_REQUIRE(propagate_down.size() < 3 || !propagate_down[2], ConfigError,
                   "InfogainLoss cannot backpropagate to its infogain matrix "
                   "input (bottom[2]); set propagate_down: false for it");
  if (!propagate_down[0]) return;
  const Dtype* prob = prob_.cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  const Dtype* h = Matrix(bottom);
  Dtype* diff = bottom[0]->mutable_cpu_diff();
  const int dim = classes_ * inner_num_;
  int valid_count = 0;
  for (int i = 0; i < outer_num_; ++i) {
    for (int j = 0; j < inner_num_; ++j) {
      const int label = ReadLabel(labels, i * inner_num_ + j);
      Dtype* dx = diff + i * dim + j;
      const Dtype* p = prob + i * dim + j;
      if (Ignored(label)) {
        for (int c = 0; c < classes_; ++c) dx[c * inner_num_] = 0;
        continue;
      }
      const Dtype* row = h + label * classes_;
      Dtype row_sum = 0;
      for (int c = 0; c < classes_; ++c) row_sum += row[c];
      for (int c = 0; c < classes_; ++c) {
        dx[c * inner_num_] = p[c * inner_num_] * row_sum - row[c];
      }
      ++valid_count;
    }
  }
  cpu_scal(bottom[0]->count(), top[0]->cpu_diff()[0] / Normalizer(valid_count),
           diff);
}

INSTANTIATE_CLASS(InfogainLossLayer);
REGISTER_LAYER_CLASS(InfogainLoss);

}  // namespace poseidon
