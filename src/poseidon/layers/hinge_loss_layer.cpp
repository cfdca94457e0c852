// HingeLossLayer: per-class margins, then their L1 or squared L2 sum, on
// either device.
#include "poseidon/layers/hinge_loss_layer.hpp"

#include "poseidon/kernels/loss_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void HingeLossLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  const auto norm = this->layer_param_.hinge_loss_param().norm();
  POSEIDON_REQUIRE(
      norm == HingeLossParameter::L1 || norm == HingeLossParameter::L2,
      ConfigError, "hinge_loss_param.norm must be L1 or L2, got ",
      static_cast<int>(norm));
  num_ = bottom[0]->shape(0);
  dim_ = num_ > 0 ? bottom[0]->count() / num_ : 0;
  POSEIDON_REQUIRE(bottom[1]->count() == num_, ShapeError,
                   "HingeLoss: scores of shape ", bottom[0]->shape_string(),
                   " need ", num_,
                   " labels (one per sample), but the labels have shape ",
                   bottom[1]->shape_string());
  margins_.ReshapeLike(*bottom[0]);
  reducer_.SetNormalizer(num_);
}

template <typename Dtype>
void HingeLossLayer<Dtype>::CheckLabels(const Dtype* labels) const {
  for (int n = 0; n < num_; ++n) {
    const int label = static_cast<int>(labels[n]);
    POSEIDON_REQUIRE(label >= 0 && label < dim_, ConfigError,
                     "HingeLoss: label value ", labels[n], " of sample ", n,
                     " is outside [0, ", dim_, "); the scores have ", dim_,
                     " classes");
  }
}

template <typename Dtype>
void HingeLossLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                      const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  if (CheckLabelsOnHost(dev, *bottom[1])) CheckLabels(bottom[1]->cpu_data());
  const int count = margins_.count();
  Dtype* m = margins_.mutable_data_on(dev);
  for_each(dev, count,
           kernels::HingeMargin<Dtype>{bottom[0]->data_on(dev),
                                       bottom[1]->data_on(dev), m, dim_});
  // The margins are >= 0, so their sum is their L1 norm.
  if (this->layer_param_.hinge_loss_param().norm() == HingeLossParameter::L1) {
    reducer_.Sum(dev, count, m, nullptr);
  } else {
    DeviceDot(dev, count, m, m, reducer_.mutable_sum(dev));
  }
  reducer_.WriteLoss(dev, top[0]->mutable_data_on(dev));
}

template <typename Dtype>
void HingeLossLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                       const vector<Blob<Dtype>*>& top,
                                       const vector<bool>& propagate_down,
                                       const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[1], ConfigError,
                   "HingeLoss cannot backpropagate to its label input "
                   "(bottom[1]); set propagate_down: false for it");
  if (!propagate_down[0]) return;
  const bool l1 =
      this->layer_param_.hinge_loss_param().norm() == HingeLossParameter::L1;
  const Dtype* scale = reducer_.GradientScales(dev, top[0]->diff_on(dev));
  for_each(dev, bottom[0]->count(),
           kernels::HingeBackward<Dtype>{
               bottom[0]->data_on(dev), bottom[1]->data_on(dev), scale,
               bottom[0]->mutable_diff_on(dev), dim_, l1});
}

INSTANTIATE_CLASS(HingeLossLayer);
REGISTER_LAYER_CLASS(HingeLoss);

}  // namespace poseidon
