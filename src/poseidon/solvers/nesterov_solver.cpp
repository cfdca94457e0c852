// Nesterov's accelerated gradient as an SGD momentum variant.
// The rule itself is in solvers/update_rule.cpp (Note [One update body]).
#include "poseidon/solvers/nesterov_solver.hpp"

#include "poseidon/solver_factory.hpp"

namespace poseidon {

INSTANTIATE_CLASS(NesterovSolver);
REGISTER_SOLVER_CLASS(Nesterov);

}  // namespace poseidon
