// SGD with momentum; the learning-rate schedule, clipping, normalisation,
// weight decay and history snapshots shared by every update rule.
#include "poseidon/solvers/sgd_solver.hpp"

#include <cmath>
#include <random>
#include <sstream>

#include "poseidon/solver_factory.hpp"
#include "poseidon/util/emulation.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

template <typename Dtype>
SGDSolver<Dtype>::SGDSolver(const SolverParameter& param)
    : SGDSolver(param, UpdateRule::kSGD) {}

template <typename Dtype>
SGDSolver<Dtype>::SGDSolver(const string& param_file)
    : SGDSolver(param_file, UpdateRule::kSGD) {}

template <typename Dtype>
SGDSolver<Dtype>::SGDSolver(const SolverParameter& param, UpdateRule rule)
    : Solver<Dtype>(param), rule_(rule) {
  PreSolve();
}

template <typename Dtype>
SGDSolver<Dtype>::SGDSolver(const string& param_file, UpdateRule rule)
    : Solver<Dtype>(param_file), rule_(rule) {
  PreSolve();
}

template <typename Dtype>
void SGDSolver<Dtype>::PreSolve() {
  CheckUpdateSettings(this->param_, rule_);
  history_.clear();
  for (int a = 0; a < HistoryArrays(rule_); ++a) {
    for (Blob<Dtype>* param : this->net_->learnable_params()) {
      history_.push_back(std::make_shared<Blob<Dtype>>(param->shape()));
    }
  }
}

template <typename Dtype>
Dtype SGDSolver<Dtype>::GetLearningRate() {
  const SolverParameter& p = this->param_;
  const string& policy = p.lr_policy();
  if (policy == "step") {
    this->current_step_ = this->iter_ / p.stepsize();
  } else if (policy == "multistep" &&
             this->current_step_ < p.stepvalue_size() &&
             this->iter_ >= p.stepvalue(this->current_step_)) {
    ++this->current_step_;
    LOG(INFO) << "MultiStep Status: Iteration " << this->iter_
              << ", step = " << this->current_step_;
  }
  return static_cast<Dtype>(
      ScheduledRate(p, this->iter_, this->current_step_));
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
  if (this->param_.clip_gradients() < 0) return;
  Dtype sumsq = 0;
  for (Blob<Dtype>* param : this->net_->learnable_params()) {
    sumsq += param->sumsq_diff();
  }
  ClipGradientsOfSumsq(sumsq);
}

template <typename Dtype>
void SGDSolver<Dtype>::ClipGradientsOfSumsq(Dtype sumsq) {
  const Dtype scale = ClipScale(this->param_, sumsq);
  if (scale == Dtype(1)) return;
  LOG(INFO) << "Gradient clipping: scaling down gradients (L2 norm "
            << std::sqrt(sumsq) << " > " << this->param_.clip_gradients()
            << ") by scale factor " << scale;
  for (Blob<Dtype>* param : this->net_->learnable_params()) {
    param->scale_diff(scale);
  }
}

template <typename Dtype>
ParamRun<Dtype> SGDSolver<Dtype>::WholeParam(int param_id, RunParts parts) {
  Blob<Dtype>* param = this->net_->learnable_params()[param_id];
  const Poseidon::Brew dev = Poseidon::mode();
  ParamRun<Dtype> run;
  run.count = param->count();
  run.diff = param->mutable_diff_on(dev);
  if (parts != kDiff) run.data = param->data_on(dev);
  if (parts == kAll) {
    const size_t num_params = this->net_->learnable_params().size();
    for (int a = 0; a < HistoryArrays(rule_); ++a) {
      run.history[a] =
          history_[a * num_params + param_id]->mutable_data_on(dev);
    }
  }
  run.lr_mult = this->net_->params_lr()[param_id];
  run.decay_mult = this->net_->params_weight_decay()[param_id];
  return run;
}

template <typename Dtype>
void SGDSolver<Dtype>::Normalize(int param_id) {
  if (this->param_.iter_size() == 1) return;
  NormalizeRun(Poseidon::mode(), this->param_, WholeParam(param_id, kDiff));
}

template <typename Dtype>
void SGDSolver<Dtype>::Regularize(int param_id) {
  if (this->param_.weight_decay() *
          this->net_->params_weight_decay()[param_id] ==
      0) {
    return;
  }
  RegularizeRun(Poseidon::mode(), this->param_,
                WholeParam(param_id, kDataAndDiff));
}

template <typename Dtype>
void SGDSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate) {
  RuleStepRun(Poseidon::mode(), this->param_, rule_, rate, update_iter_,
              WholeParam(param_id, kAll));
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
