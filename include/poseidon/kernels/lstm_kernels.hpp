// The element-wise bodies of the recurrent layers (LSTMUnit, LSTM, RNN),
// shared by the CPU and the GPU; see layers/lstm_unit_layer.hpp,
// layers/recurrent_layer.hpp and layers/rnn_layer.hpp for the formulas.
//
// Most bodies work on an N x D (or rows x cols) grid whose row index picks a
// per-stream value (cont) or whose column picks a per-unit one (bias). They
// define Apply(row, col), which the CPU runs in two nested loops (no
// division per element), and operator()(i) = Apply(i / cols, i % cols) for
// for_each on the GPU; util/for_each_rows.hpp runs them. A CPU test runs
// operator() too, so the index split the GPU uses is checked here.
//
// Note [Recurrent step fusion]
// One time step on the GPU is two launches: the W_h GEMM and one cell
// kernel. The forward cell also writes the next step's GEMM input
// hc_{t+1} = cont_{t+1} * h_t (hc_next), and the backward cell gathers the
// gradient arriving at h_t itself (HiddenGrad): from the output at t, plus
// cont_{t+1} * (dgate_{t+1} W_h) for t < T - 1, or the gradient of the final
// state at t = T - 1. The products and sums are rounded in the order the
// CPU loops before this fusion used, so CPU results did not change.
#ifndef POSEIDON_KERNELS_LSTM_KERNELS_HPP_
#define POSEIDON_KERNELS_LSTM_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

template <typename Dtype>
POSEIDON_HD_INLINE Dtype Sigmoid(Dtype x) {
  return Dtype(1) / (Dtype(1) + hd::exp(-x));
}

// The gradient arriving at h_t (element idx of stream n), see Note
// [Recurrent step fusion]:
//   (rec ? cont_next[n] * rec[idx] : (final ? final[idx] : 0))
//   + (out ? out[idx] : 0).
// All null: the gradient is read from `final` alone (LSTMUnit's dh).
template <typename Dtype>
struct HiddenGrad {
  const Dtype* out;        // dLoss/dh_t through the output, or null
  const Dtype* rec;        // dgate_{t+1} W_h, or null (last step)
  const Dtype* cont_next;  // cont_{t+1}, with rec
  const Dtype* final;      // dLoss/dh_t from outside, or null (zero)
  POSEIDON_HD_INLINE Dtype operator()(int n, int idx) const {
    Dtype dh = rec ? cont_next[n] * rec[idx] : (final ? final[idx] : Dtype(0));
    if (out) dh = dh + out[idx];
    return dh;
  }
};

// One LSTM step for N streams of D cells (LSTMUnit's formula). gates
// (N x 4D) are the gate inputs [i', f', o', g'] per stream; writes the
// activated gates [i, f, o, g] to acts (N x 4D) and c_t, h_t (N x D). With
// hc_next, also hc_next = cont_next * h_t (Note [Recurrent step fusion]).
template <typename Dtype>
struct LstmForward {
  int D;
  const Dtype* c_prev;
  const Dtype* gates;
  const Dtype* cont;
  Dtype* acts;
  Dtype* c;
  Dtype* h;
  const Dtype* cont_next;                   // with hc_next
  Dtype* hc_next;                           // or null
  static constexpr int kCostPerIndex = 16;  // five exp/tanh
  POSEIDON_HD void Apply(int n, int d) const {
    const Dtype* x = gates + n * 4 * D;
    Dtype* a = acts + n * 4 * D;
    const Dtype i = Sigmoid(x[d]);
    const Dtype f = Sigmoid(x[D + d]);
    const Dtype o = Sigmoid(x[2 * D + d]);
    const Dtype g = hd::tanh(x[3 * D + d]);
    a[d] = i;
    a[D + d] = f;
    a[2 * D + d] = o;
    a[3 * D + d] = g;
    const int idx = n * D + d;
    const Dtype c_t = cont[n] * f * c_prev[idx] + i * g;
    const Dtype h_t = o * hd::tanh(c_t);
    c[idx] = c_t;
    h[idx] = h_t;
    if (hc_next) hc_next[idx] = cont_next[n] * h_t;
  }
  POSEIDON_HD void operator()(int i) const { Apply(i / D, i % D); }
};

// The gradient of one LSTM step. dc (N x D) is the gradient arriving at c_t
// from outside the step, dh (HiddenGrad) the one arriving at h_t; acts and c
// are what LstmForward wrote. Writes the gradient w.r.t. c_{t-1} to dc_prev
// and w.r.t. the gate inputs to dgates (N x 4D); either may be null.
// dc_prev may be dc (each element is read before it is written).
template <typename Dtype>
struct LstmBackward {
  int D;
  const Dtype* c_prev;
  const Dtype* acts;
  const Dtype* c;
  const Dtype* cont;
  const Dtype* dc;
  HiddenGrad<Dtype> dh;
  Dtype* dc_prev;
  Dtype* dgates;
  static constexpr int kCostPerIndex = 8;  // a tanh and a dozen products
  POSEIDON_HD void Apply(int n, int d) const {
    const Dtype* a = acts + n * 4 * D;
    const Dtype i = a[d];
    const Dtype f = a[D + d];
    const Dtype o = a[2 * D + d];
    const Dtype g = a[3 * D + d];
    const int idx = n * D + d;
    const Dtype dh_t = dh(n, idx);
    const Dtype tanh_c = hd::tanh(c[idx]);
    // Total gradient at c_t: from outside, and through h_t = o tanh(c_t).
    const Dtype dc_total = dc[idx] + dh_t * o * (Dtype(1) - tanh_c * tanh_c);
    if (dgates) {
      const Dtype c_prev_kept = cont[n] * c_prev[idx];
      Dtype* dx = dgates + n * 4 * D;
      const Dtype di = dc_total * g;
      const Dtype df = dc_total * c_prev_kept;
      const Dtype d_o = dh_t * tanh_c;
      const Dtype dg = dc_total * i;
      dx[d] = di * i * (Dtype(1) - i);
      dx[D + d] = df * f * (Dtype(1) - f);
      dx[2 * D + d] = d_o * o * (Dtype(1) - o);
      dx[3 * D + d] = dg * (Dtype(1) - g * g);
    }
    if (dc_prev) dc_prev[idx] = dc_total * cont[n] * f;
  }
  POSEIDON_HD void operator()(int i) const { Apply(i / D, i % D); }
};

// RNN cell, N x H: h_t = tanh(a_t); with hc_next also
// hc_next = cont_next * h_t (Note [Recurrent step fusion]).
template <typename Dtype>
struct RnnForward {
  int H;
  const Dtype* a;
  Dtype* h;
  const Dtype* cont_next;                  // with hc_next
  Dtype* hc_next;                          // or null
  static constexpr int kCostPerIndex = 4;  // a tanh
  POSEIDON_HD void Apply(int n, int k) const {
    const int idx = n * H + k;
    const Dtype h_t = hd::tanh(a[idx]);
    h[idx] = h_t;
    if (hc_next) hc_next[idx] = cont_next[n] * h_t;
  }
  POSEIDON_HD void operator()(int i) const { Apply(i / H, i % H); }
};

// Gradient of the RNN cell, N x H: da = dh * (1 - h^2), dh the gradient
// arriving at h_t.
template <typename Dtype>
struct RnnBackward {
  int H;
  const Dtype* h;
  HiddenGrad<Dtype> dh;
  Dtype* da;
  POSEIDON_HD void Apply(int n, int k) const {
    const int idx = n * H + k;
    da[idx] = dh(n, idx) * (Dtype(1) - h[idx] * h[idx]);
  }
  POSEIDON_HD void operator()(int i) const { Apply(i / H, i % H); }
};

// RNN output, rows x H: o = tanh(o + b_o) in place, copied to top.
template <typename Dtype>
struct RnnOutputForward {
  int H;
  const Dtype* b;
  Dtype* o;
  Dtype* top;
  static constexpr int kCostPerIndex = 4;  // a tanh
  POSEIDON_HD void Apply(int r, int k) const {
    const int idx = r * H + k;
    const Dtype v = hd::tanh(o[idx] + b[k]);
    o[idx] = v;
    top[idx] = v;
  }
  POSEIDON_HD void operator()(int i) const { Apply(i / H, i % H); }
};

// dz = dy * (1 - y^2) for y = tanh(z), element-wise.
template <typename Dtype>
struct TanhBackward {
  const Dtype* y;
  const Dtype* dy;
  Dtype* dz;
  POSEIDON_HD void operator()(int i) const {
    dz[i] = dy[i] * (Dtype(1) - y[i] * y[i]);
  }
};

// y = cont[n] * x per stream n, N x H (hc_0 = cont_0 h_{-1}, and the
// gradient w.r.t. h_{-1}).
template <typename Dtype>
struct ContScale {
  int H;
  const Dtype* cont;
  const Dtype* x;
  Dtype* y;
  POSEIDON_HD void Apply(int n, int k) const {
    const int idx = n * H + k;
    y[idx] = cont[n] * x[idx];
  }
  POSEIDON_HD void operator()(int i) const { Apply(i / H, i % H); }
};

// a[r][k] += b[k] for rows x cols (a bias added to every row).
template <typename Dtype>
struct AddRowVector {
  int cols;
  const Dtype* b;
  Dtype* a;
  POSEIDON_HD void Apply(int r, int k) const { a[r * cols + k] += b[k]; }
  POSEIDON_HD void operator()(int i) const { Apply(i / cols, i % cols); }
};

// y[k] += sum over r of x[r][k], rows x cols, one index per column adding
// the rows in order (so it rounds as a loop of per-row axpy calls does).
template <typename Dtype>
struct SumRows {
  int rows;
  int cols;
  const Dtype* x;
  Dtype* y;
  static constexpr int kCostPerIndex = 64;  // rows, roughly
  POSEIDON_HD void operator()(int k) const {
    Dtype sum = y[k];
    for (int r = 0; r < rows; ++r) sum = sum + x[r * cols + k];
    y[k] = sum;
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_LSTM_KERNELS_HPP_
