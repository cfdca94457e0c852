// Adam: bias-corrected first and second moment estimates of the gradient.
// The rule itself is in solvers/update_rule.cpp (Note [One update body]).
#include "poseidon/solvers/adam_solver.hpp"

#include "poseidon/solver_factory.hpp"

namespace poseidon {

INSTANTIATE_CLASS(AdamSolver);
REGISTER_SOLVER_CLASS(Adam);

}  // namespace poseidon
