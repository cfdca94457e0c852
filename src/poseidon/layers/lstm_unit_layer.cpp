// LSTMUnitLayer: the LSTM step of kernels/lstm_kernels.hpp over N streams
// of D cells, on either device.
#include "poseidon/layers/lstm_unit_layer.hpp"

#include "poseidon/kernels/lstm_kernels.hpp"
#include "poseidon/util/for_each_rows.hpp"

namespace poseidon {

template <typename Dtype>
void LSTMUnitLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const Blob<Dtype>& c_prev = *bottom[0];
  const Blob<Dtype>& x = *bottom[1];
  const Blob<Dtype>& cont = *bottom[2];
  POSEIDON_REQUIRE(c_prev.num_axes() == 3 && c_prev.shape(0) == 1, ShapeError,
                   "LSTMUnit: bottom[0] (c_prev) must be 1 x N x D, got ",
                   c_prev.shape_string());
  N_ = c_prev.shape(1);
  D_ = c_prev.shape(2);
  POSEIDON_REQUIRE(
      x.num_axes() == 3 && x.shape(0) == 1 && x.shape(1) == N_ &&
          x.shape(2) == 4 * D_,
      ShapeError, "LSTMUnit: bottom[1] (gate inputs) must be 1 x N x 4D = 1 x ",
      N_, " x ", 4 * D_, " for c_prev ", c_prev.shape_string(), ", got ",
      x.shape_string());
  POSEIDON_REQUIRE(
      cont.num_axes() == 2 && cont.shape(0) == 1 && cont.shape(1) == N_,
      ShapeError, "LSTMUnit: bottom[2] (cont) must be 1 x N = 1 x ", N_,
      ", got ", cont.shape_string());
  for (int i = 0; i < 2; ++i) {
    for (int b = 0; b < 3; ++b) {
      POSEIDON_REQUIRE(top[i] != bottom[b], ConfigError,
                       "LSTMUnit cannot run in place (top[", i, "] is bottom[",
                       b, "])");
    }
  }
  top[0]->ReshapeLike(c_prev);
  top[1]->ReshapeLike(c_prev);
  acts_.ReshapeLike(x);
}

template <typename Dtype>
void LSTMUnitLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                     const vector<Blob<Dtype>*>& bottom,
                                     const vector<Blob<Dtype>*>& top) {
  for_each_rows(dev, N_, D_,
                kernels::LstmForward<Dtype>{
                    D_, bottom[0]->data_on(dev), bottom[1]->data_on(dev),
                    bottom[2]->data_on(dev), acts_.mutable_data_on(dev),
                    top[0]->mutable_data_on(dev), top[1]->mutable_data_on(dev),
                    nullptr, nullptr});
}

template <typename Dtype>
void LSTMUnitLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                      const vector<Blob<Dtype>*>& top,
                                      const vector<bool>& propagate_down,
                                      const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[2], ConfigError,
                   "LSTMUnit cannot backpropagate to the sequence continuation "
                   "indicators (bottom[2]); set propagate_down: false for it");
  if (!propagate_down[0] && !propagate_down[1]) return;
  // dh is top[1]'s diff alone (HiddenGrad with only `final`).
  const kernels::HiddenGrad<Dtype> dh{nullptr, nullptr, nullptr,
                                      top[1]->diff_on(dev)};
  for_each_rows(
      dev, N_, D_,
      kernels::LstmBackward<Dtype>{
          D_, bottom[0]->data_on(dev), acts_.data_on(dev), top[0]->data_on(dev),
          bottom[2]->data_on(dev), top[0]->diff_on(dev), dh,
          propagate_down[0] ? bottom[0]->mutable_diff_on(dev) : nullptr,
          propagate_down[1] ? bottom[1]->mutable_diff_on(dev) : nullptr});
}

INSTANTIATE_CLASS(LSTMUnitLayer);
REGISTER_LAYER_CLASS(LSTMUnit);

}  // namespace poseidon
