// Dedicated parameter servers (server_process.hpp): the plan's encoding and
// its checks, and loopback jobs where worker ranks train against server
// ranks that build no net: the workers get, bit for bit, what one shard
// holding the whole model computes, through a reseed, and the servers'
// history comes back to the leader.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "distributed/run_ranks.hpp"
#include "poseidon/distributed/param_server.hpp"
#include "poseidon/distributed/server_process.hpp"
#include "poseidon/distributed/tags.hpp"
#include "test_util.hpp"
#include "poseidon/util/io.hpp"

namespace poseidon {
namespace dist {
namespace {

SolverParameter Momentum() {
  SolverParameter sp;
  ReadProtoFromTextString(
      "base_lr: 0.1 lr_policy: 'step' gamma: 0.5 stepsize: 2 momentum: 0.9 "
      "weight_decay: 0.01",
      "server process test", &sp);
  return sp;
}

// Workers 0 and 1, servers 2 and 3; three params, the middle one summed
// only (its update stays with the workers).
ServerPlan TwoByTwo() {
  ServerPlan plan;
  plan.block_bytes = 1024 * sizeof(float);
  plan.roles = {{0, 1}, {2, 3}};
  plan.blob_counts = {3000, 500, 7000};
  plan.update = true;
  plan.settings.solver = Momentum();
  plan.settings.rule = UpdateRule::kSGD;
  plan.settings.workers = 2;
  plan.settings.on_server = {true, false, true};
  plan.settings.lr_mult = {1.f, 1.f, 2.f};
  plan.settings.decay_mult = {1.f, 1.f, 0.f};
  const BlockPartition partition(plan.blob_counts, sizeof(float),
                                 plan.block_bytes, 2);
  // Backward order: the last param first, then the first two together.
  plan.exchanges.emplace_back(partition.blob_blocks(2));
  plan.exchanges.emplace_back(partition.blob_blocks(0));
  for (int b : partition.blob_blocks(1)) plan.exchanges.back().push_back(b);
  return plan;
}

TEST(ServerPlanTest, RoundTripsEveryField) {
  ServerPlan plan = TwoByTwo();
  plan.push_threads = 3;
  plan.pull_threads = 2;
  plan.bytes_in_flight = 12345;
  plan.server_lanes = 6;
  plan.settings.pushers = 2;
  plan.consistency = Consistency::kSsp;
  plan.staleness = 3;
  const ServerPlan back = DecodeServerPlan(EncodeServerPlan(plan), 0);
  EXPECT_EQ(back.dtype_bytes, 4);
  EXPECT_EQ(back.block_bytes, plan.block_bytes);
  EXPECT_EQ(back.push_threads, 3);
  EXPECT_EQ(back.pull_threads, 2);
  EXPECT_EQ(back.bytes_in_flight, 12345u);
  EXPECT_EQ(back.server_lanes, 6);
  EXPECT_EQ(back.roles.workers, plan.roles.workers);
  EXPECT_EQ(back.roles.servers, plan.roles.servers);
  EXPECT_EQ(back.blob_counts, plan.blob_counts);
  EXPECT_EQ(back.exchanges, plan.exchanges);
  ASSERT_TRUE(back.update);
  EXPECT_EQ(back.settings.solver.SerializeAsString(),
            plan.settings.solver.SerializeAsString());
  EXPECT_EQ(back.settings.rule, UpdateRule::kSGD);
  EXPECT_EQ(back.settings.workers, 2);
  EXPECT_EQ(back.settings.on_server, plan.settings.on_server);
  EXPECT_EQ(back.settings.lr_mult, plan.settings.lr_mult);
  EXPECT_EQ(back.settings.decay_mult, plan.settings.decay_mult);
  EXPECT_EQ(back.settings.pushers, 2);
  EXPECT_EQ(back.consistency, Consistency::kSsp);
  EXPECT_EQ(back.staleness, 3);
}

// SSP or ASYNC serving without the servers' update, or a consistency out of
// range, is refused by name.
TEST(ServerPlanTest, StaleServingNeedsTheUpdateAndAKnownConsistency) {
  ServerPlan plan = TwoByTwo();
  plan.consistency = Consistency::kAsync;
  plan.update = false;
  std::string error = test::ErrorOf<DistributedError>(
      [&] { DecodeServerPlan(EncodeServerPlan(plan), 1); });
  EXPECT_TRUE(test::Contains(error, "ASYNC serving without the update"))
      << error;
  plan = TwoByTwo();
  plan.consistency = static_cast<Consistency>(7);
  error = test::ErrorOf<DistributedError>(
      [&] { DecodeServerPlan(EncodeServerPlan(plan), 1); });
  EXPECT_TRUE(test::Contains(error, "consistency 7 is none of")) << error;
}

// Every truncation, a byte too many and a wrong magic number are
// DistributedErrors naming the sender and what was being read.
TEST(ServerPlanTest, DamagedPlansNameTheSenderAndTheField) {
  const std::string bytes = EncodeServerPlan(TwoByTwo());
  for (size_t n = 0; n < bytes.size(); ++n) {
    try {
      DecodeServerPlan(bytes.substr(0, n), 5);
      ADD_FAILURE() << "no error for the first " << n << " bytes";
    } catch (const DistributedError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("the server plan from rank 5"), std::string::npos)
          << what;
      const bool named =
          what.find("truncated at byte") != std::string::npos ||
          what.find("more than the message holds") != std::string::npos;
      EXPECT_TRUE(named) << n << " bytes: " << what;
    }
  }
  try {
    DecodeServerPlan(bytes + "x", 5);
    ADD_FAILURE() << "no error for a byte too many";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes left after the last field"),
              std::string::npos)
        << e.what();
  }
  std::string wrong = bytes;
  wrong[0] ^= 1;
  try {
    DecodeServerPlan(wrong, 5);
    ADD_FAILURE() << "no error for a wrong magic number";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("not a server plan"),
              std::string::npos)
        << e.what();
  }
}

TEST(ServerControlTest, ARankCannotBeBothWorkerAndDedicatedServer) {
  LoopbackWorld world(3);
  ServerPlan plan = TwoByTwo();
  plan.roles = {{0, 1}, {1, 2}};
  try {
    ServerControl<float> control(world.rank(0), plan);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "rank 1 is named both a worker and a dedicated server"),
              std::string::npos)
        << e.what();
  }
}

// Worker w's gradient of element i of the flat model at iteration t.
float Grad(int w, size_t i, int64_t t) {
  return 0.01f * static_cast<float>((i * 37 + w * 11 + t * 5) % 23) - 0.1f;
}

// Two workers train three iterations against two dedicated servers, are
// reseeded (weights and history, as after a restore), and train two more;
// after each iteration both workers hold exactly what one shard holding
// the whole model computes from the worker-order sums (and the plain sum
// for the param the servers do not update). The leader then gathers the
// servers' history, equal to that shard's, and stops them. Seeds and
// history travel in one message per array, and in chunks of 375 floats
// that straddle the 1024-float blocks (Note [Packed transfers]).
class DedicatedServerTrainingTest : public ::testing::TestWithParam<size_t> {};
INSTANTIATE_TEST_SUITE_P(BytesInFlight, DedicatedServerTrainingTest,
                         ::testing::Values(size_t{64} << 20, 375 * 4));

TEST_P(DedicatedServerTrainingTest, WorkersGetWhatOneShardComputes) {
  ServerPlan plan = TwoByTwo();
  plan.bytes_in_flight = GetParam();
  const BlockPartition whole(plan.blob_counts, sizeof(float), plan.block_bytes,
                             1);
  ServerUpdateSettings settings = plan.settings;
  ShardState<float> reference(&whole, 0, settings);
  std::vector<size_t> start = {0};
  for (size_t c : plan.blob_counts) start.push_back(start.back() + c);
  const size_t total = start.back();
  std::vector<float> init(total), reseed(total), momentum(total);
  for (size_t i = 0; i < total; ++i) {
    init[i] = 0.001f * static_cast<float>(i % 101);
    reseed[i] = -0.002f * static_cast<float>(i % 53);
    momentum[i] = 0.0005f * static_cast<float>(i % 7);
  }
  // The reference's results, per iteration, over the flat model.
  constexpr int kIters = 5, kReseedAt = 3;
  std::vector<std::vector<float>> want(kIters);
  reference.Seed([&](int p) { return init.data() + start[p]; },
                 [](int, int) -> const float* { return nullptr; });
  for (int64_t t = 0; t < kIters; ++t) {
    if (t == kReseedAt) {
      reference.Seed([&](int p) { return reseed.data() + start[p]; },
                     [&](int, int p) { return momentum.data() + start[p]; });
    }
    want[t].resize(total);
    for (const ParamBlock& b : whole.blocks()) {
      float* v = want[t].data() + start[b.blob] + b.offset;
      for (size_t i = 0; i < b.count; ++i) {
        const size_t at = start[b.blob] + b.offset + i;
        v[i] = Grad(0, at, t) + Grad(1, at, t);
      }
      if (plan.settings.on_server[b.blob]) {
        reference.Apply(t, static_cast<int>(&b - whole.blocks().data()), v);
      }
    }
  }
  std::vector<float> want_history(total, -1.f);
  for (int b : reference.blocks()) {
    const ParamBlock& block = whole.blocks()[b];
    size_t at = 0;
    for (int e : reference.blocks()) {
      if (e == b) break;
      at += whole.blocks()[e].count;
    }
    std::copy_n(reference.history(0) + at, block.count,
                want_history.data() + start[block.blob] + block.offset);
  }

  LoopbackOptions loopback;
  loopback.timeout = std::chrono::seconds(20);
  LoopbackWorld world(4, loopback);
  RunRanks(&world, [&](Communicator* comm) {
    if (comm->rank() >= 2) {
      const Status s = RunDedicatedServer(comm, 0);
      EXPECT_TRUE(s.ok()) << s.message();
      return;
    }
    ServerControl<float> control(comm, plan);
    const BlockPartition& part = control.partition();
    EXPECT_EQ(control.leader(), comm->rank() == 0);
    ASSERT_TRUE(control.Start().ok());
    Status s = control.Seed([&](int p) { return init.data() + start[p]; },
                            [](int, int) -> const float* { return nullptr; });
    ASSERT_TRUE(s.ok()) << s.message();
    ParamServerOptions options;
    options.roles = plan.roles;
    ParamServer<float> server(comm, &part, options);
    std::vector<float> model(total);
    for (int64_t t = 0; t < kIters; ++t) {
      if (t == kReseedAt) {
        s = control.Seed(
            [&](int p) { return reseed.data() + start[p]; },
            [&](int, int p) { return momentum.data() + start[p]; });
        ASSERT_TRUE(s.ok()) << s.message();
      }
      ASSERT_TRUE(control.Iterate(t).ok());
      for (size_t i = 0; i < total; ++i) model[i] = Grad(comm->rank(), i, t);
      std::vector<std::future<Status>> done;
      for (const std::vector<int>& exchange : plan.exchanges) {
        std::vector<ParamServer<float>::BlockRef> refs;
        for (int id : exchange) {
          const ParamBlock& b = part.blocks()[id];
          refs.push_back({id, model.data() + start[b.blob] + b.offset});
        }
        auto promise = std::make_shared<std::promise<Status>>();
        done.push_back(promise->get_future());
        server.Exchange(t, refs,
                        [promise](Status st) { promise->set_value(st); });
      }
      for (auto& f : done) {
        const Status st = f.get();
        ASSERT_TRUE(st.ok()) << st.message();
      }
      for (size_t i = 0; i < total; ++i) {
        ASSERT_EQ(std::memcmp(&model[i], &want[t][i], sizeof(float)), 0)
            << "rank " << comm->rank() << " iteration " << t << " element " << i
            << ": " << model[i] << ", want " << want[t][i];
      }
    }
    std::vector<float> history(total, -1.f);
    s = control.Gather([&](int, int p) {
      return comm->rank() == 0 ? history.data() + start[p] : nullptr;
    });
    ASSERT_TRUE(s.ok()) << s.message();
    if (comm->rank() == 0) {
      for (size_t i = 0; i < total; ++i) {
        ASSERT_EQ(std::memcmp(&history[i], &want_history[i], sizeof(float)), 0)
            << "history element " << i << ": " << history[i] << ", want "
            << want_history[i];
      }
    }
    ASSERT_TRUE(control.Stop().ok());
  });
}

// A plan that names the server no shard, and a plan that is not one: the
// server returns a failure naming itself and what is wrong.
TEST(DedicatedServerTest, ABadPlanIsAFailureNamingTheServer) {
  LoopbackOptions loopback;
  loopback.timeout = std::chrono::seconds(20);
  for (const bool garbled : {false, true}) {
    SCOPED_TRACE(garbled ? "garbled" : "no shard");
    LoopbackWorld world(3, loopback);
    RunRanks(&world, [&](Communicator* comm) {
      if (comm->rank() == 2) {
        const Status s = RunDedicatedServer(comm, 0);
        ASSERT_FALSE(s.ok());
        EXPECT_NE(s.message().find("dedicated server rank 2: "),
                  std::string::npos)
            << s.message();
        EXPECT_NE(s.message().find(garbled ? "the server plan from rank 0"
                                           : "names it no shard"),
                  std::string::npos)
            << s.message();
        return;
      }
      if (comm->rank() != 0) return;
      ServerPlan plan = TwoByTwo();
      plan.roles = {{0}, {1}};
      std::string bytes = EncodeServerPlan(plan);
      if (garbled) bytes.resize(bytes.size() / 2);
      const uint64_t size = bytes.size();
      ASSERT_TRUE(comm->Send(&size, sizeof(size), 2, kServerTag).ok());
      ASSERT_TRUE(comm->Send(bytes.data(), size, 2, kServerTag).ok());
    });
  }
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
