// LSTMUnitLayer and the LSTM step it shares with LSTMLayer: element-wise
// loops over streams and cells.
#include "poseidon/layers/lstm_unit_layer.hpp"

#include <cmath>

namespace poseidon {

namespace {

template <typename Dtype>
Dtype Sigmoid(Dtype x) {
  return Dtype(1) / (Dtype(1) + std::exp(-x));
}

}  // namespace

template <typename Dtype>
void LstmUnitForward(int N, int D, const Dtype* c_prev, const Dtype* gates,
                     const Dtype* cont, Dtype* acts, Dtype* c, Dtype* h) {
  for (int n = 0; n < N; ++n) {
    const Dtype* x = gates + n * 4 * D;
    Dtype* a = acts + n * 4 * D;
    for (int k = 0; k < 3 * D; ++k) a[k] = Sigmoid(x[k]);
    for (int k = 3 * D; k < 4 * D; ++k) a[k] = std::tanh(x[k]);
    const Dtype* i = a;
    const Dtype* f = a + D;
    const Dtype* o = a + 2 * D;
    const Dtype* g = a + 3 * D;
    for (int d = 0; d < D; ++d) {
      const int idx = n * D + d;
      c[idx] = cont[n] * f[d] * c_prev[idx] + i[d] * g[d];
      h[idx] = o[d] * std::tanh(c[idx]);
    }
  }
}

template <typename Dtype>
void LstmUnitBackward(int N, int D, const Dtype* c_prev, const Dtype* acts,
                      const Dtype* c, const Dtype* cont, const Dtype* dc,
                      const Dtype* dh, Dtype* dc_prev, Dtype* dgates) {
  for (int n = 0; n < N; ++n) {
    const Dtype* a = acts + n * 4 * D;
    const Dtype* i = a;
    const Dtype* f = a + D;
    const Dtype* o = a + 2 * D;
    const Dtype* g = a + 3 * D;
    for (int d = 0; d < D; ++d) {
      const int idx = n * D + d;
      const Dtype tanh_c = std::tanh(c[idx]);
      // Total gradient at c_t: from outside, and through h_t = o tanh(c_t).
      const Dtype dc_total =
          dc[idx] + dh[idx] * o[d] * (Dtype(1) - tanh_c * tanh_c);
      const Dtype c_prev_kept = cont[n] * c_prev[idx];
      if (dgates) {
        Dtype* dx = dgates + n * 4 * D;
        const Dtype di = dc_total * g[d];
        const Dtype df = dc_total * c_prev_kept;
        const Dtype d_o = dh[idx] * tanh_c;
        const Dtype dg = dc_total * i[d];
        dx[d] = di * i[d] * (Dtype(1) - i[d]);
        dx[D + d] = df * f[d] * (Dtype(1) - f[d]);
        dx[2 * D + d] = d_o * o[d] * (Dtype(1) - o[d]);
        dx[3 * D + d] = dg * (Dtype(1) - g[d] * g[d]);
      }
      if (dc_prev) dc_prev[idx] = dc_total * cont[n] * f[d];
    }
  }
}

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
void LSTMUnitLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  LstmUnitForward(N_, D_, bottom[0]->cpu_data(), bottom[1]->cpu_data(),
                  bottom[2]->cpu_data(), acts_.mutable_cpu_data(),
                  top[0]->mutable_cpu_data(), top[1]->mutable_cpu_data());
}

template <typename Dtype>
void LSTMUnitLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                        const vector<bool>& propagate_down,
                                        const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[2], ConfigError,
                   "LSTMUnit cannot backpropagate to the sequence continuation "
                   "indicators (bottom[2]); set propagate_down: false for it");
  if (!propagate_down[0] && !propagate_down[1]) return;
  LstmUnitBackward(N_, D_, bottom[0]->cpu_data(), acts_.cpu_data(),
                   top[0]->cpu_data(), bottom[2]->cpu_data(),
                   top[0]->cpu_diff(), top[1]->cpu_diff(),
                   propagate_down[0] ? bottom[0]->mutable_cpu_diff() : nullptr,
                   propagate_down[1] ? bottom[1]->mutable_cpu_diff() : nullptr);
}

template void LstmUnitForward<float>(int, int, const float*, const float*,
                                     const float*, float*, float*, float*);
template void LstmUnitForward<double>(int, int, const double*, const double*,
                                      const double*, double*, double*, double*);
template void LstmUnitBackward<float>(int, int, const float*, const float*,
                                      const float*, const float*, const float*,
                                      const float*, float*, float*);
template void LstmUnitBackward<double>(int, int, const double*, const double*,
                                       const double*, const double*,
                                       const double*, const double*, double*,
                                       double*);

INSTANTIATE_CLASS(LSTMUnitLayer);
REGISTER_LAYER_CLASS(LSTMUnit);

}  // namespace poseidon
