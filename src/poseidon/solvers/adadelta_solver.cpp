// AdaDelta: steps scaled by the ratio of running RMS of updates and
// gradients; history keeps both means (see the header for the layout).
#include "poseidon/solvers/adadelta_solver.hpp"

#include "poseidon/kernels/solver_kernels.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/for_each.hpp"
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
  const Poseidon::Brew dev = Poseidon::mode();
  // Eg = rho * Eg + (1 - rho) * g^2; u = g * sqrt((Ex + delta) / (Eg + delta));
  // Ex = rho * Ex + (1 - rho) * u^2; step = r * u
  for_each(dev, param->count(),
           kernels::AdaDeltaUpdate<Dtype>{
               param->mutable_diff_on(dev),
               this->history_[param_id]->mutable_data_on(dev),
               this->history_[num_params + param_id]->mutable_data_on(dev),
               rho, delta, local_rate});
}

INSTANTIATE_CLASS(AdaDeltaSolver);
REGISTER_SOLVER_CLASS(AdaDelta);

}  // namespace poseidon
