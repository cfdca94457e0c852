// AdamSolver (Kingma & Ba 2015). history() holds 2P blobs for P learnable
// params: [0, P) the first moment m, [P, 2P) the second moment v. With
// b1 = momentum, b2 = momentum2, t = iter() + 1 and r = lr * lr_mult:
//   m = b1 * m + (1 - b1) * g
//   v = b2 * v + (1 - b2) * g^2
//   step = r * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + delta)
//   w -= step
// Prototxt: momentum (b1, usually 0.9), momentum2 (0.999), delta (1e-8).
#ifndef POSEIDON_SOLVERS_ADAM_SOLVER_HPP_
#define POSEIDON_SOLVERS_ADAM_SOLVER_HPP_

#include <string>

#include "poseidon/solvers/sgd_solver.hpp"

namespace poseidon {

template <typename Dtype>
class AdamSolver final : public SGDSolver<Dtype> {
 public:
  explicit AdamSolver(const SolverParameter& param)
      : SGDSolver<Dtype>(param, UpdateRule::kAdam) {}
  explicit AdamSolver(const string& param_file)
      : SGDSolver<Dtype>(param_file, UpdateRule::kAdam) {}
  const char* type() const override { return "Adam"; }
};

}  // namespace poseidon

#endif  // POSEIDON_SOLVERS_ADAM_SOLVER_HPP_
