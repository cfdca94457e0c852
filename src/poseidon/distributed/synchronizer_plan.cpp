// The synchroniser's plan: the cost model's transport for each group (from
// rank 0's measured rates, so every rank plans alike) and the transports
// that carry them, the host level's included.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "synchronizer_impl.hpp"

namespace poseidon {
namespace dist {
namespace {

// Note [Cost model time]: this rank's GEMM rate (what the SFB rebuild runs)
// and its rate of summing arrays through memory, each the best of three
// short runs (about 20 ms in all).
void MeasureRates(double* flops, double* memory_bandwidth) {
  constexpr int kN = 256;
  std::vector<float> a(kN * kN, 0.5f), b(kN * kN, 0.25f), c(kN * kN);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = SteadySeconds();
    cpu_gemm<float>(CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.f, a.data(),
                    b.data(), 0.f, c.data());
    best = std::min(best, SteadySeconds() - t0);
  }
  *flops = 2.0 * kN * kN * kN / std::max(best, 1e-9);
  constexpr size_t kCount = size_t{1} << 21;  // 8 MB per array
  std::vector<float> x(kCount, 1.f), y(kCount, 2.f), out(kCount);
  best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = SteadySeconds();
    SumInOrder<float>({x.data(), y.data()}, kCount, 1.f, out.data());
    best = std::min(best, SteadySeconds() - t0);
  }
  *memory_bandwidth = 3.0 * kCount * sizeof(float) / std::max(best, 1e-9);
  // Benchmarks: rates in the dilated time of Note [Time dilation].
  *flops /= emulation::Dilation();
  *memory_bandwidth /= emulation::Dilation();
}

}  // namespace

template <typename Dtype>
void Synchronizer<Dtype>::Impl::MakePlan() {
  ClusterShape cluster;
  // Rank 0's measured rates, so that every rank plans alike.
  double rates[2] = {0, 0};
  if (comm->rank() == 0) MeasureRates(&rates[0], &rates[1]);
  const Status shared = comm->Broadcast(rates, sizeof(rates), 0);
  POSEIDON_REQUIRE(shared.ok(), DistributedError, "rank ", comm->rank(),
                   ": receiving rank 0's cost model rates: ", shared.message());
  cluster.flops = rates[0];
  cluster.memory_bandwidth = rates[1];
  POSEIDON_REQUIRE(param.network_gbits() > 0, ConfigError,
                   "distributed network_gbits must be positive, got ",
                   param.network_gbits());
  cluster.network_bandwidth = param.network_gbits() * 1e9 / 8;
  rates_line = StrCat("network ", param.network_gbits(),
                      " Gbit/s per host (network_gbits), measured on rank 0: ",
                      FormatBytes(cluster.memory_bandwidth),
                      "/s through "
                      "memory, ",
                      std::lround(cluster.flops / 1e9), " GFLOP/s");
  cluster.num_workers = comm->size();
  cluster.num_servers = servers.job != nullptr
                            ? static_cast<int>(servers.roles.servers.size())
                            : comm->size();
  cluster.colocated = servers.job == nullptr;
  cluster.dtype_bytes = sizeof(Dtype);
  cluster.shared_memory =
      param.shared_memory() && comm->size() > 1 && comm->OnOneHost();
  // Not with dedicated servers: the host level's PS sums between the
  // hosts' leaders, which are workers.
  if (param.host_level() && servers.job == nullptr && comm->size() > 1 &&
      !comm->OnOneHost()) {
    string why_not;
    hosts = SplitByHost(comm, &why_not);
    if (hosts) {
      cluster.hosts = hosts->layout.hosts;
      cluster.ranks_per_host = hosts->layout.local_size;
    } else if (!why_not.empty() && Poseidon::root_solver()) {
      LOG(WARNING) << "No host level: " << why_not;
    }
  }
  const CommType net_default = CommTypeFromProto(param.comm());
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  for (Group& g : groups) {
    const Layer<Dtype>& layer = *net->layers()[g.push_layer];
    vector<vector<int>> shapes;
    for (int p : g.params) shapes.push_back(learnable[p]->shape());
    int64_t rows = g.rows;
    if (rows == 0 && !net->bottom_vecs()[g.push_layer].empty()) {
      rows = net->bottom_vecs()[g.push_layer][0]->shape().empty()
                 ? 1
                 : net->bottom_vecs()[g.push_layer][0]->shape(0);
    }
    LayerCommShape shape = DescribeLayer(layer.layer_param(), shapes, rows);
    if (g.rows == 0) shape.type = layer.type();
    std::optional<CommType> override_type =
        LayerCommOverride(layer.layer_param());
    TransportChoice choice;
    if (g.rows == 0 && string(layer.type()) == "InnerProduct") {
      // Shared weights or iter_size > 1: the factors do not add up.
      shape.type = "InnerProduct (shared or iter_size > 1)";
      POSEIDON_REQUIRE(!override_type || *override_type != CommType::SFB,
                       ConfigError, "layer '", layer.layer_param().name(),
                       "' asks for comm: SFB, but its weights are shared "
                       "with another layer or iter_size > 1, so its "
                       "gradient is not one batch's sufficient factors");
    }
    choice = ChooseTransport(shape, cluster, net_default, override_type);
    g.transport = choice.type;
    PlannedLayer planned;
    planned.layer = layer.layer_param().name();
    planned.transport = choice.type;
    planned.predicted_bytes = choice.bytes;
    planned.predicted_seconds = choice.seconds;
    planned.elements = g.count;
    planned.reason = choice.reason;
    plan.push_back(planned);
    predicted += choice.bytes;
  }
  MakeTransports(cluster);
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::MakeTransports(const ClusterShape& cluster) {
  collective = std::make_unique<CommThread>("collective");
  TransportContext context;
  context.comm = comm;
  context.collective = collective.get();
  context.timeline = timeline;
  context.param = &param;
  context.slots = slots;
  for (Blob<Dtype>* b : net->learnable_params()) {
    context.param_counts.push_back(b->count());
  }
  if (servers.job != nullptr) {
    context.ps_comm = servers.job;
    context.ps_roles = servers.roles;
  }
  // The groups of each transport, in posting order (every rank alike).
  std::map<Kind, vector<ExchangeSpec>> specs;
  for (Group& g : groups) {
    switch (g.transport) {
      case CommType::PS:
        g.kind = Kind::kPs;
        break;
      case CommType::SFB:
        g.kind = Kind::kSfb;
        break;
      default:
        g.kind = cluster.shared_memory ? Kind::kSharedMemory : Kind::kRing;
        break;
    }
    ExchangeSpec spec;
    spec.name = LayerName(g.push_layer);
    spec.count = g.count;
    spec.params = g.params;
    spec.offsets = g.offset;
    spec.payload = g.count;
    if (g.kind == Kind::kSfb) {
      spec.rows = g.rows;
      spec.M = g.M;
      spec.N = g.N;
      spec.layout = g.layout;
      spec.bias = g.bias;
      spec.payload = static_cast<size_t>(g.rows) * (g.M + g.N);
    }
    g.index = static_cast<int>(specs[g.kind].size());
    specs[g.kind].push_back(std::move(spec));
  }
  context.server_update = MakeShard(context);
  if (servers.job != nullptr) StartServers(context);
  // Every rank has the same plan, so every rank makes the same (collective)
  // calls here, in the same order.
  if (hosts) {
    const bool made = MakeHostTransports(context, specs);
    const string note =
        made ? StrCat(" (host level: ", hosts->layout.hosts, " hosts x ",
                      hosts->layout.local_size,
                      " ranks, shared memory within a host)")
             : string(
                   " (no host level: the hosts' shared memory could not "
                   "be mapped)");
    for (PlannedLayer& p : plan) {
      if (!cluster.shared_memory || p.transport != CommType::ALLREDUCE) {
        p.reason += note;
      }
    }
    if (!made) hosts.reset();
  }
  for (auto& [kind, list] : specs) {
    if (transports.count(kind) == 0) {
      transports[kind] = Transport<Dtype>::Make(kind, context, list);
    }
  }
  if (specs.count(Kind::kSharedMemory) > 0) {
    const bool mapped = transports[Kind::kSharedMemory] != nullptr;
    if (!mapped) {
      transports.erase(Kind::kSharedMemory);
      vector<ExchangeSpec>& ring = specs[Kind::kRing];
      for (Group& g : groups) {
        if (g.kind != Kind::kSharedMemory) continue;
        ring.push_back(specs[Kind::kSharedMemory][g.index]);
        g.kind = Kind::kRing;
        g.index = static_cast<int>(ring.size()) - 1;
      }
    }
    for (PlannedLayer& p : plan) {
      if (p.transport != CommType::ALLREDUCE) continue;
      p.reason += mapped
                      ? " (through shared memory: every rank is on this host)"
                      : " (ring over MPI: no shared memory could be mapped)";
    }
    if (!mapped) {
      transports[Kind::kRing] =
          Transport<Dtype>::Make(Kind::kRing, context, specs[Kind::kRing]);
    }
  }
  for (Group& g : groups) g.via = transports.at(g.kind).get();
  // The rebuilt sum over every rank's factors replaces an SFB layer's own
  // weight and bias gradients (Collect overwrites the diffs), so the layer
  // need not compute them: for LeNet's ip1 that is a 500 x 800 x 64 product
  // per iteration off the training thread. Its backward still runs for the
  // bottom diff, and the hooks fire either way. Stage reads the top's diff
  // (U) after the layer's backward, possibly after the whole pass: it stays
  // out of the shared-diff pool (Note [Shared diffs] in net_diffs.cpp).
  for (Group& g : groups) {
    if (g.kind != Kind::kSfb) continue;
    auto skip_param_grads = [&g](Net<Dtype>* n) {
      Layer<Dtype>* layer = n->layers()[g.push_layer].get();
      for (size_t i = 0; i < layer->blobs().size(); ++i) {
        layer->set_param_propagate_down(static_cast<int>(i), false);
      }
      n->KeepDiff(n->blob_names()[n->top_ids(g.push_layer)[0]]);
    };
    skip_param_grads(net);
    for (Net<Dtype>* replica : replicas) skip_param_grads(replica);
  }
  // The signal agreement acts `lag` iterations after a poll, so it lets a
  // rank run up to lag - 1 iterations ahead of the slowest: as far as the
  // consistency model does, and under ASYNC kAsyncActionLag - 1 (Note
  // [Stale-synchronous serving]: a bound ASYNC itself does not have).
  int lag = wait_free ? apply_lag + 1 : 1;
  if (consistency == Consistency::kSsp) lag = param.staleness() + 1;
  if (consistency == Consistency::kAsync) lag = kAsyncActionLag;
  agreement = std::make_unique<ActionAgreement>(comm, collective.get(), lag);
}

// The host level's transports for PS, ring and SFB groups, on every rank or
// on none: whether every host could map its memory is agreed first.
template <typename Dtype>
bool Synchronizer<Dtype>::Impl::MakeHostTransports(
    const TransportContext& context,
    const std::map<Kind, vector<ExchangeSpec>>& specs) {
  std::map<Kind, std::unique_ptr<Transport<Dtype>>> made;
  int32_t failed = 0;
  for (const auto& [kind, list] : specs) {
    if (kind == Kind::kSharedMemory) continue;
    made[kind] = MakeHostTransport<Dtype>(kind, context, hosts.get(), list);
    if (!made[kind]) failed = 1;
  }
  vector<int32_t> all(comm->size());
  const Status s = comm->Allgather(&failed, sizeof(failed), all.data());
  POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(),
                   ": agreeing on the host level: ", s.message());
  if (!DecodeHostFlags(all.data(), all.size() * sizeof(int32_t), comm->size(),
                       [this](int r) { return comm->JobRank(r); })) {
    return false;
  }
  for (auto& [kind, t] : made) transports[kind] = std::move(t);
  return true;
}

#define POSEIDON_INSTANTIATE_PLAN(Dtype)                       \
  template void Synchronizer<Dtype>::Impl::MakePlan();         \
  template void Synchronizer<Dtype>::Impl::MakeTransports(     \
      const ClusterShape&);                                    \
  template bool Synchronizer<Dtype>::Impl::MakeHostTransports( \
      const TransportContext&,                                 \
      const std::map<Synchronizer<Dtype>::Impl::Kind, vector<ExchangeSpec>>&);
POSEIDON_INSTANTIATE_PLAN(float)
POSEIDON_INSTANTIATE_PLAN(double)
#undef POSEIDON_INSTANTIATE_PLAN

}  // namespace dist
}  // namespace poseidon
