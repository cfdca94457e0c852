// MultinomialLogisticLossLayer: the negative log-likelihood of the labels
// under given class probabilities (e.g. the output of a Softmax layer).
//
//   loss = -(1 / N) * sum_n log(max(p[n, l_n], 1e-20))
//   d p[n, c] = -w / N / max(p[n, l_n], 1e-20) if c == l_n, else 0
// where l_n is the label of sample n and w the loss weight (top[0]'s diff).
// For a stable gradient from raw scores use SoftmaxWithLoss instead.
//
// Bottoms: bottom[0] probabilities, shape (N, ...), D = count / N values
//   per sample; bottom[1] labels, N integer values in [0, D) stored as Dtype
//   (e.g. shape N or N x 1 x 1 x 1).
// Tops: top[0] the loss (scalar).
// Gradient flows to bottom[0] only. No parameters beyond loss_weight.
//
// Devices: one body for the CPU and the GPU (kernels/loss_kernels.hpp; the
// sum stays on the device).
#ifndef POSEIDON_LAYERS_MULTINOMIAL_LOGISTIC_LOSS_LAYER_HPP_
#define POSEIDON_LAYERS_MULTINOMIAL_LOGISTIC_LOSS_LAYER_HPP_

#include <vector>

#include "poseidon/layers/loss_layer.hpp"

namespace poseidon {

template <typename Dtype>
class MultinomialLogisticLossLayer final : public LossLayer<Dtype> {
 public:
  explicit MultinomialLogisticLossLayer(const LayerParameter& param)
      : LossLayer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "MultinomialLogisticLoss"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // Throws ConfigError for a label outside [0, dim_).
  void CheckLabels(const Dtype* labels) const;

  Blob<Dtype> losses_;  // one per sample
  LossReducer<Dtype> reducer_;

  int num_ = 0;
  int dim_ = 0;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_MULTINOMIAL_LOGISTIC_LOSS_LAYER_HPP_
