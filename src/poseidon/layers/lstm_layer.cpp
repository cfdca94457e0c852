// LSTMLayer: one LSTMUnit step per time step; the h sequence is the output.
#include "poseidon/layers/lstm_layer.hpp"

#include "poseidon/layers/lstm_unit_layer.hpp"

namespace poseidon {

template <typename Dtype>
void LSTMLayer<Dtype>::ReshapeCell() {
  acts_.Reshape({this->T(), this->N(), 4 * this->H()});
}

template <typename Dtype>
void LSTMLayer<Dtype>::CellForward(int t) {
  const int N = this->N();
  const int H = this->H();
  LstmUnitForward(N, H, this->state(1, t - 1), this->gate(t), this->cont(t),
                  acts_.mutable_cpu_data() + t * N * 4 * H,
                  this->mutable_state(1, t), this->mutable_state(0, t));
}

template <typename Dtype>
void LSTMLayer<Dtype>::OutputForward(Blob<Dtype>* top) {
  cpu_copy(top->count(), this->h_sequence().cpu_data(),
           top->mutable_cpu_data());
}

template <typename Dtype>
void LSTMLayer<Dtype>::OutputBackward(const Blob<Dtype>& top) {
  cpu_copy(top.count(), top.cpu_diff(), this->h_sequence().mutable_cpu_diff());
}

template <typename Dtype>
void LSTMLayer<Dtype>::CellBackward(int t) {
  const int N = this->N();
  const int H = this->H();
  // dstate(1) becomes dLoss/dc_{t-1} in place; h_{t-1} enters the step only
  // through W_hc, which the base handles, so dstate(0) restarts at zero.
  LstmUnitBackward(N, H, this->state(1, t - 1),
                   acts_.cpu_data() + t * N * 4 * H, this->state(1, t),
                   this->cont(t), this->dstate(1), this->dstate(0),
                   this->dstate(1), this->dgate(t));
  cpu_set(N * H, Dtype(0), this->dstate(0));
}

INSTANTIATE_CLASS(LSTMLayer);
REGISTER_LAYER_CLASS(LSTM);

}  // namespace poseidon
