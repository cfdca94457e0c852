// SignalHandler: flag strings, SIGINT/SIGHUP to solver actions, one handler at
// a time, restoring the previous dispositions, and stopping a solver.
#include <gtest/gtest.h>
#include <signal.h>

#include <memory>

#include "poseidon/solver_factory.hpp"
#include "poseidon/util/signal_handler.hpp"
#include "solver_test_util.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

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

}  // namespace
}  // namespace poseidon
