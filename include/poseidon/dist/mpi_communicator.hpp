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
// Waiting: every operation is issued non-blocking and polled with a growing
// sleep (up to 200 us), so a waiting communication thread leaves the cores to
// the compute threads instead of spinning as blocking MPI calls do, and gives
// up after MpiOptions::timeout. See Note [MPI timeouts].
//
// Threads: starts none. Thread safety: as documented for Communicator
// (communicator.hpp). Construction and destruction are collective over
// MPI_COMM_WORLD (every rank creates its communicators in the same order) and
// must not race with other operations. Join the communication threads before
// the process exits: MPI is finalised by an atexit handler.
#ifndef POSEIDON_DIST_MPI_COMMUNICATOR_HPP_
#define POSEIDON_DIST_MPI_COMMUNICATOR_HPP_

#include <chrono>
#include <memory>
#include <string>

#include "poseidon/dist/communicator.hpp"

namespace poseidon {
namespace dist {

struct MpiOptions {
  // Deadline of every blocking wait; zero or negative waits forever.
  std::chrono::milliseconds timeout = kDefaultTimeout;
};

// Note [MPI timeouts]
// A Recv that times out is clean: it only probes (MPI_Improbe) until a match
// arrives, so nothing is left pending and the communicator stays usable. A
// Send or a collective that times out leaves its request with MPI, which may
// still read or write the caller's buffer: the communicator then fails every
// later operation with the first error, and the caller's only sensible move
// is Abort(). Open MPI cannot name the rank missing from a collective, so
// those messages name the collective and its sequence number instead.

class MpiCommunicator final : public Communicator {
 public:
  // Throws DistributedError when MPI cannot be initialised, was already
  // finalised, or lacks MPI_THREAD_MULTIPLE.
  explicit MpiCommunicator(MpiOptions options = {});
  ~MpiCommunicator() override;

  int rank() const override;
  int size() const override;

  // Messages are limited to 2^31 - 1 bytes (MPI's int counts), except
  // Broadcast, which splits larger buffers.
  Status Send(const void* buf, size_t bytes, int dest, int tag) override;
  Status Recv(void* buf, size_t bytes, int src, int tag) override;
  // AllreduceSumByAllgather: deterministic, n / 2 times the traffic of a
  // ring. See Note [Deterministic allreduce] in communicator.hpp.
  Status AllreduceSum(float* buf, size_t count) override;
  Status AllreduceSum(double* buf, size_t count) override;
  Status Broadcast(void* buf, size_t bytes, int root) override;
  Status Allgather(const void* send, size_t bytes, void* recv) override;
  Status Barrier() override;
  // Logs and calls MPI_Abort on MPI_COMM_WORLD: every rank of the job ends.
  [[noreturn]] void Abort(const std::string& why) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DIST_MPI_COMMUNICATOR_HPP_
