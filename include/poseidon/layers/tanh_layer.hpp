// TanH: the hyperbolic tangent, element-wise.
//
//   y = tanh(x)
//   dE/dx = dE/dy * (1 - y^2)
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: tanh_param { engine } (only the CPU/Caffe engine here).
// In place is supported: Backward needs only y.
#ifndef POSEIDON_LAYERS_TANH_LAYER_HPP_
#define POSEIDON_LAYERS_TANH_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class TanHLayer final : public NeuronLayer<Dtype> {
 public:
  explicit TanHLayer(const LayerParameter& param) : NeuronLayer<Dtype>(param) {}

  const char* type() const override { return "TanH"; }

 protected:
  void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  void Backward_cpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_TANH_LAYER_HPP_
