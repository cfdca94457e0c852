// Agreement on SIGINT/SIGHUP actions: synchronous through rank 0, and
// asynchronous through an allreduce on the collective thread.
#include "poseidon/distributed/action_agreement.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "poseidon/distributed/wire.hpp"
#include "poseidon/util/wait_notes.hpp"

namespace poseidon {
namespace dist {

namespace {

// STOP over SNAPSHOT over NONE.
SolverAction Stronger(SolverAction a, SolverAction b) {
  auto strength = [](SolverAction x) {
    return x == SolverAction::STOP ? 2 : x == SolverAction::SNAPSHOT ? 1 : 0;
  };
  return strength(b) > strength(a) ? b : a;
}

// Every rank sends `mine` to rank 0, which folds the values in rank order
// with `combine` and sends the outcome back to every rank. From the
// training thread, point-to-point on `tag`; `decode` checks a received value
// and names its sender (a job rank).
template <typename Wire, typename Decode, typename Combine>
Wire AgreeThroughRankZero(Communicator* comm, int tag, Wire mine,
                          const char* what, Decode decode, Combine combine) {
  auto require = [what](const Status& s) {
    // The communicator's message already names this rank and the peer.
    POSEIDON_REQUIRE(s.ok(), DistributedError, "agreeing on ", what, ": ",
                     s.message());
  };
  // The training thread waits here; see Note [Polling on a shared core].
  UrgentScope urgent(comm);
  if (comm->rank() != 0) {
    require(comm->Send(&mine, sizeof(mine), 0, tag));
    Wire agreed{};
    require(comm->Recv(&agreed, sizeof(agreed), 0, tag));
    return decode(&agreed, sizeof(agreed), comm->JobRank(0));
  }
  for (int r = 1; r < comm->size(); ++r) {
    Wire theirs{};
    require(comm->Recv(&theirs, sizeof(theirs), r, tag));
    mine = combine(mine, decode(&theirs, sizeof(theirs), comm->JobRank(r)));
  }
  for (int r = 1; r < comm->size(); ++r) {
    require(comm->Send(&mine, sizeof(mine), r, tag));
  }
  return mine;
}

// The largest of the ranks' polls (Note [Acting on a request under ASYNC]).
int64_t AgreeOnIteration(Communicator* comm, int64_t poll) {
  return AgreeThroughRankZero<int64_t>(
      comm, kAsyncActionTag, poll, "when to act on a signal",
      [](const void* data, size_t bytes, int peer_job) {
        return DecodeIteration(data, bytes, peer_job);
      },
      [](int64_t a, int64_t b) { return std::max(a, b); });
}

}  // namespace

SolverAction AgreeOnAction(Communicator* comm, SolverAction local) {
  if (comm->size() == 1) return local;
  const int32_t agreed = AgreeThroughRankZero<int32_t>(
      comm, kActionTag, static_cast<int32_t>(local), "the signal action",
      [](const void* data, size_t bytes, int peer_job) {
        return static_cast<int32_t>(DecodeAction(data, bytes, peer_job));
      },
      [](int32_t a, int32_t b) {
        return static_cast<int32_t>(Stronger(static_cast<SolverAction>(a),
                                             static_cast<SolverAction>(b)));
      });
  return static_cast<SolverAction>(agreed);
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

SolverAction ActionAgreement::AfterIteration(int64_t poll, SolverAction local,
                                             bool meets) {
  const int W = comm_->size();
  if (W == 1) return local;
  auto value = std::make_shared<double>(Code(local, W));
  collective_->Post(
      [this, poll, value] {
        const Status s = comm_->AllreduceSum(value.get(), 1);
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (!s.ok() && error_.ok()) error_ = s;
          sums_[poll] = *value;
          ++arrived_;
        }
        cv_.notify_all();
      },
      [this, poll](const Status& s) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (error_.ok()) error_ = s;
          sums_[poll] = 0;
          ++arrived_;
        }
        cv_.notify_all();
      });
  return lag_ == kUnbounded ? Unbounded(poll, meets) : FixedLag(poll);
}

template <typename Ready>
void ActionAgreement::Wait(std::unique_lock<std::mutex>* lock, int64_t poll,
                           Ready ready) {
  if (ready()) return;
  const WaitNote note(
      StrCat("the agreement on the signal action at iteration ", poll));
  UrgentScope urgent(comm_);
  // The allreduce's own deadline, naming the peer, comes first; this one
  // is a fallback (RelayTimeout). It restarts whenever a sum arrives: under
  // ASYNC a rank may wait here while a slower one runs many iterations.
  const std::chrono::milliseconds timeout = RelayTimeout(comm_);
  if (timeout.count() <= 0) {
    cv_.wait(*lock, ready);
    return;
  }
  for (;;) {
    const uint64_t seen = arrived_;
    const auto start = std::chrono::steady_clock::now();
    if (cv_.wait_for(*lock, timeout,
                     [&] { return ready() || arrived_ != seen; })) {
      if (ready()) return;
      continue;
    }
    lock->unlock();  // StoppedNote may sleep
    POSEIDON_THROW(DistributedError, "rank ", comm_->rank(),
                   ": agreeing on the signal action at iteration ", poll,
                   ": nothing arrived for ", FormatSeconds(timeout),
                   "; a peer may have died (--comm_timeout)",
                   StoppedNote(start, timeout));
  }
}

SolverAction ActionAgreement::FixedLag(int64_t poll) {
  if (first_poll_ < 0) first_poll_ = poll;
  const int64_t due = poll - lag_;
  if (due < first_poll_) return SolverAction::NONE;
  std::unique_lock<std::mutex> lock(mu_);
  Wait(&lock, due, [&] { return sums_.count(due) > 0 || !error_.ok(); });
  POSEIDON_REQUIRE(error_.ok(), DistributedError, "rank ", comm_->rank(),
                   ": agreeing on the signal action: ", error_.message());
  const double sum = sums_[due];
  sums_.erase(sums_.begin(), sums_.upper_bound(due));
  return DecodeActionSum(sum, comm_->size());  // wire.hpp
}

// Note [Acting on a request under ASYNC]
// Under ASYNC a rank may run any number of iterations ahead of the slowest,
// so no fixed lag after a request is late enough for every rank to have
// heard of it by then. The polls still add their coded requests to the
// collective thread's allreduces, one per poll, but a rank does not wait
// for them: at each poll it takes the sums that have arrived (in posting
// order). For each sum that holds a request, in poll order, every rank
// reports the poll it stands at to rank 0 and gets back the largest report
// (AgreeOnIteration, point-to-point on kAsyncActionTag); every rank acts at
// that poll, which none has passed, STOP over SNAPSHOT when two requests
// meet there. A rank waits only from its report until the last rank
// reports: about one iteration of the slowest rank, once per request. Every
// rank takes every sum, so every rank goes through the same agreements in
// the same order.
// A rank can report only from a poll. So at a poll after which every rank
// meets (`meets`: a test, a snapshot or the end of the Step follows) and at
// a poll where it acts (the action may end the Step), it waits until it has
// taken every sum up to this poll, agreeing on the requests among them on
// the way. Take a rank S still in an earlier agreement when a rank F
// reaches such a poll: S learned of the request from a sum, which F's
// collective thread completes too, so F takes it while it waits and
// reports. So no rank leaves such a poll with a request behind it that
// another rank still agrees on, and the ranks meet with every request
// posted before the meeting acted on.
SolverAction ActionAgreement::Unbounded(int64_t poll, bool meets) {
  const int W = comm_->size();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    POSEIDON_REQUIRE(error_.ok(), DistributedError, "rank ", comm_->rank(),
                     ": agreeing on the signal action: ", error_.message());
    std::vector<SolverAction> requests;
    for (const auto& [taken, sum] : sums_) {
      const SolverAction a = DecodeActionSum(sum, W);  // wire.hpp
      if (a != SolverAction::NONE) requests.push_back(a);
      taken_ = taken;
    }
    sums_.clear();
    lock.unlock();
    for (SolverAction a : requests) {
      const int64_t at = AgreeOnIteration(comm_, poll);
      POSEIDON_REQUIRE(at >= poll, DistributedError, "rank ", comm_->rank(),
                       ": agreeing on when to act on a signal: rank ",
                       comm_->JobRank(0), " named iteration ", at,
                       ", which this rank has passed (it is at ", poll, ")");
      agreed_[at] = Stronger(agreed_[at], a);
    }
    lock.lock();
    const bool acts = agreed_.count(poll) > 0;
    if (taken_ >= poll || !(meets || acts)) break;
    Wait(&lock, poll, [&] { return !sums_.empty() || !error_.ok(); });
  }
  lock.unlock();
  const auto it = agreed_.find(poll);
  if (it == agreed_.end()) return SolverAction::NONE;
  const SolverAction action = it->second;
  agreed_.erase(it);
  return action;
}

}  // namespace dist
}  // namespace poseidon
