// MpiCommunicator: awaiting operations (Note [Progress thread]): a caller's
// first poll, the hand-over to the communicator's progress thread, its
// polling loop paced as Note [Polling on a shared core] says, and the
// timeout that names what was awaited.
#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "mpi_communicator_impl.hpp"
#include "poseidon/util/wait_notes.hpp"

namespace poseidon {
namespace dist {

// Note [Progress thread]
// Every wait of every thread goes to one progress thread per communicator:
// callers describe their operation (an Op), poll it once themselves (an
// eager send or an arrived message completes there, with no thread switch),
// and otherwise hand it over and sleep on a condition variable of their own;
// the progress thread polls all outstanding operations in one loop and wakes
// only the callers whose operations completed. A rank thus
// has one poller however many communication threads wait, paced as Note
// [Polling on a shared core] says. A receive is a probe until a message
// matches (MPI_Improbe reserves the message for this receive, so a message
// of the wrong size is consumed and reported with both sizes, and an
// unmatched receive that times out leaves nothing pending), then a matched
// non-blocking receive (MPI_Imrecv) until the data is in.

Status MpiCommunicator::Impl::Await(const std::vector<MpiOp*>& list,
                                    const std::string& waiting_for) {
  // See Note [Progress thread]: most small messages complete at once.
  MpiWaiter waiter;
  for (MpiOp* op : list) {
    bool complete = false;
    op->result = Poll(op, &complete);
    op->done = !op->result.ok() || complete;
    if (!op->done) {
      op->waiter = &waiter;
      ++waiter.pending;
    }
  }
  auto first_result = [&list]() -> Status {
    for (MpiOp* op : list) {
      if (!op->result.ok()) return op->result;
    }
    return Status::OK();
  };
  if (waiter.pending == 0) return first_result();
  // See Note [Wait notes]: what a SIGTERM line names.
  const MpiOp* first_pending = nullptr;
  for (MpiOp* op : list) {
    if (!op->done && first_pending == nullptr) first_pending = op;
  }
  const WaitNote wait_note(StrCat(first_pending->what, ", waiting for ",
                                  WaitingFor(list, waiting_for)));
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu);
  const bool was_idle = ops.empty();
  for (MpiOp* op : list) {
    if (!op->done) ops.push_back(op);
  }
  if (was_idle) work.notify_one();
  auto finished = [&waiter] { return waiter.pending == 0; };
  if (options.timeout.count() <= 0) {
    waiter.finished.wait(lock, finished);
    return first_result();
  }
  if (waiter.finished.wait_for(lock, options.timeout, finished)) {
    return first_result();
  }
  const Status s = TimeOut(list, waiting_for, start, &lock, finished);
  return s.ok() ? first_result() : s;
}

Status MpiCommunicator::Impl::TimeOut(
    const std::vector<MpiOp*>& list, const std::string& waiting_for,
    std::chrono::steady_clock::time_point start,
    std::unique_lock<std::mutex>* lock, const std::function<bool()>& finished) {
  // StoppedNote may sleep: not under mu (the progress thread needs it).
  lock->unlock();
  const std::string note = StoppedNote(start, options.timeout);
  lock->lock();
  if (finished()) return Status::OK();
  Status s;
  bool leaves_request = false;
  const std::string who = WaitingFor(list, waiting_for);
  const std::string own = OwnWaitsNote(list);
  for (MpiOp* op : list) {
    if (op->done) continue;
    ops.erase(std::find(ops.begin(), ops.end(), op));
    if (s.ok()) {
      s = Fail(op->what, ": timed out after ", FormatSeconds(options.timeout),
               " waiting for ", who, own, note);
    }
    leaves_request = leaves_request || !op->probe;
  }
  return leaves_request ? MarkBroken(s) : s;
}

// Note [Sliding windows]
// A parameter-server push or pull thread keeps bytes_in_flight bytes of
// its blocks in flight (Note [Server pipeline] in param_server.cpp). Run
// as windows awaited whole, the depth fell from the window's to nothing
// before the next window started: on 8 emulated hosts at 1 Gbit/s a
// shard's link was 67-68% busy during a VGG-16 exchange, where plain MPI
// moving the same bytes in 4 MiB messages reached 58% with one round of
// messages in flight, 68% with two, 80% with four
// (docs/distributed.md, "Link use, sampled"; sliding, the same run went
// to 77-78%). So a windowed run starts each op as soon as the ops in
// flight leave room for it: ops start in
// order, an op waits while the bytes in flight and its own would pass the
// window (unless nothing is in flight) or while an op with its (peer, tag)
// is in flight (two such ops could match each other's messages), and the
// caller hears of every completed prefix. The ops started at any moment
// include every op a window awaited whole would hold if it began at the
// first op not yet complete, so the argument of Note [Server pipeline]
// (every op of the earliest unfinished round is in flight or done) holds
// as it did. A failed op starts no more; those in flight are awaited.
// The deadline is the communicator's timeout without any op completing.
Status MpiCommunicator::Impl::AwaitWindowed(
    std::vector<MpiOp>* batch, size_t window_bytes,
    const std::function<Status(MpiOp*)>& start,
    const std::function<Status(size_t)>& done) {
  using Clock = std::chrono::steady_clock;
  const size_t n = batch->size();
  MpiWaiter waiter;
  waiter.each = true;
  std::vector<char> held(n, 0);        // handed to the progress thread, not yet
                                       // released from the window
  // (peer, tag) of the held ops: no two share one, so its size is how
  // many are held.
  std::set<std::pair<int, int>> keys;
  size_t next = 0, prefix = 0, in_flight = 0;
  bool stop = false;
  Status done_failure;
  auto bytes_of = [](const MpiOp& op) { return op.bytes + op.bytes2; };
  auto key_of = [](const MpiOp& op) { return std::make_pair(op.peer, op.tag); };
  // Under mu: releases the held ops that completed; true if any did.
  auto release = [&] {
    bool any = false;
    for (size_t i = prefix; i < next; ++i) {
      MpiOp& op = (*batch)[i];
      if (!held[i] || !op.done) continue;
      held[i] = 0;
      in_flight -= bytes_of(op);
      keys.erase(key_of(op));
      if (!op.result.ok()) stop = true;
      any = true;
    }
    return any;
  };
  Clock::time_point since = Clock::now();  // the last completion
  for (;;) {
    // Start what the window has room for.
    while (!stop && next < n) {
      MpiOp& op = (*batch)[next];
      const size_t bytes = bytes_of(op);
      if ((!keys.empty() && in_flight + bytes > window_bytes) ||
          keys.count(key_of(op)) > 0) {
        break;
      }
      ++next;
      Status s = start(&op);
      if (!s.ok()) {
        // A send MPI refused; those already started are awaited below.
        op.result = s;
        op.done = true;
        stop = true;
        break;
      }
      bool complete = false;
      op.result = Poll(&op, &complete);
      op.done = !op.result.ok() || complete;
      if (op.done) {
        if (!op.result.ok()) stop = true;
        continue;
      }
      op.waiter = &waiter;
      held[next - 1] = 1;
      in_flight += bytes;
      keys.insert(key_of(op));
      std::lock_guard<std::mutex> lock(mu);
      ++waiter.pending;
      const bool was_idle = ops.empty();
      ops.push_back(&op);
      if (was_idle) work.notify_one();
    }
    size_t reached = prefix;
    {
      std::unique_lock<std::mutex> lock(mu);
      // Under mu: the end of the prefix of ops done and released.
      auto advance = [&] {
        while (reached < next && (*batch)[reached].done && !held[reached] &&
               (*batch)[reached].result.ok()) {
          ++reached;
        }
      };
      const bool released = release();
      advance();
      if (!released && reached == prefix && !keys.empty()) {
        const int seen = waiter.completions;
        auto completed = [&] { return waiter.completions != seen; };
        const bool woke = options.timeout.count() <= 0
                              ? (waiter.finished.wait(lock, completed), true)
                              : waiter.finished.wait_until(
                                    lock, since + options.timeout, completed);
        if (!woke) {
          std::vector<MpiOp*> list;
          for (size_t i = prefix; i < next; ++i) {
            if (held[i]) list.push_back(&(*batch)[i]);
          }
          const Status s = TimeOut(list, "", since, &lock, completed);
          if (!s.ok()) {
            // The withdrawn ops are the progress thread's no more.
            for (MpiOp* op : list) {
              if (!op->done) {
                op->done = true;
                op->result = s;
              }
            }
            for (size_t i = prefix; i < next; ++i) held[i] = 0;
            return s;
          }
        }
        release();
        advance();
      }
      since = Clock::now();
    }
    if (reached > prefix) {
      prefix = reached;
      if (!stop && done_failure.ok()) {
        // Ops are still in flight: nothing may leave this frame early.
        try {
          done_failure = done(prefix);
        } catch (const std::exception& e) {
          done_failure = Status::Failure(e.what());
        }
        if (!done_failure.ok()) stop = true;
      }
    }
    if (keys.empty() && (stop || next == n)) break;
  }
  for (size_t i = 0; i < next; ++i) {
    if (!(*batch)[i].result.ok()) return (*batch)[i].result;
  }
  return done_failure;
}

// Note [Messages to oneself]
// A rank sends messages to itself: a parameter-server shard takes its own
// rank's pushes and sends it the sums like any other rank's. Such a message
// is late only because another thread of this rank is stuck, waiting on
// some other rank; a timeout that names this rank alone points nowhere (the
// link-fault matrix's "link down for good" case ended so: the pull from a
// rank's own shard ran out first, while the shard still waited for the
// pushes of the ranks across the cut link, and the job ended before the
// shard's own error, which named them, was printed). So the timeout of a
// message to or from this rank adds this rank's oldest operations still
// pending with other ranks, the progress thread's list being in the order
// the waits began. ParamServer's Note [Own worker's windows] is the same
// idea from the shard's side, and both may appear in one error: that one
// names the blocks, shards and iteration of the windows in flight (and
// works over any communicator), this one the messages MPI still holds
// (and serves every user of the communicator, not only the shards).
std::string MpiCommunicator::Impl::OwnWaitsNote(
    const std::vector<MpiOp*>& list) const {
  const bool to_self = std::any_of(list.begin(), list.end(), [&](MpiOp* op) {
    return !op->done && op->peer == rank;
  });
  if (!to_self) return "";
  std::vector<std::string> others;
  for (const MpiOp* op : ops) {
    if (op->peer >= 0 && op->peer != rank &&
        std::find(list.begin(), list.end(), op) == list.end()) {
      others.push_back(op->what);
    }
  }
  if (others.empty()) return "";
  return StrCat(
      "; a message between this rank and itself, late because "
      "this rank's other threads are held up: they still wait on ",
      ListForMessage(others, 3));
}

std::string MpiCommunicator::Impl::WaitingFor(const std::vector<MpiOp*>& list,
                                              const std::string& waiting_for) {
  if (!waiting_for.empty()) return waiting_for;
  std::vector<std::string> pending;
  for (const MpiOp* op : list) {
    if (!op->done && !op->waiting_for.empty()) {
      pending.push_back(op->waiting_for);
    }
  }
  const std::string text = ListForMessage(pending);
  return text.empty() ? std::string("the other ranks") : text;
}

Status MpiCommunicator::Impl::Poll(MpiOp* op, bool* complete) {
  *complete = false;
  if (op->probe) {
    int found = 0;
    MPI_Message message;
    MPI_Status status;
    POSEIDON_MPI_CHECK(self(), op->what,
                       MPI_Improbe(op->src, op->tag,
                                   op->on_coll_comm ? coll_comm : comm,
                                   &found, &message, &status));
    if (!found) return Status::OK();
    int count = 0;
    POSEIDON_MPI_CHECK(self(), op->what,
                       MPI_Get_count(&status, MPI_BYTE, &count));
    if (static_cast<size_t>(count) != op->bytes + op->bytes2) {
      std::vector<char> sink(std::max(count, 1));
      POSEIDON_MPI_CHECK(self(), op->what,
                         MPI_Mrecv(sink.data(), count, MPI_BYTE, &message,
                                   MPI_STATUS_IGNORE));
      *complete = true;
      return Fail(op->what, ": rank ", Job(op->src), " sent ", count,
                  " bytes, this rank expected ", op->bytes + op->bytes2);
    }
    if (op->bytes2 == 0) {
      POSEIDON_MPI_CHECK(self(), op->what,
                         MPI_Imrecv(op->buf, count, MPI_BYTE, &message,
                                    &op->request));
    } else {
      POSEIDON_MPI_CHECK(
          self(), op->what,
          StartTwoParts(op->buf, op->bytes, op->buf2, op->bytes2,
                        [&](void* at, int n, MPI_Datatype type) {
                          return MPI_Imrecv(at, n, type, &message,
                                            &op->request);
                        }));
    }
    op->probe = false;
  }
  int flag = 0;
  POSEIDON_MPI_CHECK(self(), op->what,
                     MPI_Test(&op->request, &flag, MPI_STATUS_IGNORE));
  *complete = flag != 0;
  return Status::OK();
}

void MpiCommunicator::Impl::ProgressLoop() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mu);
  int round = 0;
  // The current run of urgent polls: since when it yields, and how many
  // naps it took since (see Note [Polling on a shared core]).
  bool spinning = false;
  Clock::time_point spin_start;
  int naps = 0;
  for (;;) {
    if (ops.empty()) {
      if (stopping) return;
      work.wait(lock, [this] { return stopping || !ops.empty(); });
      round = 0;
      spinning = false;
      continue;
    }
    bool progressed = false;
    for (size_t i = 0; i < ops.size();) {
      MpiOp* op = ops[i];
      bool complete = false;
      Status s = Poll(op, &complete);
      if (!s.ok() || complete) {
        op->result = s;
        op->done = true;
        ops.erase(ops.begin() + i);
        progressed = true;
        // Under mu: the caller owns the waiter and may destroy it once
        // pending is 0, which it can only see after this thread lets go.
        ++op->waiter->completions;
        if (--op->waiter->pending == 0 || op->waiter->each) {
          op->waiter->finished.notify_one();
        }
      } else {
        ++i;
      }
    }
    if (ops.empty()) continue;
    // See Note [Polling on a shared core].
    if (urgent > 0) {
      round = 0;
      const Clock::time_point now = Clock::now();
      if (!spinning || progressed) {
        spinning = true;
        spin_start = now;
        naps = 0;
      }
      if (now - spin_start < std::chrono::microseconds(kUrgentSpinMicros)) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
      } else {
        work.wait_for(lock, NextBackoff(kFirstNapMicros, &naps),
                      [this] { return stopping; });
      }
      continue;
    }
    spinning = false;
    work.wait_for(lock, NextBackoff(kFirstSleepMicros, &round),
                  [this] { return stopping || urgent > 0; });
  }
}

}  // namespace dist
}  // namespace poseidon
