// NeuronLayer: the base of element-wise layers (ReLU, Sigmoid, TanH, Dropout,
// ...). Each takes one bottom and produces one top of the same shape.
//
//   bottom[0]: any shape      top[0]: the same shape as bottom[0]
//
// In-place computation (top[0] == bottom[0]) is allowed; a derived layer whose
// Backward needs the original input must keep what it needs itself.
#ifndef POSEIDON_LAYERS_NEURON_LAYER_HPP_
#define POSEIDON_LAYERS_NEURON_LAYER_HPP_

#include <vector>

#include "poseidon/blob.hpp"
#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class NeuronLayer : public Layer<Dtype> {
 public:
  explicit NeuronLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  // Shapes top[0] like bottom[0] (a no-op when computing in place).
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  // Whether the layer computes in place (top[0] is bottom[0]).
  static bool InPlace(const vector<Blob<Dtype>*>& bottom,
                      const vector<Blob<Dtype>*>& top) {
    return top[0] == bottom[0];
  }
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_NEURON_LAYER_HPP_
