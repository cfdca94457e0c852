// RMSProp: per-element rates from a running mean of squared gradients.
#include "poseidon/solvers/rmsprop_solver.hpp"

#include "poseidon/kernels/solver_kernels.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/for_each.hpp"
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
  const Poseidon::Brew dev = Poseidon::mode();
  // h = rms_decay * h + (1 - rms_decay) * g^2;
  // step = r * g / (sqrt(h) + delta)
  for_each(dev, param->count(),
           kernels::RmsPropUpdate<Dtype>{
               param->mutable_diff_on(dev),
               this->history_[param_id]->mutable_data_on(dev), rms_decay,
               delta, local_rate});
}

INSTANTIATE_CLASS(RMSPropSolver);
REGISTER_SOLVER_CLASS(RMSProp);

}  // namespace poseidon
