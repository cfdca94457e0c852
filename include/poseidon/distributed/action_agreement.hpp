// Signals under mpirun: a SIGINT or SIGHUP may reach one rank only (a user's
// `kill -HUP <pid>`), but stopping or snapshotting must happen on every rank
// at the same iteration, or the others wait forever for its gradients. The
// distributed trainer therefore turns each rank's own request into the
// action every rank agrees on (STOP over SNAPSHOT over NONE), in two ways:
//
// After a training iteration: asynchronously (ActionAgreement). The poll
// after iteration p adds this rank's request to a one-number allreduce that
// runs on the collective thread. With a fixed lag (BSP, SSP(s), wait-free
// backprop) the ranks act on the outcome of the poll after iteration
// p - lag, which every rank has by then (lag = staleness + 1): no rank waits
// for the others at a poll, ranks may run up to `staleness` iterations
// apart as the bounded-staleness model allows, and a request takes effect
// `lag` iterations after it was made, on every rank at the same iteration.
// ASYNC has no bound on how far apart the ranks run, so there the ranks
// first learn of a request and then agree on when to act on it (Note
// [Acting on a request under ASYNC] in action_agreement.cpp).
//
// Between test rounds: synchronously (AgreeOnAction), through rank 0: the
// ranks test together anyway (their test scores are summed).
#ifndef POSEIDON_DISTRIBUTED_ACTION_AGREEMENT_HPP_
#define POSEIDON_DISTRIBUTED_ACTION_AGREEMENT_HPP_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>

#include "poseidon/distributed/comm_thread.hpp"
#include "poseidon/distributed/communicator.hpp"
#include "poseidon/distributed/tags.hpp"
#include "poseidon/solver.hpp"

namespace poseidon {
namespace dist {

// Returns the action every rank agrees on; throws DistributedError naming
// the peer when the exchange fails. Point-to-point on kActionTag, from the
// training thread; every rank calls it the same number of times.
SolverAction AgreeOnAction(Communicator* comm, SolverAction local);

class ActionAgreement {
 public:
  // The lag of ASYNC's agreement: none fixed.
  static constexpr int kUnbounded = 0;

  // `comm` and `collective` (the rank's collective thread, which runs the
  // allreduces in posting order) are observed; the owner joins the thread
  // before destroying this object. `lag` >= 1, or kUnbounded.
  ActionAgreement(Communicator* comm, CommThread* collective, int lag);
  POSEIDON_DISABLE_COPY_AND_ASSIGN(ActionAgreement);

  // The poll after iteration `poll` (polls come in increasing order, one per
  // iteration, the same on every rank): posts `local` and returns the action
  // every rank takes at this poll (NONE while there is none). `meets` says
  // that every rank meets right after this poll (a test, a snapshot or the
  // end of the Step follows it); the same on every rank. With a fixed lag
  // that is the action agreed for poll - lag. Throws DistributedError when
  // an agreement failed or nothing arrived for the communicator's timeout.
  SolverAction AfterIteration(int64_t poll, SolverAction local, bool meets);

 private:
  SolverAction FixedLag(int64_t poll);
  SolverAction Unbounded(int64_t poll, bool meets);
  // Waits (holding `lock` on mu_) until `ready`; the deadline restarts
  // whenever another poll's sum arrives. Throws as AfterIteration says.
  template <typename Ready>
  void Wait(std::unique_lock<std::mutex>* lock, int64_t poll, Ready ready);

  Communicator* comm_;
  CommThread* collective_;
  int lag_;
  // FixedLag: this rank's first poll (no sum is due before it + lag).
  int64_t first_poll_ = -1;
  // Unbounded: the last poll whose sum this rank has taken, and the actions
  // agreed on, by the poll they are taken at.
  int64_t taken_ = -1;
  std::map<int64_t, SolverAction> agreed_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, double> sums_;  // GUARDED_BY(mu_): poll -> coded sum
  uint64_t arrived_ = 0;            // GUARDED_BY(mu_): sums so far
  Status error_;                    // GUARDED_BY(mu_)
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_ACTION_AGREEMENT_HPP_
