// Exp: an exponential of an affine map, element-wise.
//
//   y = base^(shift + scale * x)        (base e when base == -1)
//   dE/dx = dE/dy * y * ln(base) * scale
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: exp_param { base: -1  scale: 1  shift: 0 }
//   base must be -1 (meaning e) or a finite number > 0; else SetUp throws
//   ConfigError. base 1 is allowed (y == 1).
//
// In place is supported: Backward needs only y.
// One body for both devices (kernels/neuron_kernels.hpp, util/for_each.hpp).
#ifndef POSEIDON_LAYERS_EXP_LAYER_HPP_
#define POSEIDON_LAYERS_EXP_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class ExpLayer final : public NeuronLayer<Dtype> {
 public:
  explicit ExpLayer(const LayerParameter& param) : NeuronLayer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Exp"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // y = exp(log_base_ * (shift_ + scale_ * x)).
  Dtype log_base_ = 1;
  Dtype scale_ = 1;
  Dtype shift_ = 0;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_EXP_LAYER_HPP_
