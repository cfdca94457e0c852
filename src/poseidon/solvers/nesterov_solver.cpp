// Nesterov's accelerated gradient as an SGD momentum variant.
#include "poseidon/solvers/nesterov_solver.hpp"

#include "poseidon/kernels/solver_kernels.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

template <typename Dtype>
void NesterovSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate) {
  Blob<Dtype>* param = this->net_->learnable_params()[param_id];
  const Dtype momentum = this->param_.momentum();
  const Dtype local_rate = rate * this->net_->params_lr()[param_id];
  const Poseidon::Brew dev = Poseidon::mode();
  // v_new = momentum * v + r * g; step = (1 + momentum) * v_new - momentum * v.
  for_each(dev, param->count(),
           kernels::NesterovUpdate<Dtype>{
               param->mutable_diff_on(dev),
               this->history_[param_id]->mutable_data_on(dev), momentum,
               local_rate});
}

INSTANTIATE_CLASS(NesterovSolver);
REGISTER_SOLVER_CLASS(Nesterov);

}  // namespace poseidon
