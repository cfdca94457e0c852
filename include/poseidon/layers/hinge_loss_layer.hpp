// HingeLossLayer: the one-vs-all hinge loss of multi-class scores.
//
//   m[n, c] = max(0, 1 + s[n, c] * x[n, c]),  s = -1 if c == l_n, else +1
//   L1: loss = (1 / N) * sum_{n, c} m[n, c]
//   L2: loss = (1 / N) * sum_{n, c} m[n, c]^2
//   d x[n, c] = w / N * s[n, c] * [m[n, c] > 0]   (L1)
//   d x[n, c] = w / N * 2 * s[n, c] * m[n, c]      (L2)
// where l_n is the label of sample n and w the loss weight.
//
// Bottoms: bottom[0] scores, shape (N, ...), D = count / N classes per
//   sample; bottom[1] labels, N integer values in [0, D) stored as Dtype.
// Tops: top[0] the loss (scalar).
// Gradient flows to bottom[0] only.
// Parameters: hinge_loss_param.norm (default L1) L1 | L2.
//
// Devices: one body for the CPU and the GPU (kernels/loss_kernels.hpp; the
// sum stays on the device).
#ifndef POSEIDON_LAYERS_HINGE_LOSS_LAYER_HPP_
#define POSEIDON_LAYERS_HINGE_LOSS_LAYER_HPP_

#include <vector>

#include "poseidon/layers/loss_layer.hpp"

namespace poseidon {

template <typename Dtype>
class HingeLossLayer final : public LossLayer<Dtype> {
 public:
  explicit HingeLossLayer(const LayerParameter& param)
      : LossLayer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "HingeLoss"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // Throws ConfigError for a label outside [0, D).
  void CheckLabels(const Dtype* labels) const;

  Blob<Dtype> margins_;
  LossReducer<Dtype> reducer_;
  int num_ = 0;
  int dim_ = 0;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_HINGE_LOSS_LAYER_HPP_
