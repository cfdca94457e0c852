// NesterovSolver: SGD with Nesterov's accelerated gradient, in Caffe's form.
// With v the history and r = lr * lr_mult, per element:
//   v_new = momentum * v + r * g
//   step  = (1 + momentum) * v_new - momentum * v;   w -= step
// Everything else (schedule, clipping, decay, iter_size) as SGDSolver.
#ifndef POSEIDON_SOLVERS_NESTEROV_SOLVER_HPP_
#define POSEIDON_SOLVERS_NESTEROV_SOLVER_HPP_

#include <string>

#include "poseidon/solvers/sgd_solver.hpp"

namespace poseidon {

template <typename Dtype>
class NesterovSolver final : public SGDSolver<Dtype> {
 public:
  explicit NesterovSolver(const SolverParameter& param)
      : SGDSolver<Dtype>(param, UpdateRule::kNesterov) {}
  explicit NesterovSolver(const string& param_file)
      : SGDSolver<Dtype>(param_file, UpdateRule::kNesterov) {}
  const char* type() const override { return "Nesterov"; }
};

}  // namespace poseidon

#endif  // POSEIDON_SOLVERS_NESTEROV_SOLVER_HPP_
