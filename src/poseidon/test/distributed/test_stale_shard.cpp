// Stale-synchronous and asynchronous serving (StaleShard, through
// ParamServer::ServeStale; Note [Stale-synchronous serving]): over
// loopback ranks, with colocated and dedicated shards, every answer holds
// the pushes the consistency model promises, a fast worker runs exactly s
// iterations ahead of a slowed one under SSP(s) and never waits under
// ASYNC, and the shards end with every push applied once.
//
// Each push is recognisable in the answers: worker i's gradient at
// iteration t is 2^(i T + t) in every element and the shard's update is
// w -= g, so -w, an exact integer in double precision, has bit i T + t set
// exactly when that push has been applied.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <ostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/run_ranks.hpp"
#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/param_server.hpp"
#include "poseidon/distributed/stale_shard.hpp"

namespace poseidon {
namespace dist {
namespace {

using Ref = ParamServer<double>::BlockRef;

constexpr int kIters = 10;

struct StaleCase {
  std::string name;
  int ranks;
  PsRoles roles;  // empty: colocated
  Consistency consistency;
  int staleness;
  bool slow_last_worker;
  int64_t last_worker_ends = kIters;  // the last worker's end (SendEnd)
};

void PrintTo(const StaleCase& c, std::ostream* os) { *os << c.name; }

class StaleShardTest : public ::testing::TestWithParam<StaleCase> {};

uint64_t Bit(int worker, int64_t iter) {
  return uint64_t{1} << (worker * kIters + iter);
}

TEST_P(StaleShardTest, AnswersHoldWhatTheModelPromises) {
  const StaleCase c = GetParam();
  LoopbackOptions loopback;
  loopback.timeout = std::chrono::seconds(20);
  LoopbackWorld world(c.ranks, loopback);
  std::vector<int> workers = c.roles.workers, servers = c.roles.servers;
  if (workers.empty()) {
    for (int r = 0; r < c.ranks; ++r) workers.push_back(r);
  }
  if (servers.empty()) servers = workers;
  const int num_workers = static_cast<int>(workers.size());
  ASSERT_LE(num_workers * kIters, 52);
  // Two params, 4 blocks of up to 1000 doubles; two exchanges per
  // iteration (the second param first, as backward posts them).
  const std::vector<size_t> blobs = {3000, 500};
  const std::vector<size_t> start = {0, 3000};
  const size_t total = 3500;
  const std::vector<std::vector<int>> groups = {{1}, {0}};
  std::vector<std::atomic<int>> posted(num_workers);
  for (auto& p : posted) p = 0;
  std::atomic<bool> fast_done{false};
  std::vector<int> max_lead(num_workers, 0);
  std::vector<std::vector<double>> held(c.ranks);

  RunRanks(&world, [&](Communicator* comm) {
    const BlockPartition part(blobs, sizeof(double), 8000,
                              static_cast<int>(servers.size()));
    std::vector<std::vector<int>> schedule;
    for (const auto& group : groups) {
      schedule.emplace_back();
      for (int blob : group) {
        for (int id : part.blob_blocks(blob)) schedule.back().push_back(id);
      }
    }
    std::vector<double>& w = held[comm->rank()];
    w.assign(total, 0.0);
    auto update = [&part, &w, &start](int64_t, int block, double* v) {
      const ParamBlock& b = part.blocks()[block];
      double* at = w.data() + start[b.blob] + b.offset;
      for (size_t i = 0; i < b.count; ++i) {
        at[i] -= v[i];
        v[i] = at[i];
      }
    };
    ParamServerOptions options;
    options.roles = c.roles;
    options.consistency = c.consistency;
    options.staleness = c.staleness;
    ParamServer<double> server(comm, &part, options, nullptr, update);
    std::promise<Status> served;
    if (server.shard() >= 0) {
      server.ServeStale(schedule, 0,
                        [&served](Status s) { served.set_value(s); });
    } else {
      served.set_value(Status::OK());
    }
    const auto at = std::find(workers.begin(), workers.end(), comm->rank());
    if (at != workers.end()) {
      const int me = static_cast<int>(at - workers.begin());
      const bool slow = c.slow_last_worker && me == num_workers - 1;
      const int slow_one = c.slow_last_worker ? num_workers - 1 : -1;
      std::vector<double> grad(total);
      const int64_t my_end =
          me == num_workers - 1 ? c.last_worker_ends : kIters;
      for (int64_t t = 0; t < my_end; ++t) {
        if (slow) {
          if (c.consistency == Consistency::kAsync) {
            // ASYNC: the others finish without this worker's pushes.
            while (!fast_done) std::this_thread::sleep_for(
                std::chrono::milliseconds(1));
          } else {
            // Before its push of t, until every other worker has started
            // the furthest iteration SSP(s) allows it, t + s (or 20 s:
            // then the lead check below fails).
            const int want = static_cast<int>(
                std::min<int64_t>(t + c.staleness, kIters - 1) + 1);
            const auto give_up =
                std::chrono::steady_clock::now() + std::chrono::seconds(20);
            for (int j = 0; j + 1 < num_workers; ++j) {
              while (posted[j] < want &&
                     std::chrono::steady_clock::now() < give_up) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
              }
            }
          }
        } else if (slow_one >= 0) {
          max_lead[me] = std::max(
              max_lead[me], static_cast<int>(t) - posted[slow_one].load());
        }
        ++posted[me];
        std::fill(grad.begin(), grad.end(),
                  static_cast<double>(Bit(me, t)));
        std::vector<std::future<Status>> done;
        for (const auto& group : groups) {
          std::vector<Ref> refs;
          for (int blob : group) {
            for (int id : part.blob_blocks(blob)) {
              refs.push_back(
                  {id, grad.data() + start[blob] + part.blocks()[id].offset});
            }
          }
          auto promise = std::make_shared<std::promise<Status>>();
          done.push_back(promise->get_future());
          server.Exchange(t, refs,
                          [promise](Status s) { promise->set_value(s); });
        }
        for (auto& f : done) {
          const Status s = f.get();
          ASSERT_TRUE(s.ok()) << s.message();
        }
        // Every answer: this worker's pushes up to t; under SSP(s) every
        // worker's up to t - s.
        for (size_t b = 0; b < part.blocks().size(); ++b) {
          const ParamBlock& pb = part.blocks()[b];
          const double* v = grad.data() + start[pb.blob] + pb.offset;
          for (size_t i = 1; i < pb.count; ++i) ASSERT_EQ(v[i], v[0]);
          const uint64_t mask = static_cast<uint64_t>(-v[0]);
          for (int j = 0; j < num_workers; ++j) {
            const int64_t end_j =
                j == num_workers - 1 ? c.last_worker_ends : kIters;
            const int64_t upto =
                j == me ? t
                : c.consistency == Consistency::kAsync
                    ? -1
                    : std::min(t - c.staleness, end_j - 1);
            for (int64_t u = 0; u <= upto; ++u) {
              ASSERT_TRUE(mask & Bit(j, u))
                  << "worker " << me << " iteration " << t << " block " << b
                  << ": the answer lacks worker " << j << "'s push of "
                  << "iteration " << u << " (mask " << mask << ")";
            }
          }
        }
      }
      if (!slow) fast_done = true;
      const Status s = server.EndStale(schedule, my_end);
      ASSERT_TRUE(s.ok()) << s.message();
    }
    const Status s = served.get_future().get();
    EXPECT_TRUE(s.ok()) << s.message();
  });
  // Every push applied once: each shard's blocks hold minus the sum of all.
  uint64_t pushed = 0;
  for (int j = 0; j < num_workers; ++j) {
    const int64_t end_j = j == num_workers - 1 ? c.last_worker_ends : kIters;
    for (int64_t u = 0; u < end_j; ++u) pushed |= Bit(j, u);
  }
  const double all = static_cast<double>(pushed);
  const BlockPartition part(blobs, sizeof(double), 8000,
                            static_cast<int>(servers.size()));
  for (const ParamBlock& b : part.blocks()) {
    const std::vector<double>& w = held[servers[b.shard]];
    for (size_t i = 0; i < b.count; ++i) {
      ASSERT_EQ(w[start[b.blob] + b.offset + i], -all)
          << "shard " << b.shard << " element " << i;
    }
  }
  if (c.slow_last_worker) {
    for (int i = 0; i + 1 < num_workers; ++i) {
      if (c.consistency == Consistency::kAsync) {
        EXPECT_EQ(max_lead[i], kIters - 1) << "worker " << i;
      } else {
        EXPECT_EQ(max_lead[i], c.staleness) << "worker " << i;
      }
    }
  }
}

std::string CaseName(const ::testing::TestParamInfo<StaleCase>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StaleShardTest,
    ::testing::Values(
        StaleCase{"Ssp0Colocated", 2, {}, Consistency::kSsp, 0, false},
        StaleCase{"Ssp2Colocated3", 3, {}, Consistency::kSsp, 2, false},
        StaleCase{"AsyncColocated", 2, {}, Consistency::kAsync, 0, false},
        StaleCase{"Ssp1Dedicated", 4, {{0, 1}, {2, 3}}, Consistency::kSsp, 1,
                  false},
        StaleCase{"Ssp2SlowWorker", 3, {{0, 1}, {2}}, Consistency::kSsp, 2,
                  true},
        StaleCase{"Ssp0SlowWorker", 2, {}, Consistency::kSsp, 0, true},
        StaleCase{"AsyncSlowWorker", 3, {{0, 1}, {2}}, Consistency::kAsync, 0,
                  true},
        // A worker that ends early holds no one back.
        StaleCase{"Ssp1OneEndsEarly", 3, {}, Consistency::kSsp, 1, false, 4}),
    CaseName);

// Without the update on the servers there is nothing to step: refused.
TEST(StaleShardConfigTest, NeedsTheServersUpdate) {
  LoopbackWorld world(1);
  Communicator* comm = world.rank(0);
  const BlockPartition part({100}, sizeof(double), 8000, 1);
  ParamServerOptions options;
  options.consistency = Consistency::kSsp;
  ParamServer<double> server(comm, &part, options);
  try {
    server.ServeStale({{0}}, 0, {});
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "SSP(0) serving needs the update on the servers"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
