// SignalHandler: flag strings, SIGINT/SIGHUP/SIGTERM to solver actions, one
// handler at a time, restoring the previous dispositions, and stopping a
// solver.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "poseidon/solver_factory.hpp"
#include "poseidon/util/signal_handler.hpp"
#include "solver_test_util.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kUnderThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kUnderThreadSanitizer = true;
#else
constexpr bool kUnderThreadSanitizer = false;
#endif
#else
constexpr bool kUnderThreadSanitizer = false;
#endif

TEST(SignalHandlerTest, ParsesEffects) {
  EXPECT_EQ(ParseSolverAction("stop", "--sigint_effect"), SolverAction::STOP);
  EXPECT_EQ(ParseSolverAction("snapshot", "--sighup_effect"),
            SolverAction::SNAPSHOT);
  EXPECT_EQ(ParseSolverAction("none", "--sighup_effect"), SolverAction::NONE);
  try {
    ParseSolverAction("halt", "--sigint_effect");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("halt"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--sigint_effect"), std::string::npos) << msg;
  }
  // A bad flag installs nothing, so a good handler can follow.
  EXPECT_THROW(SignalHandler("stop", "Snapshot"), ConfigError);
  SignalHandler ok("stop", "snapshot");
}

TEST(SignalHandlerTest, SigtermEffectErrorNamesItsFlag) {
  EXPECT_EQ(ParseSolverAction("stop", "--sigterm_effect"), SolverAction::STOP);
  try {
    SignalHandler handler("stop", "snapshot", "terminate");
    FAIL() << "expected ConfigError for --sigterm_effect=terminate";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'terminate'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--sigterm_effect"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("--sigint_effect"), std::string::npos) << msg;
    EXPECT_NE(msg.find("stop, snapshot or none"), std::string::npos) << msg;
  }
  SignalHandler ok("stop", "snapshot", "stop");  // nothing left installed
}

TEST(SignalHandlerTest, MapsSignalsToActions) {
  SignalHandler handler(SolverAction::STOP, SolverAction::SNAPSHOT);
  EXPECT_EQ(handler.CheckForSignals(), SolverAction::NONE);
  ASSERT_EQ(raise(SIGHUP), 0);
  EXPECT_EQ(handler.CheckForSignals(), SolverAction::SNAPSHOT);
  EXPECT_EQ(handler.CheckForSignals(), SolverAction::NONE);
  ASSERT_EQ(raise(SIGINT), 0);
  ActionCallback action = handler.GetActionFunction();
  EXPECT_EQ(action(), SolverAction::STOP);
  EXPECT_EQ(action(), SolverAction::NONE);
  // Both pending: SIGHUP's action first, then SIGINT's.
  raise(SIGINT);
  raise(SIGHUP);
  EXPECT_EQ(action(), SolverAction::SNAPSHOT);
  EXPECT_EQ(action(), SolverAction::STOP);
}

TEST(SignalHandlerTest, OneAtATime) {
  auto first = std::make_unique<SignalHandler>("none", "none");
  EXPECT_THROW(SignalHandler("stop", "snapshot"), Error);
  raise(SIGINT);  // flagged, mapped to NONE
  EXPECT_EQ(first->CheckForSignals(), SolverAction::NONE);
  first.reset();
  SignalHandler second("stop", "snapshot");
  EXPECT_EQ(second.CheckForSignals(), SolverAction::NONE);
}

volatile sig_atomic_t g_previous_handler_calls = 0;
void PreviousHandler(int) {
  g_previous_handler_calls = g_previous_handler_calls + 1;
}

TEST(SignalHandlerTest, RestoresPreviousDisposition) {
  g_previous_handler_calls = 0;
  struct sigaction mine = {};
  mine.sa_handler = &PreviousHandler;
  struct sigaction saved_int, saved_hup;
  ASSERT_EQ(sigaction(SIGINT, &mine, &saved_int), 0);
  ASSERT_EQ(sigaction(SIGHUP, &mine, &saved_hup), 0);
  {
    SignalHandler handler("stop", "snapshot");
    raise(SIGHUP);
    EXPECT_EQ(g_previous_handler_calls, 0);
    EXPECT_EQ(handler.CheckForSignals(), SolverAction::SNAPSHOT);
  }
  raise(SIGHUP);
  raise(SIGINT);
  EXPECT_EQ(g_previous_handler_calls, 2);
  sigaction(SIGINT, &saved_int, nullptr);
  sigaction(SIGHUP, &saved_hup, nullptr);
}

// Counts the SIGTERMs that reach the disposition installed before a
// SignalHandler. Installed around every raise(SIGTERM) below, so a SIGTERM
// that a handler failed to catch is counted, not fatal to the test binary.
volatile sig_atomic_t g_fallback_sigterms = 0;
void CountSigterm(int) { g_fallback_sigterms = g_fallback_sigterms + 1; }

class SigtermFallback {
 public:
  SigtermFallback() {
    g_fallback_sigterms = 0;
    struct sigaction counting = {};
    counting.sa_handler = &CountSigterm;
    EXPECT_EQ(sigaction(SIGTERM, &counting, &saved_), 0);
  }
  ~SigtermFallback() { sigaction(SIGTERM, &saved_, nullptr); }
  SigtermFallback(const SigtermFallback&) = delete;
  SigtermFallback& operator=(const SigtermFallback&) = delete;

 private:
  struct sigaction saved_;
};

// What `fn` writes to file descriptor 2 (the SIGTERM handler writes there
// with write(2), not through std::cerr).
template <typename Fn>
std::string Stderr(Fn fn) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  const int saved = dup(STDERR_FILENO);
  dup2(fds[1], STDERR_FILENO);
  fn();
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fds[1]);
  std::string text;
  char buffer[1024];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;) {
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  return text;
}

TEST(SignalHandlerTest, SigtermNoneLeavesItsDisposition) {
  SigtermFallback fallback;
  {
    SignalHandler handler("stop", "snapshot");  // --sigterm_effect=none
    ASSERT_EQ(raise(SIGTERM), 0);
    EXPECT_EQ(g_fallback_sigterms, 1) << "SIGTERM did not reach its handler";
    EXPECT_EQ(handler.CheckForSignals(), SolverAction::NONE);
  }
  {
    SignalHandler handler(SolverAction::STOP, SolverAction::SNAPSHOT,
                          SolverAction::NONE);
    raise(SIGTERM);
    EXPECT_EQ(g_fallback_sigterms, 2);
    EXPECT_EQ(handler.CheckForSignals(), SolverAction::NONE);
  }
}

TEST(SignalHandlerTest, MapsSigtermToItsAction) {
  SigtermFallback fallback;
  {
    SignalHandler handler("none", "none", "stop");
    std::string said;
    said = Stderr([] { ASSERT_EQ(raise(SIGTERM), 0); });
    EXPECT_EQ(g_fallback_sigterms, 0) << "the old SIGTERM handler ran";
    EXPECT_NE(said.find("SIGTERM received: stopping"), std::string::npos)
        << said;
    EXPECT_NE(said.find("(--sigterm_effect=stop)\n"), std::string::npos)
        << said;
    EXPECT_EQ(handler.CheckForSignals(), SolverAction::STOP);
    EXPECT_EQ(handler.CheckForSignals(), SolverAction::NONE);
    // mpirun's SIGTERM after Slurm's: the stop is said once.
    said = Stderr([] { raise(SIGTERM); });
    EXPECT_EQ(said, "");
    EXPECT_EQ(handler.GetActionFunction()(), SolverAction::STOP);
  }
  raise(SIGTERM);  // the disposition from before is back
  EXPECT_EQ(g_fallback_sigterms, 1);
  {
    SignalHandler handler(SolverAction::NONE, SolverAction::NONE,
                          SolverAction::SNAPSHOT);
    for (int i = 0; i < 2; ++i) {
      const std::string said = Stderr([] { raise(SIGTERM); });
      EXPECT_NE(said.find("(--sigterm_effect=snapshot)"), std::string::npos)
          << "SIGTERM " << i << ": " << said;
      EXPECT_EQ(handler.CheckForSignals(), SolverAction::SNAPSHOT);
    }
  }
  EXPECT_EQ(g_fallback_sigterms, 1);
}

// In a child process: InstallTerminationMessage names it, as
// poseidon_train names its rank; a SIGTERM with an action says so under that
// name, and once the SignalHandler is gone a SIGTERM ends the process with
// the termination line and status 143 again.
TEST(SignalHandlerTest, SigtermLineNamesTheProcess) {
  if (kUnderThreadSanitizer) {
    // ThreadSanitizer delivers a signal at the process's next intercepted
    // call, not inside raise(); in a child forked from the threaded test
    // process the restored handler's SIGTERM was, in CI, never delivered
    // within 200 ms. The plain and AddressSanitizer builds run this test
    // with the kernel's own delivery.
    GTEST_SKIP() << "signal delivery in a forked child under "
                    "ThreadSanitizer is deferred";
  }
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    InstallTerminationMessage("trainer rank 1 of 2", "stopped by SIGTERM");
    {
      SignalHandler handler("stop", "snapshot", "stop");
      raise(SIGTERM);
      if (handler.CheckForSignals() != SolverAction::STOP) _exit(3);
    }
    raise(SIGTERM);
    _exit(4);  // not reached when the termination handler is back
  }
  close(fds[1]);
  std::string said;
  char buffer[512];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;) {
    said.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status << ", said: " << said;
  EXPECT_EQ(WEXITSTATUS(status), 143) << said;
  EXPECT_EQ(said.rfind("trainer rank 1 of 2: SIGTERM received: stopping", 0),
            0u)
      << said;
  EXPECT_NE(said.find("\ntrainer rank 1 of 2: stopped by SIGTERM\n"),
            std::string::npos)
      << said;
}

TEST(SignalHandlerTest, ActionlessSignalHoldsNothingBack) {
  SigtermFallback fallback;
  SignalHandler handler(SolverAction::NONE, SolverAction::NONE,
                        SolverAction::STOP);
  Stderr([] {
    raise(SIGHUP);
    raise(SIGINT);
    raise(SIGTERM);
  });
  EXPECT_EQ(handler.CheckForSignals(), SolverAction::STOP);
  EXPECT_EQ(handler.CheckForSignals(), SolverAction::NONE);
}

TEST(SignalHandlerTest, SigintStopsTraining) {
  Poseidon::set_mode(Poseidon::CPU);
  auto solver = CreateSolver<float>(test::SolverTestParam("max_iter: 100"));
  test::FillSolverTestInputs(solver->net().get());
  SignalHandler handler("stop", "none");
  solver->SetActionFunction(handler.GetActionFunction());
  solver->add_on_gradients_ready([&] {
    if (solver->iter() == 2) raise(SIGINT);
  }).Detach();
  solver->Step(100);
  EXPECT_EQ(solver->iter(), 3);
  EXPECT_TRUE(solver->requested_early_exit());
}

// What poseidon_train does with --sigterm_effect=stop: the iteration under
// way ends, Solve writes its snapshot for that iteration and says that it
// stopped early.
TEST(SignalHandlerTest, SigtermStopsTrainingWithASnapshot) {
  Poseidon::set_mode(Poseidon::CPU);
  const std::string dir = test::MakeTempDir();
  auto solver = CreateSolver<float>(test::SolverTestParam(
      StrCat("max_iter: 100 snapshot_prefix: '", dir, "/stopped'")));
  test::FillSolverTestInputs(solver->net().get());
  SigtermFallback fallback;
  SignalHandler handler("stop", "snapshot", "stop");
  solver->SetActionFunction(handler.GetActionFunction());
  solver->add_on_gradients_ready([&] {
    if (solver->iter() == 4) raise(SIGTERM);
  }).Detach();
  solver->Solve();  // the handler's one line goes to stderr
  EXPECT_EQ(g_fallback_sigterms, 0);
  EXPECT_TRUE(solver->requested_early_exit());
  EXPECT_EQ(solver->iter(), 5);
  namespace fs = std::filesystem;
  EXPECT_TRUE(fs::exists(dir + "/stopped_iter_5.caffemodel"));
  EXPECT_TRUE(fs::exists(dir + "/stopped_iter_5.solverstate"));
  EXPECT_FALSE(fs::exists(dir + "/stopped_iter_100.caffemodel"));
}

}  // namespace
}  // namespace poseidon
