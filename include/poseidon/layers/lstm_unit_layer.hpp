// LSTMUnitLayer: one time step of an LSTM cell's non-linearity, for N
// independent streams of D cells (the step LSTMLayer repeats T times).
//
//   [i', f', o', g'] = X            (per stream: 4D gate inputs, in this order)
//   i = sigmoid(i')   f = sigmoid(f')   o = sigmoid(o')   g = tanh(g')
//   c_t = cont * f .* c_{t-1} + i .* g
//   h_t = o .* tanh(c_t)
// cont (per stream) is the sequence continuation indicator: 0 starts a new
// sequence, so the previous cell state is forgotten.
//
// Bottoms: c_{t-1} (1 x N x D), X (1 x N x 4D), cont (1 x N).
// Tops: c_t (1 x N x D), h_t (1 x N x D).
// Backward: gradients to c_{t-1} and X; none to cont (asking for one throws
// ConfigError, and force_backward does not reach it). No parameters, no
// prototxt parameters.
//
// Devices: one body for both, kernels::LstmForward / LstmBackward
// (kernels/lstm_kernels.hpp), the bodies LSTMLayer runs at every step.
#ifndef POSEIDON_LAYERS_LSTM_UNIT_LAYER_HPP_
#define POSEIDON_LAYERS_LSTM_UNIT_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class LSTMUnitLayer final : public Layer<Dtype> {
 public:
  explicit LSTMUnitLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "LSTMUnit"; }
  int ExactNumBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override {
    return bottom_index != 2;
  }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  int N_ = 0;         // streams
  int D_ = 0;         // cells per stream
  Blob<Dtype> acts_;  // activated gates [i, f, o, g], 1 x N x 4D
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_LSTM_UNIT_LAYER_HPP_
