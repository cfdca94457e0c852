// The per-layer transport cost model; formulas in sync_policy.hpp.
#include "poseidon/distributed/sync_policy.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "poseidon/common.hpp"

namespace poseidon {
namespace dist {

static_assert(static_cast<int>(CommType::AUTO) == DistributedParameter::AUTO &&
                  static_cast<int>(CommType::PS) == DistributedParameter::PS &&
                  static_cast<int>(CommType::SFB) ==
                      DistributedParameter::SFB &&
                  static_cast<int>(CommType::ALLREDUCE) ==
                      DistributedParameter::ALLREDUCE,
              "CommType must mirror DistributedParameter::CommType");

CommType CommTypeFromProto(DistributedParameter::CommType type) {
  return static_cast<CommType>(type);
}

DistributedParameter::CommType CommTypeToProto(CommType type) {
  return static_cast<DistributedParameter::CommType>(type);
}

const char* CommTypeName(CommType type) {
  switch (type) {
    case CommType::AUTO:
      return "AUTO";
    case CommType::PS:
      return "PS";
    case CommType::SFB:
      return "SFB";
    case CommType::ALLREDUCE:
      return "ALLREDUCE";
  }
  return "UNKNOWN";
}

LayerCommShape DescribeLayer(const LayerParameter& param,
                             const std::vector<std::vector<int>>& param_shapes,
                             int64_t rows) {
  LayerCommShape shape;
  shape.name = param.name();
  shape.type = param.type();
  shape.K = rows;
  if (param_shapes.empty()) return shape;
  int64_t weights = 1;
  for (int d : param_shapes[0]) weights *= d;
  const std::vector<int>& w = param_shapes[0];
  if (shape.type == "InnerProduct" && w.size() == 2) {
    const bool transpose = param.inner_product_param().transpose();
    shape.M = transpose ? w[1] : w[0];
    shape.N = transpose ? w[0] : w[1];
  } else {
    shape.M = w.empty() ? 1 : w[0];
    shape.N = shape.M > 0 ? weights / shape.M : 0;
  }
  for (size_t i = 1; i < param_shapes.size(); ++i) {
    int64_t count = 1;
    for (int d : param_shapes[i]) count *= d;
    shape.bias += count;
  }
  return shape;
}

bool SfbEligible(const LayerCommShape& layer) {
  return layer.type == "InnerProduct";
}

namespace {

void CheckCluster(const LayerCommShape& layer, const ClusterShape& cluster) {
  POSEIDON_REQUIRE(cluster.num_workers >= 1 && cluster.num_servers >= 1,
                   ConfigError, "cost model for layer ", layer.name,
                   ": needs at least one worker and one server, got ",
                   cluster.num_workers, " workers and ", cluster.num_servers,
                   " servers");
  POSEIDON_REQUIRE(cluster.dtype_bytes > 0, ConfigError,
                   "cost model for layer ", layer.name,
                   ": dtype_bytes must be positive");
  POSEIDON_REQUIRE(cluster.hosts >= 1 && cluster.ranks_per_host >= 1,
                   ConfigError, "cost model for layer ", layer.name,
                   ": needs at least one host of one rank, got ",
                   cluster.hosts, " of ", cluster.ranks_per_host);
  POSEIDON_REQUIRE(cluster.network_bandwidth > 0 &&
                       cluster.memory_bandwidth > 0 && cluster.flops > 0 &&
                       cluster.message_latency >= 0,
                   ConfigError, "cost model for layer ", layer.name,
                   ": rates must be positive");
}

bool HostLevel(const ClusterShape& cluster) {
  return cluster.hosts > 1 && cluster.ranks_per_host > 1;
}

}  // namespace

double PredictBytes(const LayerCommShape& layer, const ClusterShape& cluster,
                    CommType transport) {
  CheckCluster(layer, cluster);
  const double p1 = cluster.num_workers;
  const double p2 = cluster.num_servers;
  const double dtype = static_cast<double>(cluster.dtype_bytes);
  const double s =
      (static_cast<double>(layer.M) * layer.N + layer.bias) * dtype;
  const double factors = static_cast<double>(layer.K) *
                         static_cast<double>(layer.M + layer.N) * dtype;
  const bool hosts = HostLevel(cluster);
  const double h = cluster.hosts;
  const double l = cluster.ranks_per_host;
  switch (transport) {
    case CommType::PS:
      // With dedicated servers a host's first rank pushes and pulls the
      // host's sum (Note [Host level with dedicated servers]): per rank,
      // the busier of a host's link and a server's, over the host's ranks.
      if (hosts && !cluster.colocated) {
        return std::max(2 * s, 2 * h * s / p2) / l;
      }
      if (hosts) return 2 * (s / l) * (2 * h - 2) / h;
      if (cluster.colocated) return 2 * s * (p1 + p2 - 2) / p2;
      return std::max(2 * s, 2 * p1 * s / p2);
    case CommType::SFB:
      if (!SfbEligible(layer)) return std::numeric_limits<double>::infinity();
      return 2 * (hosts ? h - 1 : p1 - 1) * factors;
    case CommType::ALLREDUCE:
      if (cluster.shared_memory) return 0;
      if (hosts) return 4 * (h - 1) / h * s / l;
      return 4 * (p1 - 1) / p1 * s;
    case CommType::AUTO:
      break;
  }
  LOG(FATAL) << "PredictBytes needs a concrete transport, got "
             << CommTypeName(transport);
  return 0;
}

CommCost PredictCost(const LayerCommShape& layer, const ClusterShape& cluster,
                     CommType transport) {
  CommCost cost;
  cost.bytes = PredictBytes(layer, cluster, transport);
  if (std::isinf(cost.bytes)) {
    cost.seconds = cost.bytes;
    return cost;
  }
  const double p1 = cluster.num_workers;
  const double dtype = static_cast<double>(cluster.dtype_bytes);
  const double s =
      (static_cast<double>(layer.M) * layer.N + layer.bias) * dtype;
  const bool hosts = HostLevel(cluster);
  if (p1 > 1) {
    if (transport == CommType::SFB) {
      // Every rank's factors rebuilt, less the layer's own product.
      cost.flops = 2.0 * layer.M * layer.N * layer.K * (p1 - 1);
      if (hosts) {
        cost.memory_bytes = 2.0 * p1 * layer.K * (layer.M + layer.N) * dtype;
      }
    } else if (transport == CommType::ALLREDUCE && cluster.shared_memory) {
      cost.memory_bytes = (p1 + 1) * s;  // stage, then sum every slot
    } else if (hosts) {
      cost.memory_bytes = 3 * s;  // stage, sum the slice, read back
    }
  }
  // The host link carries every rank of the host. On one host the
  // messages are copies through memory instead: in by the sender, out by
  // the receiver, each a read and a write.
  const double link = cost.bytes * (hosts ? cluster.ranks_per_host : 1);
  const double network =
      cluster.shared_memory ? 2 * cost.bytes / cluster.memory_bandwidth
                            : link / (2 * cluster.network_bandwidth);
  // Rounds of messages; the shared-memory allreduce sends none.
  const double peers = hosts ? cluster.hosts : p1;
  double rounds = 0;
  if (peers > 1) {
    rounds = transport == CommType::PS    ? 2
             : transport == CommType::SFB ? peers - 1
             : cluster.shared_memory      ? 0
                                          : 2 * (peers - 1);
  }
  const double latency =
      cluster.message_latency * (cluster.shared_memory ? 0.1 : 1);
  cost.seconds = network + rounds * latency +
                 cost.memory_bytes / cluster.memory_bandwidth +
                 cost.flops / cluster.flops;
  return cost;
}

std::optional<CommType> LayerCommOverride(const LayerParameter& param) {
  std::optional<CommType> found;
  int found_index = -1;
  for (int i = 0; i < param.param_size(); ++i) {
    if (!param.param(i).has_comm()) continue;
    const CommType c = CommTypeFromProto(param.param(i).comm());
    if (!found) {
      found = c;
      found_index = i;
    } else {
      POSEIDON_REQUIRE(*found == c, ConfigError, "layer ", param.name(),
                       ": param ", found_index, " sets comm ",
                       CommTypeName(*found), " but param ", i, " sets comm ",
                       CommTypeName(c),
                       "; a layer's parameters share one transport");
    }
  }
  return found;
}

std::string FormatBytes(double bytes) {
  static const char* const kUnits[] = {"B", "kB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 4) {
    bytes /= 1000;
    ++unit;
  }
  char text[32];
  if (unit == 0 || bytes >= 10) {
    std::snprintf(text, sizeof(text), "%.0f %s", bytes, kUnits[unit]);
  } else {
    std::snprintf(text, sizeof(text), "%.1f %s", bytes, kUnits[unit]);
  }
  return text;
}

std::string FormatDuration(double seconds) {
  char text[32];
  if (seconds < 1e-3) {
    std::snprintf(text, sizeof(text), "%.0f us", seconds * 1e6);
  } else if (seconds < 1e-2) {
    std::snprintf(text, sizeof(text), "%.1f ms", seconds * 1e3);
  } else if (seconds < 1) {
    std::snprintf(text, sizeof(text), "%.0f ms", seconds * 1e3);
  } else {
    std::snprintf(text, sizeof(text), "%.1f s", seconds);
  }
  return text;
}

TransportChoice ChooseTransport(const LayerCommShape& layer,
                                const ClusterShape& cluster,
                                CommType net_default,
                                std::optional<CommType> layer_override) {
  // Preference on ties: PS (the only one that allows bounded staleness),
  // then ALLREDUCE, then SFB.
  const CommType kOrder[] = {CommType::PS, CommType::ALLREDUCE, CommType::SFB};
  CommCost cost[4];
  for (CommType t : kOrder) {
    cost[static_cast<int>(t)] = PredictCost(layer, cluster, t);
  }
  const bool eligible = SfbEligible(layer);

  std::string note;
  CommType requested = CommType::AUTO;
  if (layer_override) {
    requested = *layer_override;
    POSEIDON_REQUIRE(
        requested != CommType::SFB || eligible, ConfigError, "layer ",
        layer.name, ": comm SFB is forced on a ", layer.type,
        " layer, but sufficient factor broadcasting applies only to "
        "InnerProduct layers; use PS, ALLREDUCE or AUTO");
    if (requested != CommType::AUTO) note = " (forced by the layer's comm)";
  } else if (net_default != CommType::AUTO) {
    if (net_default == CommType::SFB && !eligible) {
      note = StrCat(" (net default SFB does not apply to ", layer.type,
                    " layers)");
    } else {
      requested = net_default;
      note = " (forced by the net's comm)";
    }
  }

  TransportChoice choice;
  if (requested != CommType::AUTO) {
    choice.type = requested;
    choice.forced = true;
  } else {
    choice.type = kOrder[0];
    for (CommType t : kOrder) {
      const double time = cost[static_cast<int>(t)].seconds;
      const double best = cost[static_cast<int>(choice.type)].seconds;
      if (time < best * (1 - 1e-12)) choice.type = t;
    }
  }
  choice.bytes = cost[static_cast<int>(choice.type)].bytes;
  choice.seconds = cost[static_cast<int>(choice.type)].seconds;
  auto describe = [&](CommType t) {
    const CommCost& c = cost[static_cast<int>(t)];
    return StrCat(CommTypeName(t), " ", FormatBytes(c.bytes), " ",
                  FormatDuration(c.seconds));
  };

  std::string others;
  const CommType kListing[] = {CommType::SFB, CommType::PS,
                               CommType::ALLREDUCE};
  for (CommType t : kListing) {
    if (t == choice.type || (t == CommType::SFB && !eligible)) continue;
    others += StrCat(" vs ", describe(t));
  }
  choice.reason = StrCat(layer.name, ": ", describe(choice.type), others,
                         " per node per iteration", note);
  return choice;
}

}  // namespace dist
}  // namespace poseidon
