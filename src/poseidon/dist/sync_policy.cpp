// The per-layer transport cost model; formulas in sync_policy.hpp.
#include "poseidon/dist/sync_policy.hpp"

#include <algorithm>
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

double PredictBytes(const LayerCommShape& layer, const ClusterShape& cluster,
                    CommType transport) {
  POSEIDON_REQUIRE(cluster.num_workers >= 1 && cluster.num_servers >= 1,
                   ConfigError, "cost model for layer ", layer.name,
                   ": needs at least one worker and one server, got ",
                   cluster.num_workers, " workers and ", cluster.num_servers,
                   " servers");
  POSEIDON_REQUIRE(cluster.dtype_bytes > 0, ConfigError,
                   "cost model for layer ", layer.name,
                   ": dtype_bytes must be positive");
  const double p1 = cluster.num_workers;
  const double p2 = cluster.num_servers;
  const double dtype = static_cast<double>(cluster.dtype_bytes);
  const double s =
      (static_cast<double>(layer.M) * layer.N + layer.bias) * dtype;
  switch (transport) {
    case CommType::PS:
      if (cluster.colocated) return 2 * s * (p1 + p2 - 2) / p2;
      return std::max(2 * s, 2 * p1 * s / p2);
    case CommType::SFB:
      if (!SfbEligible(layer)) return std::numeric_limits<double>::infinity();
      return 2 * static_cast<double>(layer.K) * (p1 - 1) *
             static_cast<double>(layer.M + layer.N) * dtype;
    case CommType::ALLREDUCE:
      if (cluster.shared_memory) return 0;
      return 4 * (p1 - 1) / p1 * s;
    case CommType::AUTO:
      break;
  }
  LOG(FATAL) << "PredictBytes needs a concrete transport, got "
             << CommTypeName(transport);
  return 0;
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

TransportChoice ChooseTransport(const LayerCommShape& layer,
                                const ClusterShape& cluster,
                                CommType net_default,
                                std::optional<CommType> layer_override) {
  // Preference on ties: PS (the only one that allows bounded staleness),
  // then ALLREDUCE, then SFB.
  const CommType kOrder[] = {CommType::PS, CommType::ALLREDUCE, CommType::SFB};
  double bytes[4] = {0, 0, 0, 0};
  for (CommType t : kOrder) {
    bytes[static_cast<int>(t)] = PredictBytes(layer, cluster, t);
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
      const double b = bytes[static_cast<int>(t)];
      const double best = bytes[static_cast<int>(choice.type)];
      if (b < best * (1 - 1e-12)) choice.type = t;
    }
  }
  choice.bytes = bytes[static_cast<int>(choice.type)];

  std::string others;
  const CommType kListing[] = {CommType::SFB, CommType::PS,
                               CommType::ALLREDUCE};
  for (CommType t : kListing) {
    if (t == choice.type || (t == CommType::SFB && !eligible)) continue;
    others += StrCat(" vs ", CommTypeName(t), " ",
                     FormatBytes(bytes[static_cast<int>(t)]));
  }
  choice.reason = StrCat(layer.name, ": ", CommTypeName(choice.type), " ",
                         FormatBytes(choice.bytes), others,
                         " per node per iteration", note);
  return choice;
}

}  // namespace dist
}  // namespace poseidon
