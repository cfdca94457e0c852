// Clip: clamps each element into [min, max].
//
//   y = max(min, min(x, max))
//   dE/dx = dE/dy  if min <= x <= max (bounds included, as Caffe), else 0
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: clip_param { min  max }  (both required, no defaults; SetUp
//   throws ConfigError if either is missing or min > max)
//
// In place (top == bottom) is supported; Forward then keeps a copy of x, as
// y no longer tells whether x was inside the bounds.
// One body for both devices (kernels/neuron_kernels.hpp, util/for_each.hpp).
#ifndef POSEIDON_LAYERS_CLIP_LAYER_HPP_
#define POSEIDON_LAYERS_CLIP_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class ClipLayer final : public NeuronLayer<Dtype> {
 public:
  explicit ClipLayer(const LayerParameter& param) : NeuronLayer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Clip"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  Dtype min_ = 0;
  Dtype max_ = 0;
  // The input, kept only when computing in place.
  Blob<Dtype> saved_input_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_CLIP_LAYER_HPP_
