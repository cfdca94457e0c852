// HingeLossLayer: per-class margins, then their L1 or squared L2 sum.
#include "poseidon/layers/hinge_loss_layer.hpp"

#include <algorithm>

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
}

template <typename Dtype>
void HingeLossLayer<Dtype>::ComputeMargins(const Dtype* scores,
                                           const Dtype* labels) {
  Dtype* m = margins_.mutable_cpu_data();
  for (int n = 0; n < num_; ++n) {
    const int label = static_cast<int>(labels[n]);
    POSEIDON_REQUIRE(label >= 0 && label < dim_, ConfigError,
                     "HingeLoss: label value ", labels[n], " of sample ", n,
                     " is outside [0, ", dim_, "); the scores have ", dim_,
                     " classes");
    for (int c = 0; c < dim_; ++c) {
      const Dtype x = scores[n * dim_ + c];
      const Dtype signed_x = c == label ? -x : x;
      m[n * dim_ + c] = std::max(Dtype(0), Dtype(1) + signed_x);
    }
  }
}

template <typename Dtype>
void HingeLossLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                        const vector<Blob<Dtype>*>& top) {
  ComputeMargins(bottom[0]->cpu_data(), bottom[1]->cpu_data());
  const int count = margins_.count();
  const Dtype* m = margins_.cpu_data();
  const Dtype sum =
      this->layer_param_.hinge_loss_param().norm() == HingeLossParameter::L1
          ? cpu_asum(count, m)
          : cpu_dot(count, m, m);
  top[0]->mutable_cpu_data()[0] = sum / std::max(1, num_);
}

template <typename Dtype>
void HingeLossLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                         const vector<bool>& propagate_down,
                                         const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[1], ConfigError,
                   "HingeLoss cannot backpropagate to its label input "
                   "(bottom[1]); set propagate_down: false for it");
  if (!propagate_down[0]) return;
  const Dtype* labels = bottom[1]->cpu_data();
  ComputeMargins(bottom[0]->cpu_data(), labels);
  const bool l1 =
      this->layer_param_.hinge_loss_param().norm() == HingeLossParameter::L1;
  const Dtype scale = top[0]->cpu_diff()[0] / std::max(1, num_);
  const Dtype* m = margins_.cpu_data();
  Dtype* diff = bottom[0]->mutable_cpu_diff();
  for (int n = 0; n < num_; ++n) {
    const int label = static_cast<int>(labels[n]);
    for (int c = 0; c < dim_; ++c) {
      const int at = n * dim_ + c;
      const Dtype sign = c == label ? Dtype(-1) : Dtype(1);
      const Dtype g = l1 ? (m[at] > 0 ? Dtype(1) : Dtype(0)) : 2 * m[at];
      diff[at] = scale * sign * g;
    }
  }
}

INSTANTIATE_CLASS(HingeLossLayer);
REGISTER_LAYER_CLASS(HingeLoss);

}  // namespace poseidon
