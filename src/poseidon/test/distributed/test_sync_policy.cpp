// The per-layer transport cost model: the formulas on hand-computed cases, the
// published SFB/PS crossovers (VGG and AlexNet fc6), the choice rules and
// the overrides read from prototxt.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "test_util.hpp"
#include "poseidon/distributed/sync_policy.hpp"

namespace poseidon {
namespace dist {
namespace {

using test::Contains;

LayerCommShape Fc(const std::string& name, int64_t M, int64_t N, int64_t K,
                  bool bias = true) {
  LayerCommShape s;
  s.name = name;
  s.type = "InnerProduct";
  s.M = M;
  s.N = N;
  s.K = K;
  s.bias = bias ? M : 0;
  return s;
}

// Nodes whose memory, arithmetic and latency are free: time is the
// network's bandwidth alone,
// so the choices follow the bytes (the published crossovers are in bytes).
ClusterShape Nodes(int p1, int p2, bool colocated = true) {
  ClusterShape c;
  c.num_workers = p1;
  c.num_servers = p2;
  c.colocated = colocated;
  c.dtype_bytes = 4;
  c.memory_bandwidth = std::numeric_limits<double>::infinity();
  c.flops = std::numeric_limits<double>::infinity();
  c.message_latency = 0;
  return c;
}

LayerParameter Parse(const std::string& text) {
  LayerParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param))
      << text;
  return param;
}

TEST(SyncPolicyTest, CommTypeMirrorsTheProto) {
  EXPECT_EQ(CommTypeFromProto(DistributedParameter::SFB), CommType::SFB);
  EXPECT_EQ(CommTypeFromProto(DistributedParameter::ALLREDUCE),
            CommType::ALLREDUCE);
  EXPECT_EQ(CommTypeToProto(CommType::PS), DistributedParameter::PS);
  EXPECT_EQ(CommTypeToProto(CommType::AUTO), DistributedParameter::AUTO);
  EXPECT_STREQ(CommTypeName(CommType::ALLREDUCE), "ALLREDUCE");
}

TEST(SyncPolicyTest, FormulasOnAHandComputedLayer) {
  // 4 x 3 weights + 4 bias = 16 floats, S = 64 bytes; K = 2.
  const LayerCommShape fc = Fc("fc", 4, 3, 2);
  // Colocated, P1 = P2 = 3: PS 2 S (3 + 3 - 2) / 3; SFB 2 K (P1 - 1)(M + N)
  // x 4; ring 4 (n - 1) / n S.
  EXPECT_DOUBLE_EQ(PredictBytes(fc, Nodes(3, 3), CommType::PS),
                   2.0 * 64 * 4 / 3);
  EXPECT_DOUBLE_EQ(PredictBytes(fc, Nodes(3, 3), CommType::SFB),
                   2.0 * 2 * 2 * 7 * 4);
  EXPECT_DOUBLE_EQ(PredictBytes(fc, Nodes(3, 3), CommType::ALLREDUCE),
                   4.0 * 2 / 3 * 64);
  // Separate roles: a worker moves 2 S, a server 2 P1 S / P2; the busier
  // node counts.
  EXPECT_DOUBLE_EQ(PredictBytes(fc, Nodes(4, 2, false), CommType::PS),
                   2.0 * 4 * 64 / 2);
  EXPECT_DOUBLE_EQ(PredictBytes(fc, Nodes(2, 4, false), CommType::PS),
                   2.0 * 64);
  // One node: nothing moves.
  EXPECT_EQ(PredictBytes(fc, Nodes(1, 1), CommType::PS), 0);
  EXPECT_EQ(PredictBytes(fc, Nodes(1, 1), CommType::SFB), 0);
  EXPECT_EQ(PredictBytes(fc, Nodes(1, 1), CommType::ALLREDUCE), 0);
  // Doubles cost twice as much.
  ClusterShape wide = Nodes(3, 3);
  wide.dtype_bytes = 8;
  EXPECT_DOUBLE_EQ(PredictBytes(fc, wide, CommType::SFB), 2.0 * 2 * 2 * 7 * 8);
}

TEST(SyncPolicyTest, BiasIsFreeUnderSfbOnly) {
  const LayerCommShape with = Fc("fc", 4, 3, 2, true);
  const LayerCommShape without = Fc("fc", 4, 3, 2, false);
  EXPECT_EQ(PredictBytes(with, Nodes(3, 3), CommType::SFB),
            PredictBytes(without, Nodes(3, 3), CommType::SFB));
  EXPECT_DOUBLE_EQ(PredictBytes(with, Nodes(3, 3), CommType::PS) /
                       PredictBytes(without, Nodes(3, 3), CommType::PS),
                   16.0 / 12);
}

// The largest node count P (one worker and one shard per node) for which
// AUTO still picks SFB.
int SfbCrossover(const LayerCommShape& fc) {
  int last = 0;
  for (int p = 2; p <= 2000; ++p) {
    if (ChooseTransport(fc, Nodes(p, p)).type == CommType::SFB) last = p;
  }
  return last;
}

TEST(SyncPolicyTest, SfbCrossoverMatchesThePublishedFigures) {
  struct Case {
    const char* name;
    int64_t M, N, K;
    int published;
  };
  // SFB wins while P <= 2 M N / (K (M + N)) (sync_policy.hpp's formulas):
  // about 220 nodes for VGG fc6 at batch 32, about 22 for AlexNet fc6 at
  // batch 256, as the Poseidon paper reports.
  for (const Case& c : {Case{"vgg_fc6", 4096, 25088, 32, 220},
                        Case{"alexnet_fc6", 4096, 9216, 256, 22}}) {
    const double formula = 2.0 * c.M * c.N / (c.K * (c.M + c.N));
    const int found = SfbCrossover(Fc(c.name, c.M, c.N, c.K));
    EXPECT_NEAR(found, formula, 2) << c.name;
    EXPECT_NEAR(found, c.published, 2) << c.name;
    // SFB is never chosen for a single node, PS beyond the crossover.
    EXPECT_EQ(
        ChooseTransport(Fc(c.name, c.M, c.N, c.K), Nodes(found + 3, found + 3))
            .type,
        CommType::PS)
        << c.name;
  }
}

TEST(SyncPolicyTest, ReasonListsEveryCandidate) {
  const TransportChoice choice =
      ChooseTransport(Fc("fc6", 4096, 25088, 32), Nodes(8, 8));
  EXPECT_EQ(choice.type, CommType::SFB);
  EXPECT_FALSE(choice.forced);
  EXPECT_DOUBLE_EQ(choice.bytes, 2.0 * 32 * 7 * (4096 + 25088) * 4);
  // 2 K (P - 1)(M + N) x 4 = 52.3 MB; PS and ring: 4 (7 / 8) S = 1.44 GB.
  // At 10 Gbit/s each way: 52.3 MB / 2.5 GB/s = 21 ms; 1.44 GB: 575 ms.
  EXPECT_DOUBLE_EQ(choice.seconds, choice.bytes / 2.5e9);
  EXPECT_EQ(choice.reason,
            "fc6: SFB 52 MB 21 ms vs PS 1.4 GB 575 ms vs ALLREDUCE 1.4 GB "
            "575 ms per node per iteration");
}

TEST(SyncPolicyTest, AllreduceWinsWhenServersAreFew) {
  // Dedicated servers, 8 workers on 2 shards: a server node moves 8 S.
  LayerCommShape conv;
  conv.name = "conv2";
  conv.type = "Convolution";
  conv.M = 256;
  conv.N = 96 * 25;
  conv.K = 64;
  conv.bias = 256;
  const TransportChoice choice = ChooseTransport(conv, Nodes(8, 2, false));
  EXPECT_EQ(choice.type, CommType::ALLREDUCE);
  EXPECT_FALSE(Contains(choice.reason, "SFB")) << choice.reason;
}

TEST(SyncPolicyTest, SharedMemoryMakesAllreduceFree) {
  // LeNet's ip1 on 2 ranks: SFB wins over the network, but on one host the
  // shared-memory allreduce sends nothing: it costs its 3 S of memory
  // traffic (481 us at 10 GB/s), messages twice their bytes, and SFB its
  // rebuild (2.6 ms at 20 GFLOP/s).
  const LayerCommShape ip1 = Fc("ip1", 500, 800, 64);
  ClusterShape apart = Nodes(2, 2);
  EXPECT_EQ(ChooseTransport(ip1, apart).type, CommType::SFB);
  ClusterShape one_host = apart;
  one_host.shared_memory = true;
  one_host.memory_bandwidth = 10e9;
  one_host.flops = 20e9;
  EXPECT_EQ(PredictBytes(ip1, one_host, CommType::ALLREDUCE), 0);
  EXPECT_EQ(PredictBytes(ip1, one_host, CommType::SFB),
            PredictBytes(ip1, apart, CommType::SFB));
  const TransportChoice choice = ChooseTransport(ip1, one_host);
  EXPECT_EQ(choice.type, CommType::ALLREDUCE);
  EXPECT_EQ(choice.bytes, 0);
  EXPECT_TRUE(Contains(choice.reason, "ip1: ALLREDUCE 0 B 481 us vs SFB"))
      << choice.reason;
  // A forced transport still wins.
  EXPECT_EQ(ChooseTransport(ip1, one_host, CommType::PS).type, CommType::PS);
}

TEST(SyncPolicyTest, ConvolutionIsNeverSfb) {
  // A tiny batch would make SFB cheapest if it applied.
  LayerCommShape conv;
  conv.name = "conv1";
  conv.type = "Convolution";
  conv.M = 512;
  conv.N = 4608;
  conv.K = 1;
  EXPECT_TRUE(std::isinf(PredictBytes(conv, Nodes(4, 4), CommType::SFB)));
  EXPECT_NE(ChooseTransport(conv, Nodes(4, 4)).type, CommType::SFB);
  // Forcing it on the layer is a configuration error naming the layer.
  try {
    ChooseTransport(conv, Nodes(4, 4), CommType::AUTO, CommType::SFB);
    FAIL() << "SFB forced on a convolution was accepted";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(Contains(e.what(),
                         "layer conv1: comm SFB is forced on a "
                         "Convolution layer"))
        << e.what();
  }
  // A net-wide SFB default only applies where it can.
  const TransportChoice choice =
      ChooseTransport(conv, Nodes(4, 4), CommType::SFB);
  EXPECT_FALSE(choice.forced);
  EXPECT_TRUE(Contains(choice.reason,
                       "(net default SFB does not apply to Convolution "
                       "layers)"))
      << choice.reason;
}

TEST(SyncPolicyTest, OverridesWinOverTheCostModel) {
  const LayerCommShape fc = Fc("fc6", 4096, 25088, 32);
  // Net default forces PS although SFB is cheaper.
  TransportChoice c = ChooseTransport(fc, Nodes(8, 8), CommType::PS);
  EXPECT_EQ(c.type, CommType::PS);
  EXPECT_TRUE(c.forced);
  EXPECT_TRUE(Contains(c.reason, "fc6: PS 1.4 GB 575 ms vs SFB 52 MB 21 ms")) << c.reason;
  EXPECT_TRUE(Contains(c.reason, "(forced by the net's comm)")) << c.reason;
  // A layer's comm beats the net default, including an explicit AUTO.
  c = ChooseTransport(fc, Nodes(8, 8), CommType::PS, CommType::ALLREDUCE);
  EXPECT_EQ(c.type, CommType::ALLREDUCE);
  EXPECT_TRUE(Contains(c.reason, "(forced by the layer's comm)")) << c.reason;
  c = ChooseTransport(fc, Nodes(8, 8), CommType::PS, CommType::AUTO);
  EXPECT_EQ(c.type, CommType::SFB);
  EXPECT_FALSE(c.forced);
}

TEST(SyncPolicyTest, LayerOverrideFromPrototxt) {
  EXPECT_FALSE(LayerCommOverride(Parse("name: 'ip' type: 'InnerProduct' "
                                       "param { lr_mult: 1 }"))
                   .has_value());
  EXPECT_EQ(LayerCommOverride(Parse("name: 'ip' type: 'InnerProduct' "
                                    "param { comm: SFB } param { }")),
            CommType::SFB);
  EXPECT_EQ(LayerCommOverride(Parse("name: 'ip' type: 'InnerProduct' "
                                    "param { comm: AUTO } "
                                    "param { comm: AUTO }")),
            CommType::AUTO);
  try {
    LayerCommOverride(
        Parse("name: 'ip2' type: 'InnerProduct' "
              "param { comm: SFB } param { comm: PS }"));
    FAIL() << "disagreeing params were accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "layer ip2: param 0 sets comm SFB but param 1 sets comm PS; a "
              "layer's parameters share one transport");
  }
}

TEST(SyncPolicyTest, DescribeLayerReadsBothWeightLayouts) {
  LayerParameter ip = Parse(
      "name: 'fc' type: 'InnerProduct' "
      "inner_product_param { num_output: 10 }");
  LayerCommShape s = DescribeLayer(ip, {{10, 60}, {10}}, 32);
  EXPECT_EQ(s.name, "fc");
  EXPECT_EQ(s.M, 10);
  EXPECT_EQ(s.N, 60);
  EXPECT_EQ(s.K, 32);
  EXPECT_EQ(s.bias, 10);
  ip.mutable_inner_product_param()->set_transpose(true);
  s = DescribeLayer(ip, {{60, 10}}, 32);
  EXPECT_EQ(s.M, 10);
  EXPECT_EQ(s.N, 60);
  EXPECT_EQ(s.bias, 0);
  s = DescribeLayer(Parse("name: 'c' type: 'Convolution'"),
                    {{16, 3, 5, 5}, {16}}, 8);
  EXPECT_EQ(s.type, "Convolution");
  EXPECT_EQ(s.M, 16);
  EXPECT_EQ(s.N, 75);
  EXPECT_EQ(s.bias, 16);
  s = DescribeLayer(Parse("name: 'relu' type: 'ReLU'"), {}, 8);
  EXPECT_EQ(s.M * s.N + s.bias, 0);
}

TEST(SyncPolicyTest, BadClusterIsAConfigError) {
  EXPECT_THROW(PredictBytes(Fc("fc", 2, 2, 2), Nodes(0, 1), CommType::PS),
               ConfigError);
  ClusterShape c = Nodes(2, 2);
  c.dtype_bytes = 0;
  EXPECT_THROW(PredictBytes(Fc("fc", 2, 2, 2), c, CommType::PS), ConfigError);
}

// Note [Cost model time]: SFB's rebuild costs 2 M N K (P - 1) FLOPs, so a
// slow processor moves the crossover to fewer nodes, and a slow network to
// more; the time is the sum of its parts.
TEST(SyncPolicyTest, TimeAddsNetworkMemoryAndCompute) {
  const LayerCommShape fc6 = Fc("fc6", 4096, 25088, 32);
  ClusterShape c = Nodes(8, 8);
  c.flops = 100e9;
  c.memory_bandwidth = 10e9;
  c.network_bandwidth = 1.25e9;
  const CommCost sfb = PredictCost(fc6, c, CommType::SFB);
  EXPECT_DOUBLE_EQ(sfb.flops, 2.0 * 4096 * 25088 * 32 * 7);
  EXPECT_DOUBLE_EQ(sfb.seconds, sfb.bytes / 2.5e9 + sfb.flops / 100e9);
  const CommCost ps = PredictCost(fc6, c, CommType::PS);
  EXPECT_EQ(ps.flops, 0);
  EXPECT_DOUBLE_EQ(ps.seconds, ps.bytes / 2.5e9);
  // 10 Gbit/s and 100 GFLOP/s: the rebuild (46 GFLOP, 0.46 s) plus 21 ms
  // beats PS's 0.58 s; at 20 GFLOP/s (2.3 s) PS wins; at 1 Gbit/s (PS
  // 5.8 s) SFB wins again.
  EXPECT_EQ(ChooseTransport(fc6, c).type, CommType::SFB);
  c.flops = 20e9;
  EXPECT_EQ(ChooseTransport(fc6, c).type, CommType::PS);
  c.network_bandwidth = 0.125e9;
  EXPECT_EQ(ChooseTransport(fc6, c).type, CommType::SFB);
  // The shared-memory allreduce reads every rank's slot: (P + 1) S.
  ClusterShape one_host = Nodes(4, 4);
  one_host.shared_memory = true;
  one_host.memory_bandwidth = 10e9;
  const CommCost shm = PredictCost(fc6, one_host, CommType::ALLREDUCE);
  const double s = (4096.0 * 25088 + 4096) * 4;
  EXPECT_EQ(shm.bytes, 0);
  EXPECT_DOUBLE_EQ(shm.memory_bytes, 5 * s);
  EXPECT_DOUBLE_EQ(shm.seconds, 5 * s / 10e9);
}

// The host level: a rank sends its share of its host's traffic, and the
// host's link carries all of its ranks.
TEST(SyncPolicyTest, HostLevelFormulas) {
  const LayerCommShape fc = Fc("fc", 4, 3, 2);  // S = 64 bytes
  ClusterShape c = Nodes(8, 8);
  c.hosts = 4;
  c.ranks_per_host = 2;
  // PS: 2 (S / L)(2 H - 2) / H; ring: 4 (H - 1) / H x S / L; SFB:
  // 2 K (H - 1)(M + N) d.
  EXPECT_DOUBLE_EQ(PredictBytes(fc, c, CommType::PS), 2.0 * 32 * 6 / 4);
  EXPECT_DOUBLE_EQ(PredictBytes(fc, c, CommType::ALLREDUCE),
                   4.0 * 3 / 4 * 32);
  EXPECT_DOUBLE_EQ(PredictBytes(fc, c, CommType::SFB), 2.0 * 2 * 3 * 7 * 4);
  // The host's link carries both of its ranks' bytes.
  c.memory_bandwidth = 1e9;
  const CommCost ps = PredictCost(fc, c, CommType::PS);
  EXPECT_DOUBLE_EQ(ps.memory_bytes, 3 * 64);
  EXPECT_DOUBLE_EQ(ps.seconds,
                   2 * ps.bytes / (2 * c.network_bandwidth) + 3 * 64 / 1e9);
  // Host level or not, the SFB rebuild is over every rank's factors.
  EXPECT_DOUBLE_EQ(PredictCost(fc, c, CommType::SFB).flops,
                   2.0 * 4 * 3 * 2 * 7);
  // With dedicated servers each host's first rank pushes and pulls the
  // host's sum: per rank max(2 S, 2 H S / P2) / L, the servers' side when
  // there are fewer servers than hosts.
  ClusterShape servers = c;
  servers.colocated = false;
  servers.num_servers = 2;
  EXPECT_DOUBLE_EQ(PredictBytes(fc, servers, CommType::PS),
                   2.0 * 4 * 64 / 2 / 2);
  servers.num_servers = 8;
  EXPECT_DOUBLE_EQ(PredictBytes(fc, servers, CommType::PS), 2.0 * 64 / 2);
  ClusterShape bad = c;
  bad.ranks_per_host = 0;
  EXPECT_THROW(PredictBytes(fc, bad, CommType::PS), ConfigError);
  bad = c;
  bad.flops = 0;
  EXPECT_THROW(PredictCost(fc, bad, CommType::PS), ConfigError);
}

// Latency decides the small layers: on one host the shared-memory
// allreduce (no messages) wins a 28-element layer that SFB would win on
// bytes; between hosts PS's 2 rounds beat a ring's 2 (P - 1).
TEST(SyncPolicyTest, LatencyDecidesSmallLayers) {
  const LayerCommShape tiny = Fc("ip2", 4, 6, 2);
  ClusterShape one_host = Nodes(2, 2);
  one_host.shared_memory = true;
  one_host.memory_bandwidth = 10e9;
  one_host.flops = 100e9;
  one_host.message_latency = 50e-6;
  const CommCost sfb = PredictCost(tiny, one_host, CommType::SFB);
  EXPECT_DOUBLE_EQ(sfb.seconds, 2 * sfb.bytes / 10e9 + 5e-6 +
                                    sfb.flops / 100e9);
  EXPECT_EQ(ChooseTransport(tiny, one_host).type, CommType::ALLREDUCE);
  one_host.message_latency = 0;  // bytes and flops alone: SFB's 160 B
  EXPECT_EQ(ChooseTransport(tiny, one_host).type, CommType::SFB);
  ClusterShape apart = Nodes(8, 8);
  apart.message_latency = 50e-6;
  const LayerCommShape conv = [] {
    LayerCommShape c;
    c.name = "conv";
    c.type = "Convolution";
    c.M = 8;
    c.N = 9;
    c.bias = 8;
    return c;
  }();
  EXPECT_DOUBLE_EQ(PredictCost(conv, apart, CommType::ALLREDUCE).seconds -
                       PredictCost(conv, apart, CommType::ALLREDUCE).bytes /
                           2.5e9,
                   14 * 50e-6);
  EXPECT_EQ(ChooseTransport(conv, apart).type, CommType::PS);
}

TEST(SyncPolicyTest, FormatDuration) {
  EXPECT_EQ(FormatDuration(35e-6), "35 us");
  EXPECT_EQ(FormatDuration(3.21e-3), "3.2 ms");
  EXPECT_EQ(FormatDuration(0.1214), "121 ms");
  EXPECT_EQ(FormatDuration(1.44), "1.4 s");
}

TEST(SyncPolicyTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(2.1e6), "2.1 MB");
  EXPECT_EQ(FormatBytes(302e6), "302 MB");
  EXPECT_EQ(FormatBytes(1.44e9), "1.4 GB");
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
