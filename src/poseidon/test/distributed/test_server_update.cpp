// The servers own the model (Note [Server-side update]): a shard's update
// of its blocks is the workers' update of the whole params bit for bit, a
// distributed run with the update on the servers ends with the weights and
// the solver history of the same run with the update on every worker, bit
// for bit, for every solver, and its snapshots hold the servers' history.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/server_process.hpp"
#include "poseidon/distributed/shard_state.hpp"
#include "poseidon/distributed/tags.hpp"
#include "poseidon/solvers/sgd_solver.hpp"
#include "poseidon/util/math_functions.hpp"
#include "server_test_util.hpp"
#include "sync_test_util.hpp"

namespace poseidon {
namespace dist {
namespace {

using namespace sync_test;    // NOLINT(build/namespaces)
using namespace server_test;  // NOLINT(build/namespaces)

const char* const kSolvers[] = {"SGD",     "Nesterov", "AdaGrad",
                                "RMSProp", "AdaDelta", "Adam"};

// Two params (37 and 10 elements) cut into blocks of 4 doubles over three
// shards, stepped for three iterations: once whole, as a worker's solver
// steps them, and once block by block by the shard that holds each block.
TEST(ShardStateTest, BlocksStepAsTheWholeParamDoes) {
  const std::vector<size_t> counts = {37, 10};
  const BlockPartition partition(counts, sizeof(double), 4 * sizeof(double), 3);
  constexpr int kWorkers = 2;
  for (const char* type : kSolvers) {
    SCOPED_TRACE(type);
    const SolverParameter sp = MakeSolver(type, 2, "iter_size: 2");
    const UpdateRule rule = UpdateRuleNamed(type);
    ServerUpdateSettings settings;
    settings.solver = sp;
    settings.rule = rule;
    settings.workers = kWorkers;
    settings.on_server = {true, true};
    settings.lr_mult = {1.5f, 2.f};
    settings.decay_mult = {1.f, 0.5f};
    std::mt19937 gen(5);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<std::vector<double>> weights(2), history[2];
    for (int p = 0; p < 2; ++p) {
      for (size_t i = 0; i < counts[p]; ++i) weights[p].push_back(normal(gen));
      for (int a = 0; a < 2; ++a) {
        history[a].emplace_back(counts[p], 0.0);
        // AdaDelta and AdaGrad keep positive sums of squares.
        for (double& h : history[a][p]) h = std::fabs(normal(gen));
      }
    }
    std::vector<std::unique_ptr<ShardState<double>>> shards;
    for (int s = 0; s < 3; ++s) {
      shards.push_back(
          std::make_unique<ShardState<double>>(&partition, s, settings));
      shards.back()->Seed([&](int p) { return weights[p].data(); },
                          [&](int a, int p) { return history[a][p].data(); });
    }
    for (int iter = 0; iter < 3; ++iter) {
      for (int p = 0; p < 2; ++p) {
        std::vector<double> sum(counts[p]);
        for (double& g : sum) g = normal(gen);
        // The worker: the mean over workers, the step, w -= step.
        std::vector<double> diff(counts[p]);
        cpu_scale(static_cast<int>(counts[p]), 1.0 / kWorkers, sum.data(),
                  diff.data());
        ParamRun<double> run;
        run.count = static_cast<int>(counts[p]);
        run.data = weights[p].data();
        run.diff = diff.data();
        run.history[0] = history[0][p].data();
        run.history[1] = history[1][p].data();
        run.lr_mult = settings.lr_mult[p];
        run.decay_mult = settings.decay_mult[p];
        const double rate = ScheduledRate(sp, iter, MultistepStepAt(sp, iter));
        ComputeStep(Poseidon::CPU, sp, rule, rate, iter, run);
        cpu_axpy(run.count, -1.0, diff.data(), weights[p].data());
        // The shards, each block on its own.
        for (int b : partition.blob_blocks(p)) {
          const ParamBlock& block = partition.blocks()[b];
          std::vector<double> values(sum.begin() + block.offset,
                                     sum.begin() + block.offset + block.count);
          shards[block.shard]->Apply(iter, b, values.data());
          for (size_t i = 0; i < block.count; ++i) {
            ASSERT_EQ(values[i], weights[p][block.offset + i])
                << "iteration " << iter << " param " << p << " element "
                << block.offset + i;
          }
        }
      }
    }
    // Each shard's history, block after block, is the whole params'.
    for (int s = 0; s < 3; ++s) {
      size_t at = 0;
      for (int b : shards[s]->blocks()) {
        const ParamBlock& block = partition.blocks()[b];
        for (int a = 0; a < HistoryArrays(rule); ++a) {
          for (size_t i = 0; i < block.count; ++i) {
            ASSERT_EQ(shards[s]->history(a)[at + i],
                      history[a][block.blob][block.offset + i])
                << "shard " << s << " block " << b << " history " << a;
          }
        }
        at += block.count;
      }
      EXPECT_EQ(at, shards[s]->elements());
    }
  }
}

// Per-push steps (SSP, ASYNC): W pushes of plain SGD each stepping 1/W of
// the gradient and 1/W of the weight decay end where one step of their
// sum does, but for the decay's second-order term (rate^2 decay |g|);
// the whole decay at each push would be W times the decay.
TEST(ShardStateTest, PerPushStepsShareTheWeightDecay) {
  constexpr int kWorkers = 4;
  const BlockPartition partition({64}, sizeof(double), 64 * sizeof(double), 1);
  SolverParameter sp = MakeSolver("SGD", 2);
  sp.set_momentum(0);
  sp.set_weight_decay(0.1);
  sp.set_base_lr(0.01);
  ServerUpdateSettings settings;
  settings.solver = sp;
  settings.rule = UpdateRule::kSGD;
  settings.workers = kWorkers;
  settings.on_server = {true};
  settings.lr_mult = {1.f};
  settings.decay_mult = {1.f};
  ShardState<double> sum_shard(&partition, 0, settings);
  settings.pushers = kWorkers;
  ShardState<double> push_shard(&partition, 0, settings);
  std::vector<double> w(64, 1.0);
  for (ShardState<double>* s : {&sum_shard, &push_shard}) {
    s->Seed([&](int) { return w.data(); }, [](int, int) { return nullptr; });
  }
  std::mt19937 gen(3);
  std::normal_distribution<double> normal(0.0, 0.01);
  std::vector<std::vector<double>> g(kWorkers, std::vector<double>(64));
  std::vector<double> sum(64, 0.0), by_sum, by_push;
  for (auto& gw : g) {
    for (size_t i = 0; i < 64; ++i) {
      gw[i] = normal(gen);
      sum[i] += gw[i];
    }
  }
  by_sum = sum;
  sum_shard.Apply(0, 0, by_sum.data());
  for (const auto& gw : g) {
    by_push = gw;
    push_shard.Apply(0, 0, by_push.data());
  }
  // One step of the sum: w (1 - rate decay) - rate mean(g), 0.999 here; a
  // whole decay per push would give about 0.996.
  for (size_t i = 0; i < 64; ++i) {
    ASSERT_NEAR(by_push[i], by_sum[i], 1e-5) << "element " << i;
  }
}

TEST(ShardStateTest, HoldsOnlyTheBlocksOfParamsUpdatedOnTheServers) {
  const BlockPartition partition({8, 8, 8}, sizeof(float), 4 * sizeof(float),
                                 2);
  std::vector<int> held;
  for (int s = 0; s < 2; ++s) {
    for (int b :
         ShardState<float>::HeldBlocks(partition, s, {true, false, true})) {
      EXPECT_NE(partition.blocks()[b].blob, 1) << "block " << b;
      EXPECT_EQ(partition.blocks()[b].shard, s) << "block " << b;
      held.push_back(b);
    }
  }
  EXPECT_EQ(held.size(), 4u);  // 2 blocks each of params 0 and 2
}

TEST(ShardStateTest, SettingsThatDoNotFitThePartitionAreRefused) {
  const BlockPartition partition({8, 8}, sizeof(float), 16, 2);
  ServerUpdateSettings settings;
  settings.solver = MakeSolver("SGD", 2);
  settings.on_server = {true};  // one param, the partition has two
  settings.lr_mult = {1};
  settings.decay_mult = {1};
  EXPECT_THROW(ShardState<float>(&partition, 0, settings), ConfigError);
}

TEST(ServerUpdateTest, EverySolverMatchesTheWorkersUpdateBitForBit) {
  for (const char* type : kSolvers) {
    ExpectServersMatchWorkers(MakeSolver(type, 2), 2, 4, "", type);
  }
}

TEST(ServerUpdateTest, ScheduleIterSizeAndThreeRanks) {
  // A multistep schedule (the shards compute the rate from the iteration),
  // iter_size 2 (the shards normalise) and L1 decay.
  SolverParameter param = MakeSolver("Adam", 2,
                                     "stepvalue: 1 stepvalue: 3 iter_size: 2 "
                                     "regularization_type: 'L1'");
  param.set_lr_policy("multistep");
  ExpectServersMatchWorkers(param, 3, 5, "", "multistep, iter_size 2, 3 ranks");
}

TEST(ServerUpdateTest, ExchangeAfterBackward) {
  ExpectServersMatchWorkers(MakeSolver("Nesterov", 2), 2, 4, "wait_free: false",
                            "wait_free: false");
}

// Between two Steps every rank halves the conv weights, as a pycaffe
// script may: the servers take the new weights.
TEST(ServerUpdateTest, WeightsSetBetweenStepsReachTheServers) {
  ExpectServersMatchWorkers(MakeSolver("Adam", 2), 2, 4, "",
                            "weights set between steps", [](Solver<double>* s) {
                              Blob<double>* w = s->net()->learnable_params()[0];
                              cpu_scal(w->count(), 0.5, w->mutable_cpu_data());
                            });
}

// Dedicated server ranks (Note [Dedicated servers]) train exactly as shards
// on the workers do: the same weights on every worker and the same history
// at rank 0, bit for bit, with the update on the servers or on the workers,
// exchanges wait-free or after backward, weights set between two Steps.
TEST(ServerUpdateTest, DedicatedServersTrainAsColocatedShards) {
  struct Case {
    const char* solver;
    int workers, servers;
    bool server_update;
    std::string extra;
  };
  for (const Case& c : {Case{"SGD", 2, 2, true, ""},
                        Case{"Adam", 2, 1, true, ""},
                        Case{"Nesterov", 3, 2, true, "wait_free: false"},
                        Case{"AdaGrad", 2, 3, false, ""},
                        Case{"RMSProp", 1, 2, true, ""}}) {
    const std::string what =
        StrCat(c.solver, ", ", c.workers, " workers, ", c.servers,
               " servers, update on the ",
               c.server_update ? "servers " : "workers ", c.extra);
    SCOPED_TRACE(what);
    const SolverParameter param = MakeSolver(c.solver, 2);
    auto halve = [](Solver<double>* s) {
      Blob<double>* w = s->net()->learnable_params()[0];
      cpu_scal(w->count(), 0.5, w->mutable_cpu_data());
    };
    const DistributedParameter dist = PsDist(c.server_update, c.extra);
    const Outcome<double> dedicated =
        Train<double>(param, dist, c.workers, 4, halve, c.servers);
    const Outcome<double> colocated =
        Train<double>(param, dist, c.workers, 4, halve);
    ExpectReplicasIdentical(dedicated.weights);
    ExpectIdentical(dedicated.weights[0], colocated.weights[0], "weights");
    ExpectIdentical(dedicated.history, colocated.history, "history");
    for (const std::string& reason : dedicated.reasons) {
      EXPECT_EQ(reason.find("(updated on the servers)") != std::string::npos,
                c.server_update)
          << reason;
    }
  }
}

// A snapshot of 2 workers and 2 dedicated servers holds the servers'
// history, the one colocated shards give; it resumes on 3 workers and 1
// server as on 3 colocated ranks, bit for bit.
TEST(ServerUpdateTest, DedicatedServersSnapshotAndResumeWithOtherCounts) {
  const std::string dir = test::MakeTempDir();
  auto snapshot = [&](int servers, const std::string& name) {
    const SolverParameter param = MakeSolver(
        "Adam", 2, StrCat("snapshot_prefix: '", dir, "/", name, "' "));
    RunWorkers(2, servers, [&](int r, Communicator* comm,
                               DedicatedServers dedicated) {
      Poseidon::set_data_shard({r, 2, false});
      auto solver = CreateSolver<double>(param);
      Synchronizer<double> sync(solver.get(), comm, PsDist(true), nullptr, {},
                                dedicated);
      solver->Step(3);
      solver->Snapshot();
    });
    SolverState state;
    ReadProtoFromBinaryFile(StrCat(dir, "/", name, "_iter_3.solverstate"),
                            &state);
    return state;
  };
  const SolverState dedicated = snapshot(2, "dedicated");
  const SolverState colocated = snapshot(0, "colocated");
  ExpectSameHistory(dedicated, colocated);
  const std::string state = dir + "/dedicated_iter_3.solverstate";
  auto resume = [&](int servers) {
    std::vector<Weights<double>> weights(3);
    RunWorkers(3, servers, [&](int r, Communicator* comm,
                               DedicatedServers d) {
      Poseidon::set_data_shard({r, 3, false});
      auto solver = CreateSolver<double>(MakeSolver("Adam", 2));
      Synchronizer<double> sync(solver.get(), comm, PsDist(true), nullptr, {},
                                d);
      solver->Restore(state);
      solver->Step(2);
      weights[r] = ReadWeights(*solver);
    });
    return weights;
  };
  const std::vector<Weights<double>> on_servers = resume(1);
  const std::vector<Weights<double>> on_workers = resume(0);
  ExpectReplicasIdentical(on_servers);
  ExpectIdentical(on_servers[0], on_workers[0], "resumed on 3 + 1");
}

// A dedicated server that takes its plan and then stops answering is named
// by both workers at their deadline (5 s here): the Step fails with a
// DistributedError naming the server's rank, and nothing hangs.
TEST(ServerUpdateTest, ASilentDedicatedServerIsNamedWithinTheDeadline) {
  const auto [errors, seconds] = TrainWithASilentServer(MakeSolver("SGD", 2));
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(test::Contains(errors[r], "shard of rank 2")) << "worker " << r;
  }
  EXPECT_LT(seconds, 60) << "the workers waited far past their deadline";
}

TEST(ServerUpdateTest, MatchesOneRankWithTheWholeBatch) {
  const Weights<double> alone = TrainAlone<double>(MakeSolver("RMSProp", 4), 5);
  const Outcome<double> servers =
      Train<double>(MakeSolver("RMSProp", 2), PsDist(true), 2, 5);
  ExpectClose(alone, servers.weights[0], 1e-9, "RMSProp on the servers");
}

TEST(ServerUpdateTest, StalenessKeepsReplicasIdentical) {
  const Outcome<double> servers =
      Train<double>(MakeSolver("SGD", 2), PsDist(true, "staleness: 2"), 3, 8);
  ExpectReplicasIdentical(servers.weights);
}

// The optimizer state of the params the servers update lives on the
// servers: the workers other than rank 0 (which gathers it for snapshots)
// never allocate it. Every param of the test net goes by PS here.
TEST(ServerUpdateTest, WorkersHoldNoHistoryOfServerOwnedParams) {
  const Outcome<double> servers =
      Train<double>(MakeSolver("Adam", 2), PsDist(true), 2, 3);
  const Outcome<double> workers =
      Train<double>(MakeSolver("Adam", 2), PsDist(false), 2, 3);
  EXPECT_EQ(servers.allocated_history[1], 0);
  EXPECT_EQ(workers.allocated_history[1], 12);  // 6 params x 2 arrays
  EXPECT_EQ(servers.allocated_history[0], 12);  // gathered
}

// A snapshot taken between steps holds the servers' history, and a run
// resumed from it with another number of ranks goes on as one process
// resumed from it does.
TEST(ServerUpdateTest, SnapshotsHoldTheServersHistory) {
  const std::string dir = test::MakeTempDir();
  auto snapshot = [&](bool server_update, const std::string& name) {
    const std::string extra =
        StrCat("snapshot_prefix: '", dir, "/", name, "' ");
    RunRanks(2, [&](int r, Communicator* comm) {
      Poseidon::set_data_shard({r, 2, false});
      auto solver = CreateSolver<double>(MakeSolver("AdaDelta", 2, extra));
      Synchronizer<double> sync(solver.get(), comm, PsDist(server_update));
      solver->Step(3);
      solver->Snapshot();
    });
    SolverState state;
    ReadProtoFromBinaryFile(StrCat(dir, "/", name, "_iter_3.solverstate"),
                            &state);
    return state;
  };
  const SolverState servers = snapshot(true, "servers");
  const SolverState workers = snapshot(false, "workers");
  ExpectSameHistory(servers, workers);
  // Resumed on 3 ranks with the update on the servers, and in one process.
  const std::string state = dir + "/servers_iter_3.solverstate";
  const SolverParameter param3 = MakeSolver("AdaDelta", 2);
  std::vector<Weights<double>> resumed(3);
  RunRanks(3, [&](int r, Communicator* comm) {
    Poseidon::set_data_shard({r, 3, false});
    auto solver = CreateSolver<double>(param3);
    Synchronizer<double> sync(solver.get(), comm, PsDist(true));
    solver->Restore(state);
    solver->Step(2);
    resumed[r] = ReadWeights(*solver);
  });
  ExpectReplicasIdentical(resumed);
  auto alone = CreateSolver<double>(MakeSolver("AdaDelta", 6));
  alone->Restore(state);
  alone->Step(2);
  ExpectClose(ReadWeights(*alone), resumed[0], 1e-9, "resumed on 3 ranks");
}

// ---- at the host level (Note [Shards at the host level]) --------------------

// Rank (h, l) hosts the shard of the PS between hosts over local rank l's
// slices: the weights and the gathered history are those of the workers
// updating, bit for bit, for every solver (both sum within a host first).
TEST(ServerUpdateTest, AtTheHostLevelEverySolverMatchesTheWorkersUpdate) {
  for (const char* type : kSolvers) {
    ExpectServersMatchWorkers(MakeSolver(type, 2), 4, 4, "",
                              StrCat(type, " on 2 hosts of 2"), {}, Hosts(2));
  }
}

// Three ranks per host cut every param at other places than two do, a
// multistep schedule, iter_size 2 and L1 decay, and weights set between two
// Steps, which the shards take at their pieces' places.
TEST(ServerUpdateTest, AtTheHostLevelSlicesCutParamsAnywhere) {
  SolverParameter param = MakeSolver("Adam", 2,
                                     "stepvalue: 1 stepvalue: 3 iter_size: 2 "
                                     "regularization_type: 'L1'");
  param.set_lr_policy("multistep");
  ExpectServersMatchWorkers(param, 6, 4, "", "2 hosts of 3, Adam multistep", {},
                            Hosts(3));
  ExpectServersMatchWorkers(
      MakeSolver("RMSProp", 2), 6, 4, "", "weights set between steps",
      [](Solver<double>* s) {
        Blob<double>* w = s->net()->learnable_params()[0];
        cpu_scal(w->count(), 0.5, w->mutable_cpu_data());
      },
      Hosts(3));
}

TEST(ServerUpdateTest, AtTheHostLevelThePlanSaysWhoUpdates) {
  const Outcome<double> out =
      Train<double>(MakeSolver("SGD", 2), PsDist(true), 4, 1, {}, 0, Hosts(2));
  ASSERT_FALSE(out.reasons.empty());
  for (const std::string& reason : out.reasons) {
    EXPECT_NE(reason.find("host level: 2 hosts x 2 ranks"), std::string::npos)
        << reason;
    EXPECT_NE(reason.find("(updated on the servers)"), std::string::npos)
        << reason;
  }
}

TEST(ServerUpdateTest, AtTheHostLevelWorkersHoldNoHistory) {
  const Outcome<double> servers =
      Train<double>(MakeSolver("Adam", 2), PsDist(true), 4, 3, {}, 0, Hosts(2));
  EXPECT_EQ(servers.allocated_history[0], 12);  // gathered
  for (int r = 1; r < 4; ++r) {
    EXPECT_EQ(servers.allocated_history[r], 0) << "rank " << r;
  }
}

// A snapshot of a host-level job holds the servers' history, and resuming
// from it seeds every shard's pieces from the solver state: the run goes on
// as with the workers updating.
TEST(ServerUpdateTest, AtTheHostLevelSnapshotsHoldTheServersHistory) {
  const std::string dir = test::MakeTempDir();
  auto snapshot = [&](bool server_update, const std::string& name) {
    const std::string extra =
        StrCat("snapshot_prefix: '", dir, "/", name, "' ");
    RunRanks(
        4,
        [&](int r, Communicator* comm) {
          Poseidon::set_data_shard({r, 4, false});
          auto solver = CreateSolver<double>(MakeSolver("AdaDelta", 2, extra));
          Synchronizer<double> sync(solver.get(), comm, PsDist(server_update));
          solver->Step(3);
          solver->Snapshot();
        },
        Hosts(2));
    SolverState state;
    ReadProtoFromBinaryFile(StrCat(dir, "/", name, "_iter_3.solverstate"),
                            &state);
    return state;
  };
  ExpectSameHistory(snapshot(true, "servers"), snapshot(false, "workers"));
  const std::string state = dir + "/servers_iter_3.solverstate";
  auto resume = [&](bool server_update) {
    std::vector<Weights<double>> resumed(4);
    RunRanks(
        4,
        [&](int r, Communicator* comm) {
          Poseidon::set_data_shard({r, 4, false});
          auto solver = CreateSolver<double>(MakeSolver("AdaDelta", 2));
          Synchronizer<double> sync(solver.get(), comm, PsDist(server_update));
          solver->Restore(state);
          solver->Step(2);
          resumed[r] = ReadWeights(*solver);
        },
        Hosts(2));
    ExpectReplicasIdentical(resumed);
    return resumed[0];
  };
  ExpectIdentical(resume(true), resume(false), "resumed at the host level");
}

// Note [Host level with dedicated servers]: the hosts' first ranks are
// the servers' workers; the sums are added in the order of colocated
// shards at the host level, so the weights and history are theirs, bit
// for bit, with the update on the servers or on the workers.
TEST(ServerUpdateTest, AtTheHostLevelDedicatedServersTrainAsColocatedShards) {
  for (const bool server_update : {true, false}) {
    const std::string what =
        server_update ? "update on the servers" : "update on the workers";
    const SolverParameter param = MakeSolver("Adam", 2);
    const Outcome<double> dedicated = Train<double>(
        param, PsDist(server_update), 4, 4, {}, /*servers=*/2, Hosts(2));
    const Outcome<double> colocated =
        Train<double>(param, PsDist(server_update), 4, 4, {}, 0, Hosts(2));
    ExpectReplicasIdentical(dedicated.weights);
    ExpectIdentical(dedicated.weights[0], colocated.weights[0],
                    what + ": weights");
    ExpectIdentical(dedicated.history, colocated.history, what + ": history");
    for (const std::string& reason : dedicated.reasons) {
      EXPECT_TRUE(test::Contains(reason, "host level: 2 hosts x 2 ranks"))
          << reason;
      EXPECT_TRUE(test::Contains(reason, "(each host's first rank pushes"))
          << reason;
    }
  }
}

// A silent server at the host level: the hosts' first ranks wait on it
// and name it at their deadline; the others wait on their first rank in
// its exchange, two steps longer (Note [Deadline ladder]), so under mpirun
// the first rank's error, naming the server, ends the job first.
TEST(ServerUpdateTest, AtTheHostLevelASilentDedicatedServerIsNamed) {
  const auto [errors, seconds] =
      TrainWithASilentServer(MakeSolver("SGD", 2), 4, /*ranks_per_host=*/2);
  for (int r : {0, 2}) {
    EXPECT_TRUE(test::Contains(errors[r], "shard of rank 4"))
        << "worker " << r << ": " << errors[r];
  }
  for (int r : {1, 3}) {
    EXPECT_TRUE(test::Contains(
        errors[r], StrCat("waiting for rank ", r - 1, " to finish")))
        << "worker " << r << ": " << errors[r];
  }
  EXPECT_LT(seconds, 60) << "the workers waited far past their deadline";
}

// Stale-synchronous and asynchronous training (Note [Stale-synchronous
// serving]): each push is a step of its own with 1/W of the gradient and
// of the weight decay, so for plain SGD SSP(0) ends near where BSP does:
// it differs by the order of the steps, by answers that may already hold
// a faster worker's next push, and, with weight decay, by a term of second
// order in the rate. Replicas end identical (a Step ends at a barrier
// where every worker takes the servers' parameters).
SolverParameter PlainSgd() {
  SolverParameter param = MakeSolver("SGD", 2);
  param.set_momentum(0);
  param.set_weight_decay(0);
  return param;
}

TEST(StaleTrainingTest, SspZeroEndsNearBsp) {
  const Outcome<double> bsp =
      Train<double>(PlainSgd(), PsDist(true), 2, 5);
  const Outcome<double> ssp =
      Train<double>(PlainSgd(), PsDist(true, "consistency: SSP"), 2, 5);
  ExpectReplicasIdentical(ssp.weights);
  // Fresher answers make the difference, which depends on timing: up to
  // 2e-4 measured over 20 runs (BSP's replicas would differ by 0).
  ExpectClose(bsp.weights[0], ssp.weights[0], 2e-3, "SSP(0)");
}

// The same with 2 dedicated servers (Note [Dedicated servers]): SSP(0)
// ends near BSP on those servers.
TEST(StaleTrainingTest, SspZeroOnDedicatedServersEndsNearBsp) {
  const Outcome<double> bsp =
      Train<double>(PlainSgd(), PsDist(true), 2, 5, {}, /*servers=*/2);
  const Outcome<double> ssp = Train<double>(
      PlainSgd(), PsDist(true, "consistency: SSP"), 2, 5, {}, /*servers=*/2);
  ExpectReplicasIdentical(ssp.weights);
  ExpectClose(bsp.weights[0], ssp.weights[0], 2e-3, "SSP(0), 2 servers");
}

// At the host level (Note [Stale serving at the host level]) the hosts are
// the shards' workers, each pushing its host's sum: SSP(0) on 2 hosts of 2
// ends near BSP, with colocated shards and with 2 dedicated servers. A
// large weight decay checks its share per push: divided by the 4 ranks
// instead of the 2 hosts, half of it would be lost (a relative error of
// 0.028 against the 2e-3 allowed, measured).
TEST(StaleTrainingTest, AtTheHostLevelSspZeroEndsNearBsp) {
  SolverParameter param = PlainSgd();
  param.set_weight_decay(1.0);
  for (int servers : {0, 2}) {
    SCOPED_TRACE(StrCat(servers, " dedicated servers"));
    const Outcome<double> bsp =
        Train<double>(param, PsDist(true), 4, 5, {}, servers, Hosts(2));
    const Outcome<double> ssp = Train<double>(
        param, PsDist(true, "consistency: SSP"), 4, 5, {}, servers, Hosts(2));
    ExpectReplicasIdentical(ssp.weights);
    ExpectClose(bsp.weights[0], ssp.weights[0], 2e-3, "SSP(0), 2 hosts of 2");
    ASSERT_FALSE(ssp.reasons.empty());
    for (const std::string& reason : ssp.reasons) {
      EXPECT_TRUE(test::Contains(reason, "host level: 2 hosts x 2 ranks"))
          << reason;
    }
  }
}

// Under SSP(2) and ASYNC, colocated shards and dedicated servers (3
// workers; 2 servers, and 1), and at the host level (2 hosts of 2 or 3)
// train to identical replicas that moved, with every layer updated on the
// servers; the two Steps (`between`) start and end the servers' serving
// twice.
TEST(StaleTrainingTest, SspAndAsyncTrainToIdenticalReplicas) {
  struct Case {
    const char* model;
    int servers;
    int ranks_per_host = 0;  // more: 2 hosts of that many
  };
  const Weights<double> start = TrainAlone<double>(MakeSolver("Adam", 2), 0);
  for (const Case& c :
       {Case{"SSP staleness: 2", 0}, Case{"ASYNC", 0},
        Case{"SSP staleness: 2", 2}, Case{"ASYNC", 2},
        Case{"SSP staleness: 1", 1}, Case{"SSP staleness: 1", 0, 2},
        Case{"ASYNC", 0, 3}, Case{"ASYNC", 2, 2}}) {
    SCOPED_TRACE(StrCat(c.model, ", ", c.servers, " dedicated servers, ",
                        c.ranks_per_host, " ranks per host"));
    const Outcome<double> out = Train<double>(
        MakeSolver("Adam", 2), PsDist(true, StrCat("consistency: ", c.model)),
        c.ranks_per_host > 0 ? 2 * c.ranks_per_host : 3, 8,
        [](Solver<double>*) {}, c.servers,
        c.ranks_per_host > 0 ? Hosts(c.ranks_per_host) : LoopbackOptions{});
    ExpectReplicasIdentical(out.weights);
    double moved = 0;
    for (size_t p = 0; p < start.size(); ++p) {
      for (size_t i = 0; i < start[p].size(); ++i) {
        ASSERT_TRUE(std::isfinite(out.weights[0][p][i]));
        moved = std::max(moved, std::fabs(start[p][i] - out.weights[0][p][i]));
      }
    }
    EXPECT_GT(moved, 1e-4);
    for (const std::string& reason : out.reasons) {
      EXPECT_NE(reason.find("(updated on the servers)"), std::string::npos)
          << reason;
    }
  }
}

// A snapshot in the middle of a Step is a barrier: the run goes on after
// it, and the snapshot holds the servers' parameters and history, from
// colocated shards and from 2 dedicated servers, on 2 workers and at the
// host level on 2 hosts of 2.
TEST(StaleTrainingTest, SnapshotsInTheMiddleOfAStep) {
  for (const auto [servers, per_host] :
       {std::pair{0, 0}, {2, 0}, {0, 2}, {2, 2}}) {
    SCOPED_TRACE(
        StrCat(servers, " dedicated servers, ", per_host, " ranks per host"));
    const int workers = per_host > 0 ? 2 * per_host : 2;
    const std::string dir = test::MakeTempDir();
    const std::string extra =
        StrCat("snapshot: 3 snapshot_prefix: '", dir, "/ssp' ");
    std::vector<Weights<double>> end(workers);
    RunWorkers(
        workers, servers,
        [&](int r, Communicator* comm, DedicatedServers dedicated) {
          Poseidon::set_data_shard({r, workers, false});
          auto solver = CreateSolver<double>(MakeSolver("SGD", 2, extra));
          Synchronizer<double> sync(
              solver.get(), comm, PsDist(true, "consistency: SSP staleness: 1"),
              nullptr, {}, dedicated);
          solver->Step(5);
          end[r] = ReadWeights(*solver);
        },
        per_host > 0 ? Hosts(per_host) : LoopbackOptions{});
    ExpectReplicasIdentical(end);
    auto resumed = CreateSolver<double>(MakeSolver("SGD", 4));
    resumed->Restore(dir + "/ssp_iter_3.solverstate");
    EXPECT_EQ(resumed->iter(), 3);
    SolverState state;
    ReadProtoFromBinaryFile(dir + "/ssp_iter_3.solverstate", &state);
    ASSERT_GT(state.history_size(), 0);
    double largest = 0;
    for (int i = 0; i < state.history_size(); ++i) {
      for (double v : state.history(i).double_data()) {
        largest = std::max(largest, std::fabs(v));
      }
    }
    EXPECT_GT(largest, 0) << "the snapshot's history is all zero";
  }
}

TEST(StaleTrainingTest, WhatTheServersCannotServeAloneIsRefused) {
  struct Bad {
    SolverParameter solver;
    std::string dist;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {MakeSolver("SGD", 2, "clip_gradients: 1"), "consistency: SSP",
       "clip_gradients"},
      {MakeSolver("SGD", 2), "consistency: ASYNC server_update: false",
       "needs the update on the servers (server_update: true)"},
  };
  for (const Bad& b : bad) {
    RunRanks(2, [&](int r, Communicator* comm) {
      Poseidon::set_data_shard({r, 2, false});
      auto solver = CreateSolver<double>(b.solver);
      DistributedParameter d = PsDist(true, b.dist);
      if (b.dist.find("server_update: false") != std::string::npos) {
        d.set_server_update(false);
      }
      const std::string error =
          test::ErrorOf<ConfigError>([&] {
            Synchronizer<double> sync(solver.get(), comm, d);
          });
      EXPECT_TRUE(test::Contains(error, b.message)) << error;
    });
  }
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
