// Wait-free backpropagation over the PS, SFB and ALLREDUCE transports.
#include "poseidon/dist/synchronizer.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

#include "poseidon/dist/action_agreement.hpp"
#include "poseidon/dist/comm_thread.hpp"
#include "poseidon/dist/host_level.hpp"
#include "poseidon/dist/param_uses.hpp"
#include "poseidon/dist/server_process.hpp"
#include "poseidon/dist/shard_state.hpp"
#include "poseidon/dist/shared_flags.hpp"
#include "poseidon/dist/sufficient_factor.hpp"
#include "poseidon/dist/transport.hpp"
#include "poseidon/dist/wire.hpp"
#include "poseidon/solvers/sgd_solver.hpp"
#include "poseidon/util/emulation.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/timeline.hpp"
#include "poseidon/util/wait_notes.hpp"

#ifndef CPU_ONLY
#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {
namespace dist {
namespace {

// Copies `count` elements of `mem` into the host buffer `dest`. When the
// newest copy is on the GPU (training in GPU mode) the copy is queued on the
// calling thread's stream, right behind the backward that produced it, and
// the caller waits once for all of a group's copies (WaitForHostCopies);
// the blob's own host copy is left alone.
template <typename Dtype>
void CopyToHost(SyncedMemory* mem, int count, Dtype* dest) {
#ifndef CPU_ONLY
  if (mem->head() == SyncedMemory::HEAD_AT_GPU) {
    POSEIDON_CUDA_CHECK(cudaMemcpyAsync(dest, mem->gpu_data(),
                                        count * sizeof(Dtype),
                                        cudaMemcpyDeviceToHost,
                                        gpu::Stream()));
    return;
  }
#endif
  std::memcpy(dest, mem->cpu_data(), count * sizeof(Dtype));
}

void WaitForHostCopies() {
#ifndef CPU_ONLY
  if (Poseidon::mode() == Poseidon::GPU) gpu::Synchronize();
#endif
}

}  // namespace

// Under ASYNC: iterations after a poll that the ranks act on its agreed
// signal action (a SIGINT or SIGHUP takes effect that late), and one more
// than how far a worker may run ahead of the slowest.
constexpr int kAsyncActionLag = 64;

// Note [Deferred updates]
// A group is a set of learnable params that travel together: those whose
// last backward use (the lowest layer index among the layers that use them
// and need backward) is the same layer, its "push layer". Its "wait layer"
// is the lowest layer index using any of them: the first forward that needs
// the new values. Per group and iteration j:
//   after_backward(push layer), last iter_size pass: the param diffs (or,
//       for SFB, the layer's top diff and bottom data) are copied into the
//       group's staging slot j % (staleness + 1) and posted to the
//       transport, which leaves the sum over ranks in the slot;
//   update point of j: the rate of j is recorded (GetLearningRate, once);
//   before_forward(wait layer), first pass of iteration t: for every
//       pending j <= t - 1 - staleness (waiting for it) and any later j
//       already done: diff <- slot / W; SGDSolver::ApplyUpdateToParam(p,
//       rate_j, j) for each param; diff <- 0. A PS group whose params the
//       servers update (Note [Server-side update] in shard_state.hpp)
//       reads the servers' new parameters into the params' data instead,
//       and only the diffs are zeroed.
// The diffs are scratch between the Solver's ClearParamDiffs and the next
// backward, so the training thread and the communication threads never
// share them: the threads only touch the staging slots. A slot is reused
// s + 1 iterations later, after its update was applied. Params that no
// exchanged layer produces (lr_mult 0, or no layer needs backward) are
// updated locally at the update point.

// Note [Threads of a rank]
// The training thread runs forward/backward and the hooks. The ParamServer
// runs num_push_threads push threads, num_pull_threads pull threads and one
// server thread; ALLREDUCE and SFB exchanges run on one collective thread
// (collectives must come from one thread, in the same order everywhere).
// ALLREDUCE through shared memory needs no thread: the training thread
// stages, publishes and sums (Note [Shared memory allreduce] in
// shared_allreduce.cpp).
// The collective thread also runs the asynchronous action agreement
// (action_agreement.hpp) and, posted by the training thread which then
// waits, the sum of the test scores, so that every collective keeps one
// order on every rank. Groups are posted in backward order, the same on
// every rank. Each transport is one file (transport.hpp lists them).

namespace {

uint64_t Fnv1a(const std::string& bytes, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

string SerializeDeterministic(const google::protobuf::Message& m) {
  string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

}  // namespace

template <typename Dtype>
struct Synchronizer<Dtype>::Impl {
  using Kind = typename Transport<Dtype>::Kind;

  struct Group {
    int push_layer = -1;
    int wait_layer = -1;
    vector<int> params;     // learnable param ids, increasing
    vector<size_t> offset;  // of each param in the group's gradient
    size_t count = 0;
    CommType transport = CommType::PS;
    // PS with the update on the servers: the exchange brings parameters
    // back (Note [Server-side update] in shard_state.hpp).
    bool on_server = false;
    // SFB: rows K, outputs M, inputs N, the weight layout, and whether
    // params[1] is the bias.
    int rows = 0, M = 0, N = 0;
    WeightLayout layout = WeightLayout::kOutputsByInputs;
    bool bias = false;
    // The transport that carries the group, and the group's index there.
    Transport<Dtype>* via = nullptr;
    Kind kind = Kind::kPs;
    int index = -1;
    int64_t next_apply = 0;  // the first iteration not yet applied
    int64_t last_posted = -1;
    std::vector<double> posted_at;  // per slot: when it was posted (s)
  };

  Solver<Dtype>* solver;
  SGDSolver<Dtype>* sgd;
  Net<Dtype>* net;
  Communicator* comm;
  DistributedParameter param;
  Timeline* timeline;
  vector<Net<Dtype>*> replicas;  // other device workers of this rank
  int slots = 1;
  bool wait_free = true;
  bool clip = false;
  // How the shards answer (Note [Stale-synchronous serving]); the
  // iterations a forward may run behind the exchanges (BSP's staleness; 0
  // under SSP and ASYNC, whose staleness is the servers'); whether the
  // shards are serving now (between StaleBegin and StaleBarrier).
  Consistency consistency = Consistency::kBsp;
  int apply_lag = 0;
  bool stale_serving = false;
  vector<Group> groups;
  vector<vector<int>> push_groups;  // per layer
  vector<vector<int>> wait_groups;  // per layer
  vector<int> local_params;         // updated without exchange
  vector<PlannedLayer> plan;
  double predicted = 0;
  string rates_line;  // the cost model's rates, for the log
  // The collective thread outlives the transports' and the agreement's use
  // of it: it is joined first (see ~Synchronizer).
  std::unique_ptr<CommThread> collective;
  // The host level's communicators (Note [Host level]); null without it.
  // They outlive the transports that use them.
  std::unique_ptr<HostComms> hosts;
  std::map<Kind, std::unique_ptr<Transport<Dtype>>> transports;
  std::unique_ptr<ActionAgreement> agreement;
  // The servers own the PS groups' params (Note [Server-side update]):
  // this rank's shard's state, the partition it is cut by, which params
  // it covers (by net id), whether its weights or its history must be
  // seeded from the solver before the next exchange, and whether the
  // workers' history is behind the shards'.
  std::unique_ptr<BlockPartition> ps_partition;
  std::unique_ptr<ShardState<Dtype>> shard;
  // Dedicated servers instead of a shard here (Note [Dedicated servers]):
  // the job, the servers' update settings (when they update), the control
  // the first worker commands them with, and the last iteration they were
  // told to serve.
  DedicatedServers servers;
  std::unique_ptr<ServerUpdateSettings> server_settings;
  std::unique_ptr<ServerControl<Dtype>> control;
  int64_t last_iterated = -1;
  vector<bool> on_server;
  bool seed_weights = true;
  bool seed_history = true;
  bool history_behind = false;
  std::map<int64_t, Dtype> rates;  // pending iterations -> learning rate
  int pass = 0;                    // forward pass within the iteration
  int64_t layer_begin = 0;         // timeline: when the current layer began
  // The net's and solver's hooks, removed when this object goes.
  vector<Subscription> hooks;

  Impl(Solver<Dtype>* s, Communicator* c, const DistributedParameter& p,
       Timeline* t, DedicatedServers d)
      : solver(s),
        net(s->net().get()),
        comm(c),
        param(p),
        timeline(t),
        servers(std::move(d)) {}

  void CheckAgreement();
  void BroadcastWeights();
  void MakeGroups();
  void MakePlan();
  void MakeTransports(const ClusterShape& cluster);
  // Decides which PS groups the servers update and makes the shard's
  // state; returns the transports' server_update hook (empty for none).
  std::function<void(int64_t, int, void*)> MakeShard(
      const TransportContext& context);
  // With dedicated servers: sends them their plan (the PS groups' blocks
  // in posting order, the update settings if they update).
  void StartServers(const TransportContext& context);
  void SeedShard();
  // The groups in the order Post sends them each iteration: by the
  // layers' backward (wait-free) or by group (exchange after backward).
  vector<int> PostingOrder() const;
  // Under SSP or ASYNC: refuses a plan the servers cannot serve alone.
  void CheckStalePlan() const;
  // Under SSP or ASYNC: seeds this rank's shard if due and starts its
  // serving at the solver's iteration; StaleBarrier ends every worker's
  // part there, waits for this rank's shard to finish, and gives every
  // worker the servers' parameters (collective).
  void StaleBegin();
  void StaleBarrier();
  void SyncHistory();
  bool MakeHostTransports(const TransportContext& context,
                          const std::map<Kind, vector<ExchangeSpec>>& specs);
  void Attach();
  void Stage(Group* g, int64_t iter, Dtype* dest);
  void Collect(int gid, int64_t iter);
  void Post(int gid, int64_t iter);
  void ApplyGroup(int gid, int64_t iter);
  void ApplyUpTo(int gid, int64_t must, bool take_done);
  void UpdatePoint();
  void SyncAll();
  // Runs `op` on the collective thread and waits for it: collectives must
  // keep one order on every rank, behind the exchanges already posted.
  // Runs op on the collective thread and waits for it; `what` names it in
  // this rank's wait notes.
  Status OnCollectiveThread(const char* what, std::function<Status()> op);
  string LayerName(int l) const { return net->layer_names()[l]; }
};

template <typename Dtype>
void Synchronizer<Dtype>::Impl::CheckAgreement() {
  Fingerprint mine;
  uint64_t h = Fnv1a("net");
  for (size_t l = 0; l < net->layers().size(); ++l) {
    LayerParameter lp = net->layers()[l]->layer_param();
    lp.clear_blobs();
    h = Fnv1a(SerializeDeterministic(lp), h);
  }
  mine.net = h;
  SolverParameter sp = solver->param();
  for (auto* field : {"net", "train_net", "test_net", "net_param",
                      "train_net_param", "test_net_param", "snapshot_prefix",
                      "device_id", "solver_mode"}) {
    const auto* fd = sp.GetDescriptor()->FindFieldByName(field);
    if (fd != nullptr) sp.GetReflection()->ClearField(&sp, fd);
  }
  mine.solver = Fnv1a(SerializeDeterministic(sp));
  mine.num_layers = static_cast<int64_t>(net->layers().size());
  mine.num_params = static_cast<int64_t>(net->learnable_params().size());
  for (Blob<Dtype>* b : net->learnable_params()) mine.param_elements += b->count();
  mine.dtype_bytes = sizeof(Dtype);
  vector<Fingerprint> all(comm->size());
  Status s = comm->Allgather(&mine, sizeof(mine), all.data());
  POSEIDON_REQUIRE(s.ok(), DistributedError,
                   "rank ", comm->rank(),
                   ": comparing start-up settings with the other ranks: ",
                   s.message());
  CheckFingerprints(all.data(), all.size() * sizeof(Fingerprint),
                    comm->size(), [this](int r) { return comm->JobRank(r); });
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::BroadcastWeights() {
  for (Blob<Dtype>* b : net->learnable_params()) {
    Status s = comm->Broadcast(b->mutable_cpu_data(),
                               b->count() * sizeof(Dtype), 0);
    POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(),
                     ": receiving rank 0's initial weights: ", s.message());
  }
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::MakeGroups() {
  const int num_layers = static_cast<int>(net->layers().size());
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  const int num_learnable = static_cast<int>(learnable.size());
  const vector<ParamUse> uses = LearnableParamUses(*net);
  std::map<int, int> group_of_layer;
  for (int p = 0; p < num_learnable; ++p) {
    const ParamUse& use = uses[p];
    if (net->params_lr()[p] == 0 || use.first_backward == num_layers) {
      local_params.push_back(p);
      continue;
    }
    auto it = group_of_layer.find(use.first_backward);
    if (it == group_of_layer.end()) {
      it = group_of_layer.emplace(use.first_backward,
                                  static_cast<int>(groups.size())).first;
      groups.emplace_back();
      groups.back().push_layer = use.first_backward;
      groups.back().wait_layer = use.first_use;
    }
    Group& g = groups[it->second];
    g.wait_layer = std::min(g.wait_layer, use.first_use);
    g.offset.push_back(g.count);
    g.params.push_back(p);
    g.count += learnable[p]->count();
  }
  push_groups.assign(num_layers, {});
  wait_groups.assign(num_layers, {});
  // Post in backward order: the highest push layer first.
  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return a.push_layer > b.push_layer;
  });
  for (int gid = 0; gid < static_cast<int>(groups.size()); ++gid) {
    push_groups[groups[gid].push_layer].push_back(gid);
    wait_groups[groups[gid].wait_layer].push_back(gid);
  }
  // SFB needs the group to be exactly one InnerProduct layer's own params.
  for (Group& g : groups) {
    Layer<Dtype>& layer = *net->layers()[g.push_layer];
    g.rows = 0;
    if (string(layer.type()) != "InnerProduct") continue;
    const int own = static_cast<int>(layer.blobs().size());
    bool exact = static_cast<int>(g.params.size()) == own;
    for (int i = 0; exact && i < own; ++i) {
      exact = learnable[g.params[i]] == layer.blobs()[i].get() &&
              uses[g.params[i]].users == 1;
    }
    if (!exact || solver->param().iter_size() != 1) continue;
    const Blob<Dtype>* bottom = net->bottom_vecs()[g.push_layer][0];
    const InnerProductParameter& ip = layer.layer_param().inner_product_param();
    const int axis = bottom->CanonicalAxisIndex(ip.axis());
    // Every device worker of this rank contributes its rows.
    g.rows = bottom->count(0, axis) * (1 + static_cast<int>(replicas.size()));
    g.N = bottom->count(axis);
    g.M = static_cast<int>(ip.num_output());
    g.layout = ip.transpose() ? WeightLayout::kInputsByOutputs
                              : WeightLayout::kOutputsByInputs;
    g.bias = own > 1;
  }
}

namespace {

double Seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Note [Cost model time]: this rank's GEMM rate (what the SFB rebuild runs)
// and its rate of summing arrays through memory, each the best of three
// short runs (about 20 ms in all).
void MeasureRates(double* flops, double* memory_bandwidth) {
  constexpr int kN = 256;
  std::vector<float> a(kN * kN, 0.5f), b(kN * kN, 0.25f), c(kN * kN);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = Seconds();
    cpu_gemm<float>(CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.f, a.data(),
                    b.data(), 0.f, c.data());
    best = std::min(best, Seconds() - t0);
  }
  *flops = 2.0 * kN * kN * kN / std::max(best, 1e-9);
  constexpr size_t kCount = size_t{1} << 21;  // 8 MB per array
  std::vector<float> x(kCount, 1.f), y(kCount, 2.f), out(kCount);
  best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = Seconds();
    SumInOrder<float>({x.data(), y.data()}, kCount, 1.f, out.data());
    best = std::min(best, Seconds() - t0);
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
                   ": receiving rank 0's cost model rates: ",
                   shared.message());
  cluster.flops = rates[0];
  cluster.memory_bandwidth = rates[1];
  POSEIDON_REQUIRE(param.network_gbits() > 0, ConfigError,
                   "distributed network_gbits must be positive, got ",
                   param.network_gbits());
  cluster.network_bandwidth = param.network_gbits() * 1e9 / 8;
  rates_line = StrCat("network ", param.network_gbits(),
                      " Gbit/s per host (network_gbits), measured on rank 0: ",
                      FormatBytes(cluster.memory_bandwidth), "/s through "
                      "memory, ", std::lround(cluster.flops / 1e9),
                      " GFLOP/s");
  cluster.num_workers = comm->size();
  cluster.num_servers =
      servers.job != nullptr ? static_cast<int>(servers.roles.servers.size())
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
             : string(" (no host level: the hosts' shared memory could not "
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

template <typename Dtype>
std::function<void(int64_t, int, void*)> Synchronizer<Dtype>::Impl::MakeShard(
    const TransportContext& context) {
  // Not with clip_gradients (the shards would have to agree on the norm of
  // the whole gradient first) nor at the host level (its PS transport sums
  // between hosts' leaders); then every worker updates, as with
  // server_update: false.
  const bool any_ps =
      std::any_of(groups.begin(), groups.end(),
                  [](const Group& g) { return g.kind == Kind::kPs; });
  if (!param.server_update() || !any_ps) return {};
  const char* why_not = clip    ? "clip_gradients is set"
                        : hosts ? "the host level sums between hosts"
                                : nullptr;
  if (why_not != nullptr) {
    LOG_IF(INFO, Poseidon::root_solver())
        << "The workers apply the update of the PS layers, not the "
           "servers: "
        << why_not;
    return {};
  }
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  ServerUpdateSettings settings;
  settings.solver = solver->param();
  settings.rule = sgd->rule();
  settings.workers = comm->size();
  settings.per_push = consistency != Consistency::kBsp;
  settings.on_server.assign(learnable.size(), false);
  settings.lr_mult = net->params_lr();
  settings.decay_mult = net->params_weight_decay();
  for (Group& g : groups) {
    g.on_server = g.kind == Kind::kPs;
    if (!g.on_server) continue;
    for (int p : g.params) settings.on_server[p] = true;
  }
  for (PlannedLayer& p : plan) {
    if (p.transport == CommType::PS) p.reason += " (updated on the servers)";
  }
  on_server = settings.on_server;
  if (servers.job != nullptr) {
    // The dedicated servers update (StartServers sends them the settings).
    server_settings = std::make_unique<ServerUpdateSettings>(settings);
    return {};
  }
  ps_partition = MakePsPartition(context, sizeof(Dtype));
  shard = std::make_unique<ShardState<Dtype>>(
      ps_partition.get(), comm->rank(), std::move(settings));
  ShardState<Dtype>* state = shard.get();
  return [state](int64_t iter, int block, void* values) {
    state->Apply(iter, block, static_cast<Dtype*>(values));
  };
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::StartServers(const TransportContext& context) {
  ServerPlan server_plan;
  server_plan.dtype_bytes = sizeof(Dtype);
  server_plan.block_bytes = static_cast<size_t>(param.block_size());
  server_plan.roles = servers.roles;
  server_plan.push_threads = param.num_push_threads();
  server_plan.pull_threads = param.num_pull_threads();
  server_plan.bytes_in_flight = static_cast<size_t>(param.bytes_in_flight());
  server_plan.blob_counts = context.param_counts;
  // The PS groups' blocks in the order Post sends them.
  const std::unique_ptr<BlockPartition> partition =
      MakePsPartition(context, sizeof(Dtype));
  for (int gid : PostingOrder()) {
    const Group& g = groups[gid];
    if (g.kind != Kind::kPs) continue;
    vector<int> blocks;
    for (int p : g.params) {
      for (int b : partition->blob_blocks(p)) blocks.push_back(b);
    }
    server_plan.exchanges.push_back(std::move(blocks));
  }
  if (server_settings) {
    server_plan.update = true;
    server_plan.settings = *server_settings;
  }
  control = std::make_unique<ServerControl<Dtype>>(servers.job, server_plan);
  const Status s = control->Start();
  POSEIDON_REQUIRE(s.ok(), DistributedError, s.message());
}

template <typename Dtype>
vector<int> Synchronizer<Dtype>::Impl::PostingOrder() const {
  vector<int> order;
  if (wait_free) {
    for (int l = static_cast<int>(push_groups.size()) - 1; l >= 0; --l) {
      for (int gid : push_groups[l]) order.push_back(gid);
    }
  } else {
    for (int gid = 0; gid < static_cast<int>(groups.size()); ++gid) {
      order.push_back(gid);
    }
  }
  return order;
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::CheckStalePlan() const {
  const string name = ConsistencyName(consistency, param.staleness());
  for (size_t gid = 0; gid < groups.size(); ++gid) {
    const Group& g = groups[gid];
    POSEIDON_REQUIRE(g.kind == Kind::kPs, ConfigError, "layer '",
                     plan[gid].layer, "' goes by ",
                     CommTypeName(g.transport), " (", plan[gid].reason,
                     "), but consistency ", name,
                     " needs every layer on the parameter server: remove "
                     "its ParamSpec comm or use consistency BSP");
    POSEIDON_REQUIRE(g.on_server, ConfigError, "layer '", plan[gid].layer,
                     "': consistency ", name,
                     " needs the update on the servers, which this job "
                     "does not have (see the log line above; "
                     "server_update: true, no clip_gradients)");
  }
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::StaleBegin() {
  // A net with nothing to exchange (every lr_mult 0) has no PS transport.
  if (consistency == Consistency::kBsp || stale_serving ||
      transports.count(Kind::kPs) == 0) {
    return;
  }
  if (seed_weights || seed_history) SeedShard();
  vector<int> order;
  for (int gid : PostingOrder()) order.push_back(groups[gid].index);
  transports.at(Kind::kPs)->BeginStale(order, solver->iter());
  stale_serving = true;
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::StaleBarrier() {
  if (!stale_serving) return;
  stale_serving = false;
  Status s = transports.at(Kind::kPs)->EndStale(solver->iter());
  POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(),
                   ": ending ", ConsistencyName(consistency,
                                                param.staleness()),
                   " serving at iteration ", solver->iter(), ": ",
                   s.message());
  // Every worker takes the servers' parameters: shard r's held blocks
  // broadcast from rank r, into the params' host memory (taken here, on
  // the training thread).
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  vector<Dtype*> into(learnable.size(), nullptr);
  for (size_t p = 0; p < learnable.size(); ++p) {
    if (on_server[p]) into[p] = learnable[p]->mutable_cpu_data();
  }
  s = OnCollectiveThread("taking the servers' parameters", [&] {
    std::vector<Dtype> packed;
    for (int r = 0; r < comm->size(); ++r) {
      const vector<int> held =
          ShardState<Dtype>::HeldBlocks(*ps_partition, r, on_server);
      packed.resize(BlockElements(*ps_partition, held));
      if (packed.empty()) continue;
      if (r == comm->rank()) {
        std::copy(shard->weights(), shard->weights() + packed.size(),
                  packed.begin());
      }
      const Status st =
          comm->Broadcast(packed.data(), packed.size() * sizeof(Dtype), r);
      if (!st.ok()) {
        return Status::Failure(StrCat("the parameters of the shard of rank ",
                                      comm->JobRank(r), ": ", st.message()));
      }
      UnpackBlocks<Dtype>(*ps_partition, held, packed.data(),
                          [&into](int p) { return into[p]; });
    }
    return Status::OK();
  });
  POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(), ": ",
                   s.message());
}

// Before the first exchange of a Step: the shard takes its blocks' weights,
// and when the synchroniser is new or a state was restored their history,
// from this rank's solver (the same on every rank: rank 0's weights, or a
// snapshot or weights every rank loaded alike). See Note [Server-side
// update].
template <typename Dtype>
void Synchronizer<Dtype>::Impl::SeedShard() {
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  const vector<shared_ptr<Blob<Dtype>>>& history = sgd->history();
  const size_t num = learnable.size();
  std::function<const Dtype*(int, int)> from_solver;
  if (seed_history) {
    // A history never written (a fresh solver's zeros) is left unallocated:
    // the worker never steps a server-owned param, so the optimizer state
    // of those params lives on the servers only.
    from_solver = [&](int a, int p) -> const Dtype* {
      const Blob<Dtype>& h = *history[a * num + p];
      if (h.data()->head() == SyncedMemory::UNINITIALIZED) return nullptr;
      return h.cpu_data();
    };
  }
  auto weights = [&](int p) { return learnable[p]->cpu_data(); };
  if (control) {
    const Status s = control->Seed(weights, from_solver);
    POSEIDON_REQUIRE(s.ok(), DistributedError, s.message());
  } else {
    shard->Seed(weights, from_solver);
  }
  seed_weights = false;
  seed_history = false;
}

// Every shard's history into the solver of the rank that writes snapshots
// (rank 0; the others let it pass) before a snapshot: collective, on the
// collective thread behind the exchanges posted.
template <typename Dtype>
void Synchronizer<Dtype>::Impl::SyncHistory() {
  if ((!shard && !control) || !history_behind) return;
  const vector<shared_ptr<Blob<Dtype>>>& history = sgd->history();
  const size_t num = net->learnable_params().size();
  // The solver's host memory of the server-owned params' history, taken
  // here on the training thread (the rest stays where it is, on the GPU in
  // GPU mode).
  vector<Dtype*> into(history.size(), nullptr);
  if (comm->rank() == 0) {
    for (size_t i = 0; i < history.size(); ++i) {
      if (on_server[i % num]) into[i] = history[i]->mutable_cpu_data();
    }
  }
  auto into_solver = [&](int a, int p) { return into[a * num + p]; };
  const Status s = OnCollectiveThread(
      "gathering the servers' solver history", [&] {
        return control ? control->Gather(into_solver)
                       : shard->Gather(comm, /*root=*/0, into_solver);
      });
  POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(), ": ",
                   s.message());
  history_behind = false;
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
  if (!DecodeHostFlags(all.data(), all.size() * sizeof(int32_t),
                       comm->size(),
                       [this](int r) { return comm->JobRank(r); })) {
    return false;
  }
  for (auto& [kind, t] : made) transports[kind] = std::move(t);
  return true;
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::Stage(Group* g, int64_t iter, Dtype* dest) {
  if (g->kind == Kind::kSfb) {
    // [U_0; U_1; ... | V_0; V_1; ...] over this rank's device workers, U
    // scaled by 1 / T: their summed outer products are the locally averaged
    // gradient, as DeviceWorkers' reduce would give.
    const int T = 1 + static_cast<int>(replicas.size());
    const size_t rows = static_cast<size_t>(g->rows) / T;
    const size_t u = rows * g->M;
    const size_t v = rows * g->N;
    Dtype* U = dest;
    Dtype* V = U + u * T;
    for (int t = 0; t < T; ++t) {
      const Net<Dtype>* worker = t == 0 ? net : replicas[t - 1];
      const Blob<Dtype>* top = worker->top_vecs()[g->push_layer][0];
      const Blob<Dtype>* bottom = worker->bottom_vecs()[g->push_layer][0];
      CHECK_EQ(static_cast<size_t>(top->count()), u);
      CHECK_EQ(static_cast<size_t>(bottom->count()), v);
      CopyToHost(top->diff().get(), static_cast<int>(u), U + t * u);
      CopyToHost(bottom->data().get(), static_cast<int>(v), V + t * v);
    }
    WaitForHostCopies();
    for (int t = 0; t < T; ++t) {
      cpu_scal(static_cast<int>(u), Dtype(1) / T, U + t * u);
    }
    return;
  }
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  for (size_t i = 0; i < g->params.size(); ++i) {
    const Blob<Dtype>* b = learnable[g->params[i]];
    CopyToHost(b->diff().get(), b->count(), dest + g->offset[i]);
  }
  WaitForHostCopies();
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::Post(int gid, int64_t iter) {
  Group& g = groups[gid];
  CHECK_GT(iter, g.last_posted) << "layer " << LayerName(g.push_layer);
  // The first exchange (after a restore it is not iteration 0).
  if (g.last_posted < 0) g.next_apply = iter;
  g.last_posted = iter;
  if (g.on_server) {
    if (seed_weights || seed_history) SeedShard();
    history_behind = true;
  }
  if (control && g.kind == Kind::kPs && iter > last_iterated) {
    // After any seed: the servers take their commands in order.
    const Status s = control->Iterate(iter);
    POSEIDON_REQUIRE(s.ok(), DistributedError, s.message());
    last_iterated = iter;
  }
  const int64_t begin = timeline ? timeline->NowMicros() : 0;
  Stage(&g, iter, g.via->Stage(g.index, iter));
  g.via->Post(g.index, iter);
  g.posted_at.resize(slots);
  g.posted_at[iter % slots] = Seconds();
  if (timeline && g.kind == Kind::kSharedMemory) {
    // The training thread's share of the exchange; the sum shows in the
    // timeline's wait+update before the next forward.
    timeline->Complete(timeline->Lane("compute"), LayerName(g.push_layer),
                       "ALLREDUCE", begin, timeline->NowMicros(),
                       {{"iter", iter}});
  }
}

// Waits for group gid's exchange of `iter` and leaves the mean over ranks
// in its params' diffs.
template <typename Dtype>
void Synchronizer<Dtype>::Impl::Collect(int gid, int64_t iter) {
  Group& g = groups[gid];
  const double waiting = Seconds();
  g.via->Wait(g.index, iter);
  const double done = Seconds();
  plan[gid].measured_seconds += done - g.posted_at[iter % slots];
  plan[gid].blocked_seconds += done - waiting;
  ++plan[gid].exchanges;
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  for (size_t i = 0; i < g.params.size(); ++i) {
    Blob<Dtype>* b = learnable[g.params[i]];
    if (g.on_server) {
      // The servers' parameters after the update of `iter`.
      g.via->Read(g.index, iter, g.offset[i], b->count(), Dtype(1),
                  b->mutable_cpu_data());
    } else {
      g.via->Read(g.index, iter, g.offset[i], b->count(),
                  Dtype(1) / comm->size(), b->mutable_cpu_diff());
    }
  }
  g.via->Release(g.index, iter);
  g.next_apply = iter + 1;
}

template <typename Dtype>
Status Synchronizer<Dtype>::Impl::OnCollectiveThread(
    const char* what, std::function<Status()> op) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status result;
  auto finish = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    result = s;
    done = true;
    cv.notify_all();
  };
  collective->Post([&] { finish(op()); }, finish);
  const WaitNote note(what);
  std::unique_lock<std::mutex> lock(mu);
  UrgentScope urgent(comm);
  cv.wait(lock, [&] { return done; });
  return result;
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::ApplyGroup(int gid, int64_t iter) {
  Group& g = groups[gid];
  Collect(gid, iter);
  const Dtype rate = rates.at(iter);
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  for (int p : g.params) {
    if (!g.on_server) {
      sgd->ApplyUpdateToParam(p, rate, static_cast<int>(iter));
    }
    const Poseidon::Brew dev = Poseidon::mode();
    math::set<Dtype>(dev, learnable[p]->count(), Dtype(0),
                     learnable[p]->mutable_diff_on(dev));
  }
}

// Applies group gid's pending iterations up to `must` (waiting for them),
// and, when take_done, the later ones whose exchange already ended.
template <typename Dtype>
void Synchronizer<Dtype>::Impl::ApplyUpTo(int gid, int64_t must,
                                          bool take_done) {
  Group& g = groups[gid];
  while (g.next_apply <= g.last_posted) {
    const int64_t j = g.next_apply;
    // Posted, but its update point is still ahead (the current iteration).
    if (rates.count(j) == 0) {
      CHECK_GT(j, must) << "layer " << LayerName(g.push_layer)
                        << ": no learning rate recorded for iteration " << j;
      break;
    }
    if (j > must && (!take_done || !g.via->Done(g.index, j))) break;
    ApplyGroup(gid, j);
  }
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::UpdatePoint() {
  const int64_t iter = solver->iter();
  const Dtype rate = sgd->GetLearningRate();
  const SolverParameter& sp = solver->param();
  if (sp.display() > 0 && iter % sp.display() == 0) {
    LOG_IF(INFO, Poseidon::root_solver())
        << "Iteration " << iter << ", lr = " << rate;
  }
  rates[iter] = rate;
  if (!wait_free) {
    for (int gid = 0; gid < static_cast<int>(groups.size()); ++gid) {
      Post(gid, iter);
    }
  }
  if (!wait_free || clip) {
    // Every gradient first: clipping needs the global norm.
    const vector<Blob<Dtype>*>& learnable = net->learnable_params();
    for (int gid = 0; gid < static_cast<int>(groups.size()); ++gid) {
      Collect(gid, iter);
    }
    sgd->ClipGradients();
    for (int p = 0; p < static_cast<int>(learnable.size()); ++p) {
      if (!on_server.empty() && on_server[p]) continue;  // pulled already
      sgd->ApplyUpdateToParam(p, rate, static_cast<int>(iter));
    }
    rates.erase(iter);
    return;
  }
  for (int p : local_params) {
    sgd->ApplyUpdateToParam(p, rate, static_cast<int>(iter));
  }
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::SyncAll() {
  for (int gid = 0; gid < static_cast<int>(groups.size()); ++gid) {
    ApplyUpTo(gid, groups[gid].last_posted, false);
  }
  // Iterations every group has applied are no longer needed.
  int64_t oldest = std::numeric_limits<int64_t>::max();
  for (const Group& g : groups) oldest = std::min(oldest, g.next_apply);
  rates.erase(rates.begin(), rates.lower_bound(oldest));
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::Attach() {
  hooks.push_back(net->add_before_forward([this](int l) {
    if (l == 0) ++pass;
    if (pass == 1 && wait_free && !clip) {
      const int64_t iter = solver->iter();
      const int64_t begin = timeline ? timeline->NowMicros() : 0;
      for (int gid : wait_groups[l]) {
        ApplyUpTo(gid, iter - 1 - apply_lag, true);
      }
      if (timeline && !wait_groups[l].empty()) {
        timeline->Complete(timeline->Lane("compute"), LayerName(l),
                           "wait+update", begin, timeline->NowMicros(),
                           {{"iter", iter}});
      }
    }
    if (timeline) layer_begin = timeline->NowMicros();
  }));
  if (timeline) {
    hooks.push_back(net->add_after_forward([this](int l) {
      timeline->Complete(timeline->Lane("compute"), LayerName(l), "forward",
                         layer_begin, timeline->NowMicros());
    }));
    hooks.push_back(net->add_before_backward(
        [this](int) { layer_begin = timeline->NowMicros(); }));
  }
  const int iter_size = solver->param().iter_size();
  hooks.push_back(net->add_after_backward([this, iter_size](int l) {
    if (timeline) {
      timeline->Complete(timeline->Lane("compute"), LayerName(l), "backward",
                         layer_begin, timeline->NowMicros());
    }
    if (pass != iter_size || !wait_free) return;
    for (int gid : push_groups[l]) Post(gid, solver->iter());
  }));
  hooks.push_back(solver->add_on_start([this] { pass = 0; }));
  typename Solver<Dtype>::DistributedHooks dist;
  dist.apply_update = [this] { UpdatePoint(); };
  dist.sync_weights = [this] { SyncAll(); };
  dist.sync_history = [this] {
    // Under SSP and ASYNC a snapshot is a barrier: the shards' state is
    // still while it is gathered, and every worker holds the servers'
    // parameters (the ones rank 0 writes).
    const bool serving = stale_serving;
    StaleBarrier();
    SyncHistory();
    if (serving) StaleBegin();
  };
  dist.step_begins = [this] {
    seed_weights = true;
    StaleBegin();
  };
  dist.step_ends = [this] { StaleBarrier(); };
  dist.restored = [this] { seed_history = true; };
  dist.test_index = comm->rank();
  dist.test_count = comm->size();
  dist.sum_test_scores = [this](vector<double>* sums) {
    Status s = OnCollectiveThread("the sum of the test scores", [this, sums] {
      return comm->AllreduceSum(sums->data(), sums->size());
    });
    POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(),
                     ": summing the test scores: ", s.message());
  };
  dist.writes_snapshots = comm->rank() == 0;
  dist.agree_on_action = [this](SolverAction local, bool test_round) {
    // See action_agreement.hpp: test rounds run in step on every rank.
    return test_round ? AgreeOnAction(comm, local)
                      : agreement->AfterIteration(solver->iter(), local);
  };
  solver->SetDistributedHooks(std::move(dist));
}

template <typename Dtype>
Synchronizer<Dtype>::Synchronizer(Solver<Dtype>* solver, Communicator* comm,
                                  const DistributedParameter& param,
                                  Timeline* timeline,
                                  std::vector<Net<Dtype>*> replicas,
                                  DedicatedServers servers)
    : impl_(new Impl(solver, comm, param, timeline, std::move(servers))) {
  Impl& d = *impl_;
  d.replicas = std::move(replicas);
  d.sgd = dynamic_cast<SGDSolver<Dtype>*>(solver);
  POSEIDON_REQUIRE(d.sgd != nullptr, ConfigError, "solver type '",
                   solver->type(),
                   "' cannot train distributed: it is not an SGDSolver");
  POSEIDON_REQUIRE(param.staleness() >= 0, ConfigError,
                   "distributed staleness must be >= 0, got ",
                   param.staleness());
  POSEIDON_REQUIRE(param.block_size() >= sizeof(Dtype), ConfigError,
                   "distributed block_size must be at least ", sizeof(Dtype),
                   " bytes, got ", param.block_size());
  d.wait_free = param.wait_free();
  d.clip = solver->param().clip_gradients() >= 0;
  d.consistency = ConsistencyFromProto(param.consistency());
  if (d.consistency != Consistency::kBsp) {
    // Note [Stale-synchronous serving]: the servers own every layer.
    const string name = ConsistencyName(d.consistency, param.staleness());
    POSEIDON_REQUIRE(d.servers.job == nullptr, ConfigError, "consistency ",
                     name, " with dedicated servers (--servers) is not "
                     "supported yet: use colocated shards or BSP");
    POSEIDON_REQUIRE(param.server_update(), ConfigError, "consistency ",
                     name, " needs the update on the servers "
                     "(server_update: true)");
    POSEIDON_REQUIRE(!d.clip, ConfigError, "consistency ", name,
                     " applies each worker's gradient on its own, so "
                     "clip_gradients (which needs the whole gradient of an "
                     "iteration) cannot be used with it");
    if (d.param.comm() == DistributedParameter::AUTO) {
      d.param.set_comm(DistributedParameter::PS);
    }
    d.param.set_host_level(false);
  } else {
    d.apply_lag = param.staleness();
  }
  POSEIDON_REQUIRE(!d.clip || d.apply_lag == 0, ConfigError,
                   "clip_gradients needs every layer's gradient of an "
                   "iteration before any update, so it cannot be combined "
                   "with distributed staleness ",
                   param.staleness(), "; set staleness: 0");
  d.slots = d.wait_free ? d.apply_lag + 1 : 1;
  if (d.servers.job != nullptr) {
    const PsRoles& roles = d.servers.roles;
    POSEIDON_REQUIRE(
        static_cast<int>(roles.workers.size()) == comm->size() &&
            roles.workers[comm->rank()] == d.servers.job->rank() &&
            !roles.servers.empty(),
        ConfigError, "dedicated servers: worker rank ", comm->rank(),
        " of ", comm->size(), " is job rank ", d.servers.job->rank(),
        ", but the roles name ", roles.workers.size(), " workers and ",
        roles.servers.size(), " servers");
  }
  d.CheckAgreement();
  d.BroadcastWeights();
  d.MakeGroups();
  d.MakePlan();
  if (d.consistency != Consistency::kBsp) d.CheckStalePlan();
  d.Attach();
  if (Poseidon::root_solver()) {
    LOG(INFO) << "Distributed training: " << comm->size() << " ranks, "
              << (d.wait_free ? "wait-free backprop" : "exchange after backward")
              << ", consistency "
              << ConsistencyName(d.consistency, param.staleness())
              << (d.consistency == Consistency::kBsp
                      ? StrCat(", staleness ", param.staleness())
                      : string())
              << ", block_size "
              << param.block_size() << " bytes, push/pull threads "
              << param.num_push_threads() << "/" << param.num_pull_threads()
              << " (" << param.bytes_in_flight()
              << " bytes in flight each), comm "
              << CommTypeName(CommTypeFromProto(d.param.comm()));
    if (d.clip) {
      LOG(INFO) << "clip_gradients is set: every layer is updated after the "
                   "whole gradient arrives (no overlap with the next forward)";
    }
    for (const PlannedLayer& p : d.plan) {
      LOG(INFO) << "  " << p.reason;
    }
    LOG(INFO) << "Predicted traffic per rank per iteration: "
              << FormatBytes(d.predicted) << " (cost model: "
              << d.rates_line << ")";
  }
}

template <typename Dtype>
Synchronizer<Dtype>::~Synchronizer() {
  Impl& d = *impl_;
  // Join the collective thread (it finishes what was posted, which uses
  // the transports' buffers and the agreement) before they go; the
  // parameter server joins its own threads.
  d.collective.reset();
  d.transports.clear();
  d.agreement.reset();
  if (d.control) {
    // The servers have served every exchange posted (the transports
    // waited for them); they may go.
    const Status s = d.control->Stop();
    LOG_IF(ERROR, !s.ok()) << s.message();
  }
  d.solver->SetDistributedHooks({});
  d.hooks.clear();
}

template <typename Dtype>
const vector<PlannedLayer>& Synchronizer<Dtype>::plan() const {
  Impl& d = *impl_;
  for (size_t gid = 0; gid < d.groups.size(); ++gid) {
    d.plan[gid].measured_bytes = d.groups[gid].via->group_bytes(
        d.groups[gid].index);
  }
  return d.plan;
}

template <typename Dtype>
double Synchronizer<Dtype>::predicted_bytes_per_iter() const {
  return impl_->predicted;
}

template <typename Dtype>
double Synchronizer<Dtype>::predicted_bytes_per_iter(CommType transport) const {
  double sum = 0;
  for (const PlannedLayer& p : impl_->plan) {
    if (p.transport == transport) sum += p.predicted_bytes;
  }
  return sum;
}

template <typename Dtype>
uint64_t Synchronizer<Dtype>::bytes_moved(CommType transport) const {
  using Kind = typename Transport<Dtype>::Kind;
  uint64_t sum = 0;
  for (const auto& [kind, t] : impl_->transports) {
    const CommType type = kind == Kind::kPs    ? CommType::PS
                          : kind == Kind::kSfb ? CommType::SFB
                                               : CommType::ALLREDUCE;
    if (type == transport || transport == CommType::AUTO) {
      sum += t->bytes_moved();
    }
  }
  return sum;
}

template <typename Dtype>
uint64_t Synchronizer<Dtype>::bytes_moved() const {
  return bytes_moved(CommType::AUTO);
}

template <typename Dtype>
void Synchronizer<Dtype>::Sync() {
  impl_->SyncAll();
}

INSTANTIATE_CLASS(Synchronizer);

}  // namespace dist
}  // namespace poseidon
