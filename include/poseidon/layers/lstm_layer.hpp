// LSTMLayer: a long short-term memory network over time-major sequences,
// with Caffe's LSTM semantics (see recurrent_layer.hpp for the bottoms, tops,
// prototxt parameters and what is carried between batches).
//
//   [i', f', o', g'] = W_xc x_t + b_c + W_xc_static x_static
//                      + W_hc (cont_t * h_{t-1})
//   i = sigmoid(i')  f = sigmoid(f')  o = sigmoid(o')  g = tanh(g')
//   c_t = cont_t * f .* c_{t-1} + i .* g
//   h_t = o .* tanh(c_t)
// (one LSTMUnit step per t; gates stacked in the order i, f, o, g along the
// 4H axis, as in Caffe). Top 0 is the sequence h (T x N x H); with
// expose_hidden the bottoms take h_0 then c_0 and the tops give h_T then
// c_T (1 x N x H each).
// Blobs, in Caffe's order: W_xc (4H x D), b_c (4H), W_xc_static (4H x Ds,
// only with x_static), W_hc (4H x H).
// Devices: each step is kernels::LstmForward / LstmBackward
// (kernels/lstm_kernels.hpp, LSTMUnit's bodies) on either device.
#ifndef POSEIDON_LAYERS_LSTM_LAYER_HPP_
#define POSEIDON_LAYERS_LSTM_LAYER_HPP_

#include <vector>

#include "poseidon/layers/recurrent_layer.hpp"

namespace poseidon {

template <typename Dtype>
class LSTMLayer final : public RecurrentLayer<Dtype> {
 public:
  explicit LSTMLayer(const LayerParameter& param)
      : RecurrentLayer<Dtype>(param) {}

  const char* type() const override { return "LSTM"; }

 protected:
  int NumStates() const override { return 2; }  // h, c
  int GateDim() const override { return 4 * this->H(); }
  const char* ParamSuffix() const override { return "c"; }
  void ReshapeCell() override;
  void CellForward(int t) override;
  void OutputForward(Blob<Dtype>* top) override;
  const Dtype* OutputBackward(const Blob<Dtype>& top) override;
  void CellBackward(int t) override;

 private:
  Blob<Dtype> acts_;  // T x N x 4H: activated gates [i, f, o, g]
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_LSTM_LAYER_HPP_
