// MVNLayer: per-group statistics with double accumulators.
#include "poseidon/layers/mvn_layer.hpp"

#include <cmath>

namespace poseidon {

template <typename Dtype>
void MVNLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                              const vector<Blob<Dtype>*>& top) {
  const Blob<Dtype>& in = *bottom[0];
  const MVNParameter& p = this->layer_param_.mvn_param();
  POSEIDON_REQUIRE(p.eps() >= 0, ConfigError,
                   "mvn_param.eps must not be negative, got ", p.eps());
  top[0]->ReshapeLike(in);
  const int num = in.num_axes() >= 1 ? in.shape(0) : 1;
  const int channels = in.num_axes() >= 2 ? in.shape(1) : 1;
  groups_ = p.across_channels() ? num : num * channels;
  dim_ = groups_ > 0 ? in.count() / groups_ : 0;
  std_.assign(groups_, Dtype(1));
}

template <typename Dtype>
void MVNLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  const MVNParameter& p = this->layer_param_.mvn_param();
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  if (dim_ == 0) return;
  for (int g = 0; g < groups_; ++g, x += dim_, y += dim_) {
    double sum = 0;
    for (int i = 0; i < dim_; ++i) sum += x[i];
    const Dtype mean = static_cast<Dtype>(sum / dim_);
    double sq = 0;
    for (int i = 0; i < dim_; ++i) {
      y[i] = x[i] - mean;
      sq += static_cast<double>(y[i]) * y[i];
    }
    if (!p.normalize_variance()) continue;
    const Dtype s = static_cast<Dtype>(std::sqrt(sq / dim_) + p.eps());
    std_[g] = s;
    for (int i = 0; i < dim_; ++i) y[i] /= s;
  }
}

template <typename Dtype>
void MVNLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0] || dim_ == 0) return;
  const bool normalize = this->layer_param_.mvn_param().normalize_variance();
  const Dtype* y = top[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int g = 0; g < groups_; ++g, y += dim_, dy += dim_, dx += dim_) {
    double sum_dy = 0;
    double sum_y_dy = 0;
    for (int i = 0; i < dim_; ++i) {
      sum_dy += dy[i];
      sum_y_dy += static_cast<double>(y[i]) * dy[i];
    }
    const Dtype mean_dy = static_cast<Dtype>(sum_dy / dim_);
    if (!normalize) {
      for (int i = 0; i < dim_; ++i) dx[i] = dy[i] - mean_dy;
      continue;
    }
    const Dtype mean_y_dy = static_cast<Dtype>(sum_y_dy / dim_);
    const Dtype s = std_[g];
    for (int i = 0; i < dim_; ++i) {
      dx[i] = (dy[i] - mean_dy - y[i] * mean_y_dy) / s;
    }
  }
}

INSTANTIATE_CLASS(MVNLayer);
REGISTER_LAYER_CLASS(MVN);

}  // namespace poseidon
