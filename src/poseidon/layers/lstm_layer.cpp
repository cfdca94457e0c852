// LSTMLayer: one LSTMUnit step per time step (kernels::LstmForward and
// LstmBackward, on either device); the h sequence is the output.
#include "poseidon/layers/lstm_layer.hpp"

#include "poseidon/kernels/lstm_kernels.hpp"
#include "poseidon/util/for_each_rows.hpp"

namespace poseidon {

template <typename Dtype>
void LSTMLayer<Dtype>::ReshapeCell() {
  acts_.Reshape({this->T(), this->N(), 4 * this->H()});
}

template <typename Dtype>
void LSTMLayer<Dtype>::CellForward(int t) {
  const int N = this->N();
  const int H = this->H();
  for_each_rows(this->dev(), N, H,
                kernels::LstmForward<Dtype>{
                    H, this->state(1, t - 1), this->gate(t), this->cont(t),
                    acts_.mutable_data_on(this->dev()) + t * N * 4 * H,
                    this->mutable_state(1, t), this->mutable_state(0, t),
                    this->next_cont(t), this->next_gemm_input(t)});
}

template <typename Dtype>
void LSTMLayer<Dtype>::OutputForward(Blob<Dtype>* top) {
  const Poseidon::Brew dev = this->dev();
  math::copy<Dtype>(dev, top->count(), this->h_sequence().data_on(dev),
                    top->mutable_data_on(dev));
}

template <typename Dtype>
const Dtype* LSTMLayer<Dtype>::OutputBackward(const Blob<Dtype>& top) {
  // The output is the h sequence itself.
  return top.diff_on(this->dev());
}

template <typename Dtype>
void LSTMLayer<Dtype>::CellBackward(int t) {
  const int N = this->N();
  const int H = this->H();
  // dstate(1) becomes dLoss/dc_{t-1} in place; h_{t-1} enters the step only
  // through W_hc, which the base handles.
  Dtype* dc = this->dstate(1);
  for_each_rows(
      this->dev(), N, H,
      kernels::LstmBackward<Dtype>{H, this->state(1, t - 1),
                                   acts_.data_on(this->dev()) + t * N * 4 * H,
                                   this->state(1, t), this->cont(t), dc,
                                   this->hidden_grad(t), dc, this->dgate(t)});
}

INSTANTIATE_CLASS(LSTMLayer);
REGISTER_LAYER_CLASS(LSTM);

}  // namespace poseidon
