// One round of action agreement through rank 0.
#include "poseidon/dist/action_agreement.hpp"

#include <algorithm>
#include <cstdint>

namespace poseidon {
namespace dist {

SolverAction AgreeOnAction(Communicator* comm, SolverAction local) {
  const int n = comm->size();
  int32_t action = static_cast<int32_t>(local);
  auto require = [comm](const Status& s) {
    // The communicator's message already names this rank and the peer.
    POSEIDON_REQUIRE(s.ok(), DistributedError,
                     "agreeing on the signal action: ", s.message());
  };
  if (n == 1) return local;
  // The training thread waits here; see Note [Polling on a shared core].
  UrgentScope urgent(comm);
  if (comm->rank() == 0) {
    for (int r = 1; r < n; ++r) {
      int32_t theirs = 0;
      require(comm->Recv(&theirs, sizeof(theirs), r, kActionTag));
      // STOP (1) wins over SNAPSHOT (2), which wins over NONE (0).
      auto rank_of = [](int32_t a) { return a == 1 ? 2 : a == 2 ? 1 : 0; };
      if (rank_of(theirs) > rank_of(action)) action = theirs;
    }
    for (int r = 1; r < n; ++r) {
      require(comm->Send(&action, sizeof(action), r, kActionTag));
    }
  } else {
    require(comm->Send(&action, sizeof(action), 0, kActionTag));
    require(comm->Recv(&action, sizeof(action), 0, kActionTag));
  }
  return static_cast<SolverAction>(action);
}

}  // namespace dist
}  // namespace poseidon
