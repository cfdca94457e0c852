// ReductionLayer: one reduction per leading index, a broadcast backward.
#include "poseidon/layers/reduction_layer.hpp"

namespace poseidon {

template <typename Dtype>
void ReductionLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  op_ = this->layer_param_.reduction_param().operation();
}

template <typename Dtype>
void ReductionLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const ReductionParameter& p = this->layer_param_.reduction_param();
  const Blob<Dtype>& in = *bottom[0];
  const int num_axes = in.num_axes();
  POSEIDON_REQUIRE(top[0] != bottom[0], ConfigError,
                   "Reduction cannot run in place");
  POSEIDON_REQUIRE(p.axis() >= -num_axes && p.axis() < num_axes, ConfigError,
                   "reduction_param.axis ", p.axis(),
                   " is out of range for a bottom with num_axes ", num_axes,
                   " (shape ", in.shape_string(), ")");
  const int axis = p.axis() < 0 ? p.axis() + num_axes : p.axis();
  top[0]->Reshape(vector<int>(in.shape().begin(), in.shape().begin() + axis));
  num_ = in.count(0, axis);
  dim_ = in.count(axis);
  scale_ = static_cast<Dtype>(p.coeff());
  if (op_ == ReductionParameter::MEAN && dim_ > 0) scale_ /= dim_;
}

template <typename Dtype>
void ReductionLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                        const vector<Blob<Dtype>*>& top) {
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int n = 0; n < num_; ++n, x += dim_) {
    Dtype r = 0;
    switch (op_) {
      case ReductionParameter::SUM:
      case ReductionParameter::MEAN:
        for (int i = 0; i < dim_; ++i) r += x[i];
        break;
      case ReductionParameter::ASUM:
        r = dim_ > 0 ? cpu_asum(dim_, x) : Dtype(0);
        break;
      case ReductionParameter::SUMSQ:
        r = dim_ > 0 ? cpu_dot(dim_, x, x) : Dtype(0);
        break;
    }
    y[n] = scale_ * r;
  }
}

template <typename Dtype>
void ReductionLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                         const vector<bool>& propagate_down,
                                         const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype* x = bottom[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int n = 0; n < num_; ++n, x += dim_, dx += dim_) {
    const Dtype g = scale_ * dy[n];
    switch (op_) {
      case ReductionParameter::SUM:
      case ReductionParameter::MEAN:
        cpu_set(dim_, g, dx);
        break;
      case ReductionParameter::ASUM:
        for (int i = 0; i < dim_; ++i) {
          dx[i] = x[i] > 0 ? g : (x[i] < 0 ? -g : Dtype(0));
        }
        break;
      case ReductionParameter::SUMSQ:
        cpu_scale(dim_, 2 * g, x, dx);
        break;
    }
  }
}

INSTANTIATE_CLASS(ReductionLayer);
REGISTER_LAYER_CLASS(Reduction);

}  // namespace poseidon
