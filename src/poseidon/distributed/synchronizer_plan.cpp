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
  if (param.host_level() && comm->size() > 1 && !comm->OnOneHost()) {
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
  context.diffs_born_in_slots = DiffsBornInSlots();
  for (Blob<Dtype>* b : net->learnable_params()) {
    context.param_counts.push_back(b->count());
  }
  if (servers.job != nullptr) {
    context.ps_comm = servers.job;
    context.ps_roles = servers.roles;
  }
  context.shared_memory = cluster.shared_memory;
  // The groups of each transport, in posting order (every rank alike).
  std::map<CommType, vector<ExchangeSpec>> specs;
  for (Group& g : groups) {
    ExchangeSpec spec;
    spec.name = LayerName(g.push_layer);
    spec.layer = g.push_layer;
    spec.count = g.count;
    spec.params = g.params;
    spec.offsets = g.offset;
    spec.payload = g.count;
    if (g.transport == CommType::SFB) {
      spec.rows = g.rows;
      spec.M = g.M;
      spec.N = g.N;
      spec.layout = g.layout;
      spec.bias = g.bias;
      spec.payload = static_cast<size_t>(g.rows) * (g.M + g.N);
    }
    g.index = static_cast<int>(specs[g.transport].size());
    specs[g.transport].push_back(std::move(spec));
  }
  const vector<ExchangeSpec> no_groups;
  const auto ps_specs = specs.find(CommType::PS);
  const vector<ExchangeSpec>& ps_groups =
      ps_specs == specs.end() ? no_groups : ps_specs->second;
  // The servers' update hook, and the sender that clipping holds blocks
  // for; made again when the host level cannot be had after all.
  auto make_shard = [&] {
    context.server_update = MakeShard(context, ps_groups);
    context.take_sender = nullptr;
    if (server_clip && shard) {
      context.take_sender =
          [clip = server_clip.get()](
              std::function<void(int64_t, int, const void*)> send) {
            clip->set_sender(
                [send](int64_t iter, int block, const Dtype* params) {
                  send(iter, block, params);
                });
          };
    }
  };
  if (hosts && servers.job != nullptr) {
    // The servers' workers are the hosts' first ranks (Note [Host level
    // with dedicated servers]).
    context.ps_roles.workers.clear();
    for (int r = 0; r < comm->size(); ++r) {
      if (hosts->layout.local_rank_of[r] == 0) {
        context.ps_roles.workers.push_back(servers.roles.workers[r]);
      }
    }
    CHECK_EQ(context.ps_roles.workers[0], servers.roles.workers[0])
        << "the first worker is not the first rank of its host";
  }
  make_shard();
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
    for (PlannedLayer& p : plan) p.reason += note;
    if (!made) {
      hosts.reset();
      context.ps_roles = servers.roles;
      make_shard();  // over the flat parameter server
    }
  }
  // After the host level is settled: it decides who the servers' workers
  // are.
  if (servers.job != nullptr) StartServers(context);
  for (size_t gid = 0; gid < groups.size(); ++gid) {
    if (groups[gid].on_server) plan[gid].reason += " (updated on the servers)";
  }
  for (auto& [type, list] : specs) {
    if (transports.count(type) == 0) {
      transports[type] = Transport<Dtype>::Make(type, context, list);
    }
  }
  for (PlannedLayer& p : plan) {
    const auto t = transports.find(p.transport);
    if (t == transports.end()) continue;
    const string route = t->second->route();
    if (!route.empty()) p.reason += " (" + route + ")";
  }
  for (Group& g : groups) g.via = transports.at(g.transport).get();
  workers = {net};
  workers.insert(workers.end(), replicas.begin(), replicas.end());
  for (auto& [type, transport] : transports) {
    for (Net<Dtype>* worker : workers) transport->Adapt(worker);
  }
  // The signal agreement acts `lag` iterations after a poll, so it lets a
  // rank run up to lag - 1 iterations ahead of the slowest: as far as the
  // consistency model does. ASYNC has no such bound, and its agreement none
  // (Note [Acting on a request under ASYNC] in action_agreement.cpp).
  int lag = wait_free ? apply_lag + 1 : 1;
  if (consistency == Consistency::kSsp) lag = param.staleness() + 1;
  if (consistency == Consistency::kAsync) lag = ActionAgreement::kUnbounded;
  agreement = std::make_unique<ActionAgreement>(comm, collective.get(), lag);
}

// The host level's transports for PS, ring and SFB groups, on every rank or
// on none: whether every host could map its memory is agreed first.
template <typename Dtype>
bool Synchronizer<Dtype>::Impl::MakeHostTransports(
    const TransportContext& context,
    const std::map<CommType, vector<ExchangeSpec>>& specs) {
  std::map<CommType, std::unique_ptr<Transport<Dtype>>> made;
  int32_t failed = 0;
  for (const auto& [type, list] : specs) {
    made[type] = MakeHostTransport<Dtype>(type, context, hosts.get(), list);
    if (!made[type]) failed = 1;
  }
  vector<int32_t> all(comm->size());
  const Status s = comm->Allgather(&failed, sizeof(failed), all.data());
  POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(),
                   ": agreeing on the host level: ", s.message());
  if (!DecodeHostFlags(all.data(), all.size() * sizeof(int32_t), comm->size(),
                       [this](int r) { return comm->JobRank(r); })) {
    return false;
  }
  for (auto& [type, t] : made) transports[type] = std::move(t);
  return true;
}

#define POSEIDON_INSTANTIATE_PLAN(Dtype)                       \
  template void Synchronizer<Dtype>::Impl::MakePlan();         \
  template void Synchronizer<Dtype>::Impl::MakeTransports(     \
      const ClusterShape&);                                    \
  template bool Synchronizer<Dtype>::Impl::MakeHostTransports( \
      const TransportContext&,                                 \
      const std::map<CommType, vector<ExchangeSpec>>&);
POSEIDON_INSTANTIATE_PLAN(float)
POSEIDON_INSTANTIATE_PLAN(double)
#undef POSEIDON_INSTANTIATE_PLAN

}  // namespace dist
}  // namespace poseidon
