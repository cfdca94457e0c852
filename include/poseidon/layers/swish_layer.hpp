// Swish: the input gated by its own sigmoid, element-wise.
//
//   s = sigmoid(beta * x),  y = x * s
//   dE/dx = dE/dy * (s + beta * x * s * (1 - s))
//         = dE/dy * (beta * y + s * (1 - beta * y))
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: swish_param { beta: 1 }
// In place is supported: Backward needs only y and s, which Forward keeps.
// One body for both devices (kernels/neuron_kernels.hpp, util/for_each.hpp).
#ifndef POSEIDON_LAYERS_SWISH_LAYER_HPP_
#define POSEIDON_LAYERS_SWISH_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class SwishLayer final : public NeuronLayer<Dtype> {
 public:
  explicit SwishLayer(const LayerParameter& param)
      : NeuronLayer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Swish"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // s = sigmoid(beta * x) from the last Forward.
  Blob<Dtype> sigmoid_output_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_SWISH_LAYER_HPP_
