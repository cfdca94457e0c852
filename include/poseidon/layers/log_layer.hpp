// Log: a logarithm of an affine map, element-wise.
//
//   y = log_base(shift + scale * x)      (natural log when base == -1)
//   dE/dx = dE/dy * scale / ((shift + scale * x) * ln(base))
//
// Inputs with shift + scale * x <= 0 give -inf or NaN, as std::log does.
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: log_param { base: -1  scale: 1  shift: 0 }
//   base must be -1 (meaning e) or a finite number > 0 other than 1 (whose
//   logarithm is 0); else SetUp throws ConfigError.
//
// In place (top == bottom) is supported; Forward then keeps a copy of x for
// Backward.
// One body for both devices (kernels/neuron_kernels.hpp, util/for_each.hpp).
#ifndef POSEIDON_LAYERS_LOG_LAYER_HPP_
#define POSEIDON_LAYERS_LOG_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class LogLayer final : public NeuronLayer<Dtype> {
 public:
  explicit LogLayer(const LayerParameter& param) : NeuronLayer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Log"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // y = ln(shift_ + scale_ * x) * base_scale_, base_scale_ = 1 / ln(base).
  Dtype base_scale_ = 1;
  Dtype scale_ = 1;
  Dtype shift_ = 0;
  // The input, kept only when computing in place.
  Blob<Dtype> saved_input_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_LOG_LAYER_HPP_
