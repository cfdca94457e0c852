// PReLU: the parametric rectified linear unit, with a learned negative slope
// per channel (or one shared by all channels).
//
//   y[n, c, i] = x[n, c, i]          if x[n, c, i] > 0
//              = a[c] * x[n, c, i]   otherwise
//   dE/dx[n, c, i] = dE/dy[n, c, i] * (x > 0 ? 1 : a[c])
//   dE/da[c] += sum_{n, i : x[n, c, i] <= 0} dE/dy[n, c, i] * x[n, c, i]
//
// With channel_shared, a single a is used for every channel (c reads as 0
// above and the sum runs over all channels).
//
//   bottom[0]: x, at least 2 axes (N, C, ...); axis 1 holds the channels
//   top[0]:    y, the same shape
// Parameter blobs: [a], shape (C) or, with channel_shared, a scalar (shape ()).
// Given blobs (trained weights) must hold C values (1 when channel_shared);
// else SetUp throws ConfigError.
//
// Prototxt: prelu_param {
//   filler                 initialises a (default constant 0.25)
//   channel_shared: false  one slope for all channels }
//
// In place (top == bottom) is supported; Forward then keeps a copy of x for
// Backward.
#ifndef POSEIDON_LAYERS_PRELU_LAYER_HPP_
#define POSEIDON_LAYERS_PRELU_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class PReLULayer final : public NeuronLayer<Dtype> {
 public:
  explicit PReLULayer(const LayerParameter& param)
      : NeuronLayer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "PReLU"; }

 protected:
  void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  void Backward_cpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override;

 private:
  bool channel_shared_ = false;
  // The input, kept only when computing in place.
  Blob<Dtype> saved_input_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_PRELU_LAYER_HPP_
