// ReLU: the rectified linear unit, optionally leaky.
//
//   y = x                   if x > 0
//   y = negative_slope * x  otherwise
//   dE/dx = dE/dy * (x > 0 ? 1 : negative_slope)
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: relu_param { negative_slope: 0  engine: DEFAULT }
//   negative_slope 0 is the plain ReLU. In GPU mode DEFAULT and CUDNN run
//   cuDNN's activation in builds with cuDNN when negative_slope == 0 (cuDNN
//   has no leaky ReLU), else Poseidon's own kernels, the bodies the CPU runs
//   (kernels/relu_kernels.hpp); CAFFE always the latter. See
//   layers/activation_engine.hpp. The CPU ignores the engine.
//
// In place (top == bottom) is supported for every slope. Backward takes the
// gradient mask from the bottom's data; in place that is y, whose sign equals
// the sign of x when negative_slope >= 0, and with a negative slope Forward
// keeps a copy of x for Backward. cuDNN (slope 0 only) is handed x and y; in
// place both are y, whose positives are x's.
#ifndef POSEIDON_LAYERS_RELU_LAYER_HPP_
#define POSEIDON_LAYERS_RELU_LAYER_HPP_

#include <vector>

#include "poseidon/layers/activation_engine.hpp"
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
  // cuDNN or ForwardOn/BackwardOn(GPU), as the engine says.
  void Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  void Backward_gpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override;

 private:
  bool UseCudnn();

  ActivationEngine<Dtype> engine_{ActivationKind::kReLU};
  // The input, kept only when computing in place with a negative slope.
  Blob<Dtype> saved_input_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_RELU_LAYER_HPP_
