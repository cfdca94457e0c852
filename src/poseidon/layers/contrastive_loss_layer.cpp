// ContrastiveLossLayer: pairwise squared distances, then the margin loss.
#include "poseidon/layers/contrastive_loss_layer.hpp"

#include <algorithm>
#include <cmath>

namespace poseidon {

template <typename Dtype>
void ContrastiveLossLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                          const vector<Blob<Dtype>*>& top) {
  LossLayer<Dtype>::Reshape(bottom, top);
  POSEIDON_REQUIRE(bottom[0]->shape() == bottom[1]->shape(), ShapeError,
                   "ContrastiveLoss: the two feature inputs must have the "
                   "same shape, got ",
                   bottom[0]->shape_string(), " and ",
                   bottom[1]->shape_string());
  num_ = bottom[0]->shape(0);
  dim_ = num_ > 0 ? bottom[0]->count() / num_ : 0;
  POSEIDON_REQUIRE(bottom[2]->count() == num_, ShapeError,
                   "ContrastiveLoss: features of shape ",
                   bottom[0]->shape_string(), " need ", num_,
                   " similarity labels (one per pair), but bottom[2] has "
                   "shape ",
                   bottom[2]->shape_string());
  diff_.ReshapeLike(*bottom[0]);
  dist_sq_.Reshape({num_});
}

template <typename Dtype>
void ContrastiveLossLayer<Dtype>::Forward_cpu(
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  cpu_sub(count, bottom[0]->cpu_data(), bottom[1]->cpu_data(),
          diff_.mutable_cpu_data());
  const auto& p = this->layer_param_.contrastive_loss_param();
  const Dtype margin = p.margin();
  const Dtype* diff = diff_.cpu_data();
  const Dtype* similar = bottom[2]->cpu_data();
  Dtype* dist_sq = dist_sq_.mutable_cpu_data();
  double loss = 0;
  for (int n = 0; n < num_; ++n) {
    dist_sq[n] = cpu_dot(dim_, diff + n * dim_, diff + n * dim_);
    if (static_cast<int>(similar[n]) != 0) {
      loss += dist_sq[n];
    } else if (p.legacy_version()) {
      loss += std::max(margin - dist_sq[n], Dtype(0));
    } else {
      const Dtype gap = std::max(margin - std::sqrt(dist_sq[n]), Dtype(0));
      loss += gap * gap;
    }
  }
  top[0]->mutable_cpu_data()[0] =
      static_cast<Dtype>(loss / (2.0 * std::max(1, num_)));
}

template <typename Dtype>
void ContrastiveLossLayer<Dtype>::Backward_cpu(
    const vector<Blob<Dtype>*>& top, const vector<bool>& propagate_down,
    const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[2], ConfigError,
                   "ContrastiveLoss cannot backpropagate to its similarity "
                   "labels (bottom[2]); set propagate_down: false for it");
  const auto& p = this->layer_param_.contrastive_loss_param();
  const Dtype margin = p.margin();
  const Dtype* diff = diff_.cpu_data();
  const Dtype* similar = bottom[2]->cpu_data();
  const Dtype* dist_sq = dist_sq_.cpu_data();
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    const Dtype sign = i == 0 ? Dtype(1) : Dtype(-1);
    const Dtype alpha = sign * top[0]->cpu_diff()[0] / std::max(1, num_);
    Dtype* out = bottom[i]->mutable_cpu_diff();
    for (int n = 0; n < num_; ++n) {
      Dtype coeff = 0;
      if (static_cast<int>(similar[n]) != 0) {
        coeff = alpha;
      } else if (p.legacy_version()) {
        if (margin - dist_sq[n] > 0) coeff = -alpha;
      } else {
        const Dtype dist = std::sqrt(dist_sq[n]);
        const Dtype gap = margin - dist;
        if (gap > 0) coeff = -alpha * gap / (dist + Dtype(1e-4));
      }
      cpu_scale(dim_, coeff, diff + n * dim_, out + n * dim_);
    }
  }
}

INSTANTIATE_CLASS(ContrastiveLossLayer);
REGISTER_LAYER_CLASS(ContrastiveLoss);

}  // namespace poseidon
