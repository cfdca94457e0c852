// AdaDeltaSolver (Zeiler 2012), in Caffe's form. history() holds 2P blobs for
// P learnable params: [0, P) the running mean of squared gradients Eg, and
// [P, 2P) the running mean of squared updates Ex. With rho = momentum and
// r = lr * lr_mult, per element:
//   Eg = rho * Eg + (1 - rho) * g^2
//   u  = g * sqrt((Ex + delta) / (Eg + delta))
//   Ex = rho * Ex + (1 - rho) * u^2
//   step = r * u;   w -= step
// Prototxt: momentum (rho), delta (1e-8); base_lr is usually 1.
#ifndef POSEIDON_SOLVERS_ADADELTA_SOLVER_HPP_
#define POSEIDON_SOLVERS_ADADELTA_SOLVER_HPP_

#include <string>

#include "poseidon/solvers/sgd_solver.hpp"

namespace poseidon {

template <typename Dtype>
class AdaDeltaSolver final : public SGDSolver<Dtype> {
 public:
  explicit AdaDeltaSolver(const SolverParameter& param)
      : SGDSolver<Dtype>(param, UpdateRule::kAdaDelta) {}
  explicit AdaDeltaSolver(const string& param_file)
      : SGDSolver<Dtype>(param_file, UpdateRule::kAdaDelta) {}
  const char* type() const override { return "AdaDelta"; }
};

}  // namespace poseidon

#endif  // POSEIDON_SOLVERS_ADADELTA_SOLVER_HPP_
