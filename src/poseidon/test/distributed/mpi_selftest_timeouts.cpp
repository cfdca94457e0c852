// mpi_selftest: waits under a real mpirun. A Recv, a batch or a collective
// that times out names the rank it waited for (the job's numbering, also
// on a Split communicator, with the Split's deadline) and leaves the
// communicator usable; a long urgent wait does not keep a core.
#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "mpi_selftest.hpp"

namespace poseidon {
namespace dist {
namespace selftest {

namespace {

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

// A long urgent wait must not keep a core (Note [Polling on a shared core]):
// rank 0 waits under UrgentScope for a message rank 1 sends 0.4 s late; the
// caller sleeps, so rank 0's CPU time over the wait is its poller's, which
// naps once a millisecond of yields brought nothing. (A poller that yielded
// throughout used a whole core; on a busy 2-core machine two such pollers
// kept every other process off both cores for 25 s.)
std::string UrgentWaitLeavesTheCore(Communicator* c) {
  if (c->rank() > 1) return "";
  int32_t value = 0;
  if (c->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    value = 7;
    return Expect(c->Send(&value, sizeof(value), 0, 9), "late send");
  }
  UrgentScope urgent(c);
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = ProcessCpuSeconds();
  Status s = c->Recv(&value, sizeof(value), 1, 9);
  const double cpu = ProcessCpuSeconds() - cpu_start;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!s.ok()) return s.message();
  if (value != 7) return StrCat("received ", value, " instead of 7");
  if (cpu > 0.5 * wall) {
    return StrCat("rank 0 used ", cpu, " s of CPU in an urgent wait of ", wall,
                  " s: its poller kept the core");
  }
  return "";
}

// A Recv nobody answers times out naming the peer, and leaves the
// communicator usable.
std::string RecvTimeout(Communicator* main_comm) {
  MpiOptions options;
  options.timeout = std::chrono::milliseconds(200);
  MpiCommunicator c(options);
  if (c.size() < 2) return "";
  std::string result;
  if (c.rank() == 1) {
    int v = 0;
    const auto start = std::chrono::steady_clock::now();
    Status s = c.Recv(&v, 4, 0, 3);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (s.ok()) {
      result = "a Recv nobody sent to succeeded";
    } else if (!Contains(s.message(), "timed out") ||
               !Contains(s.message(), "waiting for rank 0")) {
      result = StrCat("unclear message: ", s.message());
    } else if (waited < 0.15 || waited > 5) {
      result = StrCat("gave up after ", waited, " s, not about 0.2 s");
    }
  }
  std::string e = Expect(main_comm->Barrier(), "barrier");
  if (!e.empty()) return e;
  int v = 42;
  if (c.rank() == 0) e = Expect(c.Send(&v, 4, 1, 4), "send after timeout");
  if (c.rank() == 1) {
    v = 0;
    e = Expect(c.Recv(&v, 4, 0, 4), "recv after timeout");
    if (e.empty() && v != 42) e = StrCat("got ", v, " after timeout");
  }
  if (!e.empty()) return e;
  return result;
}

// A windowed receive (Note [Sliding windows]) of three messages of which
// rank 0 sends one: done(1) is called, the run times out after about the
// deadline naming rank 0, and the communicator stays usable.
std::string WindowedRecvTimeout(Communicator* main_comm) {
  MpiOptions options;
  options.timeout = std::chrono::milliseconds(200);
  MpiCommunicator c(options);
  if (c.size() < 2) return "";
  std::string result;
  int first = 7;
  if (c.rank() == 0) result = Expect(c.Send(&first, 4, 1, 5), "send");
  if (c.rank() == 1) {
    int v[3] = {0, 0, 0};
    std::vector<size_t> done;
    const auto start = std::chrono::steady_clock::now();
    Status s =
        c.RecvWindowed({{&v[0], 4, 0, 5}, {&v[1], 4, 0, 6}, {&v[2], 4, 0, 7}},
                       8, [&](size_t k) {
                         done.push_back(k);
                         return Status::OK();
                       });
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (s.ok()) {
      result = "a windowed receive of messages nobody sent succeeded";
    } else if (!Contains(s.message(), "Recv of 4 bytes from rank 0 tag 6") ||
               !Contains(s.message(), "timed out") ||
               !Contains(s.message(), "waiting for rank 0")) {
      result = StrCat("unclear message: ", s.message());
    } else if (done != std::vector<size_t>{1} || v[0] != 7) {
      result = StrCat("done(k) called ", done.size(), " times, message ", v[0]);
    } else if (waited < 0.15 || waited > 5) {
      result = StrCat("gave up after ", waited, " s, not about 0.2 s");
    }
  }
  std::string e = Expect(main_comm->Barrier(), "barrier");
  if (!e.empty()) return e;
  int v = 42;
  if (c.rank() == 0) e = Expect(c.Send(&v, 4, 1, 8), "send after timeout");
  if (c.rank() == 1) {
    v = 0;
    e = Expect(c.Recv(&v, 4, 0, 8), "recv after timeout");
    if (e.empty() && v != 42) e = StrCat("got ", v, " after timeout");
  }
  if (!e.empty()) return e;
  return result;
}

// A communicator made by Split numbers its ranks anew, but its messages
// name ranks as the job does (JobRank), and its waits end at the timeout
// given to Split. Ranks in reverse order: split rank 0 is the job's last.
std::string SplitNamesJobRanks(Communicator* c) {
  const int n = c->size();
  std::unique_ptr<Communicator> split =
      c->Split(0, n - 1 - c->rank(), std::chrono::milliseconds(300));
  if (split->rank() != n - 1 - c->rank()) {
    return StrCat("split rank ", split->rank(), ", expected ",
                  n - 1 - c->rank());
  }
  for (int r = 0; r < n; ++r) {
    if (split->JobRank(r) != n - 1 - r) {
      return StrCat("JobRank(", r, ") = ", split->JobRank(r), ", expected ",
                    n - 1 - r);
    }
  }
  if (split->timeout() != std::chrono::milliseconds(300)) {
    return "the split communicator did not take the timeout given to Split";
  }
  std::string result;
  if (n >= 2 && c->rank() == 0) {
    // Job rank 1 is split rank n - 2; nobody sends.
    int v = 0;
    Status s = split->Recv(&v, 4, n - 2, 5);
    if (s.ok()) {
      result = "a Recv nobody sent to succeeded";
    } else if (!Contains(s.message(), StrCat("rank 0: Recv of 4 bytes from "
                                             "rank 1 tag 5: timed out after "
                                             "0.3 s waiting for rank 1"))) {
      result = StrCat("message does not name the job's ranks: ",
                      s.message());
    }
  }
  std::string e = Expect(c->Barrier(), "barrier after the split's timeout");
  return e.empty() ? result : e;
}

// A collective that times out names the rank whose part never came (Note
// [Collectives from messages]), however many ranks there are.
std::string CollectiveTimeout(Communicator* main_comm) {
  MpiOptions options;
  options.timeout = std::chrono::milliseconds(200);
  MpiCommunicator c(options);
  const int n = c.size();
  std::string result;
  if (c.rank() != 0) {  // rank 0 joins only after the others gave up
    Status s = c.Barrier();
    const std::string want =
        "Barrier #1: timed out after 0.2 s waiting for rank 0's part";
    if (s.ok()) {
      result = "a Barrier without rank 0 succeeded";
    } else if (!Contains(s.message(), want)) {
      result = StrCat("unclear message: ", s.message());
    }
  }
  std::string e = Expect(main_comm->Barrier(), "barrier");
  if (!e.empty()) return e;
  // Rank 0's late barrier finds the others' parts (their receives were
  // withdrawn on timeout, their sends were eager).
  if (c.rank() == 0) e = Expect(c.Barrier(), "late barrier of rank 0");
  std::string f = Expect(main_comm->Barrier(), "barrier after");
  return !result.empty() ? result : !e.empty() ? e : f;
}

// An Allgather that times out names every rank whose part is missing, and
// only those (here the last two ranks, or the last of two).
std::string AllgatherTimeoutNamesTheMissing(Communicator* main_comm) {
  MpiOptions options;
  options.timeout = std::chrono::milliseconds(200);
  MpiCommunicator c(options);
  const int n = c.size();
  const int first_missing = n == 2 ? 1 : n - 2;
  std::string result;
  int mine = c.rank();
  std::vector<int> all(n, -1);
  if (c.rank() < first_missing) {
    Status s = c.Allgather(&mine, sizeof(mine), all.data());
    const std::string want =
        n == 2 ? "Allgather #1 of 4 bytes per rank: timed out after 0.2 s "
                 "waiting for rank 1's part"
               : StrCat("Allgather #1 of 4 bytes per rank: timed out after "
                        "0.2 s waiting for rank ", n - 2, "'s part and rank ",
                        n - 1, "'s part");
    if (s.ok()) {
      result = "an Allgather without the last ranks succeeded";
    } else if (!Contains(s.message(), want)) {
      result = StrCat("unclear message: ", s.message(), " (want: ", want, ")");
    }
  }
  std::string e = Expect(main_comm->Barrier(), "barrier");
  if (!e.empty()) return e;
  // The late ranks find every part: the others sent theirs before giving up.
  if (c.rank() >= first_missing) {
    e = Expect(c.Allgather(&mine, sizeof(mine), all.data()),
               "late Allgather");
    for (int r = 0; r < n && e.empty(); ++r) {
      if (all[r] != r) e = StrCat("late Allgather: part ", r, " is ", all[r]);
    }
  }
  std::string f = Expect(main_comm->Barrier(), "barrier after");
  return !result.empty() ? result : !e.empty() ? e : f;
}

// A Broadcast whose root never joins: the root's children name the root,
// the ranks below them the rank that was to pass the data on (with 4
// ranks, root 0: ranks 1 and 2 wait for rank 0, rank 3 for rank 2).
std::string BroadcastTimeoutNamesTheParent(Communicator* main_comm) {
  MpiOptions options;
  options.timeout = std::chrono::milliseconds(200);
  MpiCommunicator c(options);
  std::string result;
  double value = c.rank() == 0 ? 2.5 : -1.0;
  if (c.rank() != 0) {
    Status s = c.Broadcast(&value, sizeof(value), 0);
    // The rank's parent in the binomial tree: without its lowest set bit.
    const int parent = c.rank() & (c.rank() - 1);
    const std::string want =
        parent == 0
            ? "Broadcast #1 of 8 bytes from root 0: timed out after 0.2 s "
              "waiting for rank 0 (the root)"
            : StrCat(
                  "Broadcast #1 of 8 bytes from root 0: timed out after "
                  "0.2 s waiting for rank ",
                  parent, " to pass on the root's data");
    if (s.ok()) {
      result = "a Broadcast without its root succeeded";
    } else if (!Contains(s.message(), want)) {
      result = StrCat("unclear message: ", s.message(), " (want: ", want, ")");
    }
  }
  std::string e = Expect(main_comm->Barrier(), "barrier");
  if (!e.empty()) return e;
  // The late root's sends are eager and complete.
  if (c.rank() == 0) {
    e = Expect(c.Broadcast(&value, sizeof(value), 0), "late root");
  }
  std::string f = Expect(main_comm->Barrier(), "barrier after");
  return !result.empty() ? result : !e.empty() ? e : f;
}

// A message between a rank and itself that times out names what the rank's
// other threads still wait on (Note [Messages to oneself]): rank 0 waits
// for a message from itself that no thread sends, while another of its
// threads waits, from later on, for one from the last rank, which never
// sends. The first timeout names the last rank; the second, a message to
// another rank, carries no such note.
std::string OwnMessageTimeoutNamesWhatItsThreadsAwait(Communicator* main_comm) {
  MpiOptions options;
  options.timeout = std::chrono::milliseconds(400);
  MpiCommunicator c(options);
  const int last = c.size() - 1;
  std::string result;
  if (c.rank() == 0 && last > 0) {
    Status other;
    std::thread waiter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      int v = 0;
      other = c.RecvAll({{&v, sizeof(v), last, 11}});
    });
    int v = 0;
    Status own = c.Recv(&v, sizeof(v), 0, 12);
    waiter.join();
    const std::string want = StrCat(
        "Recv of 4 bytes from rank 0 tag 12: timed out after 0.4 s "
        "waiting for rank 0; a message between this rank and itself, "
        "late because this rank's other threads are held up: they "
        "still wait on Recv of 4 bytes from rank ",
        last, " tag 11");
    if (own.ok() || other.ok()) {
      result = "a Recv nobody sent to succeeded";
    } else if (!Contains(own.message(), want)) {
      result =
          StrCat("unclear message: ", own.message(), " (want: ", want, ")");
    } else if (!Contains(other.message(), StrCat("waiting for rank ", last)) ||
               Contains(other.message(), "itself")) {
      result = StrCat("unclear message: ", other.message());
    }
  }
  std::string e = Expect(main_comm->Barrier(), "barrier");
  return e.empty() ? result : e;
}

}  // namespace selftest
}  // namespace dist
}  // namespace poseidon
