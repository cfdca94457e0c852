// AdaGrad: per-element rates from the running sum of squared gradients.
#include "poseidon/solvers/adagrad_solver.hpp"

#include "poseidon/solver_factory.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

template <typename Dtype>
AdaGradSolver<Dtype>::AdaGradSolver(const SolverParameter& param)
    : SGDSolver<Dtype>(param) {
  CheckParams();
}

template <typename Dtype>
AdaGradSolver<Dtype>::AdaGradSolver(const string& param_file)
    : SGDSolver<Dtype>(param_file) {
  CheckParams();
}

template <typename Dtype>
void AdaGradSolver<Dtype>::CheckParams() const {
  POSEIDON_REQUIRE(this->param_.momentum() == 0, ConfigError,
                   "momentum cannot be used with AdaGrad (got momentum: ",
                   this->param_.momentum(), ")");
}

template <typename Dtype>
void AdaGradSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate) {
  Blob<Dtype>* param = this->net_->learnable_params()[param_id];
  const Dtype delta = this->param_.delta();
  const Dtype local_rate = rate * this->net_->params_lr()[param_id];
  const int count = param->count();
  const Dtype* diff = param->cpu_diff();
  Dtype* history = this->history_[param_id]->mutable_cpu_data();
  Dtype* update = this->update_[param_id]->mutable_cpu_data();
  // h += g^2
  cpu_powx(count, diff, Dtype(2), update);
  cpu_add(count, update, history, history);
  // step = r * g / (sqrt(h) + delta)
  cpu_powx(count, history, Dtype(0.5), update);
  cpu_add_scalar(count, delta, update);
  cpu_div(count, diff, update, update);
  cpu_axpby(count, local_rate, update, Dtype(0), param->mutable_cpu_diff());
}

INSTANTIATE_CLASS(AdaGradSolver);
REGISTER_SOLVER_CLASS(AdaGrad);

}  // namespace poseidon
