// RMSProp: per-element rates from a running mean of squared gradients.
#include "poseidon/solvers/rmsprop_solver.hpp"

#include "poseidon/solver_factory.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

template <typename Dtype>
RMSPropSolver<Dtype>::RMSPropSolver(const SolverParameter& param)
    : SGDSolver<Dtype>(param) {
  CheckParams();
}

template <typename Dtype>
RMSPropSolver<Dtype>::RMSPropSolver(const string& param_file)
    : SGDSolver<Dtype>(param_file) {
  CheckParams();
}

template <typename Dtype>
void RMSPropSolver<Dtype>::CheckParams() const {
  POSEIDON_REQUIRE(this->param_.momentum() == 0, ConfigError,
                   "momentum cannot be used with RMSProp (got momentum: ",
                   this->param_.momentum(), ")");
  POSEIDON_REQUIRE(
      this->param_.rms_decay() >= 0 && this->param_.rms_decay() < 1,
      ConfigError, "RMSProp needs rms_decay in [0, 1), got ",
      this->param_.rms_decay());
}

template <typename Dtype>
void RMSPropSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate) {
  Blob<Dtype>* param = this->net_->learnable_params()[param_id];
  const Dtype delta = this->param_.delta();
  const Dtype rms_decay = this->param_.rms_decay();
  const Dtype local_rate = rate * this->net_->params_lr()[param_id];
  const int count = param->count();
  const Dtype* diff = param->cpu_diff();
  Dtype* history = this->history_[param_id]->mutable_cpu_data();
  Dtype* update = this->update_[param_id]->mutable_cpu_data();
  // h = rms_decay * h + (1 - rms_decay) * g^2
  cpu_powx(count, diff, Dtype(2), update);
  cpu_axpby(count, Dtype(1) - rms_decay, update, rms_decay, history);
  // step = r * g / (sqrt(h) + delta)
  cpu_powx(count, history, Dtype(0.5), update);
  cpu_add_scalar(count, delta, update);
  cpu_div(count, diff, update, update);
  cpu_axpby(count, local_rate, update, Dtype(0), param->mutable_cpu_diff());
}

INSTANTIATE_CLASS(RMSPropSolver);
REGISTER_SOLVER_CLASS(RMSProp);

}  // namespace poseidon
