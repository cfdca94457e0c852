// SigmoidCrossEntropyLossLayer: the binary cross-entropy of sigmoid(x)
// against targets t in [0, 1], computed from x in a numerically stable form.
//
//   E_i = -[t_i log(s(x_i)) + (1 - t_i) log(1 - s(x_i))]
//       = max(x_i, 0) - x_i t_i + log(1 + exp(-|x_i|))
//   loss = (1 / Z) * sum_{i not ignored} E_i
//   d x_i = w / Z * (s(x_i) - t_i)   (0 where ignored)
// with s the logistic sigmoid and w the loss weight.
//
// Bottoms: bottom[0] scores x, shape (N, ...); bottom[1] targets t, the same
//   count. Tops: top[0] the loss (scalar).
// Gradient flows to bottom[0] only.
// Parameters (loss_param):
//   ignore_label  (unset) elements whose target, cast to int, equals it add
//                 no loss and get zero gradient.
//   normalization Z: FULL = count, VALID = number of non-ignored elements,
//                 BATCH_SIZE = N, NONE = 1; Z is at least 1. When neither
//                 normalization nor the deprecated normalize is given the
//                 mode is BATCH_SIZE (as in Caffe, unlike SoftmaxWithLoss);
//                 normalize: true means VALID, false BATCH_SIZE.
//
// Devices: one body for the CPU and the GPU (kernels/loss_kernels.hpp,
// reduced on the device by LossReducer).
#ifndef POSEIDON_LAYERS_SIGMOID_CROSS_ENTROPY_LOSS_LAYER_HPP_
#define POSEIDON_LAYERS_SIGMOID_CROSS_ENTROPY_LOSS_LAYER_HPP_

#include <vector>

#include "poseidon/layers/loss_layer.hpp"

namespace poseidon {

template <typename Dtype>
class SigmoidCrossEntropyLossLayer final : public LossLayer<Dtype> {
 public:
  explicit SigmoidCrossEntropyLossLayer(const LayerParameter& param)
      : LossLayer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "SigmoidCrossEntropyLoss"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  LossParameter::NormalizationMode normalization_ = LossParameter::BATCH_SIZE;
  int outer_num_ = 0;
  int inner_num_ = 0;
  Blob<Dtype> losses_;  // per element: the loss, then the valid flag
  LossReducer<Dtype> reducer_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_SIGMOID_CROSS_ENTROPY_LOSS_LAYER_HPP_
