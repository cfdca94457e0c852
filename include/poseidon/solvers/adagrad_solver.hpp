// AdaGradSolver (Duchi et al. 2011). With h the history (sum of squared
// gradients) and r = lr * lr_mult, per element:
//   h += g^2;   step = r * g / (sqrt(h) + delta);   w -= step
// Prototxt: delta (1e-8). momentum must be 0 (ConfigError otherwise).
#ifndef POSEIDON_SOLVERS_ADAGRAD_SOLVER_HPP_
#define POSEIDON_SOLVERS_ADAGRAD_SOLVER_HPP_

#include <string>

#include "poseidon/solvers/sgd_solver.hpp"

namespace poseidon {

template <typename Dtype>
class AdaGradSolver final : public SGDSolver<Dtype> {
 public:
  explicit AdaGradSolver(const SolverParameter& param)
      : SGDSolver<Dtype>(param, UpdateRule::kAdaGrad) {}
  explicit AdaGradSolver(const string& param_file)
      : SGDSolver<Dtype>(param_file, UpdateRule::kAdaGrad) {}
  const char* type() const override { return "AdaGrad"; }
};

}  // namespace poseidon

#endif  // POSEIDON_SOLVERS_ADAGRAD_SOLVER_HPP_
