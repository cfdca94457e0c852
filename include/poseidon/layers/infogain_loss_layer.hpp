// InfogainLossLayer: a generalisation of SoftmaxWithLoss in which an
// "information gain" matrix H (C x C) weighs the log-probability of every
// class given the true label. With H the identity it equals SoftmaxWithLoss
// (up to the clamp below).
//
//   p = softmax(x) along `axis`
//   loss = -(1 / Z) * sum_{i, j not ignored} sum_c H[l_ij, c]
//                                     * log(max(p[i, c, j], 1e-20))
//   d x[i, c, j] = w / Z * (p[i, c, j] * R[l_ij] - H[l_ij, c])
// where i runs over the axes before `axis`, j over those after it, l_ij is
// the label, R[k] = sum_c H[k, c] the row sums of H and w the loss weight.
//
// Bottoms: bottom[0] scores, shape (outer..., C, inner...); bottom[1] labels,
//   outer * inner integer values in [0, C) stored as Dtype; optional
//   bottom[2] the matrix H, C * C values (any shape, row-major). Without
//   bottom[2], H is read from infogain_loss_param.source.
// Tops: top[0] the loss (scalar); optional top[1] the probabilities p (shape
//   of bottom[0], no loss).
// Gradient flows to bottom[0] only.
// Parameters:
//   infogain_loss_param.source (unset) a binary BlobProto file holding H,
//                              required when there is no bottom[2].
//   infogain_loss_param.axis   (default 1) the class axis.
//   loss_param.ignore_label    (unset) labels equal to it add no loss and
//                              get zero gradient.
//   loss_param.normalization   (default VALID) Z as in SoftmaxWithLoss:
//                              FULL, VALID, BATCH_SIZE (= outer), NONE;
//                              Z is at least 1. The deprecated normalize is
//                              used only without normalization.
//
// Devices: one body for the CPU and the GPU: the inner Softmax, the row sums
// of H by gemv, per-position losses and per-element gradients
// (kernels/loss_kernels.hpp) reduced on the device by LossReducer.
#ifndef POSEIDON_LAYERS_INFOGAIN_LOSS_LAYER_HPP_
#define POSEIDON_LAYERS_INFOGAIN_LOSS_LAYER_HPP_

#include <vector>

#include "poseidon/layers/loss_layer.hpp"

namespace poseidon {

template <typename Dtype>
class InfogainLossLayer final : public LossLayer<Dtype> {
 public:
  explicit InfogainLossLayer(const LayerParameter& param)
      : LossLayer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "InfogainLoss"; }
  int ExactNumBottomBlobs() const override { return -1; }
  int MinBottomBlobs() const override { return 2; }
  int MaxBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return -1; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override {
    return bottom_index == 0;
  }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // H on `dev`.
  const Dtype* Matrix(Poseidon::Brew dev,
                      const vector<Blob<Dtype>*>& bottom) const {
    return bottom.size() > 2 ? bottom[2]->data_on(dev) : infogain_.data_on(dev);
  }
  // Throws ConfigError for a label that is neither ignored nor in [0, C).
  void CheckLabels(const Dtype* labels) const;

  shared_ptr<Layer<Dtype>> softmax_layer_;
  Blob<Dtype> prob_;
  Blob<Dtype> infogain_;  // H when read from the source file
  vector<Blob<Dtype>*> softmax_bottom_;
  vector<Blob<Dtype>*> softmax_top_;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  LossParameter::NormalizationMode normalization_ = LossParameter::VALID;
  int axis_ = 1;
  int outer_num_ = 0;
  int inner_num_ = 0;
  int classes_ = 0;
  Blob<Dtype> losses_;   // per position: the loss, then the valid flag
  Blob<Dtype> row_sum_;  // the row sums of H
  OnesVector<Dtype> ones_;
  LossReducer<Dtype> reducer_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_INFOGAIN_LOSS_LAYER_HPP_
