// BNLL ("binomial normal log likelihood"): the softplus function, element-wise.
//
//   y = log(1 + exp(x)),  computed as max(x, 0) + log1p(exp(-|x|)) so that no
//                         exp() overflows for large |x|
//   dE/dx = dE/dy * sigmoid(x) = dE/dy * (1 - exp(-y))
//
// Backward uses the second form (exp(-y) = 1 / (1 + exp(x)) exactly), so it
// needs only y and is stable for every x.
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: no parameters.
// In place is supported: Backward needs only y.
// One body for both devices (kernels/neuron_kernels.hpp, util/for_each.hpp).
#ifndef POSEIDON_LAYERS_BNLL_LAYER_HPP_
#define POSEIDON_LAYERS_BNLL_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class BNLLLayer final : public NeuronLayer<Dtype> {
 public:
  explicit BNLLLayer(const LayerParameter& param) : NeuronLayer<Dtype>(param) {}

  const char* type() const override { return "BNLL"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_BNLL_LAYER_HPP_
