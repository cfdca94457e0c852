// RNNLayer: tanh cell per step; the output layer o = tanh(W_ho h + b_o) runs
// over all steps at once.
#include "poseidon/layers/rnn_layer.hpp"

#include <cmath>

namespace poseidon {

template <typename Dtype>
vector<typename RecurrentLayer<Dtype>::ParamSpec>
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
  const int NH = this->N() * this->H();
  const Dtype* a = this->gate(t);
  Dtype* h = this->mutable_state(0, t);
  for (int i = 0; i < NH; ++i) h[i] = std::tanh(a[i]);
}

template <typename Dtype>
void RNNLayer<Dtype>::OutputForward(Blob<Dtype>* top) {
  const int rows = this->T() * this->N();
  const int H = this->H();
  const int k = this->output_param_index();
  Dtype* o = output_.mutable_cpu_data();
  cpu_gemm(CblasNoTrans, CblasTrans, rows, H, H, Dtype(1),
           this->h_sequence().cpu_data(), this->blobs_[k]->cpu_data(), Dtype(0),
           o);
  const Dtype* b = this->blobs_[k + 1]->cpu_data();
  for (int r = 0; r < rows; ++r) cpu_axpy(H, Dtype(1), b, o + r * H);
  for (int i = 0; i < rows * H; ++i) o[i] = std::tanh(o[i]);
  cpu_copy(rows * H, o, top->mutable_cpu_data());
}

template <typename Dtype>
void RNNLayer<Dtype>::OutputBackward(const Blob<Dtype>& top) {
  const int rows = this->T() * this->N();
  const int H = this->H();
  const int k = this->output_param_index();
  const Dtype* o = output_.cpu_data();
  const Dtype* dtop = top.cpu_diff();
  Dtype* dz = output_.mutable_cpu_diff();
  for (int i = 0; i < rows * H; ++i) dz[i] = dtop[i] * (Dtype(1) - o[i] * o[i]);
  if (this->param_propagate_down(k)) {
    cpu_gemm(CblasTrans, CblasNoTrans, H, H, rows, Dtype(1), dz,
             this->h_sequence().cpu_data(), Dtype(1),
             this->blobs_[k]->mutable_cpu_diff());
  }
  if (this->param_propagate_down(k + 1)) {
    Dtype* db = this->blobs_[k + 1]->mutable_cpu_diff();
    for (int r = 0; r < rows; ++r) cpu_axpy(H, Dtype(1), dz + r * H, db);
  }
  cpu_gemm(CblasNoTrans, CblasNoTrans, rows, H, H, Dtype(1), dz,
           this->blobs_[k]->cpu_data(), Dtype(0),
           this->h_sequence().mutable_cpu_diff());
}

template <typename Dtype>
void RNNLayer<Dtype>::CellBackward(int t) {
  const int NH = this->N() * this->H();
  const Dtype* h = this->state(0, t);
  Dtype* dh = this->dstate(0);
  Dtype* da = this->dgate(t);
  for (int i = 0; i < NH; ++i) {
    da[i] = dh[i] * (Dtype(1) - h[i] * h[i]);
    dh[i] = 0;  // h_{t-1} reaches h_t only through W_hh (the base's part)
  }
}

INSTANTIATE_CLASS(RNNLayer);
REGISTER_LAYER_CLASS(RNN);

}  // namespace poseidon
