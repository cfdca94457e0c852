// Power: an affine map raised to a power, element-wise.
//
//   y = (shift + scale * x)^power
//   dE/dx = dE/dy * power * scale * (shift + scale * x)^(power - 1)
//
// Special cases, as in Caffe: with power == 0 or scale == 0 the input is
// ignored, y = (power == 0 ? 1 : shift^power) (so 0^0 = 1) and the gradient is
// 0; with power == 1 the gradient is the constant scale. A negative base with
// a non-integer power gives NaN (std::pow), as in Caffe.
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: power_param { power: 1  scale: 1  shift: 0 }
//
// In place (top == bottom) is supported; when the gradient depends on x,
// Forward then keeps a copy of x for Backward.
// One body for both devices: kernels/neuron_kernels.hpp, math::set/scale
// for the constant cases.
#ifndef POSEIDON_LAYERS_POWER_LAYER_HPP_
#define POSEIDON_LAYERS_POWER_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class PowerLayer final : public NeuronLayer<Dtype> {
 public:
  explicit PowerLayer(const LayerParameter& param)
      : NeuronLayer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Power"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // Whether dy/dx varies with x (neither constant nor zero).
  bool GradientNeedsInput() const {
    return diff_scale_ != Dtype(0) && power_ != Dtype(1);
  }

  Dtype power_ = 1;
  Dtype scale_ = 1;
  Dtype shift_ = 0;
  // power * scale: the factor of dy/dx, and 0 when y ignores x.
  Dtype diff_scale_ = 1;
  // The input, kept only when computing in place and GradientNeedsInput().
  Blob<Dtype> saved_input_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_POWER_LAYER_HPP_
