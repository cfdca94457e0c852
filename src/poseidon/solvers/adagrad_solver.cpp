// AdaGrad: per-element rates from the running sum of squared gradients.
// The rule itself is in solvers/update_rule.cpp (Note [One update body]).
#include "poseidon/solvers/adagrad_solver.hpp"

#include "poseidon/solver_factory.hpp"

namespace poseidon {

INSTANTIATE_CLASS(AdaGradSolver);
REGISTER_SOLVER_CLASS(AdaGrad);

}  // namespace poseidon
