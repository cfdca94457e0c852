// mpi_selftest: MpiCommunicator under a real mpirun (CTest runs it with 2 and
// 4 ranks on this host with --hosts=one; the multi-host test on network
// namespaces with --hosts=several). Every rank runs the same checks; rank 0
// prints which failed on which rank and "N passed, M failed"; the exit
// status is non-zero when any check failed on any rank.
//
// Threads: the main thread runs the checks; ConcurrentTags starts a sender
// and a receiver thread per tag to exercise Send/Recv from several threads.
//
// This file: the list of checks, the runner and main(); the checks are in
// mpi_selftest_messages.cpp, mpi_selftest_collectives.cpp and
// mpi_selftest_timeouts.cpp (mpi_selftest.hpp).
#include "mpi_selftest.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace poseidon {
namespace dist {
namespace selftest {

Hosts g_hosts = Hosts::kUnknown;

namespace {

int Run() {
  MpiOptions options;
  options.timeout = std::chrono::seconds(20);
  MpiCommunicator comm(options);
  const std::vector<std::pair<std::string, Check>> checks = {
      {"SendRecvRing", SendRecvRing},
      {"SendRecvBothWays", SendRecvBothWays},
      {"RingAllreduce", RingAllreduce},
      {"SharedMemoryParts", SharedMemoryParts},
      {"TagMatching", TagMatching},
      {"ConcurrentTags", ConcurrentTags},
      {"SizeMismatch", SizeMismatch},
      {"BadArguments", BadArguments},
      {"BroadcastAllRoots", BroadcastAllRoots},
      {"AllgatherInts", AllgatherInts},
      {"AllgatherTimeoutNamesTheMissing", AllgatherTimeoutNamesTheMissing},
      {"BroadcastTimeoutNamesTheParent", BroadcastTimeoutNamesTheParent},
      {"Barriers", Barriers},
      {"DeterministicAllreduceFloat", DeterministicAllreduce<float>},
      {"DeterministicAllreduceDouble", DeterministicAllreduce<double>},
      {"RecvTimeout", RecvTimeout},
      {"WindowedRecvTimeout", WindowedRecvTimeout},
      {"BatchesRunAtOnce", BatchesRunAtOnce},
      {"TwoPartMessages", TwoPartMessages},
      {"WindowsSlide", WindowsSlide},
      {"ParamServerWindows", ParamServerWindows},
      {"UrgentWaitLeavesTheCore", UrgentWaitLeavesTheCore},
      {"SplitNamesJobRanks", SplitNamesJobRanks},
      {"CollectiveTimeout", CollectiveTimeout},
      {"OwnMessageTimeoutNamesWhatItsThreadsAwait",
       OwnMessageTimeoutNamesWhatItsThreadsAwait},
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<double> failed(checks.size(), 0);
  for (size_t i = 0; i < checks.size(); ++i) {
    const std::string error = checks[i].second(&comm);
    if (!error.empty()) {
      failed[i] = 1;
      std::fprintf(stderr, "rank %d: FAILED %s: %s\n", comm.rank(),
                   checks[i].first.c_str(), error.c_str());
    }
    // Keep the checks apart even when one failed on some rank.
    Status s = comm.Barrier();
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: barrier after %s failed: %s\n",
                   comm.rank(), checks[i].first.c_str(), s.message().c_str());
      comm.Abort("mpi_selftest cannot continue");
    }
  }
  Status s = comm.AllreduceSum(failed.data(), failed.size());
  if (!s.ok()) comm.Abort(s.message());
  int num_failed = 0;
  for (size_t i = 0; i < checks.size(); ++i) {
    if (failed[i] > 0) {
      ++num_failed;
      if (comm.rank() == 0) {
        std::printf("FAILED %s on %g of %d ranks\n", checks[i].first.c_str(),
                    failed[i], comm.size());
      }
    }
  }
  if (comm.rank() == 0) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    std::printf("mpi_selftest with %d ranks: %d passed, %d failed (%.2f s)\n",
                comm.size(), static_cast<int>(checks.size()) - num_failed,
                num_failed, seconds);
  }
  return num_failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace selftest
}  // namespace dist
}  // namespace poseidon

int main(int argc, char** argv) {
  using poseidon::dist::selftest::Hosts;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--hosts=one") {
      poseidon::dist::selftest::g_hosts = Hosts::kOne;
    } else if (arg == "--hosts=several") {
      poseidon::dist::selftest::g_hosts = Hosts::kSeveral;
    } else {
      std::fprintf(stderr, "usage: mpi_selftest [--hosts=one|several]\n");
      return 2;
    }
  }
  try {
    return poseidon::dist::selftest::Run();
  } catch (const poseidon::Error& e) {
    std::fprintf(stderr, "mpi_selftest: %s\n", e.what());
    return 1;
  }
}
