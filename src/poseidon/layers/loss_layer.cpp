// LossLayer: default loss weights and the shared bottom/top shape checks.
#include "poseidon/layers/loss_layer.hpp"

#include <algorithm>

#include "poseidon/kernels/loss_kernels.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void LossLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  // Layer::SetUp applies loss_weight after LayerSetUp, so the defaults added
  // here are the ones that take effect.
  if (this->layer_param_.loss_weight_size() == 0) {
    this->layer_param_.add_loss_weight(1);
    for (size_t i = 1; i < top.size(); ++i) {
      this->layer_param_.add_loss_weight(0);
    }
  }
}

template <typename Dtype>
void LossLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                               const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(
      bottom[0]->num_axes() >= 1 && bottom[1]->num_axes() >= 1, ShapeError,
      this->type(), " needs bottoms with at least one axis, got shapes ",
      bottom[0]->shape_string(), " and ", bottom[1]->shape_string());
  POSEIDON_REQUIRE(
      bottom[0]->shape(0) == bottom[1]->shape(0), ShapeError, this->type(),
      ": the prediction and the target must have the same first "
      "dimension, got shapes ",
      bottom[0]->shape_string(), " and ", bottom[1]->shape_string());
  top[0]->Reshape(vector<int>{});
}

INSTANTIATE_CLASS(LossLayer);

template <typename Dtype>
shared_ptr<Layer<Dtype>> SetUpInnerSoftmax(
    const LayerParameter& owner, const SoftmaxParameter& softmax_param,
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top) {
  LayerParameter param;
  param.set_name(owner.name() + "/softmax");
  param.set_type("Softmax");
  param.set_phase(owner.phase());
  *param.mutable_softmax_param() = softmax_param;
  shared_ptr<Layer<Dtype>> layer = LayerRegistry<Dtype>::CreateLayer(param);
  layer->SetUp(bottom, top);
  return layer;
}

template shared_ptr<Layer<float>> SetUpInnerSoftmax(
    const LayerParameter&, const SoftmaxParameter&, const vector<Blob<float>*>&,
    const vector<Blob<float>*>&);
template shared_ptr<Layer<double>> SetUpInnerSoftmax(
    const LayerParameter&, const SoftmaxParameter&,
    const vector<Blob<double>*>&, const vector<Blob<double>*>&);

LossParameter::NormalizationMode ResolveNormalization(
    const LossParameter& loss, LossParameter::NormalizationMode fallback) {
  if (loss.has_normalization()) return loss.normalization();
  if (loss.has_normalize()) {
    return loss.normalize() ? LossParameter::VALID : LossParameter::BATCH_SIZE;
  }
  return fallback;
}

double LossNormalizer(LossParameter::NormalizationMode mode, int outer_num,
                      int inner_num, int valid_count) {
  double z = 1;
  switch (mode) {
    case LossParameter::FULL:
      z = static_cast<double>(outer_num) * inner_num;
      break;
    case LossParameter::VALID:
      z = valid_count;
      break;
    case LossParameter::BATCH_SIZE:
      z = outer_num;
      break;
    case LossParameter::NONE:
      z = 1;
      break;
  }
  return std::max(1.0, z);
}

template <typename Dtype>
void LossReducer<Dtype>::SetNormalizer(LossParameter::NormalizationMode mode,
                                       int outer_num, int inner_num) {
  by_count_ = mode == LossParameter::VALID;
  fixed_z_ = static_cast<Dtype>(LossNormalizer(mode, outer_num, inner_num, 0));
}

template <typename Dtype>
void LossReducer<Dtype>::SetNormalizer(double z) {
  by_count_ = false;
  fixed_z_ = static_cast<Dtype>(std::max(1.0, z));
}

template <typename Dtype>
void LossReducer<Dtype>::Sum(Poseidon::Brew dev, int n, const Dtype* losses,
                             const Dtype* valid) {
  Dtype* scalars = scalars_.mutable_data_on(dev);
  DeviceSum(dev, n, losses, scalars, &ones_);
  if (by_count_) {
    CHECK(valid != nullptr) << "VALID normalization needs the valid flags";
    DeviceSum(dev, n, valid, scalars + 1, &ones_);
  }
}

template <typename Dtype>
void LossReducer<Dtype>::WriteLoss(Poseidon::Brew dev, Dtype* loss,
                                   Dtype divisor) {
  const Dtype* scalars = scalars_.data_on(dev);
  for_each(
      dev, 1,
      kernels::NormalizedLoss<Dtype>{scalars, by_count_ ? scalars + 1 : nullptr,
                                     fixed_z_, divisor, loss});
}

template <typename Dtype>
const Dtype* LossReducer<Dtype>::GradientScales(Poseidon::Brew dev,
                                                const Dtype* loss_weight) {
  Dtype* scalars = scalars_.mutable_data_on(dev);
  for_each(dev, 1,
           kernels::GradientScales<Dtype>{loss_weight,
                                          by_count_ ? scalars + 1 : nullptr,
                                          fixed_z_, scalars + 2});
  return scalars + 2;
}

template class LossReducer<float>;
template class LossReducer<double>;

}  // namespace poseidon
