// MultinomialLogisticLossLayer: clamped log-likelihood of the labelled
// class, on either device.
#include "poseidon/layers/multinomial_logistic_loss_layer.hpp"

#include "poseidon/kernels/loss_kernels.hpp"
#include "poseidon/util/for_each.hpp"

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
  losses_.Reshape({num_});
  reducer_.SetNormalizer(num_);
}

template <typename Dtype>
void MultinomialLogisticLossLayer<Dtype>::CheckLabels(
    const Dtype* labels) const {
  for (int n = 0; n < num_; ++n) {
    const int label = static_cast<int>(labels[n]);
    POSEIDON_REQUIRE(label >= 0 && label < dim_, ConfigError,
                     "MultinomialLogisticLoss: label value ", labels[n],
                     " of sample ", n, " is outside [0, ", dim_,
                     "); the probabilities have ", dim_, " classes");
  }
}

template <typename Dtype>
void MultinomialLogisticLossLayer<Dtype>::ForwardOn(
    Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
    const vector<Blob<Dtype>*>& top) {
  if (CheckLabelsOnHost(dev, *bottom[1])) CheckLabels(bottom[1]->cpu_data());
  Dtype* loss = losses_.mutable_data_on(dev);
  for_each(dev, num_,
           kernels::MultinomialLossForward<Dtype>{bottom[0]->data_on(dev),
                                                  bottom[1]->data_on(dev), loss,
                                                  dim_, Dtype(kLogThreshold)});
  reducer_.Sum(dev, num_, loss, nullptr);
  reducer_.WriteLoss(dev, top[0]->mutable_data_on(dev));
}

template <typename Dtype>
void MultinomialLogisticLossLayer<Dtype>::BackwardOn(
    Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
    const vector<bool>& propagate_down, const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[1], ConfigError,
                   "MultinomialLogisticLoss cannot backpropagate to its "
                   "label input (bottom[1]); set propagate_down: false for it");
  if (!propagate_down[0]) return;
  const Dtype* scale = reducer_.GradientScales(dev, top[0]->diff_on(dev));
  for_each(dev, bottom[0]->count(),
           kernels::MultinomialLossBackward<Dtype>{
               bottom[0]->data_on(dev), bottom[1]->data_on(dev), scale,
               bottom[0]->mutable_diff_on(dev), dim_, Dtype(kLogThreshold)});
}

INSTANTIATE_CLASS(MultinomialLogisticLossLayer);
REGISTER_LAYER_CLASS(MultinomialLogisticLoss);

}  // namespace poseidon
