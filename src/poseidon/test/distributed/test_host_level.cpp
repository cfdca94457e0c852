// The host level (Note [Host level] in distributed/host_level.hpp), over emulated
// hosts: a LoopbackWorld whose ranks r / ranks_per_host share a host (they
// map shared memory among themselves, not with the other hosts). BSP
// equivalence with one rank and the whole batch for every transport and
// AUTO, bit-identical replicas, SFB bit-identical to the flat transport,
// less traffic between hosts, and the fallbacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "poseidon/distributed/host_level.hpp"
#include "poseidon/distributed/loopback_communicator.hpp"
#include "poseidon/distributed/synchronizer.hpp"
#include "sync_test_util.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace dist {
namespace {

using namespace sync_test;  // NOLINT(build/namespaces)

// ---- the pieces ---------------------------------------------------------------

TEST(HostLevelTest, SlicesCoverTheBufferInOrder) {
  for (size_t n : {0, 1, 5, 64, 1001}) {
    for (int L : {1, 2, 3, 4, 7}) {
      size_t expected_begin = 0;
      for (int l = 0; l < L; ++l) {
        size_t begin, end;
        HostSlice(n, L, l, &begin, &end);
        EXPECT_EQ(begin, expected_begin) << n << " over " << L;
        EXPECT_LE(end - begin, n / L + 1);
        EXPECT_GE(end - begin, n / L);
        expected_begin = end;
      }
      EXPECT_EQ(expected_begin, n) << n << " over " << L;
    }
  }
}

TEST(HostLevelTest, DiscoverHostsAndSplit) {
  // 6 ranks, 3 per host: hosts {0, 1, 2} and {3, 4, 5}.
  RunRanks(
      6,
      [](int r, Communicator* comm) {
        EXPECT_FALSE(comm->OnOneHost());
        std::string why_not;
        std::unique_ptr<HostComms> hosts = SplitByHost(comm, &why_not);
        ASSERT_NE(hosts, nullptr) << why_not;
        const HostLayout& layout = hosts->layout;
        EXPECT_EQ(layout.hosts, 2);
        EXPECT_EQ(layout.local_size, 3);
        EXPECT_EQ(layout.host, r / 3);
        EXPECT_EQ(layout.local_rank, r % 3);
        EXPECT_EQ(hosts->local->size(), 3);
        EXPECT_EQ(hosts->local->rank(), r % 3);
        EXPECT_TRUE(hosts->local->OnOneHost());
        EXPECT_EQ(hosts->cross->size(), 2);
        EXPECT_EQ(hosts->cross->rank(), r / 3);
        EXPECT_FALSE(hosts->cross->OnOneHost());
        // The split communicators carry their own collectives.
        double x = r;
        ASSERT_TRUE(hosts->local->AllreduceSum(&x, 1).ok());
        EXPECT_EQ(x, r < 3 ? 0 + 1 + 2 : 3 + 4 + 5);
        double y = r;
        ASSERT_TRUE(hosts->cross->AllreduceSum(&y, 1).ok());
        EXPECT_EQ(y, (r % 3) * 2 + 3);
        // Memory mapped by the host's ranks is shared among them only.
        std::unique_ptr<SharedMemory> shm =
            hosts->local->MapSharedMemory(64);
        ASSERT_NE(shm, nullptr);
        shm->part(hosts->local->rank())[0] = static_cast<char>(r);
        ASSERT_TRUE(hosts->local->Barrier().ok());
        for (int k = 0; k < 3; ++k) {
          EXPECT_EQ(shm->part(k)[0], static_cast<char>(r / 3 * 3 + k));
        }
        ASSERT_TRUE(hosts->local->Barrier().ok());
        // Messages name the job's ranks (cross rank 1 of rank 1 is rank 4).
        for (int k = 0; k < 3; ++k) {
          EXPECT_EQ(hosts->local->JobRank(k), r / 3 * 3 + k);
        }
        EXPECT_EQ(hosts->cross->JobRank(0), r % 3);
        EXPECT_EQ(hosts->cross->JobRank(1), r % 3 + 3);
      },
      Hosts(3));
}

// Note [Deadline ladder]: waits between hosts end a step after those within
// one, and a cross communicator's errors name the job's ranks.
TEST(HostLevelTest, SplitCommunicatorsClimbTheDeadlineLadder) {
  LoopbackOptions options = Hosts(2);
  options.timeout = std::chrono::milliseconds(500);
  std::string error;
  RunRanks(
      4,
      [&](int r, Communicator* comm) {
        std::string why_not;
        std::unique_ptr<HostComms> hosts = SplitByHost(comm, &why_not);
        ASSERT_NE(hosts, nullptr) << why_not;
        EXPECT_EQ(hosts->local->timeout().count(), 500);
        EXPECT_EQ(hosts->cross->timeout().count(), 500 + 2000);
        if (r == 1) {
          // Cross rank 1 of rank 1 is rank 3, who sends nothing.
          int v = 0;
          error = hosts->cross->Recv(&v, 4, 1, 7).message();
        }
      },
      options);
  EXPECT_EQ(error,
            "rank 1: Recv of 4 bytes from rank 3 tag 7: timed out after 2.5 "
            "s waiting for rank 3");
}

TEST(HostLevelTest, NoHostLevelForOneRankPerHostOrUnevenHosts) {
  // One rank per host: nothing to combine; no reason to give.
  RunRanks(
      3,
      [](int, Communicator* comm) {
        std::string why_not;
        EXPECT_EQ(SplitByHost(comm, &why_not), nullptr);
        EXPECT_EQ(why_not, "");
      },
      Hosts(1));
  // 3 ranks, 2 per host: hosts of 2 and 1 rank.
  RunRanks(
      3,
      [](int, Communicator* comm) {
        std::string why_not;
        EXPECT_EQ(SplitByHost(comm, &why_not), nullptr);
        EXPECT_NE(why_not.find("different numbers of ranks"),
                  std::string::npos)
            << why_not;
      },
      Hosts(2));
}

// ---- training -------------------------------------------------------------------

struct HostCase {
  const char* solver;
  DistributedParameter::CommType comm;
  int hosts;
  int ranks_per_host;
};

void PrintTo(const HostCase& c, std::ostream* os) {
  *os << c.solver << " " << DistributedParameter::CommType_Name(c.comm)
      << " " << c.hosts << "x" << c.ranks_per_host;
}

class HostLevelEquivalence : public ::testing::TestWithParam<HostCase> {};

// W = hosts x ranks_per_host ranks with batch 2 each match one rank with
// batch 2 W (double: the sums differ only in the order of additions).
TEST_P(HostLevelEquivalence, MatchesOneRankWithTheWholeBatch) {
  const HostCase c = GetParam();
  const int W = c.hosts * c.ranks_per_host;
  const auto alone = TrainAlone<double>(MakeSolver(c.solver, 2 * W), 5);
  const auto together = TrainTogether<double>(
      MakeSolver(c.solver, 2),
      Dist(c.comm, "block_size: 64 num_push_threads: 2 num_pull_threads: 2"),
      W, 5, Hosts(c.ranks_per_host));
  ExpectReplicasIdentical(together);
  ExpectClose(alone, together[0], 1e-9,
              StrCat(c.solver, " on ", c.hosts, " hosts of ",
                     c.ranks_per_host));
}

std::vector<HostCase> HostCases() {
  std::vector<HostCase> cases;
  for (auto comm : {DistributedParameter::PS, DistributedParameter::SFB,
                    DistributedParameter::ALLREDUCE,
                    DistributedParameter::AUTO}) {
    cases.push_back({"SGD", comm, 2, 2});
  }
  cases.push_back({"Adam", DistributedParameter::AUTO, 2, 2});
  cases.push_back({"Nesterov", DistributedParameter::PS, 3, 2});
  cases.push_back({"SGD", DistributedParameter::ALLREDUCE, 2, 3});
  cases.push_back({"SGD", DistributedParameter::SFB, 3, 2});
  return cases;
}

std::string HostCaseName(const ::testing::TestParamInfo<HostCase>& info) {
  return StrCat(info.param.solver, "_",
                DistributedParameter::CommType_Name(info.param.comm), "_",
                info.param.hosts, "x", info.param.ranks_per_host);
}

INSTANTIATE_TEST_SUITE_P(HostsOfSeveralRanks, HostLevelEquivalence,
                         ::testing::ValuesIn(HostCases()), HostCaseName);

// SFB through the host level rebuilds the gradient from the same factors in
// the same rank order as the flat transport: the same bits, on a net whose
// every learnable layer is an InnerProduct exchanged by SFB.
TEST(HostLevelTest, SfbIsBitIdenticalToTheFlatTransport) {
  SolverParameter param;
  ReadProtoFromTextString(
      StrCat("net_param { name: 'fc' "
             "layer { name: 'data' type: 'Data' top: 'data' top: 'label' "
             "  data_param { source: '", TestLmdb(), "' batch_size: 2 } } "
             "layer { name: 'ip1' type: 'InnerProduct' bottom: 'data' "
             "  top: 'ip1' inner_product_param { num_output: 5 "
             "    weight_filler { type: 'gaussian' std: 0.3 } } } "
             "layer { name: 'tanh' type: 'TanH' bottom: 'ip1' top: 'ip1' } "
             "layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' "
             "  top: 'ip2' inner_product_param { num_output: 4 "
             "    weight_filler { type: 'gaussian' std: 0.3 } } } "
             "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' "
             "  bottom: 'label' top: 'loss' } } "
             "type: 'SGD' momentum: 0.9 base_lr: 0.05 lr_policy: 'fixed' "
             "max_iter: 100 random_seed: 7 display: 0 "
             "snapshot_after_train: false"),
      "host level SFB test", &param);
  const auto flat = TrainTogether<float>(
      param, Dist(DistributedParameter::SFB, "host_level: false"), 4, 5,
      Hosts(2));
  const auto host = TrainTogether<float>(
      param, Dist(DistributedParameter::SFB), 4, 5, Hosts(2));
  ExpectReplicasIdentical(host);
  ASSERT_EQ(flat[0].size(), 4u);
  for (size_t p = 0; p < flat[0].size(); ++p) {
    EXPECT_EQ(flat[0][p], host[0][p]) << "param " << p;
  }
  EXPECT_NE(flat[0][0], TrainAlone<float>(param, 0)[0]) << "nothing trained";
}

// The plan says which level carries what, and the bytes between hosts
// shrink: PS over 2 hosts of 2 ranks moves a third of the bytes of a flat
// 4-rank PS (per rank 4 (H - 1) / H x S / L = S instead of
// 4 (W - 1) / W x S = 3 S). The workers update: with the update on the
// servers a slice's blocks end where its params do (Note [Shards at the
// host level]), and on this small net their headers add 10%.
TEST(HostLevelTest, PlanAndBytesBetweenHosts) {
  uint64_t bytes[2] = {0, 0};
  for (bool on : {false, true}) {
    std::vector<uint64_t> moved(4);
    RunRanks(
        4,
        [&](int r, Communicator* comm) {
          Poseidon::set_data_shard({r, 4, false});
          auto solver = CreateSolver<float>(MakeSolver("SGD", 2));
          Synchronizer<float> sync(
              solver.get(), comm,
              Dist(DistributedParameter::PS,
                   on ? "server_update: false"
                      : "server_update: false host_level: false"));
          for (const PlannedLayer& p : sync.plan()) {
            EXPECT_EQ(p.reason.find("host level") != std::string::npos, on)
                << p.reason;
          }
          solver->Step(4);
          moved[r] = sync.bytes_moved();
        },
        Hosts(2));
    for (uint64_t b : moved) bytes[on] += b;
  }
  ASSERT_GT(bytes[0], 0u);
  const double ratio = static_cast<double>(bytes[1]) / bytes[0];
  EXPECT_NEAR(ratio, 1.0 / 3, 0.02) << bytes[1] << " vs " << bytes[0];
}

TEST(HostLevelTest, StalenessKeepsReplicasIdentical) {
  for (auto comm : {DistributedParameter::PS, DistributedParameter::SFB,
                    DistributedParameter::ALLREDUCE}) {
    const auto together = TrainTogether<double>(
        MakeSolver("SGD", 2), Dist(comm, "staleness: 2"), 4, 8, Hosts(2));
    ExpectReplicasIdentical(together);
  }
}

TEST(HostLevelTest, UnevenHostsTrainWithoutIt) {
  const auto alone = TrainAlone<double>(MakeSolver("SGD", 6), 4);
  const auto together = TrainTogether<double>(
      MakeSolver("SGD", 2), Dist(DistributedParameter::PS), 3, 4, Hosts(2));
  ExpectReplicasIdentical(together);
  ExpectClose(alone, together[0], 1e-9, "hosts of 2 and 1 ranks");
}

TEST(HostLevelTest, AStalledRankOfTheHostIsNamed) {
  // The host thread's wait (1 s) must end before the training thread's
  // watchdog (twice that) even when a loaded machine delays the threads.
  LoopbackOptions options = Hosts(2);
  options.timeout = std::chrono::milliseconds(1000);
  std::string error;
  std::mutex mu;
  RunRanks(
      4,
      [&](int r, Communicator* comm) {
        Poseidon::set_data_shard({r, 4, false});
        auto solver = CreateSolver<double>(MakeSolver("SGD", 2));
        Synchronizer<double> sync(solver.get(), comm,
                                  Dist(DistributedParameter::ALLREDUCE));
        if (r == 1) {
          // Never trains: its host's other rank waits for its gradient.
          std::this_thread::sleep_for(std::chrono::milliseconds(3000));
          return;
        }
        try {
          solver->Step(3);
        } catch (const DistributedError& e) {
          std::lock_guard<std::mutex> lock(mu);
          if (r == 0) error = e.what();
        }
      },
      options);
  EXPECT_NE(error.find("waiting for rank 1 to publish their gradients"),
            std::string::npos)
      << "error: '" << error << "'";
}

// One rank stops in the middle of training (its training thread never
// posts again; its communication threads live on). The first error of the
// job, the one a real job prints before MPI_Abort ends it, must name that
// rank, not its partner on the same host that only waits for it (found
// with scripts/fault_matrix.py, 2 hosts x 2 ranks, SIGSTOP), over the
// parameter server and SFB between hosts.
TEST(HostLevelTest, TheFirstErrorNamesTheStoppedRank) {
  using Clock = std::chrono::steady_clock;
  for (auto comm_type :
       {DistributedParameter::PS, DistributedParameter::SFB}) {
    const std::string name = DistributedParameter::CommType_Name(comm_type);
    LoopbackOptions options = Hosts(2);
    options.timeout = std::chrono::milliseconds(1000);
    std::mutex mu;
    std::vector<std::pair<Clock::time_point, std::string>> errors;
    RunRanks(
        4,
        [&](int r, Communicator* comm) {
          Poseidon::set_data_shard({r, 4, false});
          auto solver = CreateSolver<double>(MakeSolver("SGD", 2));
          Synchronizer<double> sync(solver.get(), comm, Dist(comm_type));
          if (r == 3) {
            try {
              solver->Step(2);
            } catch (const DistributedError&) {
              // Its last exchange may fail once the others gave up on it.
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5000));
            return;
          }
          try {
            solver->Step(50);
          } catch (const DistributedError& e) {
            std::lock_guard<std::mutex> lock(mu);
            errors.emplace_back(Clock::now(), e.what());
          }
        },
        options);
    ASSERT_FALSE(errors.empty()) << name;
    std::sort(errors.begin(), errors.end());
    std::string all;
    for (const auto& e : errors) all += "\n  " + e.second;
    EXPECT_NE(errors[0].second.find("rank 3"), std::string::npos)
        << name << ": the first error does not name rank 3:" << all;
  }
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
