// Adam: bias-corrected first and second moment estimates of the gradient.
#include "poseidon/solvers/adam_solver.hpp"

#include <cmath>

#include "poseidon/solver_factory.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

template <typename Dtype>
AdamSolver<Dtype>::AdamSolver(const SolverParameter& param)
    : SGDSolver<Dtype>(param) {
  this->AppendHistory();
}

template <typename Dtype>
AdamSolver<Dtype>::AdamSolver(const string& param_file)
    : SGDSolver<Dtype>(param_file) {
  this->AppendHistory();
}

template <typename Dtype>
void AdamSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate) {
  Blob<Dtype>* param = this->net_->learnable_params()[param_id];
  const int num_params =
      static_cast<int>(this->net_->learnable_params().size());
  const Dtype beta1 = this->param_.momentum();
  const Dtype beta2 = this->param_.momentum2();
  const Dtype eps = this->param_.delta();
  const Dtype local_rate = rate * this->net_->params_lr()[param_id];
  const int t = this->update_iter_ + 1;
  const Dtype correction =
      static_cast<Dtype>(std::sqrt(1.0 - std::pow(double(beta2), t)) /
                         (1.0 - std::pow(double(beta1), t)));
  const int count = param->count();
  Dtype* m = this->history_[param_id]->mutable_cpu_data();
  Dtype* v = this->history_[num_params + param_id]->mutable_cpu_data();
  Dtype* scratch = this->temp_[param_id]->mutable_cpu_data();
  const Dtype* diff = param->cpu_diff();
  // m = b1 * m + (1 - b1) * g
  cpu_axpby(count, Dtype(1) - beta1, diff, beta1, m);
  // v = b2 * v + (1 - b2) * g^2
  cpu_mul(count, diff, diff, scratch);
  cpu_axpby(count, Dtype(1) - beta2, scratch, beta2, v);
  // step = r * correction * m / (sqrt(v) + eps)
  cpu_powx(count, v, Dtype(0.5), scratch);
  cpu_add_scalar(count, eps, scratch);
  cpu_div(count, m, scratch, scratch);
  cpu_scale(count, local_rate * correction, scratch, param->mutable_cpu_diff());
}

INSTANTIATE_CLASS(AdamSolver);
REGISTER_SOLVER_CLASS(Adam);

}  // namespace poseidon
