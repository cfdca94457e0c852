// AbsVal: the absolute value, element-wise.
//
//   y = |x|
//   dE/dx = dE/dy * sign(x)      (sign(0) = 0, as Caffe)
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: no parameters.
//
// In place (top == bottom) is supported, unlike in Caffe, which refuses it:
// y has lost the sign of x, so Forward then keeps a copy of x for Backward.
// One body for both devices: math::abs and kernels/neuron_kernels.hpp.
#ifndef POSEIDON_LAYERS_ABSVAL_LAYER_HPP_
#define POSEIDON_LAYERS_ABSVAL_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class AbsValLayer final : public NeuronLayer<Dtype> {
 public:
  explicit AbsValLayer(const LayerParameter& param)
      : NeuronLayer<Dtype>(param) {}

  const char* type() const override { return "AbsVal"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // The input, kept only when computing in place.
  Blob<Dtype> saved_input_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_ABSVAL_LAYER_HPP_
