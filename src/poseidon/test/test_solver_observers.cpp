// The solver's observation points (Note [Solver observation points] in
// solver.hpp): each fires at the moment the note gives, among the training
// loop's own steps, subscribers run in the order they subscribed, and a
// dropped Subscription stops its callback while the others go on.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/solvers/sgd_solver.hpp"
#include "poseidon/util/io.hpp"
#include "solver_test_util.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using Add = Subscription (Solver<float>::*)(std::function<void()>);

// Every observation point, with the letter the event logs below give it.
struct Point {
  const char* name;
  char letter;
  Add add;
};
const Point kPoints[] = {
    {"step_begin", 'b', &Solver<float>::add_on_step_begin},
    {"sync_weights", 'w', &Solver<float>::add_on_sync_weights},
    {"sync_history", 'h', &Solver<float>::add_on_sync_history},
    {"start", 's', &Solver<float>::add_on_start},
    {"gradients_ready", 'g', &Solver<float>::add_on_gradients_ready},
    {"step_end", 'e', &Solver<float>::add_on_step_end},
    {"restored", 'r', &Solver<float>::add_on_restored},
};

class SolverObserversTest : public ::testing::Test {
 protected:
  SolverObserversTest() : dir_(test::MakeTempDir()) {
    // iter_size 2: two forward passes between start and gradients_ready.
    // A test at iterations 0 and 2, a snapshot at 2.
    solver_ = std::make_unique<SGDSolver<float>>(test::SolverTestParam(
        StrCat("iter_size: 2 test_iter: 1 test_interval: 2 snapshot: 2 "
               "snapshot_prefix: '",
               Prefix(), "' test_net_param { ", test::SolverTestNet(4), " }")));
    test::FillSolverTestInputs(solver_->net().get());
    test::FillSolverTestInputs(solver_->test_nets()[0].get());
  }
  ~SolverObserversTest() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string Prefix() const { return dir_ + "/snap"; }

  // Three iterations, then a restore of the snapshot of iteration 2.
  void Run() {
    solver_->Step(3);
    solver_->Restore(Prefix() + "_iter_2.solverstate");
  }

  const std::string dir_;
  std::unique_ptr<Solver<float>> solver_;
};

// The moments, logged among landmarks of the loop: F a forward pass of the
// train net, T one of the test net, U the update (the strategy's
// apply_update, which runs ApplyUpdate).
TEST_F(SolverObserversTest, EachPointFiresAtItsMoment) {
  std::string log;
  std::vector<Subscription> subscriptions;
  for (const Point& p : kPoints) {
    subscriptions.push_back(
        (solver_.get()->*p.add)([&log, p] { log += p.letter; }));
  }
  subscriptions.push_back(solver_->net()->add_before_forward(
      [&log](int layer) { log += layer == 0 ? "F" : ""; }));
  subscriptions.push_back(solver_->test_nets()[0]->add_before_forward(
      [&log](int layer) { log += layer == 0 ? "T" : ""; }));
  Solver<float>::DistributedStrategy strategy;
  strategy.apply_update = [&log, this] {
    log += 'U';
    solver_->ApplyUpdate();
  };
  solver_->SetDistributedStrategy(strategy);
  // What the points see of the solver's state when they fire.
  const std::string snapshot = Prefix() + "_iter_2.caffemodel";
  bool snapshot_written_before_history = true;
  int restored_iter = -1;
  subscriptions.push_back(solver_->add_on_sync_history(
      [&] { snapshot_written_before_history = FileExists(snapshot); }));
  subscriptions.push_back(
      solver_->add_on_restored([&] { restored_iter = solver_->iter(); }));

  std::string legend;
  for (const Point& p : kPoints) {
    legend += std::string(1, p.letter) + "=" + p.name + " ";
  }
  Run();
  EXPECT_EQ(log,
            "b"      // Step begins
            "wT"     // iteration 0: weights synced, then tested
            "sFFgU"  // start, iter_size forwards, gradients, update
            "sFFgU"  // iteration 1
            "wh"     // the snapshot of iteration 2
            "wT"     // iteration 2's test
            "sFFgU"  // iteration 2
            "we"     // Step ends
            "r")     // Restore
      << "points: " << legend;
  EXPECT_FALSE(snapshot_written_before_history)
      << "sync_history ran after " << snapshot << " was written";
  EXPECT_TRUE(FileExists(snapshot));
  EXPECT_EQ(restored_iter, 2) << "restored ran before the state was loaded";
  EXPECT_EQ(solver_->iter(), 2);

  // SyncState runs the two sync points, in that order.
  log.clear();
  solver_->SyncState();
  EXPECT_EQ(log, "wh");
  solver_->SetDistributedStrategy({});
}

TEST_F(SolverObserversTest, SubscribersRunInTheOrderTheySubscribed) {
  for (const Point& p : kPoints) {
    std::string order;
    Subscription first = (solver_.get()->*p.add)([&] { order += "1"; });
    Subscription second = (solver_.get()->*p.add)([&] { order += "2"; });
    Run();
    ASSERT_FALSE(order.empty()) << p.name << " never fired";
    std::string expected;
    while (expected.size() < order.size()) expected += "12";
    EXPECT_EQ(order, expected) << p.name;
  }
}

// For every point: the callback whose handle was reset (or destroyed)
// stops, the one subscribed beside it goes on.
TEST_F(SolverObserversTest, ADroppedSubscriptionStopsFiring) {
  const size_t n = std::size(kPoints);
  std::vector<int> dropped(n, 0), reset(n, 0), kept(n, 0);
  std::vector<Subscription> resets, keeps;
  {
    std::vector<Subscription> drops;
    for (size_t i = 0; i < n; ++i) {
      Solver<float>* s = solver_.get();
      drops.push_back((s->*kPoints[i].add)([&dropped, i] { ++dropped[i]; }));
      resets.push_back((s->*kPoints[i].add)([&reset, i] { ++reset[i]; }));
      keeps.push_back((s->*kPoints[i].add)([&kept, i] { ++kept[i]; }));
    }
    Run();
    for (size_t i = 0; i < n; ++i) {
      EXPECT_GT(dropped[i], 0) << kPoints[i].name << " never fired";
      EXPECT_EQ(reset[i], dropped[i]) << kPoints[i].name;
      EXPECT_EQ(kept[i], dropped[i]) << kPoints[i].name;
    }
  }  // `drops` destroyed here
  for (Subscription& s : resets) {
    s.Reset();
    EXPECT_FALSE(s.active());
  }
  const std::vector<int> before = kept;
  Run();
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(dropped[i], before[i])
        << kPoints[i].name << " fired after its handle was destroyed";
    EXPECT_EQ(reset[i], before[i])
        << kPoints[i].name << " fired after its handle was reset";
    EXPECT_GT(kept[i], before[i])
        << kPoints[i].name << " stopped for a subscriber that kept its handle";
  }
}

// A handle that outlives its solver does nothing when it goes.
TEST_F(SolverObserversTest, AHandleMayOutliveTheSolver) {
  int fired = 0;
  Subscription handle = solver_->add_on_start([&] { ++fired; });
  solver_->Step(1);
  EXPECT_EQ(fired, 1);
  solver_.reset();
  EXPECT_TRUE(handle.active());
  handle.Reset();
  EXPECT_FALSE(handle.active());
}

}  // namespace
}  // namespace poseidon
