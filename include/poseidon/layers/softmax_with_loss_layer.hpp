// SoftmaxWithLossLayer: the multinomial logistic loss of a softmax, computed
// in one layer for a stable gradient.
//
//   p = softmax(x) along `axis` (see softmax_layer.hpp)
//   loss = -(1 / Z) * sum_{i, j not ignored} log(max(p[i, l_ij, j], FLT_MIN))
//   d x[i, c, j] = w / Z * (p[i, c, j] - [c == l_ij])  (0 where ignored)
// where i runs over the axes before `axis` (outer), j over those after it
// (inner), l_ij is the label and w the loss weight (top[0]'s diff).
//
// Bottoms: bottom[0] scores, shape (outer..., C, inner...); bottom[1] labels,
//   outer * inner integer values in [0, C) stored as Dtype, with the same
//   first dimension as the scores (e.g. N x 1 x H x W for scores N x C x H x
//   W).
// Tops: top[0] the loss (scalar); optional top[1] the probabilities p (shape
//   of bottom[0], no loss, no gradient).
// Gradient flows to bottom[0] only; asking for one to the labels is an error.
// Parameters:
//   softmax_param.axis       (default 1) the class axis.
//   loss_param.ignore_label  (unset) labels equal to it add no loss and get
//                            zero gradient.
//   loss_param.normalization (default VALID) Z: FULL = outer * inner,
//                            VALID = number of non-ignored labels,
//                            BATCH_SIZE = outer, NONE = 1; Z is at least 1.
//   loss_param.normalize     (deprecated) used only without normalization:
//                            true = VALID, false = BATCH_SIZE.
//
// Devices: one body for the CPU and the GPU: the inner Softmax layer (cuDNN
// or kernels on the GPU, see softmax_layer.hpp), then per-position losses
// and per-element gradients (kernels/loss_kernels.hpp) reduced on the
// device by LossReducer (loss_layer.hpp).
#ifndef POSEIDON_LAYERS_SOFTMAX_WITH_LOSS_LAYER_HPP_
#define POSEIDON_LAYERS_SOFTMAX_WITH_LOSS_LAYER_HPP_

#include <vector>

#include "poseidon/layers/loss_layer.hpp"

namespace poseidon {

template <typename Dtype>
class SoftmaxWithLossLayer final : public LossLayer<Dtype> {
 public:
  explicit SoftmaxWithLossLayer(const LayerParameter& param)
      : LossLayer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "SoftmaxWithLoss"; }
  int ExactNumTopBlobs() const override { return -1; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // Throws ConfigError for a label that is neither ignored nor in [0, C).
  void CheckLabels(const Dtype* labels) const;

  shared_ptr<Layer<Dtype>> softmax_layer_;
  Blob<Dtype> prob_;
  vector<Blob<Dtype>*> softmax_bottom_;
  vector<Blob<Dtype>*> softmax_top_;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  int softmax_axis_ = 1;
  int outer_num_ = 0;
  int inner_num_ = 0;
  Blob<Dtype> losses_;  // per position: the loss, then the valid flag
  LossReducer<Dtype> reducer_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_SOFTMAX_WITH_LOSS_LAYER_HPP_
