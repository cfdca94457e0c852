// Signals under mpirun: a SIGINT or SIGHUP may reach one rank only (a user's
// `kill -HUP <pid>`), but stopping or snapshotting must happen on every rank
// at the same iteration, or the others wait forever for its gradients. The
// distributed trainer therefore wraps the solver's action function: each
// time the solver polls it, every rank reports its own request to rank 0,
// which answers all of them with the strongest one (STOP over SNAPSHOT over
// NONE). The solver polls the same number of times on every rank (once per
// iteration, once per test round), so the exchanges pair up.
//
// Point-to-point on its own tag, from the training thread; safe beside the
// communication threads.
#ifndef POSEIDON_DIST_ACTION_AGREEMENT_HPP_
#define POSEIDON_DIST_ACTION_AGREEMENT_HPP_

#include "poseidon/dist/communicator.hpp"
#include "poseidon/solver.hpp"

namespace poseidon {
namespace dist {

// The tag of the exchange (beside the transports' tags, param_server.hpp).
constexpr int kActionTag = 30000;

// Returns the action every rank agrees on; throws DistributedError naming
// the peer when the exchange fails.
SolverAction AgreeOnAction(Communicator* comm, SolverAction local);

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DIST_ACTION_AGREEMENT_HPP_
