// The distributed trainer's correctness test (docs/distributed.md, Consistency): under
// BSP, W ranks with batch K each end with the same weights, up to float
// rounding, as one rank with batch W K on the same samples; for every solver
// type, with weight decay, lr_mult, a step lr schedule, iter_size and
// clip_gradients, and for each transport forced in turn and for AUTO. Ranks
// are threads over a LoopbackWorld; the data is a real LMDB, read by each
// rank's Data layer through its data shard (every W-th record).
//
// Tolerance: the runs differ only in the order of float additions (sums over
// ranks vs over one batch), so in double precision the weights agree to a
// relative 1e-9 after the iterations run here; one float run checks 1e-4.
// Replicas of one distributed run must agree bit for bit.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "poseidon/distributed/action_agreement.hpp"
#include "poseidon/distributed/device_workers.hpp"
#include "poseidon/distributed/loopback_communicator.hpp"
#include "poseidon/distributed/nccl_reducer.hpp"
#include "poseidon/distributed/synchronizer.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/db.hpp"
#include "poseidon/util/gpu_context.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/timeline.hpp"
#include "sync_test_util.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace dist {
namespace {

using namespace sync_test;  // NOLINT(build/namespaces)

struct Case {
  const char* solver;
  DistributedParameter::CommType comm;
  int ranks;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.solver << " " << DistributedParameter::CommType_Name(c.comm)
      << " " << c.ranks << " ranks";
}

class SynchronizerEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(SynchronizerEquivalence, MatchesOneRankWithTheWholeBatch) {
  const Case c = GetParam();
  constexpr int kBatch = 2;
  constexpr int kIters = 5;
  const Weights<double> alone = TrainAlone<double>(
      MakeSolver(c.solver, kBatch * c.ranks), kIters);
  // Small blocks: many blocks per param, spread over every shard.
  const auto together = TrainTogether<double>(
      MakeSolver(c.solver, kBatch),
      Dist(c.comm, "block_size: 64 num_push_threads: 2 num_pull_threads: 2"),
      c.ranks, kIters);
  ExpectReplicasIdentical(together);
  ExpectClose(alone, together[0], 1e-9,
              StrCat(c.solver, " over ", c.ranks, " ranks"));
  // And training moved the weights at all.
  const Weights<double> start = TrainAlone<double>(
      MakeSolver(c.solver, kBatch * c.ranks), 0);
  double moved = 0;
  for (size_t p = 0; p < start.size(); ++p) {
    for (size_t i = 0; i < start[p].size(); ++i) {
      moved = std::max(moved, std::fabs(start[p][i] - alone[p][i]));
    }
  }
  EXPECT_GT(moved, 1e-4);
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const char* solver :
       {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"}) {
    for (auto comm : {DistributedParameter::PS, DistributedParameter::SFB,
                      DistributedParameter::ALLREDUCE,
                      DistributedParameter::AUTO}) {
      cases.push_back({solver, comm, 2});
    }
    cases.push_back({solver, DistributedParameter::AUTO, 4});
  }
  cases.push_back({"SGD", DistributedParameter::PS, 3});
  cases.push_back({"SGD", DistributedParameter::ALLREDUCE, 3});
  cases.push_back({"SGD", DistributedParameter::SFB, 4});
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return StrCat(info.param.solver, "_",
                DistributedParameter::CommType_Name(info.param.comm), "_",
                info.param.ranks, "ranks");
}

INSTANTIATE_TEST_SUITE_P(AllSolversAndTransports, SynchronizerEquivalence,
                         ::testing::ValuesIn(AllCases()), CaseName);

// Settings that change when updates happen; each must still match.
TEST(SynchronizerTest, ClipGradientsMatchesOneRank) {
  for (auto comm : {DistributedParameter::PS, DistributedParameter::SFB,
                    DistributedParameter::ALLREDUCE}) {
    const std::string extra = "clip_gradients: 0.05 ";
    const auto alone = TrainAlone<double>(MakeSolver("SGD", 4, extra), 5);
    const auto together = TrainTogether<double>(MakeSolver("SGD", 2, extra),
                                                Dist(comm), 2, 5);
    ExpectReplicasIdentical(together);
    ExpectClose(alone, together[0], 1e-9, "clip_gradients");
  }
}

TEST(SynchronizerTest, IterSizeMatchesOneRank) {
  // iter_size 2 of batch 2 on 2 ranks = one rank, iter_size 2 of batch 4.
  const auto alone =
      TrainAlone<double>(MakeSolver("Adam", 4, "iter_size: 2"), 4);
  const auto together = TrainTogether<double>(
      MakeSolver("Adam", 2, "iter_size: 2"), Dist(DistributedParameter::AUTO),
      2, 4);
  ExpectReplicasIdentical(together);
  ExpectClose(alone, together[0], 1e-9, "iter_size");
}

TEST(SynchronizerTest, ExchangeAfterBackwardMatchesWaitFree) {
  const auto alone = TrainAlone<double>(MakeSolver("Nesterov", 4), 5);
  const auto together = TrainTogether<double>(
      MakeSolver("Nesterov", 2),
      Dist(DistributedParameter::PS, "wait_free: false"), 2, 5);
  ExpectReplicasIdentical(together);
  ExpectClose(alone, together[0], 1e-9, "wait_free: false");
}

TEST(SynchronizerTest, FloatMatchesOneRankToFloatRounding) {
  const auto alone = TrainAlone<float>(MakeSolver("SGD", 4), 5);
  const auto together = TrainTogether<float>(
      MakeSolver("SGD", 2), Dist(DistributedParameter::AUTO), 2, 5);
  ExpectReplicasIdentical(together);
  ExpectClose(alone, together[0], 1e-4, "float");
}

TEST(SynchronizerTest, StalenessKeepsReplicasIdenticalAndTrains) {
  const auto start = TrainAlone<double>(MakeSolver("SGD", 2), 0);
  const auto together = TrainTogether<double>(
      MakeSolver("SGD", 2), Dist(DistributedParameter::PS, "staleness: 2"), 3,
      8);
  ExpectReplicasIdentical(together);
  double moved = 0;
  for (size_t p = 0; p < start.size(); ++p) {
    for (size_t i = 0; i < start[p].size(); ++i) {
      moved = std::max(moved, std::fabs(start[p][i] - together[0][p][i]));
    }
  }
  EXPECT_GT(moved, 1e-4);
}

// How far a fast rank gets ahead of a slow one, seen when the fast one
// starts an iteration: it may start iteration t once it has applied the
// update of t-2-s (the wait for t-1-s comes in t's forward), which needs the
// slow rank to be in iteration t-2-s at least: a lead of s + 2.
int MaxLead(int staleness) {
  std::atomic<int> iter_of[2] = {{0}, {0}};
  std::atomic<int> max_lead{0};
  RunRanks(2, [&](int r, Communicator* comm) {
    Poseidon::set_data_shard({r, 2, false});
    auto solver = CreateSolver<double>(MakeSolver("SGD", 2));
    Synchronizer<double> sync(
        solver.get(), comm,
        Dist(DistributedParameter::PS, StrCat("staleness: ", staleness)));
    solver->add_on_start([&, r, s = solver.get()] {
      iter_of[r] = s->iter();
      if (r == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      } else {
        const int lead = iter_of[0] - iter_of[1];
        if (lead > max_lead) max_lead = lead;
      }
    }).Detach();
    solver->Step(12);
  });
  return max_lead;
}

TEST(SynchronizerTest, StalenessBoundsHowFarARankRunsAhead) {
  EXPECT_LE(MaxLead(0), 2);
  const int lead = MaxLead(2);
  EXPECT_GE(lead, 3) << "with staleness 2 the fast rank never ran further "
                        "ahead than under BSP";
  EXPECT_LE(lead, 4);
}

// A stop requested on one rank only (a signal that reached one process)
// takes effect on every rank at the same iteration, staleness + 1 polls
// later, without holding the ranks in step (action_agreement.hpp).
TEST(SynchronizerTest, AStopOnOneRankStopsEveryRankAtOneIteration) {
  for (int staleness : {0, 2}) {
    std::atomic<int> stopped_at[2] = {{-1}, {-1}};
    RunRanks(2, [&](int r, Communicator* comm) {
      Poseidon::set_data_shard({r, 2, false});
      auto solver = CreateSolver<double>(MakeSolver("SGD", 2));
      Synchronizer<double> sync(
          solver.get(), comm,
          Dist(DistributedParameter::PS, StrCat("staleness: ", staleness)));
      Solver<double>* s = solver.get();
      solver->SetActionFunction([r, s] {
        return r == 1 && s->iter() == 3 ? SolverAction::STOP
                                        : SolverAction::NONE;
      });
      if (r == 1) {
        solver->add_on_start([] {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }).Detach();
      }
      solver->Step(20);
      EXPECT_TRUE(solver->requested_early_exit()) << "rank " << r;
      stopped_at[r] = solver->iter();
    });
    EXPECT_EQ(stopped_at[0], stopped_at[1]) << "staleness " << staleness;
    EXPECT_EQ(stopped_at[0], 3 + staleness + 1) << "staleness " << staleness;
  }
}

// A snapshot of a distributed run resumes distributed: the restored ranks
// update again (iteration numbers no longer start at 0) and match one
// process restored from the same snapshot.
void CheckResumesFromASnapshot(LoopbackOptions options) {
  const std::string prefix = test::MakeTempDir() + "/resume";
  const std::string extra = StrCat("snapshot_prefix: '", prefix, "' ");
  const std::string state = prefix + "_iter_3.solverstate";
  // Trains 3 iterations and snapshots, or resumes and trains 2 more.
  std::vector<Weights<double>> together(2);
  auto train = [&](bool resume) {
    RunRanks(
        2,
        [&](int r, Communicator* comm) {
          Poseidon::set_data_shard({r, 2, false});
          auto solver = CreateSolver<double>(MakeSolver("Adam", 2, extra));
          Synchronizer<double> sync(solver.get(), comm,
                                    Dist(DistributedParameter::AUTO));
          if (!resume) {
            solver->Step(3);
            solver->Snapshot();
            return;
          }
          solver->Restore(state);
          EXPECT_EQ(solver->iter(), 3);
          solver->Step(2);
          together[r] = ReadWeights(*solver);
        },
        options);
  };
  train(false);
  auto alone = CreateSolver<double>(MakeSolver("Adam", 4, extra));
  alone->Restore(state);
  const Weights<double> restored = ReadWeights(*alone);
  alone->Step(2);
  train(true);
  ExpectReplicasIdentical(together);
  ExpectClose(ReadWeights(*alone), together[0], 1e-9, "resumed");
  double moved = 0;
  for (size_t p = 0; p < restored.size(); ++p) {
    for (size_t i = 0; i < restored[p].size(); ++i) {
      moved = std::max(moved, std::fabs(restored[p][i] - together[0][p][i]));
    }
  }
  EXPECT_GT(moved, 1e-6) << "the resumed ranks did not update";
}

TEST(SynchronizerTest, ResumesFromASnapshot) {
  CheckResumesFromASnapshot({});
}

TEST(SynchronizerTest, ResumesFromASnapshotThroughSharedMemory) {
  CheckResumesFromASnapshot(OneHost());
}

TEST(SynchronizerTest, StalenessWithClipGradientsIsAConfigError) {
  EXPECT_THROW(TrainTogether<double>(MakeSolver("SGD", 2, "clip_gradients: 1"),
                                     Dist(DistributedParameter::PS,
                                          "staleness: 1"),
                                     2, 1),
               ConfigError);
}

TEST(SynchronizerTest, DifferentNetsRefuseToStart) {
  RunRanks(2, [](int r, Communicator* comm) {
    Poseidon::set_data_shard({r, 2, false});
    auto solver = CreateSolver<double>(
        MakeSolver("SGD", 2, "", r == 1 ? 7 : 6));
    try {
      Synchronizer<double> sync(solver.get(), comm,
                                Dist(DistributedParameter::PS));
      ADD_FAILURE() << "rank " << r << " started with mismatched nets";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("rank 1 was started with a "
                                           "different train net"),
                std::string::npos)
          << e.what();
    }
  });
}

TEST(SynchronizerTest, DifferentSolverSettingsRefuseToStart) {
  RunRanks(2, [](int r, Communicator* comm) {
    Poseidon::set_data_shard({r, 2, false});
    auto solver = CreateSolver<double>(
        MakeSolver("SGD", 2, r == 1 ? "rms_decay: 0.5" : ""));
    EXPECT_THROW(Synchronizer<double>(solver.get(), comm,
                                      Dist(DistributedParameter::PS)),
                 ConfigError);
  });
}

TEST(SynchronizerTest, PlanNamesEveryExchangedLayer) {
  RunRanks(2, [](int r, Communicator* comm) {
    Poseidon::set_data_shard({r, 2, false});
    auto solver = CreateSolver<float>(MakeSolver("SGD", 2));
    Synchronizer<float> sync(solver.get(), comm,
                             Dist(DistributedParameter::SFB));
    ASSERT_EQ(sync.plan().size(), 3u);
    // Backward order; SFB for the InnerProduct layers only.
    EXPECT_EQ(sync.plan()[0].layer, "ip2");
    EXPECT_EQ(sync.plan()[0].transport, CommType::SFB);
    EXPECT_EQ(sync.plan()[1].layer, "ip1");
    EXPECT_EQ(sync.plan()[1].transport, CommType::SFB);
    EXPECT_EQ(sync.plan()[2].layer, "conv");
    EXPECT_NE(sync.plan()[2].transport, CommType::SFB);
    EXPECT_GT(sync.predicted_bytes_per_iter(), 0);
    solver->Step(2);
    EXPECT_GT(sync.bytes_moved(), 0u);
  });
}

TEST(SynchronizerTest, TestScoresCoverTheTestSetOnce) {
  // test_iter 8 of batch 2: one rank reads records 0..15; two ranks run 4
  // iterations each on their halves; the means must agree.
  const std::string extra = StrCat(
      "test_net_param { ", TrainNet(2), " } test_iter: 8 test_interval: 1000 ");
  auto alone = CreateSolver<double>(MakeSolver("SGD", 2, extra));
  alone->TestAll();
  const std::vector<double> expected = alone->test_scores()[0];
  ASSERT_EQ(expected.size(), 2u);  // accuracy, loss
  RunRanks(2, [&](int r, Communicator* comm) {
    Poseidon::set_data_shard({r, 2, false});
    auto solver = CreateSolver<double>(MakeSolver("SGD", 2, extra));
    Synchronizer<double> sync(solver.get(), comm,
                              Dist(DistributedParameter::PS));
    solver->TestAll();
    ASSERT_EQ(solver->test_scores()[0].size(), 2u);
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(solver->test_scores()[0][i], expected[i], 1e-12)
          << "rank " << r << " output " << i;
    }
  });
}

// Note [Shared memory allreduce]: ranks on one host. AUTO then exchanges
// every layer through shared memory and predicts no traffic; the weights
// match one rank with the whole batch for every solver.
class SharedMemoryEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(SharedMemoryEquivalence, MatchesOneRankWithTheWholeBatch) {
  const Case c = GetParam();
  const Weights<double> alone =
      TrainAlone<double>(MakeSolver(c.solver, 2 * c.ranks), 5);
  const auto together = TrainTogether<double>(
      MakeSolver(c.solver, 2), Dist(c.comm), c.ranks, 5, OneHost());
  ExpectReplicasIdentical(together);
  ExpectClose(alone, together[0], 1e-9,
              StrCat(c.solver, " through shared memory"));
}

std::vector<Case> SharedMemoryCases() {
  std::vector<Case> cases;
  for (const char* solver :
       {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"}) {
    cases.push_back({solver, DistributedParameter::AUTO, 2});
  }
  cases.push_back({"SGD", DistributedParameter::ALLREDUCE, 3});
  cases.push_back({"Adam", DistributedParameter::AUTO, 4});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(OneHost, SharedMemoryEquivalence,
                         ::testing::ValuesIn(SharedMemoryCases()), CaseName);

TEST(SharedMemoryTest, PlanUsesSharedMemoryOnlyWhenAllowed) {
  for (bool allowed : {true, false}) {
    RunRanks(
        2,
        [allowed](int r, Communicator* comm) {
          Poseidon::set_data_shard({r, 2, false});
          auto solver = CreateSolver<float>(MakeSolver("SGD", 2));
          Synchronizer<float> sync(
              solver.get(), comm,
              Dist(DistributedParameter::AUTO,
                   allowed ? "" : "shared_memory: false"));
          ASSERT_EQ(sync.plan().size(), 3u);
          for (const PlannedLayer& p : sync.plan()) {
            if (allowed) {
              EXPECT_EQ(p.transport, CommType::ALLREDUCE) << p.reason;
              EXPECT_EQ(p.predicted_bytes, 0) << p.reason;
              EXPECT_NE(p.reason.find("through shared memory"),
                        std::string::npos)
                  << p.reason;
            } else {
              EXPECT_EQ(p.reason.find("shared memory"), std::string::npos)
                  << p.reason;
            }
          }
          solver->Step(2);
          // Nothing went through messages when everything was shared.
          EXPECT_EQ(sync.bytes_moved() == 0, allowed);
        },
        OneHost());
  }
}

// The shared-memory allreduce runs on the training thread: its share of
// each exchange (staging and publishing a layer's gradient) shows on the
// compute lane, one event per layer and iteration.
TEST(SharedMemoryTest, TheTrainingThreadsShareIsOnTheTimeline) {
  RunRanks(
      2,
      [](int r, Communicator* comm) {
        Poseidon::set_data_shard({r, 2, false});
        auto solver = CreateSolver<float>(MakeSolver("SGD", 2));
        Timeline timeline(r, StrCat("rank ", r));
        Synchronizer<float> sync(solver.get(), comm,
                                 Dist(DistributedParameter::ALLREDUCE, ""),
                                 &timeline);
        ASSERT_EQ(sync.plan().size(), 3u);
        solver->Step(2);
        EXPECT_EQ(test::CountTimelineEvents(&timeline, "compute", "ALLREDUCE"),
                  3 * 2)
            << timeline.ToJson();
        EXPECT_EQ(
            test::CountTimelineEvents(&timeline, "collective", "ALLREDUCE"), 0)
            << timeline.ToJson();
      },
      OneHost());
}

// Note [Gradients born in shared memory]: through shared memory, with no
// staleness, the params' diffs live in the three slots in turn (the backward
// writes the gradient where the other ranks read it), and once the
// Synchronizer is gone they own memory again, with the values they held.
// Messages, or staleness, keep the diffs where they were.
TEST(SharedMemoryTest, GradientsAreBornInTheSlotsAndGivenBack) {
  const std::pair<const char*, bool> cases[] = {
      {"", true}, {"shared_memory: false", false}, {"staleness: 1", false}};
  for (const auto& [settings, born] : cases) {
    RunRanks(
        2,
        [settings = settings, born = born](int r, Communicator* comm) {
          Poseidon::set_data_shard({r, 2, false});
          auto solver = CreateSolver<double>(MakeSolver("SGD", 2));
          const vector<Blob<double>*>& learnable =
              solver->net()->learnable_params();
          auto where = [&] {
            std::vector<const double*> at;
            for (Blob<double>* b : learnable) at.push_back(b->cpu_diff());
            return at;
          };
          const std::vector<const double*> own = where();
          Weights<double> held;
          std::vector<const double*> last;
          {
            Synchronizer<double> sync(
                solver.get(), comm,
                Dist(DistributedParameter::ALLREDUCE, settings));
            std::vector<std::vector<const double*>> after;
            for (int step = 0; step < 4; ++step) {
              solver->Step(1);
              after.push_back(where());
            }
            for (size_t i = 0; i < learnable.size(); ++i) {
              SCOPED_TRACE(StrCat(settings, ", param ", i));
              if (born) {
                EXPECT_NE(after[0][i], own[i]);
                EXPECT_NE(after[1][i], after[0][i]);
                EXPECT_NE(after[2][i], after[0][i]);
                EXPECT_NE(after[2][i], after[1][i]);
                EXPECT_EQ(after[3][i], after[0][i]);
              } else {
                for (const auto& at : after) EXPECT_EQ(at[i], own[i]);
              }
            }
            for (Blob<double>* b : learnable) {
              held.emplace_back(b->cpu_diff(), b->cpu_diff() + b->count());
            }
            last = after.back();
          }
          for (size_t i = 0; i < learnable.size(); ++i) {
            const double* diff = learnable[i]->cpu_diff();
            if (born) EXPECT_NE(diff, last[i]) << "param " << i;
            EXPECT_EQ(std::vector<double>(diff, diff + learnable[i]->count()),
                      held[i])
                << settings << ", param " << i;
          }
          solver->Step(1);  // alone now, in memory of its own
        },
        OneHost());
  }
}

TEST(SharedMemoryTest, StalenessClipIterSizeAndExchangeAfterBackward) {
  const auto stale = TrainTogether<double>(
      MakeSolver("SGD", 2), Dist(DistributedParameter::AUTO, "staleness: 2"),
      3, 8, OneHost());
  ExpectReplicasIdentical(stale);
  // {solver extras, distributed settings}: each must match one rank.
  const std::pair<const char*, const char*> cases[] = {
      {"clip_gradients: 0.05 ", ""},
      {"", "wait_free: false"},
      {"iter_size: 2 ", ""},
  };
  for (const auto& [extra, dist] : cases) {
    const auto alone = TrainAlone<double>(MakeSolver("SGD", 4, extra), 5);
    const auto together = TrainTogether<double>(
        MakeSolver("SGD", 2, extra),
        Dist(DistributedParameter::ALLREDUCE, dist), 2, 5, OneHost());
    ExpectReplicasIdentical(together);
    ExpectClose(alone, together[0], 1e-9, StrCat(extra, dist));
  }
}

TEST(SharedMemoryTest, AStalledRankIsNamed) {
  LoopbackOptions options = OneHost();
  options.timeout = std::chrono::milliseconds(300);
  std::string error;
  RunRanks(
      2,
      [&](int r, Communicator* comm) {
        Poseidon::set_data_shard({r, 2, false});
        auto solver = CreateSolver<double>(MakeSolver("SGD", 2));
        Synchronizer<double> sync(solver.get(), comm,
                                  Dist(DistributedParameter::AUTO));
        if (r == 1) {
          // Never trains: rank 0 waits for its first gradient.
          std::this_thread::sleep_for(std::chrono::milliseconds(900));
          return;
        }
        try {
          solver->Step(3);
        } catch (const DistributedError& e) {
          error = e.what();
        }
      },
      options);
  EXPECT_NE(error.find("timed out after 0.3 s waiting for rank 1 to "
                       "publish the gradient in shared memory"),
            std::string::npos)
      << "error: '" << error << "'";
}

// The device level: T worker threads with batch K in each of W ranks match
// one worker with batch W T K.
TEST(DeviceWorkersTest, ThreadsMatchOneWorkerWithTheWholeBatch) {
  for (const char* type : {"SGD", "Adam"}) {
    const auto alone = TrainAlone<double>(MakeSolver(type, 4), 5);
    std::unique_ptr<Solver<double>> solver =
        CreateSolver<double>(MakeSolver(type, 2));
    {
      Poseidon::set_data_shard({0, 2, false});
      solver = CreateSolver<double>(MakeSolver(type, 2));
      DeviceWorkers<double> workers(solver.get(), 2);
      solver->Step(5);
      Poseidon::set_data_shard({});
    }
    ExpectClose(alone, ReadWeights(*solver), 1e-9,
                StrCat(type, " with 2 device workers"));
  }
}

TEST(DeviceWorkersTest, ThreadsTimesRanksMatchOneWorker) {
  constexpr int kRanks = 2, kThreads = 2;
  const auto alone = TrainAlone<double>(MakeSolver("Nesterov", 8), 4);
  for (auto comm_type : {DistributedParameter::PS, DistributedParameter::SFB,
                         DistributedParameter::ALLREDUCE}) {
  std::vector<Weights<double>> together(kRanks);
  RunRanks(kRanks, [&](int r, Communicator* comm) {
    Poseidon::set_data_shard({r * kThreads, kRanks * kThreads, false});
    auto solver = CreateSolver<double>(MakeSolver("Nesterov", 2));
    DeviceWorkers<double> workers(solver.get(), kThreads, r, kRanks);
    Synchronizer<double> sync(solver.get(), comm, Dist(comm_type), nullptr,
                              workers.replicas());
    solver->Step(4);
    together[r] = ReadWeights(*solver);
  });
  ExpectReplicasIdentical(together);
  ExpectClose(alone, together[0], 1e-9,
              StrCat("2 ranks x 2 device workers over ",
                     DistributedParameter::CommType_Name(comm_type)));
  }
}

TEST(DeviceWorkersTest, BadThreadCountIsAConfigError) {
  auto solver = CreateSolver<double>(MakeSolver("SGD", 2));
  EXPECT_THROW(DeviceWorkers<double>(solver.get(), 0), ConfigError);
}

// On the GPU (deterministic cuDNN algorithms, as the equivalence tests
// need): ranks training on one GPU match one rank with the whole batch on
// it, every solver, each transport; and the GPU run matches the CPU run to
// the rounding of the GPU's other summation orders. Skipped without a GPU.
class SynchronizerGPUTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::GpuSkipReason().empty()) {
      GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
    }
    saved_ = gpu::GetSettings().deterministic;
    gpu::SetDeterministic(true);
    Poseidon::set_device(0);
  }
  void TearDown() override {
    Poseidon::set_mode(Poseidon::CPU);
    if (test::GpuSkipReason().empty()) gpu::SetDeterministic(saved_);
  }
  bool saved_ = false;
};

TEST_F(SynchronizerGPUTest, MatchesOneRankWithTheWholeBatch) {
  for (const char* type :
       {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"}) {
    Poseidon::set_mode(Poseidon::CPU);
    const auto on_cpu = TrainAlone<double>(MakeSolver(type, 4), 5);
    Poseidon::set_mode(Poseidon::GPU);
    const auto alone = TrainAlone<double>(MakeSolver(type, 4), 5);
    ExpectClose(on_cpu, alone, 1e-7, StrCat(type, ": GPU against CPU"));
    for (auto comm : {DistributedParameter::PS, DistributedParameter::SFB,
                      DistributedParameter::ALLREDUCE}) {
      const auto together =
          TrainTogether<double>(MakeSolver(type, 2), Dist(comm), 2, 5);
      ExpectReplicasIdentical(together);
      ExpectClose(alone, together[0], 1e-9,
                  StrCat(type, " over 2 GPU ranks, ",
                         DistributedParameter::CommType_Name(comm)));
    }
  }
}

TEST_F(SynchronizerGPUTest, DeviceWorkersOnOneGpuMatchOneWorker) {
  Poseidon::set_mode(Poseidon::GPU);
  const auto alone = TrainAlone<double>(MakeSolver("SGD", 4), 5);
  Poseidon::set_data_shard({0, 2, false});
  auto solver = CreateSolver<double>(MakeSolver("SGD", 2));
  {
    DeviceWorkers<double> workers(solver.get(), 2);
    solver->Step(5);
  }
  Poseidon::set_data_shard({});
  ExpectClose(alone, ReadWeights(*solver), 1e-9, "2 workers on one GPU");
}

// The device level on several GPUs (NCCL; distributed/nccl_reducer.hpp). A
// single-GPU communicator runs wherever one GPU does: its reduce and
// broadcast leave the buffer as it was.
TEST_F(SynchronizerGPUTest, NcclOnOneGpuLeavesTheBuffer) {
  if (!NcclReducer::Available()) GTEST_SKIP() << "built without NCCL";
  Poseidon::set_mode(Poseidon::GPU);
  NcclReducer nccl({0});
  Blob<double> blob({5});
  for (int i = 0; i < 5; ++i) blob.mutable_cpu_data()[i] = 0.5 * i - 1;
  nccl.Reduce(0, blob.mutable_gpu_data(), 5);
  nccl.Broadcast(0, blob.mutable_gpu_data(), 5);
  nccl.Settle(0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(blob.cpu_data()[i], 0.5 * i - 1);
}

// One worker per GPU with batch 2 matches one worker with batch 2 T, and
// the replicas keep worker 0's weights.
TEST_F(SynchronizerGPUTest, DeviceWorkersOnTwoGpusMatchOneWorker) {
  if (!NcclReducer::Available()) GTEST_SKIP() << "built without NCCL";
  if (gpu::DeviceCount() < 2) {
    GTEST_SKIP() << "GPU test skipped: needs 2 GPUs, this machine has "
                 << gpu::DeviceCount();
  }
  Poseidon::set_mode(Poseidon::GPU);
  const auto alone = TrainAlone<double>(MakeSolver("SGD", 4), 5);
  Poseidon::set_data_shard({0, 2, false});
  auto solver = CreateSolver<double>(MakeSolver("SGD", 2));
  {
    DeviceWorkers<double> workers(solver.get(), 2, 0, 1, {0, 1});
    solver->Step(5);
  }
  Poseidon::set_data_shard({});
  ExpectClose(alone, ReadWeights(*solver), 1e-9, "2 workers on 2 GPUs");
}

// Without a GPU (or without NCCL) asking for workers on GPUs is a clear
// error, not a crash.
TEST(DeviceWorkersTest, WorkersOnGpusNeedGpuModeAndNccl) {
  Poseidon::set_mode(Poseidon::CPU);
  auto solver = CreateSolver<double>(MakeSolver("SGD", 2));
  try {
    DeviceWorkers<double> workers(solver.get(), 2, 0, 1, {0, 1});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos)
        << e.what();
  }
  try {
    DeviceWorkers<double> workers(solver.get(), 3, 0, 1, {0, 1});
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("one worker per GPU"),
              std::string::npos)
        << e.what();
  }
  if (!NcclReducer::Available()) {
    EXPECT_THROW(NcclReducer({0, 1}), ConfigError);
  }
}

TEST(ActionAgreementTest, EveryRankGetsTheStrongestRequest) {
  // rank 1 asks for a snapshot, rank 2 to stop, then nobody asks.
  RunRanks(3, [](int r, Communicator* comm) {
    const SolverAction mine = r == 1   ? SolverAction::SNAPSHOT
                              : r == 2 ? SolverAction::STOP
                                       : SolverAction::NONE;
    EXPECT_EQ(AgreeOnAction(comm, mine), SolverAction::STOP) << "rank " << r;
    EXPECT_EQ(AgreeOnAction(comm, r == 1 ? SolverAction::SNAPSHOT
                                         : SolverAction::NONE),
              SolverAction::SNAPSHOT)
        << "rank " << r;
    EXPECT_EQ(AgreeOnAction(comm, SolverAction::NONE), SolverAction::NONE);
  });
}

// Under ASYNC no rank waits for a slower one at a poll, however far ahead
// it gets, and every rank still acts on every request at the same poll.
// Rank 2 is slow; ranks meet after polls 120 and 240; rank 1 asks for a
// snapshot after poll 30, rank 2 after poll 100, rank 0 to stop after
// poll 200.
TEST(ActionAgreementTest, AsyncRanksRunAheadAndActTogether) {
  constexpr int kRanks = 3;
  constexpr int64_t kMeetEvery = 120;
  constexpr int64_t kLast = 240;
  std::atomic<int64_t> slow_poll{0};
  std::atomic<int64_t> lead{0};  // the most a fast rank got ahead of rank 2
  std::vector<std::vector<std::pair<int64_t, SolverAction>>> acted(kRanks);
  RunRanks(kRanks, [&](int r, Communicator* comm) {
    auto collective = std::make_unique<CommThread>("collective");
    ActionAgreement agreement(comm, collective.get(),
                              ActionAgreement::kUnbounded);
    for (int64_t poll = 1; poll <= kLast; ++poll) {
      if (r == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(3));
        slow_poll = poll;
      } else {
        int64_t ahead = poll - slow_poll;
        int64_t most = lead;
        while (ahead > most && !lead.compare_exchange_weak(most, ahead)) {
        }
      }
      const SolverAction mine =
          (r == 1 && poll == 30) || (r == 2 && poll == 100)
              ? SolverAction::SNAPSHOT
          : r == 0 && poll == 200 ? SolverAction::STOP
                                  : SolverAction::NONE;
      const SolverAction a =
          agreement.AfterIteration(poll, mine, poll % kMeetEvery == 0);
      if (a == SolverAction::NONE) continue;
      acted[r].emplace_back(poll, a);
      if (a == SolverAction::STOP) break;
    }
    collective.reset();  // joined before the agreement goes
  });
  for (int r = 1; r < kRanks; ++r) EXPECT_EQ(acted[r], acted[0]) << r;
  ASSERT_GE(acted[0].size(), 2u);
  // The first snapshot request is acted on after it, by poll 120 (the
  // meeting); the second after it too; the stop after poll 200 and by the
  // last poll.
  EXPECT_EQ(acted[0].front().second, SolverAction::SNAPSHOT);
  EXPECT_GE(acted[0].front().first, 30);
  EXPECT_LE(acted[0].front().first, kMeetEvery);
  const auto& second = acted[0][acted[0].size() - 2];
  EXPECT_EQ(second.second, SolverAction::SNAPSHOT);
  EXPECT_GE(second.first, 100);
  EXPECT_EQ(acted[0].back().second, SolverAction::STOP);
  EXPECT_GE(acted[0].back().first, 200);
  EXPECT_LE(acted[0].back().first, kLast);
  // A fixed lag of 64 would keep the fast ranks within 65 polls of rank 2
  // here (measured before a poll); unbounded, they reach the meeting at 120
  // while rank 2 sleeps near its start.
  EXPECT_GT(lead, 90);
}

// A rank that acts away from a meeting (here on a stop that ends its loop)
// first takes the requests posted before that poll, so no rank is left
// agreeing on one alone. Rank 2, the slow one, asks to stop after poll 10
// and for a snapshot after poll 11, while ranks 0 and 1 are far ahead and
// meet nobody until poll 400.
LoopbackOptions Deadline(std::chrono::milliseconds timeout) {
  LoopbackOptions options;
  options.timeout = timeout;
  return options;
}

TEST(ActionAgreementTest, AsyncRanksActingAwayFromAMeetingLeaveNoneBehind) {
  constexpr int kRanks = 3;
  constexpr int64_t kLast = 400;
  std::vector<std::vector<std::pair<int64_t, SolverAction>>> acted(kRanks);
  RunRanks(
      kRanks,
      [&](int r, Communicator* comm) {
        auto collective = std::make_unique<CommThread>("collective");
        ActionAgreement agreement(comm, collective.get(),
                                  ActionAgreement::kUnbounded);
        for (int64_t poll = 1; poll <= kLast; ++poll) {
          std::this_thread::sleep_for(
              std::chrono::microseconds(r == 2 ? 3000 : 200));
          const SolverAction mine = r != 2       ? SolverAction::NONE
                                    : poll == 10 ? SolverAction::STOP
                                    : poll == 11 ? SolverAction::SNAPSHOT
                                                 : SolverAction::NONE;
          const SolverAction a =
              agreement.AfterIteration(poll, mine, poll == kLast);
          if (a == SolverAction::NONE) continue;
          acted[r].emplace_back(poll, a);
          if (a == SolverAction::STOP) break;
        }
        collective.reset();
      },
      Deadline(std::chrono::seconds(20)));  // a rank left agreeing throws
  for (int r = 1; r < kRanks; ++r) EXPECT_EQ(acted[r], acted[0]) << r;
  ASSERT_FALSE(acted[0].empty());
  EXPECT_EQ(acted[0].back().second, SolverAction::STOP);
  EXPECT_GE(acted[0].back().first, 10);
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
