// RecurrentLayer: the shared machinery of RNNLayer and LSTMLayer (Caffe's
// "Recurrent" contract), computed directly with one loop over time instead
// of Caffe's unrolled internal net. See Note [Recurrent state] for what is
// carried between batches.
//
// Every step t of every stream n computes a gate input of width G,
//   a_t = W_x x_t + b + W_s x_static + W_h (cont_t * h_{t-1}),
// and the subclass's cell turns a_t (and its own state at t-1) into the new
// state h_t (LSTM: also c_t). G = H for RNN, 4H for LSTM; H = num_output.
//
// Bottoms, in order:
//   x        (T x N x ...)  time-major input; D = the product of the dims
//                           after the first two.
//   cont     (T x N)        continuation indicators: cont = 0 starts a new
//                           sequence (the previous state is multiplied by
//                           cont, so it is forgotten); normally 0 or 1.
//   x_static (N x ...)      optional input seen at every step; Ds = the
//                           product of the dims after the first.
//   h_0 [, c_0] (1 x N x H) only with expose_hidden: the initial state(s).
// Tops: the output sequence (T x N x H); with expose_hidden also the final
//   state(s) h_T [, c_T] (1 x N x H each).
// Parameters (recurrent_param):
//   num_output    (required, > 0) H.
//   weight_filler (default constant 0) fills every weight matrix.
//   bias_filler   (default constant 0) fills every bias.
//   debug_info    (default false) accepted for compatibility; no effect.
//   expose_hidden (default false) the initial states become bottoms and the
//                 final states tops.
// Blobs (Caffe's order and shapes, so Caffe caffemodels load), k = "c" for
// LSTM, "h" for RNN: W_xk (G x D), b_k (G), W_xk_static (G x Ds) only with
// x_static, W_hk (G x H), then the subclass's own (RNN: W_ho, b_o).
// Gradients: to x, x_static and the exposed initial states, and the diffs of
// the exposed final states flow back through time (Caffe's unrolled net
// does neither); never to cont (its diff is zeroed if asked for). Param
// diffs accumulate. Unlike Caffe, T may change between batches.
//
// Devices: one body for both (ForwardOn/BackwardOn). The products are GEMMs
// (math::gemm_serial: one OpenBLAS call on the CPU, cuBLAS on the GPU) and
// the rest are the element-wise bodies of kernels/lstm_kernels.hpp. On the
// GPU everything, the state carried between batches and the exposed states
// included, stays on the device: one step is one W_h GEMM and one cell
// kernel (Note [Recurrent step fusion] in kernels/lstm_kernels.hpp), and
// nothing is read back to the host.
#ifndef POSEIDON_LAYERS_RECURRENT_LAYER_HPP_
#define POSEIDON_LAYERS_RECURRENT_LAYER_HPP_

#include <string>
#include <vector>

#include "poseidon/kernels/lstm_kernels.hpp"
#include "poseidon/layer.hpp"

namespace poseidon {

// y[k] += sum over r of x[r][k] for a rows x cols matrix x on `dev` (bias
// gradients). CPU: one axpy per row, in row order; GPU: kernels::SumRows,
// one index per column adding the rows in the same order, so both round
// alike.
template <typename Dtype>
void AddRowSums(Poseidon::Brew dev, int rows, int cols, const Dtype* x,
                Dtype* y);

// Note [Recurrent state]
// Without expose_hidden, the initial state of a forward pass is the final
// state of the previous one (zero at first, and again whenever N changes or
// Reset() is called), as in Caffe. Streams that start a new sequence at t = 0
// set cont = 0 there, which discards it. No gradient crosses batches: the
// gradient w.r.t. the carried state is dropped. With expose_hidden nothing is
// carried: the state comes from the bottoms and goes to the tops.
template <typename Dtype>
class RecurrentLayer : public Layer<Dtype> {
 public:
  explicit RecurrentLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  // Zeroes the state carried to the next forward pass (on the device of
  // the calling thread's mode).
  void Reset();

  int MinBottomBlobs() const override { return 2 + NumExposed(); }
  int MaxBottomBlobs() const override { return 3 + NumExposed(); }
  int ExactNumTopBlobs() const override { return 1 + NumExposed(); }
  bool AllowForceBackward(int bottom_index) const override {
    return bottom_index != 1;
  }

 protected:
  struct ParamSpec {
    std::string name;
    vector<int> shape;  // one axis: a bias (bias_filler), else weight_filler
  };

  // --- What a cell defines. ---
  // Number of state blobs: 1 (h) or 2 (h, c); h is always state 0.
  virtual int NumStates() const = 0;
  // Width G of the gate input per stream.
  virtual int GateDim() const = 0;
  // The letter k in the parameter names W_xk, b_k, W_xk_static, W_hk.
  virtual const char* ParamSuffix() const = 0;
  // Parameters after W_hk, in blob order.
  virtual vector<ParamSpec> OutputParamSpecs() const { return {}; }
  // Sizes the cell's own buffers once T_ and N_ are known.
  virtual void ReshapeCell() {}
  // Computes the states at step t from gate(t) and the states at t - 1, and
  // writes next_gemm_input(t) = next_cont(t) * h_t unless it is null (see
  // Note [Recurrent step fusion] in kernels/lstm_kernels.hpp).
  virtual void CellForward(int t) = 0;
  // Writes the output sequence (from the h sequence) into top.
  virtual void OutputForward(Blob<Dtype>* top) = 0;
  // Accumulates the output parameters' diffs and returns dLoss/dh_t through
  // the output for every t (T x N x H, on dev()).
  virtual const Dtype* OutputBackward(const Blob<Dtype>& top) = 0;
  // Writes dgate(t), the gradient w.r.t. the gate input at t, from
  // hidden_grad(t), the gradient arriving at h_t. A cell with more states
  // finds the full gradient w.r.t. state s >= 1 at t in dstate(s) and
  // replaces it by the gradient w.r.t. state s at t - 1.
  virtual void CellBackward(int t) = 0;

  // --- What the base gives a cell. Pointers are on dev(), the device of
  // the running Forward/Backward. ---
  Poseidon::Brew dev() const { return dev_; }
  int T() const { return T_; }
  int N() const { return N_; }
  int H() const { return H_; }
  const Dtype* cont(int t) const { return cont_ + t * N_; }
  const Dtype* gate(int t) const {
    return gates_.data_on(dev_) + t * N_ * GateDim();
  }
  Dtype* dgate(int t) {
    return gates_.mutable_diff_on(dev_) + t * N_ * GateDim();
  }
  // State s at step t (N x H); t = -1 is the initial state.
  const Dtype* state(int s, int t) const;
  Dtype* mutable_state(int s, int t);
  // The input of step t + 1's W_h GEMM, cont_{t+1} * h_t, and cont_{t+1};
  // null at the last step.
  Dtype* next_gemm_input(int t);
  const Dtype* next_cont(int t) const {
    return t + 1 < T_ ? cont(t + 1) : nullptr;
  }
  // The gradient arriving at h_t; see kernels::HiddenGrad.
  kernels::HiddenGrad<Dtype> hidden_grad(int t) const;
  // Backward only, s >= 1 (see CellBackward).
  Dtype* dstate(int s);
  // The h sequence (T x N x H).
  Blob<Dtype>& h_sequence() { return *states_[0]; }
  // Index in blobs() of the first of OutputParamSpecs().
  int output_param_index() const { return 3 + (static_input_ ? 1 : 0); }

  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) final;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) final;

 private:
  int NumExposed() const {
    return this->layer_param_.recurrent_param().expose_hidden() ? NumStates()
                                                                : 0;
  }
  int first_state_bottom() const { return 2 + (static_input_ ? 1 : 0); }
  int w_h_index() const { return 2 + (static_input_ ? 1 : 0); }
  vector<ParamSpec> AllParamSpecs() const;
  // The gradient of the gate inputs w.r.t. x, x_static, b and the weights.
  void ProjectionBackward(const vector<bool>& propagate_down,
                          const vector<Blob<Dtype>*>& bottom);
  // Zeroes the carried state on the calling thread's device.
  void ZeroCarried();

  int T_ = 0;
  int N_ = 0;
  int H_ = 0;
  int D_ = 0;   // input dims per step and stream
  int Ds_ = 0;  // static input dims per stream
  bool static_input_ = false;
  bool expose_hidden_ = false;
  // Valid during Forward/Backward: the device, cont's data on it, and in
  // Backward OutputBackward's dLoss/dh sequence and the diff of the exposed
  // final h (or null).
  Poseidon::Brew dev_ = Poseidon::CPU;
  const Dtype* cont_ = nullptr;
  const Dtype* dh_out_ = nullptr;
  const Dtype* final_h_diff_ = nullptr;

  Blob<Dtype> gates_;         // T x N x G: gate inputs (data) and their diff
  Blob<Dtype> h_conted_;      // T x N x H: cont_t * h_{t-1}
  Blob<Dtype> static_gates_;  // N x G: W_s x_static (data); sum_t dgate
  Blob<Dtype> scratch_;       // N x H: dgate_{t+1} W_h in Backward
  vector<shared_ptr<Blob<Dtype>>> states_;   // T x N x H each
  vector<shared_ptr<Blob<Dtype>>> initial_;  // 1 x N x H: states at t = -1
  vector<shared_ptr<Blob<Dtype>>> carried_;  // 1 x N x H, see Note
  // N x H, backward only, for states s >= 1 (at s - 1): the gradient at
  // h_t is gathered by the cell instead (hidden_grad).
  vector<shared_ptr<Blob<Dtype>>> dstates_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_RECURRENT_LAYER_HPP_
