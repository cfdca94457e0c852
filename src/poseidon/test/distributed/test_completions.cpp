// Completions (distributed/transport.hpp): the training thread's wait for the
// exchanges that communication threads run, and its deadlines (Note
// [Completion deadlines] in transport.cpp); and a rank that stops in the
// middle of training, named by the others within the timeout over each
// transport.
//
// Threads: each test finishes exchanges from a helper thread while the test
// thread waits, or runs one thread per rank (RunRanks).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "poseidon/distributed/loopback_communicator.hpp"
#include "poseidon/distributed/shared_flags.hpp"
#include "poseidon/distributed/synchronizer.hpp"
#include "poseidon/distributed/transport.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/signal_handler.hpp"
#include "sync_test_util.hpp"

namespace poseidon {
namespace dist {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

LoopbackOptions Timeout(int ms) {
  LoopbackOptions options;
  options.timeout = milliseconds(ms);
  return options;
}

TEST(CompletionsTest, AFailedGroupEndsTheWaitForAnother) {
  // Found on a link cut between hosts: the pull thread failed conv2's
  // exchange after a timeout, and the training thread, waiting for conv1
  // (queued behind it), waited a whole timeout more and then failed with a
  // message that named no rank.
  LoopbackWorld world(1, Timeout(3000));
  Completions completions(world.rank(0), {"conv1", "conv2"});
  EXPECT_FALSE(completions.Done(0, 0));
  std::thread comm([&] {
    std::this_thread::sleep_for(milliseconds(100));
    completions.Finish(1, 0,
                       Status::Failure("pull of block 3 from shard 1: rank "
                                       "0: Recv from rank 1: timed out"));
  });
  const Clock::time_point start = Clock::now();
  std::string error;
  try {
    completions.Wait(0, 0, "PS");
  } catch (const DistributedError& e) {
    error = e.what();
  }
  comm.join();
  EXPECT_LT(SecondsSince(start), 1.5) << "waited for conv1's own deadline";
  EXPECT_NE(error.find("layer 'conv2', iteration 0: pull of block 3 from "
                       "shard 1: rank 0: Recv from rank 1: timed out"),
            std::string::npos)
      << error;
  EXPECT_TRUE(completions.Done(0, 0)) << "a failure makes every wait end";
}

TEST(CompletionsTest, AWaitAfterALongPauseIsNotCutShort) {
  // The last exchange ended long before this wait began (a test phase or a
  // snapshot in between): the wait still has its whole deadline.
  LoopbackWorld world(1, Timeout(200));
  Completions completions(world.rank(0), {"ip1"});
  completions.Finish(0, 0, Status::OK());
  std::this_thread::sleep_for(milliseconds(1500));  // > the 1.2 s deadline
  std::thread comm([&] {
    std::this_thread::sleep_for(milliseconds(100));
    completions.Finish(0, 1, Status::OK());
  });
  EXPECT_NO_THROW(completions.Wait(0, 1, "PS"));
  comm.join();
}

TEST(CompletionsTest, AStuckExchangeFailsAfterTheRelayTimeout) {
  LoopbackWorld world(1, Timeout(200));
  EXPECT_EQ(RelayTimeout(world.rank(0)).count(), 1200);
  Completions completions(world.rank(0), {"ip1"});
  const Clock::time_point start = Clock::now();
  std::string error;
  try {
    completions.Wait(0, 0, "SFB");
  } catch (const DistributedError& e) {
    error = e.what();
  }
  const double waited = SecondsSince(start);
  EXPECT_GE(waited, 1.15);
  EXPECT_LT(waited, 5.0);
  EXPECT_NE(error.find("gradient exchange (SFB) of layer 'ip1', iteration 0: "
                       "no exchange finished for 1.2 s"),
            std::string::npos)
      << error;
}

// Note [Stopped ranks]: a wait that ran out while this process was stopped
// says so instead of only blaming the peer; a SIGCONT that finds the
// process running, as mpirun sends before it ends a job, does not (Note
// [Telling a stop from a SIGCONT]).
TEST(CompletionsTest, ATimeoutOfARankThatWasStoppedSaysSo) {
  RecordContinues();
  enum Signals { kNone, kContinueOnly, kStopAndContinue };
  // Returns the error of a wait for rank 1 that runs out after `timeout`;
  // a forked helper signals this process once the wait has begun.
  auto wait = [](Signals signals, milliseconds timeout) {
    // Should this test's process group be orphaned (run from a shell that
    // has exited), the kernel sends SIGHUP to it when a process of it exits
    // while a member is stopped: the helper continues this process before
    // it exits, and SIGHUP is ignored meanwhile all the same.
    struct sigaction ignore, saved;
    std::memset(&ignore, 0, sizeof(ignore));
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGHUP, &ignore, &saved);
    int began[2] = {-1, -1};
    pid_t helper = -1;
    if (signals != kNone) {
      EXPECT_EQ(pipe(began), 0);
      // A stopped process cannot continue itself: a child does it, with
      // async-signal-safe calls only (this process has threads), as soon
      // as the wait has begun (a byte through the pipe).
      const pid_t parent = getpid();
      helper = fork();
      if (helper == 0) {
        char byte;
        if (read(began[0], &byte, 1) != 1) _exit(1);
        if (signals == kStopAndContinue) {
          kill(parent, SIGSTOP);
          struct timespec stopped = {1, 500 * 1000 * 1000};
          nanosleep(&stopped, nullptr);
        }
        kill(parent, SIGCONT);
        _exit(0);
      }
    }
    bool told = false;
    std::string error;
    try {
      WaitForRanks(
          2,
          [&](int r) {
            if (!told && began[1] >= 0) {
              told = write(began[1], "b", 1) == 1;
            }
            return r == 1;
          },
          timeout, 0, "host level, layer 'ip1', iteration 3",
          "publish their gradients");
    } catch (const DistributedError& e) {
      error = e.what();
    }
    if (helper > 0) {
      int status = 0;
      waitpid(helper, &status, 0);
    }
    for (int fd : began) {
      if (fd >= 0) close(fd);
    }
    sigaction(SIGHUP, &saved, nullptr);
    return error;
  };
  const std::string expected =
      "rank 0: host level, layer 'ip1', iteration 3: timed out after 0.3 s "
      "waiting for rank 1 to publish their gradients";
  EXPECT_EQ(wait(kNone, milliseconds(300)), expected);
  EXPECT_EQ(wait(kContinueOnly, milliseconds(300)), expected);
  // The stop (1.5 s) begins as soon as the helper runs, well inside the
  // 3 s wait however loaded the machine.
  const std::string stopped = wait(kStopAndContinue, milliseconds(3000));
  EXPECT_EQ(stopped.find("rank 0: host level, layer 'ip1', iteration 3: "
                         "timed out after 3 s waiting for rank 1 to "
                         "publish their gradients; but this rank was itself "
                         "stopped (SIGSTOP) and continued "),
            0u)
      << stopped;
  EXPECT_NE(stopped.find("it is more likely that the others waited for this "
                         "rank"),
            std::string::npos)
      << stopped;
}

// A rank that stops responding in the middle of training (its training
// thread never posts again) is named by rank 0 within about the timeout,
// over each transport, without shared memory (as between hosts).
TEST(CompletionsTest, ARankThatStopsMidTrainingIsNamed) {
  using sync_test::Dist;
  using sync_test::MakeSolver;
  using sync_test::RunRanks;
  constexpr int kTimeoutMs = 1000;
  for (auto comm_type : {DistributedParameter::PS, DistributedParameter::SFB,
                         DistributedParameter::ALLREDUCE}) {
    const std::string name = DistributedParameter::CommType_Name(comm_type);
    std::atomic<int64_t> stalled_at{0};
    std::string error;
    double after = -1;
    RunRanks(
        2,
        [&](int r, Communicator* comm) {
          Poseidon::set_data_shard({r, 2, false});
          auto solver = CreateSolver<double>(MakeSolver("SGD", 2));
          Synchronizer<double> sync(solver.get(), comm, Dist(comm_type));
          if (r == 1) {
            solver->Step(2);
            stalled_at = Clock::now().time_since_epoch().count();
            std::this_thread::sleep_for(milliseconds(4 * kTimeoutMs));
            return;
          }
          try {
            solver->Step(50);
          } catch (const DistributedError& e) {
            error = e.what();
            after = std::chrono::duration<double>(
                        Clock::now().time_since_epoch() -
                        Clock::duration(stalled_at.load()))
                        .count();
          }
        },
        Timeout(kTimeoutMs));
    EXPECT_NE(error.find("rank 1"), std::string::npos)
        << name << ": error '" << error << "'";
    // The communicator's deadline (1 s) from the exchange posted after rank
    // 1 stopped, not two of them in a row nor the fallback (1.25 s + 1 s).
    EXPECT_GT(after, 0) << name;
    EXPECT_LT(after, 1.8) << name << ": error '" << error << "'";
  }
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
