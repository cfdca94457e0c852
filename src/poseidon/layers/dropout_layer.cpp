// Dropout on the CPU.
#include "poseidon/layers/dropout_layer.hpp"

namespace poseidon {

template <typename Dtype>
void DropoutLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                     const vector<Blob<Dtype>*>& top) {
  const DropoutParameter& param = this->layer_param_.dropout_param();
  const float ratio = param.dropout_ratio();
  POSEIDON_REQUIRE(ratio >= 0 && ratio < 1, ConfigError,
                   "dropout_param.dropout_ratio must be in [0, 1), got ",
                   ratio);
  ratio_ = ratio;
  if (param.scale_train()) {
    train_scale_ = Dtype(1) / (Dtype(1) - ratio_);
    test_scale_ = 1;
  } else {
    train_scale_ = 1;
    test_scale_ = Dtype(1) - ratio_;
  }
}

template <typename Dtype>
void DropoutLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  if (!training()) {
    cpu_scale(count, test_scale_, x, y);
    return;
  }
  mask_.resize(count);
  rng_bernoulli(count, Dtype(1) - ratio_, mask_.data());
  for (int i = 0; i < count; ++i) {
    y[i] = mask_[i] ? x[i] * train_scale_ : Dtype(0);
  }
}

template <typename Dtype>
void DropoutLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                       const vector<bool>& propagate_down,
                                       const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  if (!training()) {
    cpu_scale(count, test_scale_, dy, dx);
    return;
  }
  CHECK_EQ(static_cast<int>(mask_.size()), count)
      << "Dropout Backward without a matching TRAIN Forward";
  for (int i = 0; i < count; ++i) {
    dx[i] = mask_[i] ? dy[i] * train_scale_ : Dtype(0);
  }
}

INSTANTIATE_CLASS(DropoutLayer);
REGISTER_LAYER_CLASS(Dropout);

}  // namespace poseidon
