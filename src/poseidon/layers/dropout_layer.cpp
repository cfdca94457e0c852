// Dropout on either device: the mask from math::rng_bernoulli, applied by
// the body of kernels/neuron_kernels.hpp.
#include "poseidon/layers/dropout_layer.hpp"

#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/for_each.hpp"

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
void DropoutLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                    const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  const Dtype* x = bottom[0]->data_on(dev);
  Dtype* y = top[0]->mutable_data_on(dev);
  if (!training()) {
    math::scale<Dtype>(dev, count, test_scale_, x, y);
    return;
  }
  mask_.Resize(count);
  unsigned int* mask = mask_.mutable_data_on(dev);
  math::rng_bernoulli<Dtype>(dev, count, Dtype(1) - ratio_, mask);
  for_each(dev, count, kernels::DropoutMask<Dtype>{x, mask, y, train_scale_});
}

template <typename Dtype>
void DropoutLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                     const vector<Blob<Dtype>*>& top,
                                     const vector<bool>& propagate_down,
                                     const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const Dtype* dy = top[0]->diff_on(dev);
  Dtype* dx = bottom[0]->mutable_diff_on(dev);
  if (!training()) {
    math::scale<Dtype>(dev, count, test_scale_, dy, dx);
    return;
  }
  CHECK_EQ(mask_.count(), count)
      << "Dropout Backward without a matching TRAIN Forward";
  for_each(
      dev, count,
      kernels::DropoutMask<Dtype>{dy, mask_.data_on(dev), dx, train_scale_});
}

INSTANTIATE_CLASS(DropoutLayer);
REGISTER_LAYER_CLASS(Dropout);

}  // namespace poseidon
