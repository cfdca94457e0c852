// MpiCommunicator: non-blocking MPI calls on a private communicator, polled
// with a deadline. See mpi_communicator.hpp and Note [MPI timeouts].
#include "poseidon/distributed/mpi_communicator.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <vector>

#include "poseidon/distributed/mpi_check.hpp"
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // MPIX_CUDA_AWARE_SUPPORT (Open MPI)
#endif
#include "poseidon/distributed/sync_policy.hpp"  // FormatBytes
#include "poseidon/util/wait_notes.hpp"

namespace poseidon {
namespace dist {

Status MpiErrorStatus(int code, int rank, const std::string& what,
                      const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) {
    std::snprintf(text, sizeof(text), "MPI error code %d", code);
  }
  const char* base = std::strrchr(file, '/');
  return Status::Failure(StrCat("rank ", rank, ": ", what, ": ", call,
                                " failed: ", text, " (", base ? base + 1 : file,
                                ":", line, ")"));
}

namespace {

// Note [Parking the pollers before MPI_Abort]
// Open MPI's error reporting (orte_show_help and its flex lexer) is not
// safe from two threads at once. When a peer aborts, the TCP transport of
// a rank's progress thread may report the reset connection through it at
// the moment this rank's own MPI_Abort prints "MPI_ABORT was invoked": a
// CI run of the fault matrix (a rank stopped for good, 2 x 2 ranks) had a
// rank crash with SIGSEGV in opal_show_help_yylex under
// mca_btl_tcp_frag_recv, on the progress thread, beside the main thread's
// abort. So Abort first takes every live communicator's progress mutex,
// which its progress thread holds whenever it calls MPI, and keeps them:
// the pollers are parked outside MPI while MPI_Abort runs. (A caller's
// first try of an operation is made without that mutex; that window is
// one call long.) Taking a mutex gives up after a bounded wait, so a
// thread that aborts while holding one cannot deadlock.
std::mutex g_pollers_mu;
std::vector<std::mutex*>& LivePollers() {  // GUARDED_BY(g_pollers_mu)
  static std::vector<std::mutex*> pollers;
  return pollers;
}

void ParkPollers() {
  std::lock_guard<std::mutex> lock(g_pollers_mu);
  for (std::mutex* mu : LivePollers()) {
    for (int tries = 0; tries < 2000 && !mu->try_lock(); ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Held (or given up on) until the process ends.
  }
}

void FinalizeMpiAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

const char* ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown thread level";
}

// Initialises MPI for concurrent use from several threads, once per process.
void EnsureMpiInitialized() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  int finalized = 0;
  MPI_Finalized(&finalized);
  POSEIDON_REQUIRE(!finalized, DistributedError,
                   "MpiCommunicator: MPI was already finalised in this "
                   "process; it cannot be initialised again");
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    const int rc =
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    POSEIDON_REQUIRE(rc == MPI_SUCCESS, DistributedError,
                     "MpiCommunicator: MPI_Init_thread failed with code ", rc);
    std::atexit(FinalizeMpiAtExit);
  } else {
    MPI_Query_thread(&provided);
  }
  POSEIDON_REQUIRE(provided >= MPI_THREAD_MULTIPLE, DistributedError,
                   "MpiCommunicator: the MPI library provides ",
                   ThreadLevelName(provided),
                   " but Poseidon's communication threads need "
                   "MPI_THREAD_MULTIPLE (rebuild Open MPI with thread "
                   "support, or initialise MPI with MPI_THREAD_MULTIPLE)");
}

constexpr size_t kMaxMessageBytes = INT_MAX;

// Starts an MPI operation on a message of `bytes` at `a` followed by
// `bytes2` at `b` (RecvOp / SendOp with a second part): `start` gets
// (MPI_BOTTOM, 1, a datatype of the two absolute ranges), which is freed
// once the operation has started (MPI keeps what a pending operation
// needs). Returns MPI's error code.
template <typename Start>
int StartTwoParts(const void* a, size_t bytes, const void* b, size_t bytes2,
                  Start start) {
  MPI_Aint where[2];
  int rc = MPI_Get_address(a, &where[0]);
  if (rc == MPI_SUCCESS) rc = MPI_Get_address(b, &where[1]);
  const int lengths[2] = {static_cast<int>(bytes), static_cast<int>(bytes2)};
  MPI_Datatype type = MPI_DATATYPE_NULL;
  if (rc == MPI_SUCCESS) {
    rc = MPI_Type_create_hindexed(2, lengths, where, MPI_BYTE, &type);
  }
  if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&type);
  if (rc == MPI_SUCCESS) rc = start(MPI_BOTTOM, 1, type);
  if (type != MPI_DATATYPE_NULL) MPI_Type_free(&type);
  return rc;
}

}  // namespace

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

// The thread awaiting one or more MpiOps: the progress thread wakes it when
// the last of them completes, and no other thread (a rank has half a dozen
// waiting at times).
struct MpiWaiter {
  int pending = 0;  // ops not yet done, GUARDED_BY(Impl::mu)
  std::condition_variable finished;
};

// One operation awaited through the progress thread. The caller fills it
// and owns it; between Await's hand-over and `done` (or the caller's
// withdrawal on timeout) only the progress thread touches it, under mu.
struct MpiOp {
  std::string what;  // for messages: "Recv of 8 bytes from rank 1 tag 3"
  MPI_Request request = MPI_REQUEST_NULL;
  // An unmatched receive: probe (src, tag); exactly `bytes` go to buf.
  bool probe = false;
  bool on_coll_comm = false;  // probe coll_comm, not comm
  int src = 0;
  int tag = 0;
  void* buf = nullptr;
  size_t bytes = 0;
  // A second part: the message's last bytes2 bytes go here (RecvOp).
  void* buf2 = nullptr;
  size_t bytes2 = 0;
  // What a timeout of this op waits for ("rank 3's part"), when the op is
  // one of several of a gather and the awaited peers are listed instead of
  // Await's `waiting_for`.
  std::string waiting_for;
  bool done = false;
  Status result;
  MpiWaiter* waiter = nullptr;

  // Makes this op a receive of exactly `n` bytes from `from` with tag `t`
  // into `into`, started as a probe (Note [Progress thread]); on the
  // collectives' communicator if `collective`.
  void Receive(int from, int t, void* into, size_t n, bool collective) {
    probe = true;
    on_coll_comm = collective;
    src = from;
    tag = t;
    buf = into;
    bytes = n;
  }
};

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  // A duplicate of comm for the collectives built from messages (Note
  // [Collectives from messages]): their tags never meet the callers'.
  MPI_Comm coll_comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  // This communicator's ranks in MPI_COMM_WORLD, and its size: every
  // message names ranks by these (Communicator::JobRank).
  std::vector<int> job_ranks;
  int job_size = 1;
  MpiOptions options;
  std::mutex broken_mu;
  std::string broken;           // guarded by broken_mu; see Note [MPI timeouts]
  uint64_t collective_seq = 0;  // touched by the collective thread only
  bool one_host = false;        // every rank on this host (MPI's view)
  int host_key = 0;             // the lowest rank on this host

  // See Note [Progress thread] and Note [Polling on a shared core].
  static constexpr int kFirstSleepMicros = 100;
  static constexpr int kMaxSleepMicros = 1000;
  // How long an urgent poller yields without any operation completing
  // before it naps (kFirstNapMicros, doubling up to kMaxSleepMicros).
  static constexpr int kUrgentSpinMicros = 1000;
  static constexpr int kFirstNapMicros = 50;
  // The *step-th pause of a backoff from first_us, doubling up to
  // kMaxSleepMicros; advances *step (saturating).
  static std::chrono::microseconds NextBackoff(int first_us, int* step) {
    const int k = *step;
    if (*step < 10) ++*step;
    return std::chrono::microseconds(std::min(kMaxSleepMicros, first_us << k));
  }
  std::mutex mu;
  std::condition_variable work;  // to the progress thread: ops, urgency, stop
  std::vector<MpiOp*> ops;       // GUARDED_BY(mu): outstanding
  int urgent = 0;                // GUARDED_BY(mu): training threads waiting
  bool stopping = false;         // GUARDED_BY(mu)
  // The progress thread: exists because MPI has no sleeping wait (Note
  // [Progress thread]); touches only `ops` and the MPI requests in them.
  std::thread progress;

  int Job(int r) const {
    return r >= 0 && r < static_cast<int>(job_ranks.size()) ? job_ranks[r] : r;
  }
  int self() const { return Job(rank); }

  template <typename... Args>
  Status Fail(const std::string& what, Args&&... args) const {
    return Status::Failure(
        StrCat("rank ", self(), ": ", what, std::forward<Args>(args)...));
  }

  Status CheckUsable(const std::string& what) {
    std::lock_guard<std::mutex> lock(broken_mu);
    if (broken.empty()) return Status::OK();
    return Fail(what, ": communicator unusable after an earlier timeout (",
                broken, ")");
  }

  Status CheckPeer(const std::string& what, int peer, int tag, size_t bytes) {
    if (peer < 0 || peer >= size) {
      return Fail(what, ": no such rank (communicator of ", size,
                  " ranks)");
    }
    if (tag < 0 || tag > kMaxTag) {
      return Fail(what, ": tag is outside 0..", kMaxTag);
    }
    if (bytes > kMaxMessageBytes) {
      return Fail(what, ": more than ", kMaxMessageBytes,
                  " bytes in one message; split it");
    }
    return CheckUsable(what);
  }

  // Hands `ops` to the progress thread and sleeps until all complete or
  // the deadline passes; returns the first failure in `ops` order. On
  // timeout a pending request stays with MPI and the communicator becomes
  // unusable (Note [MPI timeouts]). An empty `waiting_for` lists the
  // pending ops' own waiting_for instead.
  Status Await(std::initializer_list<MpiOp*> list,
               const std::string& waiting_for) {
    return Await(std::vector<MpiOp*>(list), waiting_for);
  }
  Status Await(const std::vector<MpiOp*>& list,
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
    // StoppedNote may sleep: not under mu (the progress thread needs it).
    lock.unlock();
    const std::string note = StoppedNote(start, options.timeout);
    lock.lock();
    if (finished()) return first_result();
    Status s;
    bool leaves_request = false;
    const std::string who = WaitingFor(list, waiting_for);
    for (MpiOp* op : list) {
      if (op->done) continue;
      ops.erase(std::find(ops.begin(), ops.end(), op));
      if (s.ok()) {
        s = Fail(op->what, ": timed out after ", FormatSeconds(options.timeout),
                 " waiting for ", who, note);
      }
      leaves_request = leaves_request || !op->probe;
    }
    return leaves_request ? MarkBroken(s) : s;
  }

  // `waiting_for`, or when it is empty, the waiting_for of the ops of
  // `list` not done ("rank 1's part and rank 3's part"; at most three, then
  // how many more; each once). Under mu once the ops are handed over.
  static std::string WaitingFor(const std::vector<MpiOp*>& list,
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

  // One poll of `op`, by its caller before the hand-over or by the progress
  // thread under mu; *complete tells whether it has finished.
  Status Poll(MpiOp* op, bool* complete) {
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

  void ProgressLoop() {
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
          if (--op->waiter->pending == 0) op->waiter->finished.notify_one();
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

  // See Note [Collectives from messages]: every rank sends `bytes` bytes
  // from `send` to every other rank and receives theirs into recv + r *
  // bytes (its own part copied to recv + rank * bytes); with bytes 0 (and
  // null buffers) a barrier.
  Status GatherFromMessages(const std::string& what, uint64_t seq,
                            const void* send, size_t bytes, char* recv) {
    Status s = CheckUsable(what);
    if (!s.ok()) return s;
    if (bytes > 0) {
      std::memmove(recv + static_cast<size_t>(rank) * bytes, send, bytes);
    }
    if (size == 1) return Status::OK();
    const int tag =
        static_cast<int>(seq % (static_cast<uint64_t>(kMaxTag) + 1));
    std::vector<MpiOp> in(size - 1), out(size - 1);
    std::vector<MpiOp*> list;
    for (int peer = 0, k = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      MpiOp& op = in[k++];
      op.what = what;
      op.Receive(peer, tag,
                 bytes > 0 ? recv + static_cast<size_t>(peer) * bytes : nullptr,
                 bytes, /*collective=*/true);
      op.waiting_for = StrCat("rank ", Job(peer), "'s part");
      list.push_back(&op);
    }
    for (int k = 1; k < size; ++k) {
      const int peer = (rank + k) % size;
      MpiOp& op = out[k - 1];
      op.what = what;
      op.waiting_for = StrCat("rank ", Job(peer), " to take this rank's part");
      s = StartCollectiveSend(&op, send, bytes, peer, tag);
      if (!s.ok()) return s;
      list.push_back(&op);
    }
    return Await(list, "");
  }

  // Starts op as a send of `bytes` at buf to `dest` on the collectives'
  // communicator. If MPI refuses, the communicator is marked unusable: the
  // sends already started stay with MPI (Note [MPI timeouts]).
  Status StartCollectiveSend(MpiOp* op, const void* buf, size_t bytes, int dest,
                             int tag) {
    const int rc = MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, dest, tag,
                             coll_comm, &op->request);
    if (rc == MPI_SUCCESS) return Status::OK();
    return MarkBroken(
        MpiErrorStatus(rc, self(), op->what, "MPI_Isend", __FILE__, __LINE__));
  }

  // Records s as why this communicator is unusable (the first reason
  // stays); returns s.
  Status MarkBroken(Status s) {
    std::lock_guard<std::mutex> broken_lock(broken_mu);
    if (broken.empty()) broken = s.message();
    return s;
  }

  // See Note [Collectives from messages]: `bytes` at data from `root` to
  // every rank down a binomial tree, in messages of at most
  // kMaxMessageBytes; each rank forwards a piece to its children as soon as
  // it has it.
  Status BroadcastFromMessages(const std::string& what, uint64_t seq,
                               char* data, size_t bytes, int root) {
    if (size == 1 || bytes == 0) return Status::OK();
    const int tag =
        static_cast<int>(seq % (static_cast<uint64_t>(kMaxTag) + 1));
    // Ranks relative to the root: r's parent is r without its lowest set
    // bit; its children are r + m for the powers of two m below that bit.
    const int relative = (rank - root + size) % size;
    int parent = -1;
    int low = 1;
    for (; low < size; low <<= 1) {
      if (relative & low) {
        parent = (relative - low + root) % size;
        break;
      }
    }
    std::vector<int> children;
    for (int m = low >> 1; m > 0; m >>= 1) {
      if (relative + m < size) children.push_back((relative + m + root) % size);
    }
    std::deque<MpiOp> sends;  // stable addresses for the progress thread
    std::vector<MpiOp*> pending;
    for (size_t begin = 0; begin < bytes; begin += kMaxMessageBytes) {
      const size_t len = std::min(kMaxMessageBytes, bytes - begin);
      if (parent >= 0) {
        MpiOp in;
        in.what = what;
        in.Receive(parent, tag, data + begin, len, /*collective=*/true);
        in.waiting_for =
            parent == root
                ? StrCat("rank ", Job(root), " (the root)")
                : StrCat("rank ", Job(parent), " to pass on the root's data");
        Status s = Await({&in}, "");
        // Sends of earlier pieces still read the caller's buffer.
        if (!s.ok()) return pending.empty() ? s : MarkBroken(s);
      }
      for (int child : children) {
        sends.emplace_back();
        MpiOp& op = sends.back();
        op.what = what;
        op.waiting_for = StrCat("rank ", Job(child), " to take the data");
        Status s = StartCollectiveSend(&op, data + begin, len, child, tag);
        if (!s.ok()) return s;
        pending.push_back(&op);
      }
    }
    return Await(pending, "");
  }
};

MpiCommunicator::MpiCommunicator(MpiOptions options)
    : impl_(std::make_unique<Impl>()) {
  EnsureMpiInitialized();
  impl_->options = options;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm);
  POSEIDON_REQUIRE(rc == MPI_SUCCESS, DistributedError,
                   "MpiCommunicator: MPI_Comm_dup failed with code ", rc);
  Start();
}

MpiCommunicator::MpiCommunicator(void* comm, MpiOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->comm = *static_cast<MPI_Comm*>(comm);
  Start();
}

std::unique_ptr<Communicator> MpiCommunicator::Split(
    int color, int key, std::chrono::milliseconds timeout) {
  MPI_Comm split = MPI_COMM_NULL;
  const int rc = MPI_Comm_split(impl_->comm, color, key, &split);
  POSEIDON_REQUIRE(rc == MPI_SUCCESS, DistributedError, "rank ",
                   impl_->self(), ": MPI_Comm_split failed with code ", rc);
  MpiOptions options = impl_->options;
  options.timeout = timeout;
  return std::unique_ptr<Communicator>(new MpiCommunicator(&split, options));
}

int MpiCommunicator::JobRank(int r) const { return impl_->Job(r); }

int MpiCommunicator::HostKey() const { return impl_->host_key; }

void MpiCommunicator::Start() {
  int rc = MPI_SUCCESS;
  MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN);
  rc = MPI_Comm_dup(impl_->comm, &impl_->coll_comm);
  POSEIDON_REQUIRE(rc == MPI_SUCCESS, DistributedError,
                   "MpiCommunicator: MPI_Comm_dup failed with code ", rc);
  MPI_Comm_set_errhandler(impl_->coll_comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(impl_->comm, &impl_->rank);
  MPI_Comm_size(impl_->comm, &impl_->size);
  // The job's numbering of this communicator's ranks, for messages.
  MPI_Comm_size(MPI_COMM_WORLD, &impl_->job_size);
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  std::vector<int> mine(impl_->size);
  for (int r = 0; r < impl_->size; ++r) mine[r] = r;
  impl_->job_ranks.assign(impl_->size, MPI_UNDEFINED);
  if (MPI_Comm_group(impl_->comm, &group) == MPI_SUCCESS &&
      MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS) {
    MPI_Group_translate_ranks(group, impl_->size, mine.data(), world,
                              impl_->job_ranks.data());
  }
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
  for (int r = 0; r < impl_->size; ++r) {
    if (impl_->job_ranks[r] == MPI_UNDEFINED) impl_->job_ranks[r] = r;
  }
  // The ranks that share this host's memory, as mpirun placed them.
  MPI_Comm local = MPI_COMM_NULL;
  rc = MPI_Comm_split_type(impl_->comm, MPI_COMM_TYPE_SHARED, impl_->rank,
                           MPI_INFO_NULL, &local);
  POSEIDON_REQUIRE(rc == MPI_SUCCESS, DistributedError,
                   "MpiCommunicator: MPI_Comm_split_type failed with code ",
                   rc);
  int local_size = 0;
  MPI_Comm_size(local, &local_size);
  MPI_Allreduce(&impl_->rank, &impl_->host_key, 1, MPI_INT, MPI_MIN, local);
  MPI_Comm_free(&local);
  impl_->one_host = local_size == impl_->size;
  Impl* impl = impl_.get();
  impl_->progress = std::thread([impl] {
    pthread_setname_np(pthread_self(), "psd progress");
    impl->ProgressLoop();
  });
  std::lock_guard<std::mutex> lock(g_pollers_mu);
  LivePollers().push_back(&impl_->mu);
}

MpiCommunicator::~MpiCommunicator() {
  {
    std::lock_guard<std::mutex> lock(g_pollers_mu);
    std::vector<std::mutex*>& pollers = LivePollers();
    pollers.erase(std::remove(pollers.begin(), pollers.end(), &impl_->mu),
                  pollers.end());
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->work.notify_one();
  impl_->progress.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && impl_->coll_comm != MPI_COMM_NULL) {
    MPI_Comm_free(&impl_->coll_comm);
  }
  if (!finalized && impl_->comm != MPI_COMM_NULL) {
    MPI_Comm_free(&impl_->comm);
  }
}

int MpiCommunicator::rank() const { return impl_->rank; }
int MpiCommunicator::size() const { return impl_->size; }
std::chrono::milliseconds MpiCommunicator::timeout() const {
  return impl_->options.timeout;
}

Status MpiCommunicator::Send(const void* buf, size_t bytes, int dest, int tag) {
  const std::string what = StrCat("Send of ", bytes, " bytes to rank ",
                                  impl_->Job(dest), " tag ", tag);
  Status s = impl_->CheckPeer(what, dest, tag, bytes);
  if (!s.ok()) return s;
  MpiOp op;
  op.what = what;
  POSEIDON_MPI_CHECK(impl_->self(), what,
                     MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, dest,
                               tag, impl_->comm, &op.request));
  return impl_->Await({&op}, StrCat("rank ", impl_->Job(dest), " to receive"));
}

Status MpiCommunicator::Recv(void* buf, size_t bytes, int src, int tag) {
  const std::string what = StrCat("Recv of ", bytes, " bytes from rank ",
                                  impl_->Job(src), " tag ", tag);
  Status s = impl_->CheckPeer(what, src, tag, bytes);
  if (!s.ok()) return s;
  // See Note [Progress thread] for why a receive starts as a probe.
  MpiOp op;
  op.what = what;
  op.Receive(src, tag, buf, bytes, /*collective=*/false);
  return impl_->Await({&op}, StrCat("rank ", impl_->Job(src)));
}

Status MpiCommunicator::SendRecv(const void* send, size_t send_bytes,
                                 int dest, void* recv, size_t recv_bytes,
                                 int src, int tag) {
  MpiOp out;
  out.what = StrCat("Send of ", send_bytes, " bytes to rank ",
                    impl_->Job(dest), " tag ", tag);
  MpiOp in;
  in.what = StrCat("Recv of ", recv_bytes, " bytes from rank ",
                   impl_->Job(src), " tag ", tag);
  Status s = impl_->CheckPeer(out.what, dest, tag, send_bytes);
  if (s.ok()) s = impl_->CheckPeer(in.what, src, tag, recv_bytes);
  if (!s.ok()) return s;
  in.Receive(src, tag, recv, recv_bytes, /*collective=*/false);
  POSEIDON_MPI_CHECK(impl_->self(), out.what,
                     MPI_Isend(send, static_cast<int>(send_bytes), MPI_BYTE,
                               dest, tag, impl_->comm, &out.request));
  return impl_->Await({&out, &in}, StrCat("rank ", impl_->Job(dest),
                                          " and rank ", impl_->Job(src)));
}

Status MpiCommunicator::RecvAll(const std::vector<RecvOp>& ops) {
  // See Note [Progress thread] for why each receive starts as a probe: none
  // is matched before the progress thread (or Await's first poll) finds
  // its message, so a timeout leaves nothing with MPI.
  std::vector<MpiOp> in(ops.size());
  std::vector<MpiOp*> list;
  for (size_t i = 0; i < ops.size(); ++i) {
    const RecvOp& r = ops[i];
    MpiOp& op = in[i];
    op.what = StrCat("Recv of ", r.bytes + r.bytes2, " bytes from rank ",
                     impl_->Job(r.src), " tag ", r.tag);
    Status s = impl_->CheckPeer(op.what, r.src, r.tag, r.bytes + r.bytes2);
    if (!s.ok()) return s;
    op.Receive(r.src, r.tag, r.buf, r.bytes, /*collective=*/false);
    op.buf2 = r.buf2;
    op.bytes2 = r.bytes2;
    op.waiting_for = StrCat("rank ", impl_->Job(r.src));
    list.push_back(&op);
  }
  return impl_->Await(list, "");
}

Status MpiCommunicator::SendAll(const std::vector<SendOp>& ops) {
  // Every op checked before any starts, so a bad one leaves nothing with MPI.
  std::vector<MpiOp> out(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const SendOp& w = ops[i];
    out[i].what = StrCat("Send of ", w.bytes + w.bytes2, " bytes to rank ",
                         impl_->Job(w.dest), " tag ", w.tag);
    out[i].waiting_for = StrCat("rank ", impl_->Job(w.dest), " to receive");
    Status s =
        impl_->CheckPeer(out[i].what, w.dest, w.tag, w.bytes + w.bytes2);
    if (!s.ok()) return s;
  }
  std::vector<MpiOp*> list;
  for (size_t i = 0; i < ops.size(); ++i) {
    const SendOp& w = ops[i];
    MpiOp& op = out[i];
    auto start = [&](const void* at, int n, MPI_Datatype type) {
      return MPI_Isend(at, n, type, w.dest, w.tag, impl_->comm, &op.request);
    };
    const int rc =
        w.bytes2 == 0
            ? start(w.buf, static_cast<int>(w.bytes), MPI_BYTE)
            : StartTwoParts(w.buf, w.bytes, w.buf2, w.bytes2, start);
    if (rc != MPI_SUCCESS) {
      Status s = MpiErrorStatus(rc, impl_->self(), op.what, "MPI_Isend",
                                __FILE__, __LINE__);
      // The sends already started still read their buffers (Note [MPI
      // timeouts]).
      return list.empty() ? s : impl_->MarkBroken(s);
    }
    list.push_back(&op);
  }
  return impl_->Await(list, "");
}

Status MpiCommunicator::AllreduceSum(float* buf, size_t count) {
  return AllreduceSumByAllgather(this, buf, count);
}

Status MpiCommunicator::AllreduceSum(double* buf, size_t count) {
  return AllreduceSumByAllgather(this, buf, count);
}

Status MpiCommunicator::Broadcast(void* buf, size_t bytes, int root) {
  const uint64_t seq = ++impl_->collective_seq;
  const std::string what =
      StrCat("Broadcast #", seq, " of ", bytes, " bytes from root ",
             impl_->Job(root));
  if (root < 0 || root >= impl_->size) {
    return impl_->Fail(what, ": no such rank (job of ", impl_->size, " ranks)");
  }
  Status s = impl_->CheckUsable(what);
  if (!s.ok()) return s;
  return impl_->BroadcastFromMessages(what, seq, static_cast<char*>(buf), bytes,
                                      root);
}

// Note [Collectives from messages]
// Allgather (and so AllreduceSum) and Barrier are point-to-point messages,
// every rank to every other, on a duplicate of the communicator with the
// collective's sequence number as tag, rather than MPI_Iallgather and
// MPI_Ibarrier; Broadcast is messages down a binomial tree rooted at the
// root (log2(n) rounds, each rank receiving once and sending to at most
// log2(n) children, as MPI's own small-message broadcast does), rather
// than MPI_Ibcast, and a rank that times out names the rank it waited for
// ("rank 2 to pass on the root's data"). Two reasons. A collective that times
// out can then name the ranks whose part never came ("waiting for rank 3's
// part"); MPI's request only says that the collective has not finished, which
// in a job of more than two ranks named nobody ("waiting for every rank to
// join"), as the signal agreement's allgather did after a link flap. And a
// receive that has not matched is withdrawn on timeout (Note [Progress
// thread]), so MPI does not write into a gather buffer the caller freed after
// the error (a receive already matched and still in flight is not withdrawn:
// that one marks the communicator unusable, Note [MPI timeouts]). The
// bytes each rank sends and receives are those of MPI's own allgather
// ((n - 1) parts each way), but the messages go out at once instead of in
// log(n) or n - 1 rounds; tested at 2 to 4 ranks and in the 2 x 2 fault
// matrix, not measured against MPI_Iallgather at large n.
Status MpiCommunicator::Allgather(const void* send, size_t bytes, void* recv) {
  const uint64_t seq = ++impl_->collective_seq;
  const std::string what =
      StrCat("Allgather #", seq, " of ", bytes, " bytes per rank");
  if (bytes > kMaxMessageBytes) {
    return impl_->Fail(what, ": more than ", kMaxMessageBytes,
                       " bytes per rank; split it");
  }
  return impl_->GatherFromMessages(what, seq, send, bytes,
                                   static_cast<char*>(recv));
}

Status MpiCommunicator::Barrier() {
  const uint64_t seq = ++impl_->collective_seq;
  return impl_->GatherFromMessages(StrCat("Barrier #", seq), seq, nullptr, 0,
                                   nullptr);
}

bool MpiCommunicator::OnOneHost() const { return impl_->one_host; }

// Rank 0 creates a POSIX shared-memory file with every page reserved
// (posix_fallocate: a full /dev/shm is an error now, not a SIGBUS later),
// the others open it by the broadcast name, all map it, and once every rank
// has, rank 0 removes the name: nothing is left behind however the job ends
// after that. Any failure on any rank makes every rank return nullptr.
std::unique_ptr<SharedMemory> MpiCommunicator::MapSharedMemory(
    size_t bytes_per_rank) {
  Impl& d = *impl_;
  if (!d.one_host || d.size < 2) return nullptr;
  const size_t stride = SharedMemory::Align(bytes_per_rank);
  const size_t total = stride * d.size;
  char name[64] = {0};
  int fd = -1;
  if (d.rank == 0) {
    // Unique in the process across communicators (a job's world and its
    // hosts' sub-communicators may both map memory).
    static std::atomic<unsigned long long> seq{0};
    std::snprintf(name, sizeof(name), "/poseidon-%d-%llu",
                  static_cast<int>(getpid()), ++seq);
    std::string error;
    struct statvfs fs;
    if (statvfs("/dev/shm", &fs) == 0 &&
        total > static_cast<double>(fs.f_bavail) * fs.f_frsize / 2) {
      error = StrCat("it would take more than half of the ",
                     FormatBytes(static_cast<double>(fs.f_bavail) *
                                 fs.f_frsize),
                     " free in /dev/shm");
    } else {
      fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0) {
        error = StrCat("shm_open: ", std::strerror(errno));
      } else {
        const int rc = posix_fallocate(fd, 0, static_cast<off_t>(total));
        if (rc != 0) error = StrCat("posix_fallocate: ", std::strerror(rc));
      }
    }
    if (!error.empty()) {
      LOG(WARNING) << "No shared memory for the " << d.size
                   << " ranks on this host (" << FormatBytes(total)
                   << "): " << error << "; exchanging messages instead";
      if (fd >= 0) {
        close(fd);
        shm_unlink(name);
        fd = -1;
      }
      name[0] = 0;
    }
  }
  Status s = Broadcast(name, sizeof(name), 0);
  if (!s.ok() || name[0] == 0) return nullptr;
  if (d.rank != 0) fd = shm_open(name, O_RDWR, 0);
  void* base = MAP_FAILED;
  if (fd >= 0) {
    base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  }
  int mapped = base != MAP_FAILED ? 1 : 0;
  if (!mapped) {
    LOG(WARNING) << "rank " << d.self() << ": mapping shared memory " << name
                 << ": " << std::strerror(errno);
  }
  std::vector<int> all(d.size, 0);
  s = Allgather(&mapped, sizeof(mapped), all.data());
  if (d.rank == 0) shm_unlink(name);
  const bool everyone =
      s.ok() && std::count(all.begin(), all.end(), 1) == d.size;
  if (!everyone) {
    if (mapped) munmap(base, total);
    return nullptr;
  }
  return std::make_unique<SharedMemory>(
      static_cast<char*>(base), stride, d.size, d.options.timeout,
      [base, total] { munmap(base, total); });
}

void MpiCommunicator::BeginUrgent() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    ++impl_->urgent;
  }
  impl_->work.notify_one();
}

void MpiCommunicator::EndUrgent() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  --impl_->urgent;
}

void MpiCommunicator::Abort(const std::string& why) {
  // One line per rank, whichever thread aborts first (the training thread's
  // error, a parameter-server shard's), in the job's numbering as mpirun's
  // messages; a second thread waits for the first to end the process.
  static std::atomic<bool> aborting{false};
  if (aborting.exchange(true)) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::fprintf(stderr, "Error: rank %d of %d: %s\n", impl_->self(),
               impl_->job_size, why.c_str());
  std::fflush(stderr);
  google::FlushLogFiles(google::GLOG_INFO);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    ParkPollers();  // Note [Parking the pollers before MPI_Abort]
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::abort();
}

bool MpiCudaAware(std::string* how) {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  const bool yes = MPIX_Query_cuda_support() == 1;
  *how = yes ? "yes (MPIX_Query_cuda_support)"
             : "no (this Open MPI has CUDA support built in, but it is off "
               "at run time)";
  return yes;
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
  *how = "no (this Open MPI was built without CUDA support)";
  return false;
#else
  *how = "unknown MPI: not assumed";
  return false;
#endif
}

}  // namespace dist
}  // namespace poseidon
