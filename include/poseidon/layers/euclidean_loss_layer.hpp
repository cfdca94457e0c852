// EuclideanLossLayer: half the mean squared distance between two inputs.
//
//   loss = 1 / (2N) * sum_n ||a_n - b_n||^2
//   d a = w / N * (a - b),  d b = -w / N * (a - b)
// with N the first dimension and w the loss weight (top[0]'s diff).
//
// Bottoms: a and b, any shapes with equal first dimension N and equal
//   count. Top: the loss (scalar). Both bottoms are differentiable (also
//   under force_backward). No parameters beyond loss_weight.
//
// Devices: one body for the CPU and the GPU; the dot product stays on the
// device (DeviceDot, util/device_reduce.hpp).
#ifndef POSEIDON_LAYERS_EUCLIDEAN_LOSS_LAYER_HPP_
#define POSEIDON_LAYERS_EUCLIDEAN_LOSS_LAYER_HPP_

#include <vector>

#include "poseidon/layers/loss_layer.hpp"

namespace poseidon {

template <typename Dtype>
class EuclideanLossLayer final : public LossLayer<Dtype> {
 public:
  explicit EuclideanLossLayer(const LayerParameter& param)
      : LossLayer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "EuclideanLoss"; }
  bool AllowForceBackward(int bottom_index) const override { return true; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  Blob<Dtype> diff_;  // a - b, kept from Forward for Backward
  LossReducer<Dtype> reducer_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_EUCLIDEAN_LOSS_LAYER_HPP_
