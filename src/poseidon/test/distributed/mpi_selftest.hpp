// What mpi_selftest's files share: a check's type, the helpers its checks
// use, where --hosts says the ranks run, and the checks that Run (in
// mpi_selftest.cpp) goes through: mpi_selftest_messages.cpp (point-to-point
// messages), mpi_selftest_collectives.cpp (collectives, shared memory, the
// ring allreduce and the parameter server over MPI) and
// mpi_selftest_timeouts.cpp (timeouts that name the peer, urgent waits).
#ifndef POSEIDON_TEST_DISTRIBUTED_MPI_SELFTEST_HPP_
#define POSEIDON_TEST_DISTRIBUTED_MPI_SELFTEST_HPP_

#include <cstdint>
#include <functional>
#include <string>

#include "poseidon/distributed/mpi_communicator.hpp"

namespace poseidon {
namespace dist {
namespace selftest {

// A check returns "" on success, else what went wrong on this rank.
using Check = std::function<std::string(Communicator*)>;

inline std::string Expect(const Status& s, const std::string& what) {
  return s.ok() ? "" : StrCat(what, ": ", s.message());
}

inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A value for (rank, i) whose sum over ranks depends on the addition order
// in float: large terms of alternating sign plus small ones.
template <typename Dtype>
Dtype Term(int rank, size_t i) {
  const uint64_t h =
      (i * 2654435761u + static_cast<uint64_t>(rank) * 97) % 1000003;
  const double big = (rank % 2 == 0 ? 1 : -1) * 1e7 * ((h % 7) + 1);
  return static_cast<Dtype>(big + (h % 1000) * 0.001 + rank * 0.1);
}

// What --hosts=one|several says about where mpirun put the ranks.
enum class Hosts { kUnknown, kOne, kSeveral };
extern Hosts g_hosts;

// mpi_selftest_messages.cpp
std::string SendRecvRing(Communicator* c);
std::string SendRecvBothWays(Communicator* c);
std::string TagMatching(Communicator* c);
std::string ConcurrentTags(Communicator* c);
std::string SizeMismatch(Communicator* c);
std::string BadArguments(Communicator* c);
std::string BatchesRunAtOnce(Communicator* main_comm);
std::string TwoPartMessages(Communicator* c);
std::string WindowsSlide(Communicator* c);

// mpi_selftest_collectives.cpp
std::string RingAllreduce(Communicator* c);
std::string SharedMemoryParts(Communicator* c);
std::string BroadcastAllRoots(Communicator* c);
std::string AllgatherInts(Communicator* c);
std::string Barriers(Communicator* c);
template <typename Dtype>
std::string DeterministicAllreduce(Communicator* c);  // float and double
std::string ParamServerWindows(Communicator* c);

// mpi_selftest_timeouts.cpp
std::string UrgentWaitLeavesTheCore(Communicator* c);
std::string RecvTimeout(Communicator* main_comm);
std::string WindowedRecvTimeout(Communicator* main_comm);
std::string SplitNamesJobRanks(Communicator* c);
std::string CollectiveTimeout(Communicator* main_comm);
std::string AllgatherTimeoutNamesTheMissing(Communicator* main_comm);
std::string BroadcastTimeoutNamesTheParent(Communicator* main_comm);
std::string OwnMessageTimeoutNamesWhatItsThreadsAwait(Communicator* main_comm);

}  // namespace selftest
}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_TEST_DISTRIBUTED_MPI_SELFTEST_HPP_
