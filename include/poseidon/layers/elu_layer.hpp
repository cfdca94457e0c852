// ELU: the exponential linear unit, element-wise.
//
//   y = x                       if x > 0
//   y = alpha * (exp(x) - 1)    otherwise
//   dE/dx = dE/dy               if x > 0
//   dE/dx = dE/dy * (y + alpha) otherwise   (alpha * exp(x); at x = 0: alpha)
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: elu_param { alpha: 1 }
//
// In place (top == bottom) is supported. Backward takes the mask x > 0 from
// the bottom's data; in place that is y, which is > 0 exactly when x > 0 if
// alpha >= 0, and with a negative alpha Forward keeps a copy of x.
// One body for both devices (kernels/neuron_kernels.hpp, util/for_each.hpp).
#ifndef POSEIDON_LAYERS_ELU_LAYER_HPP_
#define POSEIDON_LAYERS_ELU_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class ELULayer final : public NeuronLayer<Dtype> {
 public:
  explicit ELULayer(const LayerParameter& param) : NeuronLayer<Dtype>(param) {}

  const char* type() const override { return "ELU"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // The input, kept only when computing in place with a negative alpha.
  Blob<Dtype> saved_input_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_ELU_LAYER_HPP_
