// clip_gradients with the update on the parameter servers (Note [Clipping
// on the servers] in distributed/server_clip.hpp): the shards' agreement
// on the norm, colocated and on dedicated servers, against the workers'
// clipping and one process.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "server_test_util.hpp"
#include "sync_test_util.hpp"

namespace poseidon {
namespace dist {
namespace {

using namespace sync_test;    // NOLINT(build/namespaces)
using namespace server_test;  // NOLINT(build/namespaces)

// The test net with ip2's weight and bias sent by ALLREDUCE (ParamSpec
// comm), the other layers by the job's setting.
SolverParameter WithIp2ByAllreduce(SolverParameter param) {
  for (LayerParameter& layer : *param.mutable_net_param()->mutable_layer()) {
    if (layer.name() != "ip2") continue;
    while (layer.param_size() < 2) layer.add_param();
    for (ParamSpec& spec : *layer.mutable_param()) {
      spec.set_comm(DistributedParameter::ALLREDUCE);
    }
  }
  return param;
}

// Note [Clipping on the servers]: with clip_gradients the shards agree on
// the norm of the whole gradient, the workers' layers included, and update
// the params they hold; every replica equals the servers', and the result
// is the workers' clipping (server_update: false) and one process's with
// the whole batch, within rounding.
TEST(ServerClipTest, TheServersClipAsTheWorkersAndOneProcessDo) {
  struct Case {
    const char* solver;
    int ranks;
    bool ip2_by_allreduce;
  };
  for (const Case c : {Case{"SGD", 2, false}, Case{"Adam", 3, false},
                       Case{"Nesterov", 2, true}}) {
    const std::string what =
        StrCat(c.solver, " on ", c.ranks, " ranks",
               c.ip2_by_allreduce ? ", ip2 by ALLREDUCE" : "");
    const std::string clip = "clip_gradients: 0.05 ";
    auto solver = [&](int batch, const std::string& extra) {
      const SolverParameter p = MakeSolver(c.solver, batch, extra);
      return c.ip2_by_allreduce ? WithIp2ByAllreduce(p) : p;
    };
    // Sends that wait for their receives, as MPI's large messages do: the
    // shards' answers must go out in the order the workers pull them.
    LoopbackOptions rendezvous;
    rendezvous.synchronous_send = true;
    rendezvous.timeout = std::chrono::seconds(20);
    const Outcome<double> servers = Train<double>(
        solver(2, clip), PsDist(true), c.ranks, 4, {}, 0, rendezvous);
    const Outcome<double> workers =
        Train<double>(solver(2, clip), PsDist(false), c.ranks, 4);
    const Weights<double> alone =
        TrainAlone<double>(solver(2 * c.ranks, clip), 4);
    ExpectReplicasIdentical(servers.weights);
    ExpectClose(workers.weights[0], servers.weights[0], 1e-9,
                what + ": weights against the workers' clipping");
    ExpectClose(workers.history, servers.history, 1e-9,
                what + ": history against the workers' clipping");
    ExpectClose(alone, servers.weights[0], 1e-9,
                what + ": weights against one process");
    int on_servers = 0;
    for (const std::string& reason : servers.reasons) {
      on_servers += test::Contains(reason, "(updated on the servers)");
    }
    // conv, ip1 and ip2 are the layers with params.
    EXPECT_EQ(on_servers, c.ip2_by_allreduce ? 2 : 3) << what;
    // The clipping took effect: without it the weights go elsewhere.
    const Outcome<double> unclipped =
        Train<double>(solver(2, ""), PsDist(true), c.ranks, 4);
    EXPECT_GT(LargestDifference(unclipped.weights[0], servers.weights[0]), 1e-4)
        << what << ": clip_gradients changed nothing";
  }
}

// At the host level every rank's shard holds pieces of its slices (Note
// [Shards at the host level]) and stages them; the ranks agree on the norm
// over the job's communicator as colocated shards do. With dedicated
// servers the hosts' first ranks agree on it with the servers and pass it
// on to their hosts' ranks (Note [Host level with dedicated servers]).
// Either way the result is the workers' clipping at the host level within
// rounding, with ip2 by the ring between hosts or by the PS.
TEST(ServerClipTest, AtTheHostLevelTheShardsClipAsTheWorkersDo) {
  for (const int server_ranks : {0, 2}) {
    for (const bool ip2_by_allreduce : {false, true}) {
      const std::string what =
          StrCat("2 hosts of 2", server_ranks ? " and 2 servers" : "",
                 ip2_by_allreduce ? ", ip2 by ALLREDUCE" : "");
      auto solver = [&](const std::string& extra) {
        const SolverParameter p = MakeSolver("Adam", 2, extra);
        return ip2_by_allreduce ? WithIp2ByAllreduce(p) : p;
      };
      const std::string clip = "clip_gradients: 0.05 ";
      LoopbackOptions hosts = Hosts(2);
      hosts.synchronous_send = true;
      hosts.timeout = std::chrono::seconds(20);
      const Outcome<double> servers = Train<double>(
          solver(clip), PsDist(true), 4, 4, {}, server_ranks, hosts);
      const Outcome<double> workers =
          Train<double>(solver(clip), PsDist(false), 4, 4, {}, 0, Hosts(2));
      const Outcome<double> unclipped =
          Train<double>(solver(""), PsDist(true), 4, 4, {}, 0, Hosts(2));
      ExpectReplicasIdentical(servers.weights);
      ExpectClose(workers.weights[0], servers.weights[0], 1e-9,
                  what + ": weights against the workers' clipping");
      ExpectClose(workers.history, servers.history, 1e-9,
                  what + ": history against the workers' clipping");
      int on_servers = 0;
      for (const std::string& reason : servers.reasons) {
        EXPECT_TRUE(test::Contains(reason, "host level: 2 hosts x 2 ranks"))
            << reason;
        on_servers += test::Contains(reason, "(updated on the servers)");
      }
      EXPECT_EQ(on_servers, ip2_by_allreduce ? 2 : 3) << what;
      EXPECT_GT(LargestDifference(unclipped.weights[0], servers.weights[0]),
                1e-4)
          << what << ": clip_gradients changed nothing";
    }
  }
}

// Dedicated servers agree with the first worker on the norm, and clip
// and update as colocated shards do; one server holds no block at all.
TEST(ServerClipTest, DedicatedServersClipAsColocatedShards) {
  const SolverParameter param = MakeSolver("Adam", 2, "clip_gradients: 0.05");
  LoopbackOptions rendezvous;
  rendezvous.synchronous_send = true;
  rendezvous.timeout = std::chrono::seconds(20);
  const Outcome<double> workers = Train<double>(param, PsDist(false), 2, 4);
  for (const int servers : {1, 2, 7}) {
    const std::string what = StrCat(servers, " dedicated servers");
    DistributedParameter dist = PsDist(true);
    // In blocks of 1 MB each of the test net's 6 params is one block, so
    // one of 7 servers holds none.
    if (servers == 7) dist.set_block_size(1 << 20);
    const Outcome<double> dedicated =
        Train<double>(param, dist, 2, 4, {}, servers, rendezvous);
    for (const std::string& reason : dedicated.reasons) {
      EXPECT_TRUE(test::Contains(reason, "(updated on the servers)"))
          << what << ": " << reason;
    }
    ExpectReplicasIdentical(dedicated.weights);
    ExpectClose(workers.weights[0], dedicated.weights[0], 1e-9,
                what + ": weights against the workers' clipping");
    ExpectClose(workers.history, dedicated.history, 1e-9,
                what + ": history against the workers' clipping");
  }
}

// With clip_gradients the workers wait for the servers' parts of the norm
// first: a server that is gone is named there.
TEST(ServerClipTest, ASilentDedicatedServerIsNamedWithinTheDeadline) {
  const auto [errors, seconds] =
      TrainWithASilentServer(MakeSolver("SGD", 2, "clip_gradients: 0.05"));
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(test::Contains(errors[r], "agreeing on the norm") &&
                test::Contains(errors[r], "waiting for rank 2"))
        << "worker " << r << ": " << errors[r];
  }
  EXPECT_LT(seconds, 60) << "the workers waited far past their deadline";
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
