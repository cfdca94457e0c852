// SGD with momentum; the learning-rate schedule, clipping, normalisation,
// weight decay and history snapshots shared by every update rule.
#include "poseidon/solvers/sgd_solver.hpp"

#include <cmath>
#include <random>
#include <sstream>

#include "poseidon/kernels/solver_kernels.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/emulation.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

template <typename Dtype>
SGDSolver<Dtype>::SGDSolver(const SolverParameter& param)
    : Solver<Dtype>(param) {
  PreSolve();
}

template <typename Dtype>
SGDSolver<Dtype>::SGDSolver(const string& param_file)
    : Solver<Dtype>(param_file) {
  PreSolve();
}

template <typename Dtype>
void SGDSolver<Dtype>::PreSolve() {
  const SolverParameter& p = this->param_;
  const string& policy = p.lr_policy();
  POSEIDON_REQUIRE(policy == "fixed" || policy == "step" || policy == "exp" ||
                       policy == "inv" || policy == "multistep" ||
                       policy == "poly" || policy == "sigmoid",
                   ConfigError, "unknown lr_policy: \"", policy,
                   "\" (known: fixed, step, exp, inv, multistep, poly, "
                   "sigmoid)");
  POSEIDON_REQUIRE(policy != "step" || p.stepsize() > 0, ConfigError,
                   "lr_policy \"step\" needs stepsize > 0, got ", p.stepsize());
  POSEIDON_REQUIRE(policy != "poly" || p.max_iter() > 0, ConfigError,
                   "lr_policy \"poly\" needs max_iter > 0, got ", p.max_iter());
  for (int i = 1; i < p.stepvalue_size(); ++i) {
    POSEIDON_REQUIRE(p.stepvalue(i) > p.stepvalue(i - 1), ConfigError,
                     "stepvalue must increase, but stepvalue[", i,
                     "] = ", p.stepvalue(i), " follows ", p.stepvalue(i - 1));
  }
  POSEIDON_REQUIRE(
      p.regularization_type() == "L2" || p.regularization_type() == "L1",
      ConfigError, "unknown regularization_type: \"", p.regularization_type(),
      "\" (known: L1, L2)");
  history_.clear();
  for (Blob<Dtype>* param : this->net_->learnable_params()) {
    history_.push_back(std::make_shared<Blob<Dtype>>(param->shape()));
  }
}

template <typename Dtype>
void SGDSolver<Dtype>::AppendHistory() {
  for (Blob<Dtype>* param : this->net_->learnable_params()) {
    history_.push_back(std::make_shared<Blob<Dtype>>(param->shape()));
  }
}

template <typename Dtype>
Dtype SGDSolver<Dtype>::GetLearningRate() {
  const SolverParameter& p = this->param_;
  const string& policy = p.lr_policy();
  const double base_lr = p.base_lr();
  const double it = this->iter_;
  double rate = 0;
  if (policy == "fixed") {
    rate = base_lr;
  } else if (policy == "step") {
    this->current_step_ = this->iter_ / p.stepsize();
    rate = base_lr * std::pow(double(p.gamma()), this->current_step_);
  } else if (policy == "exp") {
    rate = base_lr * std::pow(double(p.gamma()), it);
  } else if (policy == "inv") {
    rate = base_lr * std::pow(1.0 + double(p.gamma()) * it, -double(p.power()));
  } else if (policy == "multistep") {
    if (this->current_step_ < p.stepvalue_size() &&
        this->iter_ >= p.stepvalue(this->current_step_)) {
      ++this->current_step_;
      LOG(INFO) << "MultiStep Status: Iteration " << this->iter_
                << ", step = " << this->current_step_;
    }
    rate = base_lr * std::pow(double(p.gamma()), this->current_step_);
  } else if (policy == "poly") {
    rate = base_lr * std::pow(1.0 - it / p.max_iter(), double(p.power()));
  } else if (policy == "sigmoid") {
    rate = base_lr / (1.0 + std::exp(-double(p.gamma()) * (it - p.stepsize())));
  } else {
    POSEIDON_THROW(ConfigError, "unknown lr_policy: \"", policy, "\"");
  }
  return static_cast<Dtype>(rate);
}

template <typename Dtype>
void SGDSolver<Dtype>::ApplyUpdate() {
  const Dtype rate = GetLearningRate();
  if (this->param_.display() > 0 && this->iter_ % this->param_.display() == 0) {
    LOG_IF(INFO, Poseidon::root_solver())
        << "Iteration " << this->iter_ << ", lr = " << rate;
  }
  ClipGradients();
  const int num_params =
      static_cast<int>(this->net_->learnable_params().size());
  update_iter_ = this->iter_;
  for (int param_id = 0; param_id < num_params; ++param_id) {
    Normalize(param_id);
    Regularize(param_id);
    ComputeUpdateValue(param_id, rate);
  }
  this->net_->Update();
}

template <typename Dtype>
void SGDSolver<Dtype>::ApplyUpdateToParam(int param_id, Dtype rate, int iter) {
  update_iter_ = iter;
  emulation::DilatedCompute dilated;  // benchmarks only (Note [Time dilation])
  Normalize(param_id);
  Regularize(param_id);
  ComputeUpdateValue(param_id, rate);
  this->net_->learnable_params()[param_id]->Update();
}

template <typename Dtype>
void SGDSolver<Dtype>::ClipGradients() {
  const Dtype clip = this->param_.clip_gradients();
  if (clip < 0) return;
  const vector<Blob<Dtype>*>& params = this->net_->learnable_params();
  Dtype sumsq = 0;
  for (Blob<Dtype>* param : params) sumsq += param->sumsq_diff();
  const Dtype l2norm = std::sqrt(sumsq);
  if (l2norm > clip) {
    const Dtype scale = clip / l2norm;
    LOG(INFO) << "Gradient clipping: scaling down gradients (L2 norm " << l2norm
              << " > " << clip << ") by scale factor " << scale;
    for (Blob<Dtype>* param : params) param->scale_diff(scale);
  }
}

template <typename Dtype>
void SGDSolver<Dtype>::Normalize(int param_id) {
  if (this->param_.iter_size() == 1) return;
  Blob<Dtype>* param = this->net_->learnable_params()[param_id];
  const Poseidon::Brew dev = Poseidon::mode();
  math::scal<Dtype>(dev, param->count(), Dtype(1) / this->param_.iter_size(),
                    param->mutable_diff_on(dev));
}

template <typename Dtype>
void SGDSolver<Dtype>::Regularize(int param_id) {
  Blob<Dtype>* param = this->net_->learnable_params()[param_id];
  const Dtype local_decay =
      this->param_.weight_decay() * this->net_->params_weight_decay()[param_id];
  if (local_decay == 0) return;
  const int count = param->count();
  const Poseidon::Brew dev = Poseidon::mode();
  if (this->param_.regularization_type() == "L2") {
    math::axpy<Dtype>(dev, count, local_decay, param->data_on(dev),
                      param->mutable_diff_on(dev));
  } else {
    for_each(dev, count,
             kernels::L1Regularize<Dtype>{param->data_on(dev),
                                          param->mutable_diff_on(dev),
                                          local_decay});
  }
}

template <typename Dtype>
void SGDSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate) {
  Blob<Dtype>* param = this->net_->learnable_params()[param_id];
  const Dtype momentum = this->param_.momentum();
  const Dtype local_rate = rate * this->net_->params_lr()[param_id];
  const Poseidon::Brew dev = Poseidon::mode();
  for_each(dev, param->count(),
           kernels::SgdUpdate<Dtype>{param->mutable_diff_on(dev),
                                     history_[param_id]->mutable_data_on(dev),
                                     momentum, local_rate});
}

template <typename Dtype>
void SGDSolver<Dtype>::SnapshotSolverState(const string& model_filename) {
  if (this->param_.snapshot_format() == SolverParameter::HDF5) {
    SnapshotSolverStateToHDF5(model_filename);
    return;
  }
  SolverState state;
  state.set_iter(this->iter_);
  state.set_learned_net(model_filename);
  state.set_current_step(this->current_step_);
  for (const auto& blob : history_) blob->ToProto(state.add_history());
  std::ostringstream rng;
  rng << Poseidon::rng();
  state.set_rng_state(rng.str());
  const string filename = this->SnapshotFilename(".solverstate");
  LOG(INFO) << "Snapshotting solver state to binary proto file " << filename;
  WriteProtoToBinaryFile(state, filename);
}

template <typename Dtype>
void SGDSolver<Dtype>::RestoreSolverStateFromBinaryProto(
    const string& state_file) {
  SolverState state;
  ReadProtoFromBinaryFile(state_file, &state);
  // Validate everything before changing the solver.
  POSEIDON_REQUIRE(state.history_size() == static_cast<int>(history_.size()),
                   ConfigError, "solver state '", state_file, "' holds ",
                   state.history_size(), " history blobs but this ",
                   this->type(), " solver keeps ", history_.size(),
                   " (was it written by another solver type or net?)");
  for (size_t i = 0; i < history_.size(); ++i) {
    const BlobProto& stored = state.history(int(i));
    POSEIDON_REQUIRE(history_[i]->ShapeEquals(stored), ShapeError,
                     "solver state '", state_file, "': history blob ", i,
                     " has shape ", BlobProtoShapeString(stored),
                     ", which does not match the shape ",
                     history_[i]->shape_string(), " of the net's parameter");
    const int64_t values = stored.double_data_size() > 0
                               ? stored.double_data_size()
                               : stored.data_size();
    const int64_t diffs = stored.double_diff_size() > 0
                              ? stored.double_diff_size()
                              : stored.diff_size();
    POSEIDON_REQUIRE(values == history_[i]->count() &&
                         (diffs == 0 || diffs == history_[i]->count()),
                     IOError, "solver state '", state_file, "': history blob ",
                     i, " holds ", values, " values and ", diffs,
                     " diff values but its shape needs ",
                     history_[i]->count());
  }
  POSEIDON_REQUIRE(state.iter() >= 0 && state.current_step() >= 0, IOError,
                   "solver state '", state_file, "' holds iteration ",
                   state.iter(), " and step ", state.current_step(),
                   "; neither may be negative");
  std::mt19937 rng;
  if (state.has_rng_state()) {
    std::istringstream in(state.rng_state());
    in >> rng;
    POSEIDON_REQUIRE(!in.fail(), IOError, "solver state '", state_file,
                     "' holds a random generator state that cannot be read");
  }
  if (state.has_learned_net()) {
    this->net_->CopyTrainedLayersFrom(
        this->ResolveLearnedNet(state_file, state.learned_net()));
  }
  this->iter_ = state.iter();
  this->current_step_ = state.current_step();
  for (size_t i = 0; i < history_.size(); ++i) {
    history_[i]->FromProto(state.history(int(i)), /*reshape=*/false);
  }
  if (state.has_rng_state()) Poseidon::rng() = rng;
  LOG(INFO) << "Restored solver state from " << state_file << " at iteration "
            << this->iter_;
}

INSTANTIATE_CLASS(SGDSolver);
REGISTER_SOLVER_CLASS(SGD);

}  // namespace poseidon
