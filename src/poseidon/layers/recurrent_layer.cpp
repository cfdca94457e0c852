// RecurrentLayer: input projections for all steps at once (one GEMM), then a
// loop over time (one GEMM per step for W_h, the cell in between), and the
// same loop backwards (backpropagation through time).
#include "poseidon/layers/recurrent_layer.hpp"

#include <climits>

#include "poseidon/filler.hpp"

namespace poseidon {

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
    dstates_.push_back(std::make_shared<Blob<Dtype>>());
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
  for (int s = 0; s < NumStates(); ++s) {
    states_[s]->Reshape({T_, N_, H_});
    initial_[s]->Reshape(state_shape);
    dstates_[s]->Reshape({N_, H_});
    if (carried_[s]->shape() != state_shape) {
      carried_[s]->Reshape(state_shape);
      cpu_set(carried_[s]->count(), Dtype(0), carried_[s]->mutable_cpu_data());
    }
  }
  ReshapeCell();
}

template <typename Dtype>
void RecurrentLayer<Dtype>::Reset() {
  for (auto& blob : carried_) {
    cpu_set(blob->count(), Dtype(0), blob->mutable_cpu_data());
  }
}

template <typename Dtype>
const Dtype* RecurrentLayer<Dtype>::state(int s, int t) const {
  if (t < 0) return initial_[s]->cpu_data();
  return states_[s]->cpu_data() + t * N_ * H_;
}

template <typename Dtype>
Dtype* RecurrentLayer<Dtype>::mutable_state(int s, int t) {
  CHECK_GE(t, 0) << "the initial state is not written by the cell";
  return states_[s]->mutable_cpu_data() + t * N_ * H_;
}

template <typename Dtype>
void RecurrentLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                        const vector<Blob<Dtype>*>& top) {
  cont_ = bottom[1]->cpu_data();
  const int G = GateDim();
  const int NH = N_ * H_;
  const int NG = N_ * G;
  for (int s = 0; s < NumStates(); ++s) {
    const Blob<Dtype>& source =
        expose_hidden_ ? *bottom[first_state_bottom() + s] : *carried_[s];
    cpu_copy(NH, source.cpu_data(), initial_[s]->mutable_cpu_data());
  }

  // Input projections of every step: a = x W_x^T + b [+ x_static W_s^T].
  Dtype* a = gates_.mutable_cpu_data();
  cpu_gemm(CblasNoTrans, CblasTrans, T_ * N_, G, D_, Dtype(1),
           bottom[0]->cpu_data(), this->blobs_[0]->cpu_data(), Dtype(0), a);
  const Dtype* b = this->blobs_[1]->cpu_data();
  for (int r = 0; r < T_ * N_; ++r) cpu_axpy(G, Dtype(1), b, a + r * G);
  if (static_input_) {
    Dtype* sg = static_gates_.mutable_cpu_data();
    cpu_gemm(CblasNoTrans, CblasTrans, N_, G, Ds_, Dtype(1),
             bottom[2]->cpu_data(), this->blobs_[2]->cpu_data(), Dtype(0), sg);
    for (int t = 0; t < T_; ++t) cpu_axpy(NG, Dtype(1), sg, a + t * NG);
  }

  // The recurrence: a_t += W_h (cont_t * h_{t-1}), then the cell.
  const Dtype* w_h = this->blobs_[w_h_index()]->cpu_data();
  for (int t = 0; t < T_; ++t) {
    const Dtype* h_prev = state(0, t - 1);
    Dtype* hc = h_conted_.mutable_cpu_data() + t * NH;
    for (int n = 0; n < N_; ++n) {
      cpu_scale(H_, cont(t)[n], h_prev + n * H_, hc + n * H_);
    }
    cpu_gemm(CblasNoTrans, CblasTrans, N_, G, H_, Dtype(1), hc, w_h, Dtype(1),
             gates_.mutable_cpu_data() + t * NG);
    CellForward(t);
  }
  OutputForward(top[0]);

  for (int s = 0; s < NumStates(); ++s) {
    Blob<Dtype>* dest = expose_hidden_ ? top[1 + s] : carried_[s].get();
    cpu_copy(NH, state(s, T_ - 1), dest->mutable_cpu_data());
  }
}

template <typename Dtype>
void RecurrentLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                         const vector<bool>& propagate_down,
                                         const vector<Blob<Dtype>*>& bottom) {
  cont_ = bottom[1]->cpu_data();
  const int G = GateDim();
  const int NH = N_ * H_;
  OutputBackward(*top[0]);
  const Dtype* dh_out = states_[0]->cpu_diff();
  for (int s = 0; s < NumStates(); ++s) {
    if (expose_hidden_) {
      cpu_copy(NH, top[1 + s]->cpu_diff(), dstate(s));
    } else {
      cpu_set(NH, Dtype(0), dstate(s));
    }
  }

  // Backpropagation through time; dstate(s) carries dLoss/dstate from t + 1.
  const Dtype* w_h = this->blobs_[w_h_index()]->cpu_data();
  Dtype* scratch = scratch_.mutable_cpu_data();
  for (int t = T_ - 1; t >= 0; --t) {
    cpu_axpy(NH, Dtype(1), dh_out + t * NH, dstate(0));
    CellBackward(t);
    cpu_gemm(CblasNoTrans, CblasNoTrans, N_, H_, G, Dtype(1), dgate(t), w_h,
             Dtype(0), scratch);
    for (int n = 0; n < N_; ++n) {
      cpu_axpy(H_, cont(t)[n], scratch + n * H_, dstate(0) + n * H_);
    }
  }
  for (int s = 0; s < NumExposed(); ++s) {
    const int i = first_state_bottom() + s;
    if (propagate_down[i]) {
      cpu_copy(NH, dstates_[s]->cpu_data(), bottom[i]->mutable_cpu_diff());
    }
  }

  if (this->param_propagate_down(w_h_index())) {
    cpu_gemm(CblasTrans, CblasNoTrans, G, H_, T_ * N_, Dtype(1),
             gates_.cpu_diff(), h_conted_.cpu_data(), Dtype(1),
             this->blobs_[w_h_index()]->mutable_cpu_diff());
  }
  ProjectionBackward(propagate_down, bottom);
  if (propagate_down[1]) {
    cpu_set(bottom[1]->count(), Dtype(0), bottom[1]->mutable_cpu_diff());
  }
}

template <typename Dtype>
void RecurrentLayer<Dtype>::ProjectionBackward(
    const vector<bool>& propagate_down, const vector<Blob<Dtype>*>& bottom) {
  const int G = GateDim();
  const int NG = N_ * G;
  const Dtype* da = gates_.cpu_diff();
  auto& blobs = this->blobs_;
  if (this->param_propagate_down(0)) {
    cpu_gemm(CblasTrans, CblasNoTrans, G, D_, T_ * N_, Dtype(1), da,
             bottom[0]->cpu_data(), Dtype(1), blobs[0]->mutable_cpu_diff());
  }
  if (this->param_propagate_down(1)) {
    Dtype* db = blobs[1]->mutable_cpu_diff();
    for (int r = 0; r < T_ * N_; ++r) cpu_axpy(G, Dtype(1), da + r * G, db);
  }
  if (static_input_ && (this->param_propagate_down(2) || propagate_down[2])) {
    // x_static feeds every step: its gradient sees the sum over time.
    Dtype* sum = static_gates_.mutable_cpu_diff();
    cpu_set(NG, Dtype(0), sum);
    for (int t = 0; t < T_; ++t) cpu_axpy(NG, Dtype(1), da + t * NG, sum);
    if (this->param_propagate_down(2)) {
      cpu_gemm(CblasTrans, CblasNoTrans, G, Ds_, N_, Dtype(1), sum,
               bottom[2]->cpu_data(), Dtype(1), blobs[2]->mutable_cpu_diff());
    }
    if (propagate_down[2]) {
      cpu_gemm(CblasNoTrans, CblasNoTrans, N_, Ds_, G, Dtype(1), sum,
               blobs[2]->cpu_data(), Dtype(0), bottom[2]->mutable_cpu_diff());
    }
  }
  if (propagate_down[0]) {
    cpu_gemm(CblasNoTrans, CblasNoTrans, T_ * N_, D_, G, Dtype(1), da,
             blobs[0]->cpu_data(), Dtype(0), bottom[0]->mutable_cpu_diff());
  }
}

INSTANTIATE_CLASS(RecurrentLayer);

}  // namespace poseidon
