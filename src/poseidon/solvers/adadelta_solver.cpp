// AdaDelta: steps scaled by the ratio of running RMS of updates and
// gradients; history keeps both means (see the header for the layout).
#include "poseidon/solvers/adadelta_solver.hpp"

#include "poseidon/solver_factory.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

template <typename Dtype>
AdaDeltaSolver<Dtype>::AdaDeltaSolver(const SolverParameter& param)
    : SGDSolver<Dtype>(param) {
  this->AppendHistory();
}

template <typename Dtype>
AdaDeltaSolver<Dtype>::AdaDeltaSolver(const string& param_file)
    : SGDSolver<Dtype>(param_file) {
  this->AppendHistory();
}

template <typename Dtype>
void AdaDeltaSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate) {
  Blob<Dtype>* param = this->net_->learnable_params()[param_id];
  const int num_params =
      static_cast<int>(this->net_->learnable_params().size());
  const Dtype rho = this->param_.momentum();
  const Dtype delta = this->param_.delta();
  const Dtype local_rate = rate * this->net_->params_lr()[param_id];
  const int count = param->count();
  Dtype* grad_sq = this->history_[param_id]->mutable_cpu_data();
  Dtype* step_sq = this->history_[num_params + param_id]->mutable_cpu_data();
  Dtype* update = this->update_[param_id]->mutable_cpu_data();
  Dtype* temp = this->temp_[param_id]->mutable_cpu_data();
  Dtype* diff = param->mutable_cpu_diff();
  // Eg = rho * Eg + (1 - rho) * g^2
  cpu_powx(count, diff, Dtype(2), update);
  cpu_axpby(count, Dtype(1) - rho, update, rho, grad_sq);
  // u = g * sqrt((Ex + delta) / (Eg + delta))
  cpu_set(count, delta, temp);
  cpu_add(count, temp, step_sq, update);
  cpu_add(count, temp, grad_sq, temp);
  cpu_div(count, update, temp, update);
  cpu_powx(count, update, Dtype(0.5), update);
  cpu_mul(count, diff, update, diff);
  // Ex = rho * Ex + (1 - rho) * u^2
  cpu_powx(count, diff, Dtype(2), update);
  cpu_axpby(count, Dtype(1) - rho, update, rho, step_sq);
  // step = r * u
  cpu_scal(count, local_rate, diff);
}

INSTANTIATE_CLASS(AdaDeltaSolver);
REGISTER_SOLVER_CLASS(AdaDelta);

}  // namespace poseidon
