// MultinomialLogisticLossLayer: clamped log-likelihood of the labelled class.
#include "poseidon/layers/multinomial_logistic_loss_layer.hpp"

#include <algorithm>
#include <cmath>

namespace poseidon {
namespace {

// Probabilities below this are clamped before the log (Caffe's value).
constexpr double kLogThreshold = 1e-20;

}  // namespace

template <typename Dtype>
void MultinomialLogisticLossLayer<Dtype>::Reshape(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  num_ = bottom[0]->shape(0);
  dim_ = num_ > 0 ? bottom[0]->count() / num_ : 0;
  POSEIDON_REQUIRE(bottom[1]->count() == num_, ShapeError,
                   "MultinomialLogisticLoss: probabilities of shape ",
                   bottom[0]->shape_string(), " need ", num_,
                   " labels (one per sample), but the labels have shape ",
                   bottom[1]->shape_string());
}

template <typename Dtype>
int MultinomialLogisticLossLayer<Dtype>::ReadLabel(const Dtype* labels,
                                                   int n) const {
  const int label = static_cast<int>(labels[n]);
  POSEIDON_REQUIRE(label >= 0 && label < dim_, ConfigError,
                   "MultinomialLogisticLoss: label value ", labels[n],
                   " of sample ", n, " is outside [0, ", dim_,
                   "); the probabilities have ", dim_, " classes");
  return label;
}

template <typename Dtype>
void MultinomialLogisticLossLayer<Dtype>::Forward_cpu(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
  const Dtype* prob = bottom[0]->cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  double loss = 0;
  for (int n = 0; n < num_; ++n) {
    const Dtype p = prob[n * dim_ + ReadLabel(labels, n)];
    loss -= std::log(std::max(p, Dtype(kLogThreshold)));
  }
  top[0]->mutable_cpu_data()[0] = static_cast<Dtype>(loss / std::max(1, num_));
}

template <typename Dtype>
void MultinomialLogisticLossLayer<Dtype>::Backward_cpu(
    const vector<Blob<Dtype>*>& top, const vector<bool>& propagate_down,
    const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[1], ConfigError,
                   "MultinomialLogisticLoss cannot backpropagate to its "
                   "label input (bottom[1]); set propagate_down: false for it");
  if (!propagate_down[0]) return;
  const Dtype* prob = bottom[0]->cpu_data();
  const Dtype* labels = bottom[1]->cpu_data();
  Dtype* diff = bottom[0]->mutable_cpu_diff();
  cpu_set(bottom[0]->count(), Dtype(0), diff);
  const Dtype scale = top[0]->cpu_diff()[0] / std::max(1, num_);
  for (int n = 0; n < num_; ++n) {
    const int at = n * dim_ + ReadLabel(labels, n);
    diff[at] = -scale / std::max(prob[at], Dtype(kLogThreshold));
  }
}

INSTANTIATE_CLASS(MultinomialLogisticLossLayer);
REGISTER_LAYER_CLASS(MultinomialLogisticLoss);

}  // namespace poseidon
