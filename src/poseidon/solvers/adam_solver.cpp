// Adam: bias-corrected first and second moment estimates of the gradient.
#include "poseidon/solvers/adam_solver.hpp"

#include <cmath>

#include "poseidon/kernels/solver_kernels.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/for_each.hpp"
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
  const Poseidon::Brew dev = Poseidon::mode();
  // m = b1 * m + (1 - b1) * g; v = b2 * v + (1 - b2) * g^2;
  // step = r * correction * m / (sqrt(v) + eps)
  for_each(dev, param->count(),
           kernels::AdamUpdate<Dtype>{
               param->mutable_diff_on(dev),
               this->history_[param_id]->mutable_data_on(dev),
               this->history_[num_params + param_id]->mutable_data_on(dev),
               beta1, beta2, eps, Dtype(local_rate * correction)});
}

INSTANTIATE_CLASS(AdamSolver);
REGISTER_SOLVER_CLASS(Adam);

}  // namespace poseidon
