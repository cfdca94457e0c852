// RNNLayer: tanh cell per step; the output layer o = tanh(W_ho h + b_o) runs
// over all steps at once. Either device: GEMMs plus the bodies of
// kernels/lstm_kernels.hpp.
#include "poseidon/layers/rnn_layer.hpp"

#include "poseidon/kernels/lstm_kernels.hpp"
#include "poseidon/util/for_each_rows.hpp"

namespace poseidon {

template <typename Dtype>
vector<typename RNNLayer<Dtype>::ParamSpec>
RNNLayer<Dtype>::OutputParamSpecs() const {
  const int H = this->H();
  return {{"W_ho", {H, H}}, {"b_o", {H}}};
}

template <typename Dtype>
void RNNLayer<Dtype>::ReshapeCell() {
  output_.Reshape({this->T(), this->N(), this->H()});
}

template <typename Dtype>
void RNNLayer<Dtype>::CellForward(int t) {
  for_each_rows(this->dev(), this->N(), this->H(),
                kernels::RnnForward<Dtype>{
                    this->H(), this->gate(t), this->mutable_state(0, t),
                    this->next_cont(t), this->next_gemm_input(t)});
}

template <typename Dtype>
void RNNLayer<Dtype>::OutputForward(Blob<Dtype>* top) {
  const Poseidon::Brew dev = this->dev();
  const int rows = this->T() * this->N();
  const int H = this->H();
  const int k = this->output_param_index();
  Dtype* o = output_.mutable_data_on(dev);
  math::gemm_serial<Dtype>(dev, CblasNoTrans, CblasTrans, rows, H, H, Dtype(1),
                           this->h_sequence().data_on(dev),
                           this->blobs_[k]->data_on(dev), Dtype(0), o);
  for_each_rows(
      dev, rows, H,
      kernels::RnnOutputForward<Dtype>{H, this->blobs_[k + 1]->data_on(dev), o,
                                       top->mutable_data_on(dev)});
}

template <typename Dtype>
const Dtype* RNNLayer<Dtype>::OutputBackward(const Blob<Dtype>& top) {
  const Poseidon::Brew dev = this->dev();
  const int rows = this->T() * this->N();
  const int H = this->H();
  const int k = this->output_param_index();
  Dtype* dz = output_.mutable_diff_on(dev);
  for_each(
      dev, rows * H,
      kernels::TanhBackward<Dtype>{output_.data_on(dev), top.diff_on(dev), dz});
  if (this->param_propagate_down(k)) {
    math::gemm_serial<Dtype>(dev, CblasTrans, CblasNoTrans, H, H, rows,
                             Dtype(1), dz, this->h_sequence().data_on(dev),
                             Dtype(1), this->blobs_[k]->mutable_diff_on(dev));
  }
  if (this->param_propagate_down(k + 1)) {
    AddRowSums(dev, rows, H, dz, this->blobs_[k + 1]->mutable_diff_on(dev));
  }
  Dtype* dh = this->h_sequence().mutable_diff_on(dev);
  math::gemm_serial<Dtype>(dev, CblasNoTrans, CblasNoTrans, rows, H, H,
                           Dtype(1), dz, this->blobs_[k]->data_on(dev),
                           Dtype(0), dh);
  return dh;
}

template <typename Dtype>
void RNNLayer<Dtype>::CellBackward(int t) {
  // h_{t-1} reaches h_t only through W_hh, which the base handles.
  for_each_rows(
      this->dev(), this->N(), this->H(),
      kernels::RnnBackward<Dtype>{this->H(), this->state(0, t),
                                  this->hidden_grad(t), this->dgate(t)});
}

INSTANTIATE_CLASS(RNNLayer);
REGISTER_LAYER_CLASS(RNN);

}  // namespace poseidon
