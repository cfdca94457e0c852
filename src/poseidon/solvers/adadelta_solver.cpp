// AdaDelta: steps scaled by the ratio of running RMS of updates and
// The rule itself is in solvers/update_rule.cpp (Note [One update body]).
#include "poseidon/solvers/adadelta_solver.hpp"

#include "poseidon/solver_factory.hpp"

namespace poseidon {

INSTANTIATE_CLASS(AdaDeltaSolver);
REGISTER_SOLVER_CLASS(AdaDelta);

}  // namespace poseidon
