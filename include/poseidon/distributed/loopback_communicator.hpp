// LoopbackWorld: N ranks as threads of one process, the in-process fake used
// to unit-test distributed logic without MPI (like c10d's fake process
// group). A test creates a world of N ranks, starts one thread per rank and
// hands thread i the Communicator world.rank(i).
//
//   LoopbackWorld world(4);
//   std::vector<std::thread> ranks;
//   for (int i = 0; i < 4; ++i)
//     ranks.emplace_back([&world, i] { Train(world.rank(i)); });
//
// Semantics follow MPI: messages match by (source, tag) in FIFO order;
// collectives must be issued in the same order on every rank. Differences,
// all deliberate:
//  - Send is buffered (returns once the message is queued) unless
//    LoopbackOptions::synchronous_send is set; then it waits until the
//    receiver has taken the message, which exposes send-send deadlocks that
//    MPI would show only for large messages.
//  - Every blocking wait gives up after LoopbackOptions::timeout with an
//    error naming the rank it was waiting for, instead of hanging the test.
//  - Collectives carry their kind and sequence number, so a rank that issues
//    a different collective (or a different size) than its peers gets an
//    error naming both, instead of undefined behaviour.
//  - Abort poisons the world: every pending and later operation on every
//    rank fails with the reason, and the process keeps running.
//
// Threads: the world starts none; it is driven by the callers' threads.
// Thread safety: as documented for Communicator (communicator.hpp); each rank's
// Communicator may be used by several threads of that rank. The world must
// outlive every thread that uses one of its communicators.
#ifndef POSEIDON_DISTRIBUTED_LOOPBACK_COMMUNICATOR_HPP_
#define POSEIDON_DISTRIBUTED_LOOPBACK_COMMUNICATOR_HPP_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/distributed/communicator.hpp"

namespace poseidon {
namespace dist {

struct LoopbackOptions {
  // Deadline of every blocking wait; must be positive.
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // Send waits until the matching Recv has taken the message.
  bool synchronous_send = false;
  // The ranks share one host: OnOneHost() is true and MapSharedMemory hands
  // every rank the same heap block. Off by default, so that the message
  // paths stay the ones unit tests exercise.
  bool shared_memory = false;
  // > 0: emulated hosts of this many ranks each (rank r on host
  // r / ranks_per_host), for the host level: HostKey() tells them apart,
  // and a Split() communicator whose ranks share a host maps shared memory.
  // The world itself is one host only if all its ranks are on one.
  int ranks_per_host = 0;
};

class LoopbackCommunicator;

class LoopbackWorld {
 public:
  // A world of `size` ranks (>= 1). Throws ConfigError on a bad size or
  // timeout.
  explicit LoopbackWorld(int size, LoopbackOptions options = {});
  ~LoopbackWorld();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(LoopbackWorld);

  int size() const;
  // Rank i's communicator, owned by the world. CHECKs 0 <= i < size().
  Communicator* rank(int i);

  // The reason given to Abort, or "" while no rank has aborted.
  std::string abort_reason() const;

  // The parent of a world made by Communicator::Split: an Abort in either
  // ends both. Set once, before any use.
  void set_parent(LoopbackWorld* parent);

 private:
  friend class LoopbackCommunicator;
  struct State;
  std::unique_ptr<State> state_;
  std::vector<std::unique_ptr<LoopbackCommunicator>> ranks_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_LOOPBACK_COMMUNICATOR_HPP_
