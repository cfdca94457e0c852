// AdaGrad: per-element rates from the running sum of squared gradients.
#include "poseidon/solvers/adagrad_solver.hpp"

#include "poseidon/kernels/solver_kernels.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/for_each.hpp"
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
  const Poseidon::Brew dev = Poseidon::mode();
  // h += g^2; step = r * g / (sqrt(h) + delta)
  for_each(dev, param->count(),
           kernels::AdaGradUpdate<Dtype>{
               param->mutable_diff_on(dev),
               this->history_[param_id]->mutable_data_on(dev), delta,
               local_rate});
}

INSTANTIATE_CLASS(AdaGradSolver);
REGISTER_SOLVER_CLASS(AdaGrad);

}  // namespace poseidon
