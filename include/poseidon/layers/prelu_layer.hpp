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
//
// Both devices run one body (kernels/neuron_kernels.hpp) except for dE/da:
// the CPU sums each (n, c) row in double; the GPU sums over n per position
// with a functor and then over positions with a gemv
// (PReLUSlopeGradientOnDevice below), with no host round trip.
#ifndef POSEIDON_LAYERS_PRELU_LAYER_HPP_
#define POSEIDON_LAYERS_PRELU_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"
#include "poseidon/util/channel_ops.hpp"

namespace poseidon {

// The GPU pass's slope gradient, on `dev`, over x and dy viewed as
// (outer, dim, inner) (dim is 1 when the slope is shared):
//   slope_diff[d] += sum_{o, i : x <= 0} dy[o, d, i] * x[o, d, i]
// `terms` (scratch, resized to dim * inner) and `reducer` belong to the
// caller. Tests run it on the CPU against the CPU pass.
template <typename Dtype>
void PReLUSlopeGradientOnDevice(Poseidon::Brew dev, int outer, int dim,
                                int inner, const Dtype* x, const Dtype* dy,
                                Blob<Dtype>* terms,
                                ChannelReducer<Dtype>* reducer,
                                Dtype* slope_diff);

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
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // The bottom as (outer, dim, inner) around the slopes: (N, C, rest), or
  // (N, 1, C * rest) with one shared slope.
  struct View {
    int outer, dim, inner;
  };
  View ViewOf(const Blob<Dtype>& bottom) const;

  bool channel_shared_ = false;
  // The input, kept only when computing in place.
  Blob<Dtype> saved_input_;
  // GPU slope gradient scratch (see PReLUSlopeGradientOnDevice).
  Blob<Dtype> slope_terms_;
  ChannelReducer<Dtype> reducer_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_PRELU_LAYER_HPP_
