// Communicator: the point-to-point and collective operations the distributed
// trainer is written against, with two implementations: MpiCommunicator (one
// rank per process, over Open MPI) and LoopbackCommunicator (ranks as threads
// of one process, for unit tests). Nothing outside distributed/ talks to MPI.
//
// Error model: every operation returns a Status and never throws, because it
// runs on communication threads; the training thread turns a failed Status
// into a DistributedError where it waits. Messages name this rank, the
// operation and the peer ("rank 1: Recv from rank 0 tag 7: ...").
//
// Thread safety (every implementation):
//  - rank() and size() may be called from any thread.
//  - Send and Recv may be called concurrently from several threads (the
//    push/pull communication threads), as long as two threads never wait on
//    the same (peer, tag) pair at once in the same direction; use a tag per
//    thread or per layer. Matching is MPI's: messages from one source with
//    one tag arrive in the order they were sent.
//  - Collectives (AllreduceSum, Broadcast, Allgather, Barrier) must be issued
//    by ONE thread per rank at a time, in the same order on every rank (as in
//    MPI). They may run while other threads use Send/Recv; the two never
//    match each other.
//  - Abort may be called from any thread.
//
// Buffers: the caller owns every buffer; an operation reads/writes it only
// until it returns. Sizes are in bytes unless the name says otherwise.
#ifndef POSEIDON_DISTRIBUTED_COMMUNICATOR_HPP_
#define POSEIDON_DISTRIBUTED_COMMUNICATOR_HPP_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/util/status.hpp"

namespace poseidon {
namespace dist {

// User tags are 0..kMaxTag; MPI guarantees at least this many.
constexpr int kMaxTag = 32767;

// Default deadline of a blocking operation before it gives up and names the
// peer it was waiting for.
constexpr std::chrono::milliseconds kDefaultTimeout{60000};

// Memory that every rank of a job maps into its address space: one part per
// rank, each `bytes_per_rank` bytes (a multiple of kAlignment), zero-filled
// when made, at the same offsets on every rank. Made by
// Communicator::MapSharedMemory; the memory stays mapped until this object
// is destroyed, which is local (no rank waits for another). What the parts
// hold and how ranks synchronise on them is the user's business; the
// distributed trainer uses std::atomic flags inside them (Note [Shared
// memory allreduce], shared_allreduce.cpp).
class SharedMemory {
 public:
  SharedMemory(char* base, size_t bytes_per_rank, int ranks,
               std::chrono::milliseconds timeout,
               std::function<void()> unmap)
      : base_(base), bytes_per_rank_(bytes_per_rank), ranks_(ranks),
        timeout_(timeout), unmap_(std::move(unmap)) {}
  ~SharedMemory() {
    if (unmap_) unmap_();
  }
  POSEIDON_DISABLE_COPY_AND_ASSIGN(SharedMemory);

  // Parts, and the regions users lay out inside them, keep to this
  // alignment: a cache line, so ranks' flags never share one.
  static constexpr size_t kAlignment = 64;
  // `bytes` rounded up to a multiple of kAlignment (at least one).
  static size_t Align(size_t bytes) {
    const size_t lines = (bytes == 0 ? 1 : bytes + kAlignment - 1) / kAlignment;
    return lines * kAlignment;
  }

  char* part(int rank) const { return base_ + rank * bytes_per_rank_; }
  size_t bytes_per_rank() const { return bytes_per_rank_; }
  int ranks() const { return ranks_; }
  // The communicator's deadline for blocking waits, for waits on flags in
  // this memory.
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  char* base_;
  size_t bytes_per_rank_;
  int ranks_;
  std::chrono::milliseconds timeout_;
  std::function<void()> unmap_;
};

class Communicator {
 public:
  Communicator() = default;
  virtual ~Communicator() = default;
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Communicator);

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // How long a blocking wait lasts before it gives up naming the peer
  // (--comm_timeout); waits built on top of the communicator use it too.
  virtual std::chrono::milliseconds timeout() const { return kDefaultTimeout; }

  // Sends `bytes` bytes to rank `dest` with tag `tag` (0..kMaxTag). May
  // return before the receiver has posted its Recv (buffered) or wait for it.
  virtual Status Send(const void* buf, size_t bytes, int dest, int tag) = 0;

  // Receives exactly `bytes` bytes from rank `src` with tag `tag`. A message
  // of another size is consumed and reported as an error naming both sizes
  // and the peer. Times out (error naming `src`) after the deadline.
  virtual Status Recv(void* buf, size_t bytes, int src, int tag) = 0;

  // Sends `send_bytes` to `dest` and receives `recv_bytes` from `src`, both
  // with `tag`, as one step of a ring or a pairwise exchange (every rank
  // calls it, each rank's dest receiving from it). The default runs Send
  // and Recv one after the other, even ranks sending first, which cannot
  // deadlock around a ring even when a Send waits for its Recv (the chain of
  // waits breaks at every odd rank); MpiCommunicator runs both at once.
  // Fails like Send or Recv, naming the peer.
  virtual Status SendRecv(const void* send, size_t send_bytes, int dest,
                          void* recv, size_t recv_bytes, int src, int tag);

  // Several receives, or several sends, in flight at once and awaited
  // together: a parameter-server shard takes one block's pushes from every
  // rank, and sends every rank the block's sum, without making each message
  // wait for the one before it (Note [Server pipeline] in param_server.cpp).
  // The ops' (peer, tag) pairs must be distinct. Returns OK once every op
  // has completed, else the first failure in `ops` order, worded as Send's
  // and Recv's are. The default runs the ops one after another and stops
  // at a failure: the same results, for implementations without
  // non-blocking operations (and only where the peers do not need the ops
  // in flight together); MpiCommunicator starts them all at once and
  // reports once each has completed or timed out.
  //
  // An op's message may have a second part: `bytes2` bytes at `buf2`
  // after the `bytes` at `buf` (a message of bytes + bytes2 bytes, which
  // the peer may take in one piece or in two), so that a header can travel
  // with a payload that stays where it is: the parameter server sends and
  // receives a block's elements in the caller's memory, without a copy.
  // Messages name the whole size ("Recv of 4016 bytes").
  struct RecvOp {
    void* buf;
    size_t bytes;
    int src;
    int tag;
    void* buf2 = nullptr;
    size_t bytes2 = 0;
    // Copies a received message of bytes + bytes2 bytes into the parts.
    void SplitFrom(const char* whole) const;
  };
  struct SendOp {
    const void* buf;
    size_t bytes;
    int dest;
    int tag;
    const void* buf2 = nullptr;
    size_t bytes2 = 0;
    // Replaces *whole with the message: the first part, then the second.
    void JoinInto(std::vector<char>* whole) const;
  };
  virtual Status RecvAll(const std::vector<RecvOp>& ops);
  virtual Status SendAll(const std::vector<SendOp>& ops);

  // SendAll and RecvAll through a window that slides (Note [Sliding
  // windows] in mpi_communicator_progress.cpp): the ops start in order,
  // each as soon as the ops in flight hold fewer than `window_bytes` bytes
  // with it (an op always starts when none is in flight) and none of them
  // has its (peer, tag); `done(k)` runs on the calling thread each time the
  // ops [0, k) have all completed, k growing, and a failure it returns
  // starts no more ops. Returns once every started op has completed, with
  // the first failure of an op in `ops` order, else done's, else OK. The
  // default runs consecutive groups of ops that fit through SendAll /
  // RecvAll, each awaited whole (the same results; only the order in time
  // differs); MpiCommunicator slides.
  virtual Status SendWindowed(const std::vector<SendOp>& ops,
                              size_t window_bytes,
                              const std::function<Status(size_t)>& done);
  virtual Status RecvWindowed(const std::vector<RecvOp>& ops,
                              size_t window_bytes,
                              const std::function<Status(size_t)>& done);

  // buf[i] <- sum over ranks r of buf_r[i], identical bits on every rank.
  // See Note [Deterministic allreduce].
  virtual Status AllreduceSum(float* buf, size_t count) = 0;
  virtual Status AllreduceSum(double* buf, size_t count) = 0;

  // Copies `bytes` bytes from rank `root`'s buf into every rank's buf.
  virtual Status Broadcast(void* buf, size_t bytes, int root) = 0;

  // recv[r * bytes, (r + 1) * bytes) <- rank r's send, on every rank. recv
  // holds size() * bytes bytes and must not overlap send.
  virtual Status Allgather(const void* send, size_t bytes, void* recv) = 0;

  virtual Status Barrier() = 0;

  // True when every rank of the job runs on this host, so that
  // MapSharedMemory can succeed; the same answer on every rank.
  virtual bool OnOneHost() const { return false; }

  // Maps `bytes_per_rank` bytes (rounded up to a multiple of 64) per rank of
  // memory shared by all ranks. Collective. Returns nullptr on every rank
  // when the ranks do not share one host or the memory cannot be had (the
  // reason is logged); callers fall back to messages.
  virtual std::unique_ptr<SharedMemory> MapSharedMemory(
      size_t bytes_per_rank) {
    (void)bytes_per_rank;
    return nullptr;
  }

  // Identifies the host this rank runs on: ranks that share one (and can
  // map shared memory among themselves) return the same key, the lowest
  // rank among them. The default puts every rank on a host of its own.
  virtual int HostKey() const { return rank(); }

  // Rank r of this communicator as the whole job numbers it (MPI_COMM_WORLD,
  // or the loopback world it was split from): every message names ranks
  // this way, so that an error inside a communicator made by Split names
  // the same rank that mpirun and the other errors do.
  virtual int JobRank(int r) const { return r; }

  // Collective: the ranks passing the same `color` form a new communicator,
  // ranked by `key` (ties by this rank), whose blocking waits give up after
  // `timeout` (the host level gives waits between hosts a later deadline
  // than waits within one: Note [Deadline ladder] in host_transport.cpp).
  // Used for the host level (DiscoverHosts). Throws DistributedError where
  // the implementation cannot split.
  virtual std::unique_ptr<Communicator> Split(
      int color, int key, std::chrono::milliseconds timeout) {
    (void)color;
    (void)key;
    (void)timeout;
    POSEIDON_THROW(DistributedError, "this communicator cannot be split");
  }

  // Hints that a training thread of this rank is blocked until some
  // communication finishes, so that waiting may cost CPU but not latency
  // (see Note [Polling on a shared core] in mpi_communicator.hpp). Calls
  // nest and may come from any thread; every BeginUrgent needs one
  // EndUrgent. Use UrgentScope. Implementations that never poll ignore it.
  virtual void BeginUrgent() {}
  virtual void EndUrgent() {}

  // A fatal error: logs `why` with this rank and ends the job on every rank.
  // MpiCommunicator calls MPI_Abort and does not return; LoopbackCommunicator
  // fails every pending and later operation of its world with `why`, so a
  // test can observe it, and returns.
  virtual void Abort(const std::string& why) = 0;
};

// The deadline of a thread's wait for work that communication threads do
// through `comm` (an exchange, an agreement): the communicator's timeout
// plus a quarter of it, at least a second, so that the communication
// threads' own deadlines, whose errors name the peer, fire first (Note
// [Completion deadlines] in transport.cpp). Zero when the communicator has
// no deadline (MpiOptions: timeout <= 0): wait without one.
std::chrono::milliseconds RelayTimeout(const Communicator* comm);

// For a message about a wait that began at `wait_start`, with deadline
// `timeout`, and ran out: "" or, when this process was stopped (SIGSTOP)
// and continued meanwhile, a note saying so, to append. May sleep 250 ms
// (call it holding no lock). Note [Stopped ranks] in communicator.cpp.
std::string StoppedNote(std::chrono::steady_clock::time_point wait_start,
                        std::chrono::milliseconds timeout);

// Marks a training thread's wait on communication (Communicator::
// BeginUrgent) for as long as it lives.
class UrgentScope {
 public:
  explicit UrgentScope(Communicator* comm) : comm_(comm) {
    comm_->BeginUrgent();
  }
  ~UrgentScope() { comm_->EndUrgent(); }
  POSEIDON_DISABLE_COPY_AND_ASSIGN(UrgentScope);

 private:
  Communicator* const comm_;
};

// Note [Deterministic allreduce]
// Every replica must apply bit-identical gradients, whatever order messages
// arrive in. AllreduceSum therefore fixes the order of the additions: each
// element is summed in rank order, evaluated left to right in the buffer's
// type,
//   result[i] = (...((x_0[i] + x_1[i]) + x_2[i]) + ...) + x_{n-1}[i],
// on one rank's data gathered from all ranks, so every rank computes the same
// expression on the same inputs. The reference algorithm below gathers the
// buffer in chunks (Allgather) and adds in rank order. Every rank's buffer
// reaches every other rank, so a node receives (n - 1) x size bytes (and, with
// a ring allgather, sends as much), against 2 (n - 1) / n x size each way for
// a ring allreduce: n / 2 times the traffic, correctness first. A
// ring (reduce-scatter then allgather, each chunk summed along the ring
// starting from a fixed rank) also has a fixed order per element and is the
// drop-in replacement: an implementation's AllreduceSum may call it instead.

// Elements per chunk of AllreduceSumByAllgather: bounds its scratch memory to
// size() x kAllreduceChunkElements elements. The same on every rank.
constexpr size_t kAllreduceChunkElements = size_t{1} << 20;

// The reference deterministic allreduce over comm's Allgather; see
// Note [Deterministic allreduce]. Collective.
template <typename Dtype>
Status AllreduceSumByAllgather(Communicator* comm, Dtype* buf, size_t count);

// Where the ranks of a job run (DiscoverHosts): hosts are numbered in the
// order of their lowest rank, a host's ranks in rank order.
struct HostLayout {
  int host = 0;         // this rank's host
  int hosts = 1;
  int local_rank = 0;   // this rank's place on its host
  int local_size = 1;   // ranks on this rank's host
  bool uniform = true;  // every host runs local_size ranks
  std::vector<int> host_of;        // host of every rank
  std::vector<int> local_rank_of;  // place of every rank on its host
};

// Collective (one Allgather of HostKey): the layout of comm's ranks.
HostLayout DiscoverHosts(Communicator* comm);

// Seconds as text for messages: "0.25 s".
std::string FormatSeconds(std::chrono::milliseconds d);

// The window rule of Communicator::SendWindowed / RecvWindowed: from op
// `begin` of `count`, as many ops as fit `window_bytes` (one at least),
// stopping before an op whose key (peer, tag) is already in the window;
// op i has bytes(i) bytes and key(i). Returns the end of the window. The
// default windowed calls run such windows whole; the parameter server
// names one in its errors.
size_t WindowEnd(size_t begin, size_t count, size_t window_bytes,
                 const std::function<size_t(size_t)>& bytes,
                 const std::function<std::pair<int, int>(size_t)>& key);

// Items as a list for messages: "a", "a and b", "a, b and c"; past `shown`
// items, "a, b, c and 4 more". Repeated items are listed once, where they
// first appear.
std::string ListForMessage(const std::vector<std::string>& items,
                           size_t shown = 3);

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_COMMUNICATOR_HPP_
