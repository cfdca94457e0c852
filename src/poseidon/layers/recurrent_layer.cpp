// RecurrentLayer: input projections for all steps at once (one GEMM), then a
// loop over time (one GEMM per step for W_h, the cell in between), and the
// same loop backwards (backpropagation through time), on either device.
#include "poseidon/layers/recurrent_layer.hpp"

#include <climits>

#include "poseidon/filler.hpp"
#include "poseidon/util/for_each_rows.hpp"

namespace poseidon {

template <typename Dtype>
void AddRowSums(Poseidon::Brew dev, int rows, int cols, const Dtype* x,
                Dtype* y) {
  if (dev == Poseidon::GPU) {
    for_each(dev, cols, kernels::SumRows<Dtype>{rows, cols, x, y});
    return;
  }
  for (int r = 0; r < rows; ++r) cpu_axpy(cols, Dtype(1), x + r * cols, y);
}

template void AddRowSums<float>(Poseidon::Brew, int, int, const float*, float*);
template void AddRowSums<double>(Poseidon::Brew, int, int, const double*,
                                 double*);

template <typename Dtype>
typename std::vector<typename RecurrentLayer<Dtype>::ParamSpec>
RecurrentLayer<Dtype>::AllParamSpecs() const {
  const std::string k = ParamSuffix();
  const int G = GateDim();
  vector<ParamSpec> specs = {{"W_x" + k, {G, D_}}, {"b_" + k, {G}}};
  if (static_input_) specs.push_back({"W_x" + k + "_static", {G, Ds_}});
  specs.push_back({"W_h" + k, {G, H_}});
  for (const ParamSpec& spec : OutputParamSpecs()) specs.push_back(spec);
  return specs;
}

template <typename Dtype>
void RecurrentLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  const RecurrentParameter& p = this->layer_param_.recurrent_param();
  POSEIDON_REQUIRE(p.num_output() > 0 && p.num_output() <= INT_MAX / 4,
                   ConfigError, this->type(),
                   ": recurrent_param.num_output must be positive, got ",
                   p.num_output());
  H_ = static_cast<int>(p.num_output());
  expose_hidden_ = p.expose_hidden();
  const Blob<Dtype>& x = *bottom[0];
  POSEIDON_REQUIRE(x.num_axes() >= 2, ShapeError, this->type(),
                   ": bottom[0] (x) must be T x N x ... (time-major), got ",
                   x.shape_string());
  D_ = x.count(2);
  static_input_ = static_cast<int>(bottom.size()) > 2 + NumExposed();
  if (static_input_) {
    POSEIDON_REQUIRE(bottom[2]->num_axes() >= 1, ShapeError, this->type(),
                     ": bottom[2] (x_static) must be N x ..., got ",
                     bottom[2]->shape_string());
    Ds_ = bottom[2]->count(1);
  }

  const vector<ParamSpec> specs = AllParamSpecs();
  auto& blobs = this->blobs_;
  if (!blobs.empty()) {
    std::string names;
    for (const ParamSpec& spec : specs) names += " " + spec.name;
    POSEIDON_REQUIRE(blobs.size() == specs.size(), ShapeError, this->type(),
                     " has ", blobs.size(), " parameter blobs but expects ",
                     specs.size(), ":", names,
                     static_input_ ? " (with x_static)" : "");
    for (size_t i = 0; i < specs.size(); ++i) {
      POSEIDON_REQUIRE(blobs[i]->shape() == specs[i].shape, ShapeError,
                       this->type(), ": parameter ", i, " (", specs[i].name,
                       ") has shape ", blobs[i]->shape_string(),
                       " but num_output ", H_, " and the bottoms need ",
                       Blob<Dtype>(specs[i].shape).shape_string());
    }
  } else {
    for (const ParamSpec& spec : specs) {
      blobs.push_back(std::make_shared<Blob<Dtype>>(spec.shape));
      const FillerParameter& filler =
          spec.shape.size() == 1 ? p.bias_filler() : p.weight_filler();
      GetFiller<Dtype>(filler)->Fill(blobs.back().get());
    }
  }
  this->param_propagate_down_.resize(blobs.size(), true);

  states_.clear();
  initial_.clear();
  carried_.clear();
  dstates_.clear();
  for (int s = 0; s < NumStates(); ++s) {
    states_.push_back(std::make_shared<Blob<Dtype>>());
    initial_.push_back(std::make_shared<Blob<Dtype>>());
    carried_.push_back(std::make_shared<Blob<Dtype>>());
    if (s > 0) dstates_.push_back(std::make_shared<Blob<Dtype>>());
  }
}

template <typename Dtype>
void RecurrentLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const Blob<Dtype>& x = *bottom[0];
  const Blob<Dtype>& cont = *bottom[1];
  POSEIDON_REQUIRE(x.num_axes() >= 2 && x.shape(0) > 0 && x.shape(1) > 0,
                   ShapeError, this->type(),
                   ": bottom[0] (x) must be T x N x ... with T, N > 0, got ",
                   x.shape_string());
  POSEIDON_REQUIRE(x.count(2) == D_, ShapeError, this->type(),
                   ": bottom[0] (x) ", x.shape_string(), " has ", x.count(2),
                   " values per step and stream, but the layer was set up "
                   "for ",
                   D_);
  T_ = x.shape(0);
  N_ = x.shape(1);
  POSEIDON_REQUIRE(
      cont.num_axes() == 2 && cont.shape(0) == T_ && cont.shape(1) == N_,
      ShapeError, this->type(), ": bottom[1] (cont) must be T x N = ", T_,
      " x ", N_, " to match x ", x.shape_string(), ", got ",
      cont.shape_string());
  if (static_input_) {
    const Blob<Dtype>& xs = *bottom[2];
    POSEIDON_REQUIRE(
        xs.num_axes() >= 1 && xs.shape(0) == N_ && xs.count(1) == Ds_,
        ShapeError, this->type(),
        ": bottom[2] (x_static) must be N x ... = ", N_, " x (", Ds_,
        " values) to match x ", x.shape_string(), ", got ", xs.shape_string());
  }
  const vector<int> state_shape = {1, N_, H_};
  const char* state_names[] = {"h_0", "c_0"};
  for (int s = 0; s < NumExposed(); ++s) {
    const Blob<Dtype>& b = *bottom[first_state_bottom() + s];
    POSEIDON_REQUIRE(b.shape() == state_shape, ShapeError, this->type(),
                     ": bottom[", first_state_bottom() + s, "] (",
                     state_names[s], ") must be 1 x N x num_output = 1 x ", N_,
                     " x ", H_, ", got ", b.shape_string());
  }
  for (size_t t = 0; t < top.size(); ++t) {
    for (size_t b = 0; b < bottom.size(); ++b) {
      POSEIDON_REQUIRE(top[t] != bottom[b], ConfigError, this->type(),
                       " cannot run in place (top[", t, "] is bottom[", b,
                       "])");
    }
  }

  top[0]->Reshape({T_, N_, H_});
  for (int s = 0; s < NumExposed(); ++s) top[1 + s]->Reshape(state_shape);
  const int G = GateDim();
  gates_.Reshape({T_, N_, G});
  h_conted_.Reshape({T_, N_, H_});
  static_gates_.Reshape({N_, G});
  scratch_.Reshape({N_, H_});
  bool carried_reshaped = false;
  for (int s = 0; s < NumStates(); ++s) {
    states_[s]->Reshape({T_, N_, H_});
    initial_[s]->Reshape(state_shape);
    if (s > 0) dstates_[s - 1]->Reshape({N_, H_});
    if (carried_[s]->shape() != state_shape) {
      carried_[s]->Reshape(state_shape);
      carried_reshaped = true;
    }
  }
  if (carried_reshaped) ZeroCarried();
  ReshapeCell();
}

template <typename Dtype>
void RecurrentLayer<Dtype>::ZeroCarried() {
  // On the device that computes next, so that a GPU net never copies it.
  const Poseidon::Brew dev = Poseidon::mode();
  for (auto& blob : carried_) {
    math::set<Dtype>(dev, blob->count(), Dtype(0), blob->mutable_data_on(dev));
  }
}

template <typename Dtype>
void RecurrentLayer<Dtype>::Reset() {
  ZeroCarried();
}

template <typename Dtype>
const Dtype* RecurrentLayer<Dtype>::state(int s, int t) const {
  if (t < 0) return initial_[s]->data_on(dev_);
  return states_[s]->data_on(dev_) + t * N_ * H_;
}

template <typename Dtype>
Dtype* RecurrentLayer<Dtype>::mutable_state(int s, int t) {
  CHECK_GE(t, 0) << "the initial state is not written by the cell";
  return states_[s]->mutable_data_on(dev_) + t * N_ * H_;
}

template <typename Dtype>
Dtype* RecurrentLayer<Dtype>::next_gemm_input(int t) {
  if (t + 1 >= T_) return nullptr;
  return h_conted_.mutable_data_on(dev_) + (t + 1) * N_ * H_;
}

template <typename Dtype>
kernels::HiddenGrad<Dtype> RecurrentLayer<Dtype>::hidden_grad(int t) const {
  // The output's part is h_sequence's diff or the top's (OutputBackward);
  // what comes through W_h from step t + 1 sits in scratch_.
  const bool last = t + 1 == T_;
  return kernels::HiddenGrad<Dtype>{
      dh_out_ + t * N_ * H_, last ? nullptr : scratch_.data_on(dev_),
      last ? nullptr : cont(t + 1), last ? final_h_diff_ : nullptr};
}

template <typename Dtype>
Dtype* RecurrentLayer<Dtype>::dstate(int s) {
  CHECK_GE(s, 1) << "the gradient at h_t comes from hidden_grad()";
  return dstates_[s - 1]->mutable_data_on(dev_);
}

template <typename Dtype>
void RecurrentLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                      const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  dev_ = dev;
  cont_ = bottom[1]->data_on(dev);
  const int G = GateDim();
  const int NH = N_ * H_;
  const int NG = N_ * G;
  for (int s = 0; s < NumStates(); ++s) {
    const Blob<Dtype>& source =
        expose_hidden_ ? *bottom[first_state_bottom() + s] : *carried_[s];
    math::copy<Dtype>(dev, NH, source.data_on(dev),
                      initial_[s]->mutable_data_on(dev));
  }

  // Input projections of every step: a = x W_x^T + b [+ x_static W_s^T].
  Dtype* a = gates_.mutable_data_on(dev);
  math::gemm_serial<Dtype>(dev, CblasNoTrans, CblasTrans, T_ * N_, G, D_,
                           Dtype(1), bottom[0]->data_on(dev),
                           this->blobs_[0]->data_on(dev), Dtype(0), a);
  for_each_rows(
      dev, T_ * N_, G,
      kernels::AddRowVector<Dtype>{G, this->blobs_[1]->data_on(dev), a});
  if (static_input_) {
    Dtype* sg = static_gates_.mutable_data_on(dev);
    math::gemm_serial<Dtype>(dev, CblasNoTrans, CblasTrans, N_, G, Ds_,
                             Dtype(1), bottom[2]->data_on(dev),
                             this->blobs_[2]->data_on(dev), Dtype(0), sg);
    for_each_rows(dev, T_, NG, kernels::AddRowVector<Dtype>{NG, sg, a});
  }

  // The recurrence: a_t += W_h (cont_t * h_{t-1}), then the cell, which also
  // writes cont_{t+1} * h_t for the next step.
  Dtype* hc = h_conted_.mutable_data_on(dev);
  for_each_rows(dev, N_, H_,
                kernels::ContScale<Dtype>{H_, cont(0), state(0, -1), hc});
  const Dtype* w_h = this->blobs_[w_h_index()]->data_on(dev);
  for (int t = 0; t < T_; ++t) {
    math::gemm_serial<Dtype>(dev, CblasNoTrans, CblasTrans, N_, G, H_, Dtype(1),
                             hc + t * NH, w_h, Dtype(1), a + t * NG);
    CellForward(t);
  }
  OutputForward(top[0]);

  for (int s = 0; s < NumStates(); ++s) {
    Blob<Dtype>* dest = expose_hidden_ ? top[1 + s] : carried_[s].get();
    math::copy<Dtype>(dev, NH, state(s, T_ - 1), dest->mutable_data_on(dev));
  }
}

template <typename Dtype>
void RecurrentLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                       const vector<Blob<Dtype>*>& top,
                                       const vector<bool>& propagate_down,
                                       const vector<Blob<Dtype>*>& bottom) {
  dev_ = dev;
  cont_ = bottom[1]->data_on(dev);
  const int G = GateDim();
  const int NH = N_ * H_;
  dh_out_ = OutputBackward(*top[0]);
  final_h_diff_ = expose_hidden_ ? top[1]->diff_on(dev) : nullptr;
  for (int s = 1; s < NumStates(); ++s) {
    if (expose_hidden_) {
      math::copy<Dtype>(dev, NH, top[1 + s]->diff_on(dev), dstate(s));
    } else {
      math::set<Dtype>(dev, NH, Dtype(0), dstate(s));
    }
  }

  // Backpropagation through time: the cell at t reads dgate_{t+1} W_h from
  // scratch_ (hidden_grad) before this step's GEMM replaces it.
  const int h0 = first_state_bottom();
  const bool want_dh0 = expose_hidden_ && propagate_down[h0];
  const Dtype* w_h = this->blobs_[w_h_index()]->data_on(dev);
  Dtype* scratch = scratch_.mutable_data_on(dev);
  for (int t = T_ - 1; t >= 0; --t) {
    CellBackward(t);
    if (t > 0 || want_dh0) {
      math::gemm_serial<Dtype>(dev, CblasNoTrans, CblasNoTrans, N_, H_, G,
                               Dtype(1), dgate(t), w_h, Dtype(0), scratch);
    }
  }
  if (want_dh0) {
    for_each_rows(dev, N_, H_,
                  kernels::ContScale<Dtype>{H_, cont(0), scratch,
                                            bottom[h0]->mutable_diff_on(dev)});
  }
  for (int s = 1; s < NumExposed(); ++s) {
    if (propagate_down[h0 + s]) {
      math::copy<Dtype>(dev, NH, dstate(s),
                        bottom[h0 + s]->mutable_diff_on(dev));
    }
  }

  if (this->param_propagate_down(w_h_index())) {
    math::gemm_serial<Dtype>(dev, CblasTrans, CblasNoTrans, G, H_, T_ * N_,
                             Dtype(1), gates_.diff_on(dev),
                             h_conted_.data_on(dev), Dtype(1),
                             this->blobs_[w_h_index()]->mutable_diff_on(dev));
  }
  ProjectionBackward(propagate_down, bottom);
  if (propagate_down[1]) {
    math::set<Dtype>(dev, bottom[1]->count(), Dtype(0),
                     bottom[1]->mutable_diff_on(dev));
  }
}

template <typename Dtype>
void RecurrentLayer<Dtype>::ProjectionBackward(
    const vector<bool>& propagate_down, const vector<Blob<Dtype>*>& bottom) {
  const Poseidon::Brew dev = dev_;
  const int G = GateDim();
  const int NG = N_ * G;
  const Dtype* da = gates_.diff_on(dev);
  auto& blobs = this->blobs_;
  if (this->param_propagate_down(0)) {
    math::gemm_serial<Dtype>(dev, CblasTrans, CblasNoTrans, G, D_, T_ * N_,
                             Dtype(1), da, bottom[0]->data_on(dev), Dtype(1),
                             blobs[0]->mutable_diff_on(dev));
  }
  if (this->param_propagate_down(1)) {
    AddRowSums(dev, T_ * N_, G, da, blobs[1]->mutable_diff_on(dev));
  }
  if (static_input_ && (this->param_propagate_down(2) || propagate_down[2])) {
    // x_static feeds every step: its gradient sees the sum over time.
    Dtype* sum = static_gates_.mutable_diff_on(dev);
    math::set<Dtype>(dev, NG, Dtype(0), sum);
    AddRowSums(dev, T_, NG, da, sum);
    if (this->param_propagate_down(2)) {
      math::gemm_serial<Dtype>(dev, CblasTrans, CblasNoTrans, G, Ds_, N_,
                               Dtype(1), sum, bottom[2]->data_on(dev), Dtype(1),
                               blobs[2]->mutable_diff_on(dev));
    }
    if (propagate_down[2]) {
      math::gemm_serial<Dtype>(dev, CblasNoTrans, CblasNoTrans, N_, Ds_, G,
                               Dtype(1), sum, blobs[2]->data_on(dev), Dtype(0),
                               bottom[2]->mutable_diff_on(dev));
    }
  }
  if (propagate_down[0]) {
    math::gemm_serial<Dtype>(dev, CblasNoTrans, CblasNoTrans, T_ * N_, D_, G,
                             Dtype(1), da, blobs[0]->data_on(dev), Dtype(0),
                             bottom[0]->mutable_diff_on(dev));
  }
}

INSTANTIATE_CLASS(RecurrentLayer);

}  // namespace poseidon
