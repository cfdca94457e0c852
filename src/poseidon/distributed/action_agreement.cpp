// Agreement on SIGINT/SIGHUP actions: synchronous through rank 0, and
// asynchronous through an allreduce on the collective thread.
#include "poseidon/distributed/action_agreement.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "poseidon/distributed/wire.hpp"
#include "poseidon/util/wait_notes.hpp"

namespace poseidon {
namespace dist {

SolverAction AgreeOnAction(Communicator* comm, SolverAction local) {
  const int n = comm->size();
  int32_t action = static_cast<int32_t>(local);
  auto require = [](const Status& s) {
    // The communicator's message already names this rank and the peer.
    POSEIDON_REQUIRE(s.ok(), DistributedError,
                     "agreeing on the signal action: ", s.message());
  };
  if (n == 1) return local;
  // The training thread waits here; see Note [Polling on a shared core].
  UrgentScope urgent(comm);
  if (comm->rank() == 0) {
    for (int r = 1; r < n; ++r) {
      int32_t received = 0;
      require(comm->Recv(&received, sizeof(received), r, kActionTag));
      const int32_t theirs = static_cast<int32_t>(
          DecodeAction(&received, sizeof(received), comm->JobRank(r)));
      // STOP (1) wins over SNAPSHOT (2), which wins over NONE (0).
      auto rank_of = [](int32_t a) { return a == 1 ? 2 : a == 2 ? 1 : 0; };
      if (rank_of(theirs) > rank_of(action)) action = theirs;
    }
    for (int r = 1; r < n; ++r) {
      require(comm->Send(&action, sizeof(action), r, kActionTag));
    }
  } else {
    require(comm->Send(&action, sizeof(action), 0, kActionTag));
    int32_t agreed = 0;
    require(comm->Recv(&agreed, sizeof(agreed), 0, kActionTag));
    return DecodeAction(&agreed, sizeof(agreed), comm->JobRank(0));
  }
  return static_cast<SolverAction>(action);
}

// Note [Coding actions in a sum]
// Each rank adds W + 1 for STOP, 1 for SNAPSHOT and 0 for NONE (W ranks),
// in doubles: exact for any job size. A sum above W means some rank asked to
// stop; a positive sum at most W, that some asked for a snapshot and none
// to stop. Every rank sees the same sum (AllreduceSum is deterministic), so
// every rank decides the same.
namespace {

double Code(SolverAction a, int ranks) {
  return a == SolverAction::STOP       ? ranks + 1.0
         : a == SolverAction::SNAPSHOT ? 1.0
                                       : 0.0;
}

}  // namespace

ActionAgreement::ActionAgreement(Communicator* comm, CommThread* collective,
                                 int lag)
    : comm_(comm), collective_(collective), lag_(lag) {
  CHECK_GE(lag, 0);
}

SolverAction ActionAgreement::AfterIteration(int64_t poll,
                                             SolverAction local) {
  const int W = comm_->size();
  if (W == 1) return local;
  if (first_poll_ < 0) first_poll_ = poll;
  auto value = std::make_shared<double>(Code(local, W));
  collective_->Post(
      [this, poll, value] {
        const Status s = comm_->AllreduceSum(value.get(), 1);
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (!s.ok() && error_.ok()) error_ = s;
          sums_[poll] = *value;
        }
        cv_.notify_all();
      },
      [this, poll](const Status& s) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (error_.ok()) error_ = s;
          sums_[poll] = 0;
        }
        cv_.notify_all();
      });
  const int64_t due = poll - lag_;
  if (due < first_poll_) return SolverAction::NONE;
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] { return sums_.count(due) > 0 || !error_.ok(); };
  if (!ready()) {
    const WaitNote note(
        StrCat("the agreement on the signal action of iteration ", due));
    UrgentScope urgent(comm_);
    // The allreduce's own deadline, naming the peer, comes first; this one
    // is a fallback (RelayTimeout).
    const std::chrono::milliseconds timeout = RelayTimeout(comm_);
    const auto start = std::chrono::steady_clock::now();
    if (timeout.count() <= 0) cv_.wait(lock, ready);
    if (!cv_.wait_for(lock, timeout, ready)) {
      lock.unlock();  // StoppedNote may sleep
      POSEIDON_THROW(DistributedError, "rank ", comm_->rank(),
                     ": agreeing on the signal action of iteration ", due,
                     ": nothing arrived for ", FormatSeconds(timeout),
                     "; a peer may have died (--comm_timeout)",
                     StoppedNote(start, timeout));
    }
  }
  POSEIDON_REQUIRE(error_.ok(), DistributedError, "rank ", comm_->rank(),
                   ": agreeing on the signal action: ", error_.message());
  const double sum = sums_[due];
  sums_.erase(sums_.begin(), sums_.upper_bound(due));
  return DecodeActionSum(sum, W);  // wire.hpp
}

}  // namespace dist
}  // namespace poseidon
