// MpiCommunicator: the Communicator of a real job, one rank per process,
// launched by mpirun. Built only with USE_MPI=ON. This header does not include
// mpi.h (the MPI handles live in the .cpp), so code that only constructs a
// communicator stays free of MPI.
//
// MPI setup: the first MpiCommunicator initialises MPI with
// MPI_Init_thread(MPI_THREAD_MULTIPLE) unless someone already did, and then
// finalises it at process exit; a library that provides a lower thread level
// is an error (the push/pull threads call MPI concurrently). Each
// communicator works on a private MPI_Comm_dup of MPI_COMM_WORLD with
// MPI_ERRORS_RETURN, so its traffic never mixes with other MPI users and MPI
// failures come back as a Status naming the rank, the operation and MPI's
// error string (see POSEIDON_MPI_CHECK in mpi_check.hpp).
//
// Waiting: every operation is issued non-blocking and polled by the progress
// thread, paced by whether a training thread is waiting (Note [Polling on a
// shared core]); a wait gives up after MpiOptions::timeout (Note [MPI
// timeouts]).
//
// Threads: one progress thread per communicator polls every outstanding
// operation; callers sleep until theirs completes (Note [Progress thread] in
// mpi_communicator_progress.cpp). Thread safety: as documented for
// Communicator (communicator.hpp). Construction and destruction are
// collective over MPI_COMM_WORLD (every rank creates its communicators in the
// same order) and must not race with other operations. Join the
// communication threads before the process exits: MPI is finalised by an
// atexit handler.
#ifndef POSEIDON_DISTRIBUTED_MPI_COMMUNICATOR_HPP_
#define POSEIDON_DISTRIBUTED_MPI_COMMUNICATOR_HPP_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/distributed/communicator.hpp"

namespace poseidon {
namespace dist {

struct MpiOptions {
  // Deadline of every blocking wait; zero or negative waits forever.
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

// Note [MPI timeouts]
// A Recv that times out is clean: it only probes (MPI_Improbe) until a match
// arrives, so nothing is left pending and the communicator stays usable. A
// Send, a Broadcast, or a part of an Allgather or Barrier sent but not
// taken, that times out leaves its request with MPI, which may still read or
// write the caller's buffer: the communicator then fails every later
// operation with the first error, and the caller's only sensible move is
// Abort(). Allgather and Barrier are messages between every two ranks (Note
// [Collectives from messages] in the .cpp), so their timeouts name the ranks
// whose part is missing; a Broadcast's names the broadcast and its sequence
// number (MPI cannot tell which rank has not joined).

// Note [Polling on a shared core]
// MPI offers no wait that sleeps: Open MPI's blocking calls spin. A polling
// communication thread shares its core with the compute (one rank per core
// is the usual binding), and the scheduler splits a core evenly between
// runnable threads, so a poller that spins or yields in a loop while the
// training thread computes takes half of the core, and even a poller that
// sleeps briefly costs a context switch and cold caches per wake. On LeNet
// over two ranks, each pinned to a core, the communication threads used
// about a third as much CPU as the training thread when each of them polled
// its own operation, every wait starting with 64 yields (measured with
// per-thread CPU times); hence one poller per rank (Note [Progress thread]
// in mpi_communicator_progress.cpp) and this pacing.
// So the pace depends on who is waiting:
//  - while a training thread of this rank is blocked on communication
//    (BeginUrgent/EndUrgent, see UrgentScope), latency matters: the poller
//    yields between polls, leaving the core to any thread with work (the
//    SFB rebuild, the server's sum). Sleeping 10 or 30 us instead (with 1 us
//    of timer slack) gave LeNet 5-7% less two-rank throughput (medians of 3
//    to 5 runs). But only for a millisecond without any operation
//    completing; then it naps, 50 us doubling up to 1 ms, until one does.
//    A yield is no promise that anyone else runs: on a 2-core machine with
//    two busy loops beside a 2 x 2 job, the two ranks of one host, both
//    waiting for the other host, yielded in a loop for 25 s while no other
//    process of the machine ran at all (per-thread CPU times: each poller
//    24 s of the 25; a heartbeat process at nice -20 was not scheduled
//    once), so the ranks they waited for never sent and the job timed out
//    (docs/reliability.md, "An intermittent freeze");
//  - otherwise the communication overlaps compute and its latency is
//    hidden: the poller sleeps 100 us at first, doubling up to 1 ms, and
//    BeginUrgent wakes it at once. New operations do not shorten the
//    sleep: an iteration posts dozens of them.
// A peer's request served by this rank's server thread may thus wait up to
// 1 ms while this rank computes; under BSP every rank ends its iteration
// waiting, and then its poller turns urgent. (Running the communication
// threads as SCHED_BATCH, so that their wake-ups never preempt the compute,
// made no measurable difference.) When every rank is on one host, the
// distributed trainer sidesteps all of this for its gradients: they go
// through shared memory on the training thread (Note [Shared memory
// allreduce] in shared_allreduce.cpp), and only small control messages remain.

class MpiCommunicator final : public Communicator {
 public:
  // Throws DistributedError when MPI cannot be initialised, was already
  // finalised, or lacks MPI_THREAD_MULTIPLE.
  explicit MpiCommunicator(MpiOptions options = {});
  ~MpiCommunicator() override;

  int rank() const override;
  int size() const override;
  std::chrono::milliseconds timeout() const override;

  // Messages are limited to 2^31 - 1 bytes (MPI's int counts), except
  // Broadcast, which splits larger buffers.
  Status Send(const void* buf, size_t bytes, int dest, int tag) override;
  Status Recv(void* buf, size_t bytes, int src, int tag) override;
  // Both at once, awaited together.
  Status SendRecv(const void* send, size_t send_bytes, int dest, void* recv,
                  size_t recv_bytes, int src, int tag) override;
  // Every op started at once, awaited together.
  Status RecvAll(const std::vector<RecvOp>& ops) override;
  Status SendAll(const std::vector<SendOp>& ops) override;
  Status RecvWindowed(const std::vector<RecvOp>& ops, size_t window_bytes,
                      const std::function<Status(size_t)>& done) override;
  Status SendWindowed(const std::vector<SendOp>& ops, size_t window_bytes,
                      const std::function<Status(size_t)>& done) override;
  // AllreduceSumByAllgather: deterministic, n / 2 times the traffic of a
  // ring. See Note [Deterministic allreduce] in communicator.hpp.
  Status AllreduceSum(float* buf, size_t count) override;
  Status AllreduceSum(double* buf, size_t count) override;
  Status Broadcast(void* buf, size_t bytes, int root) override;
  Status Allgather(const void* send, size_t bytes, void* recv) override;
  Status Barrier() override;
  // From MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) at construction.
  bool OnOneHost() const override;
  int HostKey() const override;
  // MPI_Comm_split: a communicator with its own progress thread.
  std::unique_ptr<Communicator> Split(
      int color, int key, std::chrono::milliseconds timeout) override;
  // Through MPI_Group_translate_ranks to MPI_COMM_WORLD.
  int JobRank(int r) const override;
  // POSIX shared memory (shm_open), sized up front with posix_fallocate and
  // refused when it would take more than half of /dev/shm's free space.
  std::unique_ptr<SharedMemory> MapSharedMemory(
      size_t bytes_per_rank) override;
  void BeginUrgent() override;
  void EndUrgent() override;
  // Prints "Error: rank k of N: why" (job numbering) to stderr and calls
  // MPI_Abort on MPI_COMM_WORLD: every rank of the job ends.
  [[noreturn]] void Abort(const std::string& why) override;

 private:
  struct Impl;
  // Takes over `comm` (from MPI_Comm_split).
  MpiCommunicator(void* comm, MpiOptions options);
  void Start();

  std::unique_ptr<Impl> impl_;
};

// Whether device (GPU) memory may be handed to MPI directly: Open MPI's
// compile-time MPIX_CUDA_AWARE_SUPPORT and, where built in, its run-time
// MPIX_Query_cuda_support(). Detected, never assumed; *how says which and
// why. Poseidon stages gradients through host memory either way today (the
// seam: Synchronizer's CopyToHost); this is logged in GPU mode.
bool MpiCudaAware(std::string* how);

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_MPI_COMMUNICATOR_HPP_
