// MpiCommunicator's state (MpiCommunicator::Impl) and the operations its
// progress thread polls (MpiOp, MpiWaiter), shared by its four files:
// mpi_communicator.cpp (MPI start-up, the communicator's life, shared
// memory, urgency and abort), mpi_communicator_progress.cpp (awaiting
// operations: the progress thread, Note [Progress thread]),
// mpi_communicator_p2p.cpp (sends and receives) and
// mpi_communicator_collectives.cpp (allgather, barrier, broadcast and
// allreduce from messages, Note [Collectives from messages]). Private to
// them: not installed.
#ifndef POSEIDON_DISTRIBUTED_MPI_COMMUNICATOR_IMPL_HPP_
#define POSEIDON_DISTRIBUTED_MPI_COMMUNICATOR_IMPL_HPP_

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "poseidon/distributed/mpi_check.hpp"
#include "poseidon/distributed/mpi_communicator.hpp"

namespace poseidon {
namespace dist {

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

// The thread awaiting one or more MpiOps: the progress thread wakes it when
// the last of them completes, and no other thread (a rank has half a dozen
// waiting at times).
struct MpiWaiter {
  int pending = 0;      // ops not yet done, GUARDED_BY(Impl::mu)
  int completions = 0;  // ops done so far, GUARDED_BY(Impl::mu)
  // Woken at every completion, not only the last (Note [Sliding windows]).
  bool each = false;
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
  // The other rank of a send or receive (this communicator's numbering), -1
  // where none is recorded: Note [Messages to oneself].
  int peer = -1;
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
    peer = from;
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
  Status Await(const std::vector<MpiOp*>& list, const std::string& waiting_for);

  // The ops of a RecvAll / RecvWindowed as MpiOps in *in (sized like
  // ops), each a probe (Note [Progress thread]: none is matched before the
  // progress thread, or the first poll, finds its message, so a timeout
  // leaves nothing with MPI); the first bad op's failure.
  Status ReceiveOps(const std::vector<RecvOp>& ops, std::vector<MpiOp>* in);
  // The ops of a SendAll / SendWindowed as MpiOps in *out, not started;
  // every op checked before any starts, so a bad one leaves nothing with
  // MPI.
  Status SendOps(const std::vector<SendOp>& ops, std::vector<MpiOp>* out);
  // Starts `op`, the send `w` (in one part or two); MPI's failure if it
  // refuses.
  Status StartSend(const SendOp& w, MpiOp* op);

  // See Note [Sliding windows]: runs `batch` with at most `window_bytes`
  // of its ops' bytes in flight, each op started by `start` (a send's
  // MPI_Isend; a receive needs none, it starts as a probe) once the window
  // has room for it and no op in flight has its (peer, tag); `done(k)` as
  // Communicator::SendWindowed says.
  Status AwaitWindowed(std::vector<MpiOp>* batch, size_t window_bytes,
                       const std::function<Status(MpiOp*)>& start,
                       const std::function<Status(size_t)>& done);

  // Under *lock: `list`'s ops not done have outlived the deadline of a wait
  // begun at `start`. Unless `finished()` holds once the note on this
  // rank's own stops is written (with mu released meanwhile), withdraws
  // them from the progress thread and returns the timeout's failure, the
  // communicator made unusable if a request stays with MPI (Note [MPI
  // timeouts]); else returns OK and withdraws nothing.
  Status TimeOut(const std::vector<MpiOp*>& list,
                 const std::string& waiting_for,
                 std::chrono::steady_clock::time_point start,
                 std::unique_lock<std::mutex>* lock,
                 const std::function<bool()>& finished);

  // `waiting_for`, or when it is empty, the waiting_for of the ops of
  // `list` not done ("rank 1's part and rank 3's part"; at most three, then
  // how many more; each once). Under mu once the ops are handed over.
  static std::string WaitingFor(const std::vector<MpiOp*>& list,
                                const std::string& waiting_for);

  // For a timeout of `list` that includes a message between this rank and
  // itself: "; ..." naming this rank's oldest operations still pending
  // with other ranks, or "" (Note [Messages to oneself]). Under mu.
  std::string OwnWaitsNote(const std::vector<MpiOp*>& list) const;

  // One poll of `op`, by its caller before the hand-over or by the progress
  // thread under mu; *complete tells whether it has finished.
  Status Poll(MpiOp* op, bool* complete);

  // The progress thread's loop (Note [Progress thread]).
  void ProgressLoop();

  // See Note [Collectives from messages]: every rank sends `bytes` bytes
  // from `send` to every other rank and receives theirs into recv + r *
  // bytes (its own part copied to recv + rank * bytes); with bytes 0 (and
  // null buffers) a barrier.
  Status GatherFromMessages(const std::string& what, uint64_t seq,
                            const void* send, size_t bytes, char* recv);

  // Starts op as a send of `bytes` at buf to `dest` on the collectives'
  // communicator. If MPI refuses, the communicator is marked unusable: the
  // sends already started stay with MPI (Note [MPI timeouts]).
  Status StartCollectiveSend(MpiOp* op, const void* buf, size_t bytes, int dest,
                             int tag);

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
                               char* data, size_t bytes, int root);
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_MPI_COMMUNICATOR_IMPL_HPP_
