// Threshold: a step function, element-wise.
//
//   y = 1 if x > threshold, else 0
//   dE/dx = 0
//
// The step is flat except at the threshold, where it has no derivative.
// Caffe does not implement Backward at all (it aborts if called); here a
// Backward asked for the bottom writes zeros, the derivative almost
// everywhere, so nets that force backward through it still run.
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: threshold_param { threshold: 0 }
// In place is supported.
// One body for both devices (kernels/neuron_kernels.hpp; Backward is
// math::set).
#ifndef POSEIDON_LAYERS_THRESHOLD_LAYER_HPP_
#define POSEIDON_LAYERS_THRESHOLD_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class ThresholdLayer final : public NeuronLayer<Dtype> {
 public:
  explicit ThresholdLayer(const LayerParameter& param)
      : NeuronLayer<Dtype>(param) {}

  const char* type() const override { return "Threshold"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_THRESHOLD_LAYER_HPP_
