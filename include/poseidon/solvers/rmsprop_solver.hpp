// RMSPropSolver (Tieleman & Hinton). With h the history (running mean of
// squared gradients) and r = lr * lr_mult, per element:
//   h = rms_decay * h + (1 - rms_decay) * g^2
//   step = r * g / (sqrt(h) + delta);   w -= step
// Prototxt: rms_decay (0.99, in [0, 1)), delta (1e-8). momentum must be 0.
#ifndef POSEIDON_SOLVERS_RMSPROP_SOLVER_HPP_
#define POSEIDON_SOLVERS_RMSPROP_SOLVER_HPP_

#include <string>

#include "poseidon/solvers/sgd_solver.hpp"

namespace poseidon {

template <typename Dtype>
class RMSPropSolver final : public SGDSolver<Dtype> {
 public:
  explicit RMSPropSolver(const SolverParameter& param)
      : SGDSolver<Dtype>(param, UpdateRule::kRMSProp) {}
  explicit RMSPropSolver(const string& param_file)
      : SGDSolver<Dtype>(param_file, UpdateRule::kRMSProp) {}
  const char* type() const override { return "RMSProp"; }
};

}  // namespace poseidon

#endif  // POSEIDON_SOLVERS_RMSPROP_SOLVER_HPP_
