// SharedAllreduce over a loopback world whose ranks share memory: sums in
// rank order, slot reuse waits for every rank's release, stalls are named;
// the ALLREDUCE transport goes through it when it can, and says so.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "distributed/run_ranks.hpp"
#include "poseidon/distributed/loopback_communicator.hpp"
#include "poseidon/distributed/shared_allreduce.hpp"
#include "poseidon/distributed/transport.hpp"

namespace poseidon {
namespace dist {
namespace {

using Clock = std::chrono::steady_clock;

LoopbackOptions OneHost(int timeout_ms = 10000) {
  LoopbackOptions options;
  options.shared_memory = true;
  options.timeout = std::chrono::milliseconds(timeout_ms);
  return options;
}

// Large terms of alternating sign plus small ones: the float sum depends
// on the order of the additions.
float Term(int rank, size_t i) {
  const double big = (rank % 2 == 0 ? 1 : -1) * 1e7 * ((i * 7 + rank) % 5 + 1);
  return static_cast<float>(big + (i % 997) * 0.001 + rank * 0.1);
}

TEST(SharedAllreduceTest, NoSharedMemoryNoTransport) {
  LoopbackWorld world(2);
  RunRanks(&world, [](Communicator* c) {
    EXPECT_EQ(SharedAllreduce<float>::Create(c, {{"ip1", 10}}, 2), nullptr);
  });
}

// The ALLREDUCE transport's name and the route the plan's log gives.
TEST(SharedAllreduceTest, TheAllreduceTransportSaysWhichWayItGoes) {
  struct Case {
    bool ranks_share_memory;
    bool asked;  // TransportContext::shared_memory
    const char* name;
    const char* route;
  };
  const Case cases[] = {
      {true, true, "ALLREDUCE (shared memory)",
       "through shared memory: every rank is on this host"},
      {false, true, "ALLREDUCE (ring)",
       "ring over MPI: no shared memory could be mapped"},
      {true, false, "ALLREDUCE (ring)", ""},
  };
  for (const Case& c : cases) {
    LoopbackWorld world(2,
                        c.ranks_share_memory ? OneHost() : LoopbackOptions());
    RunRanks(&world, [&](Communicator* comm) {
      DistributedParameter param;
      TransportContext context;
      context.comm = comm;
      context.param = &param;
      context.shared_memory = c.asked;
      ExchangeSpec spec;
      spec.name = "ip1";
      spec.count = spec.payload = 10;
      auto t = Transport<float>::Make(CommType::ALLREDUCE, context, {spec});
      ASSERT_NE(t, nullptr);
      EXPECT_STREQ(t->name(), c.name);
      EXPECT_STREQ(t->route(), c.route);
    });
  }
}

TEST(SharedAllreduceTest, SumsInRankOrderWithTheSameBitsEverywhere) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 5000;  // several blocks of the summing loop
  LoopbackWorld world(kRanks, OneHost());
  std::vector<std::vector<float>> out(kRanks);
  RunRanks(&world, [&](Communicator* c) {
    auto all = SharedAllreduce<float>::Create(
        c, {{"small", 3}, {"big", kCount}}, 2);
    ASSERT_NE(all, nullptr);
    for (int64_t iter : {int64_t{7}, int64_t{8}}) {
      float* mine = all->Slot(1, iter);
      for (size_t i = 0; i < kCount; ++i) {
        mine[i] = Term(c->rank(), i) * static_cast<float>(iter);
      }
      all->Publish(1, iter);
    }
    all->Wait(1, 7);
    out[c->rank()].resize(kCount);
    // Two parts, to check offsets.
    all->Sum(1, 7, 0, 100, 0.5f, out[c->rank()].data());
    all->Sum(1, 7, 100, kCount - 100, 0.5f, out[c->rank()].data() + 100);
    all->Release(1, 7);
    all->Wait(1, 8);
    all->Release(1, 8);
  });
  for (size_t i = 0; i < kCount; ++i) {
    float want = Term(0, i) * 7.f;
    for (int r = 1; r < kRanks; ++r) want += Term(r, i) * 7.f;
    want *= 0.5f;
    ASSERT_EQ(std::memcmp(&want, &out[0][i], sizeof(float)), 0)
        << "element " << i << ": " << out[0][i] << ", rank-order sum " << want;
    for (int r = 1; r < kRanks; ++r) {
      ASSERT_EQ(std::memcmp(&out[0][i], &out[r][i], sizeof(float)), 0)
          << "rank " << r << " differs at " << i;
    }
  }
}

TEST(SharedAllreduceTest, ASlotIsReusedOnlyAfterEveryRankReleasedIt) {
  LoopbackWorld world(2, OneHost());
  std::atomic<bool> released{false};
  std::atomic<bool> reused_early{false};
  RunRanks(&world, [&](Communicator* c) {
    auto all = SharedAllreduce<double>::Create(c, {{"ip1", 4}}, 1);
    ASSERT_NE(all, nullptr);
    // The first use of the slot never waits, whatever the iteration.
    double* mine = all->Slot(0, 41);
    mine[0] = c->rank();
    all->Publish(0, 41);
    all->Wait(0, 41);
    if (c->rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      released = true;
      all->Release(0, 41);
    } else {
      all->Release(0, 41);
      all->Slot(0, 42);  // one slot: waits for rank 1's release of 41
      if (!released) reused_early = true;
    }
  });
  EXPECT_FALSE(reused_early) << "rank 0 reused the slot before rank 1 "
                                "had released it";
}

TEST(SharedAllreduceTest, StalledRanksAreNamed) {
  LoopbackWorld world(3, OneHost(200));
  std::string publish_error, release_error;
  RunRanks(&world, [&](Communicator* c) {
    auto all =
        SharedAllreduce<float>::Create(c, {{"fc1", 8}, {"fc2", 8}}, 1);
    ASSERT_NE(all, nullptr);
    if (c->rank() != 0) {
      // Publishes fc1's 0 and never releases it; never publishes fc2.
      all->Slot(0, 0);
      all->Publish(0, 0);
      // Long enough that only the 0.2 s deadlines can end rank 0's waits
      // within the bound below, even on a loaded machine.
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));
      return;
    }
    all->Slot(0, 0);
    all->Publish(0, 0);
    all->Wait(0, 0);
    all->Release(0, 0);
    const auto start = Clock::now();
    try {
      all->Slot(0, 1);
    } catch (const DistributedError& e) {
      release_error = e.what();
    }
    all->Slot(1, 5);
    all->Publish(1, 5);
    try {
      all->Wait(1, 5);
    } catch (const DistributedError& e) {
      publish_error = e.what();
    }
    EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(2500));
  });
  EXPECT_NE(release_error.find("layer 'fc1', iteration 0: timed out after "
                               "0.2 s waiting for ranks 1, 2 to read the "
                               "previous gradient"),
            std::string::npos)
      << "'" << release_error << "'";
  EXPECT_NE(publish_error.find("layer 'fc2', iteration 5: timed out after "
                               "0.2 s waiting for ranks 1, 2 to publish the "
                               "gradient"),
            std::string::npos)
      << "'" << publish_error << "'";
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
