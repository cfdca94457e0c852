// RMSProp: per-element rates from a running mean of squared gradients.
// The rule itself is in solvers/update_rule.cpp (Note [One update body]).
#include "poseidon/solvers/rmsprop_solver.hpp"

#include "poseidon/solver_factory.hpp"

namespace poseidon {

INSTANTIATE_CLASS(RMSPropSolver);
REGISTER_SOLVER_CLASS(RMSProp);

}  // namespace poseidon
