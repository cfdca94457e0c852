// SigmoidCrossEntropyLossLayer: stable logistic loss with ignore_label and
// Caffe's normalisation modes.
#include "poseidon/layers/sigmoid_cross_entropy_loss_layer.hpp"

#include <algorithm>
#include <cmath>

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
}

template <typename Dtype>
Dtype SigmoidCrossEntropyLossLayer<Dtype>::Normalizer(int valid_count) const {
  return static_cast<Dtype>(
      LossNormalizer(normalization_, outer_num_, inner_num_, valid_count));
}

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::Forward_cpu(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  const Dtype* x = bottom[0]->cpu_data();
  const Dtype* t = bottom[1]->cpu_data();
  double loss = 0;
  int valid_count = 0;
  for (int i = 0; i < count; ++i) {
    if (Ignored(t[i])) continue;
    const double xi = x[i];
    loss +=
        std::max(xi, 0.0) - xi * t[i] + std::log1p(std::exp(-std::fabs(xi)));
    ++valid_count;
  }
  top[0]->mutable_cpu_data()[0] =
      static_cast<Dtype>(loss) / Normalizer(valid_count);
}

template <typename Dtype>
void SigmoidCrossEntropyLossLayer<Dtype>::Backward_cpu(
    const vector<Blob<Dtype>*>& top, const vector<bool>& propagate_down,
    const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[1], ConfigError,
                   "SigmoidCrossEntropyLoss cannot backpropagate to its "
                   "target input (bottom[1]); set propagate_down: false for "
                   "it");
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const Dtype* x = bottom[0]->cpu_data();
  const Dtype* t = bottom[1]->cpu_data();
  Dtype* diff = bottom[0]->mutable_cpu_diff();
  int valid_count = 0;
  for (int i = 0; i < count; ++i) {
    if (Ignored(t[i])) {
      diff[i] = 0;
      continue;
    }
    // sigmoid(x) without overflow for large |x|.
    const Dtype e = std::exp(-std::fabs(x[i]));
    const Dtype s = x[i] >= 0 ? 1 / (1 + e) : e / (1 + e);
    diff[i] = s - t[i];
    ++valid_count;
  }
  cpu_scal(count, top[0]->cpu_diff()[0] / Normalizer(valid_count), diff);
}

INSTANTIATE_CLASS(SigmoidCrossEntropyLossLayer);
REGISTER_LAYER_CLASS(SigmoidCrossEntropyLoss);

}  // namespace poseidon
