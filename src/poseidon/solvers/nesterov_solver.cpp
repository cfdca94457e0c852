// Nesterov's accelerated gradient as an SGD momentum variant.
#include "poseidon/solvers/nesterov_solver.hpp"

#include "poseidon/solver_factory.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

template <typename Dtype>
void NesterovSolver<Dtype>::ComputeUpdateValue(int param_id, Dtype rate) {
  Blob<Dtype>* param = this->net_->learnable_params()[param_id];
  const Dtype momentum = this->param_.momentum();
  const Dtype local_rate = rate * this->net_->params_lr()[param_id];
  const int count = param->count();
  Dtype* history = this->history_[param_id]->mutable_cpu_data();
  Dtype* previous = this->update_[param_id]->mutable_cpu_data();
  // Keep v, then v_new = momentum * v + r * g.
  cpu_copy(count, history, previous);
  cpu_axpby(count, local_rate, param->cpu_diff(), momentum, history);
  // step = (1 + momentum) * v_new - momentum * v.
  cpu_axpby(count, Dtype(1) + momentum, history, -momentum, previous);
  cpu_copy(count, previous, param->mutable_cpu_diff());
}

INSTANTIATE_CLASS(NesterovSolver);
REGISTER_SOLVER_CLASS(Nesterov);

}  // namespace poseidon
