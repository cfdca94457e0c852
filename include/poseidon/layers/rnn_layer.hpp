// RNNLayer: a simple (Elman) recurrent network over time-major sequences,
// with Caffe's RNN semantics (see recurrent_layer.hpp for the bottoms, tops,
// prototxt parameters and what is carried between batches).
//
//   h_t = tanh(W_xh x_t + b_h + W_xh_static x_static + W_hh (cont_t * h_{t-1}))
//   o_t = tanh(W_ho h_t + b_o)
// Top 0 is the sequence o (T x N x H); with expose_hidden the tops also give
// h_T and the bottoms take h_0.
// Blobs, in Caffe's order: W_xh (H x D), b_h (H), W_xh_static (H x Ds, only
// with x_static), W_hh (H x H), W_ho (H x H), b_o (H).
// Devices: the cell and output bodies are kernels::RnnForward, RnnBackward,
// RnnOutputForward and TanhBackward (kernels/lstm_kernels.hpp), run on
// either device with the base's GEMMs.
#ifndef POSEIDON_LAYERS_RNN_LAYER_HPP_
#define POSEIDON_LAYERS_RNN_LAYER_HPP_

#include <vector>

#include "poseidon/layers/recurrent_layer.hpp"

namespace poseidon {

template <typename Dtype>
class RNNLayer final : public RecurrentLayer<Dtype> {
 public:
  explicit RNNLayer(const LayerParameter& param)
      : RecurrentLayer<Dtype>(param) {}

  const char* type() const override { return "RNN"; }

 protected:
  using typename RecurrentLayer<Dtype>::ParamSpec;

  int NumStates() const override { return 1; }
  int GateDim() const override { return this->H(); }
  const char* ParamSuffix() const override { return "h"; }
  vector<ParamSpec> OutputParamSpecs() const override;
  void ReshapeCell() override;
  void CellForward(int t) override;
  void OutputForward(Blob<Dtype>* top) override;
  const Dtype* OutputBackward(const Blob<Dtype>& top) override;
  void CellBackward(int t) override;

 private:
  Blob<Dtype> output_;  // T x N x H: o (data) and dLoss/d(W_ho h + b_o)
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_RNN_LAYER_HPP_
