// ReLU: the rectified linear unit, optionally leaky.
//
//   y = x                   if x > 0
//   y = negative_slope * x  otherwise
//   dE/dx = dE/dy * (x > 0 ? 1 : negative_slope)
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: relu_param { negative_slope: 0 }   (default 0, plain ReLU)
//
// In place (top == bottom) is supported for every slope. Backward takes the
// gradient mask from the bottom's data; in place that is y, whose sign equals
// the sign of x when negative_slope >= 0, and with a negative slope Forward
// keeps a copy of x for Backward.
#ifndef POSEIDON_LAYERS_RELU_LAYER_HPP_
#define POSEIDON_LAYERS_RELU_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class ReLULayer final : public NeuronLayer<Dtype> {
 public:
  explicit ReLULayer(const LayerParameter& param) : NeuronLayer<Dtype>(param) {}

  const char* type() const override { return "ReLU"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // The input, kept only when computing in place with a negative slope.
  Blob<Dtype> saved_input_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_RELU_LAYER_HPP_
