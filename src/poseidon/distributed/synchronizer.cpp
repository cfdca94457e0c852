// Wait-free backpropagation over the PS, SFB and ALLREDUCE transports: the
// synchroniser's set-up (start-up agreement, groups, initial weights), its
// hooks into the net and the solver, and its public calls. The plan, the
// servers' side and the exchanges are in synchronizer_plan.cpp,
// synchronizer_servers.cpp and synchronizer_exchange.cpp; the state they
// share in synchronizer_impl.hpp.
#include "poseidon/distributed/synchronizer.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "synchronizer_impl.hpp"

namespace poseidon {
namespace dist {

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
  for (auto* field :
       {"net", "train_net", "test_net", "net_param", "train_net_param",
        "test_net_param", "snapshot_prefix", "device_id", "solver_mode"}) {
    const auto* fd = sp.GetDescriptor()->FindFieldByName(field);
    if (fd != nullptr) sp.GetReflection()->ClearField(&sp, fd);
  }
  mine.solver = Fnv1a(SerializeDeterministic(sp));
  mine.num_layers = static_cast<int64_t>(net->layers().size());
  mine.num_params = static_cast<int64_t>(net->learnable_params().size());
  for (Blob<Dtype>* b : net->learnable_params())
    mine.param_elements += b->count();
  mine.dtype_bytes = sizeof(Dtype);
  vector<Fingerprint> all(comm->size());
  Status s = comm->Allgather(&mine, sizeof(mine), all.data());
  POSEIDON_REQUIRE(
      s.ok(), DistributedError, "rank ", comm->rank(),
      ": comparing start-up settings with the other ranks: ", s.message());
  CheckFingerprints(all.data(), all.size() * sizeof(Fingerprint), comm->size(),
                    [this](int r) { return comm->JobRank(r); });
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::BroadcastWeights() {
  for (Blob<Dtype>* b : net->learnable_params()) {
    Status s =
        comm->Broadcast(b->mutable_cpu_data(), b->count() * sizeof(Dtype), 0);
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
      it = group_of_layer
               .emplace(use.first_backward, static_cast<int>(groups.size()))
               .first;
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
  hooks.push_back(solver->add_on_step_begin([this] {
    seed_weights = true;
    StaleBegin();
    MoveAllDiffsHome();
  }));
  hooks.push_back(solver->add_on_sync_weights([this] { SyncAll(); }));
  hooks.push_back(solver->add_on_sync_history([this] {
    // Under SSP and ASYNC a snapshot is a barrier: the shards' state is
    // still while it is gathered, and every worker holds the servers'
    // parameters (the ones rank 0 writes).
    const bool serving = stale_serving;
    StaleBarrier();
    SyncHistory();
    if (serving) StaleBegin();
  }));
  hooks.push_back(solver->add_on_step_end([this] { StaleBarrier(); }));
  hooks.push_back(solver->add_on_restored([this] { seed_history = true; }));
  // What the solver leaves to this object rather than tells it (Note
  // [Solver observation points] in solver.hpp).
  typename Solver<Dtype>::DistributedStrategy strategy;
  strategy.apply_update = [this] { UpdatePoint(); };
  strategy.test_index = comm->rank();
  strategy.test_count = comm->size();
  strategy.sum_test_scores = [this](vector<double>* sums) {
    Status s = OnCollectiveThread("the sum of the test scores", [this, sums] {
      return comm->AllreduceSum(sums->data(), sums->size());
    });
    POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(),
                     ": summing the test scores: ", s.message());
  };
  strategy.writes_snapshots = comm->rank() == 0;
  using PollPoint = typename Solver<Dtype>::PollPoint;
  strategy.agree_on_action = [this](SolverAction local, PollPoint where) {
    // See action_agreement.hpp: test rounds run in step on every rank.
    if (where == PollPoint::kTestRound) return AgreeOnAction(comm, local);
    return agreement->AfterIteration(solver->iter(), local,
                                     where == PollPoint::kBeforeMeeting);
  };
  solver->SetDistributedStrategy(std::move(strategy));
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
    POSEIDON_REQUIRE(param.server_update(), ConfigError, "consistency ", name,
                     " needs the update on the servers "
                     "(server_update: true)");
    POSEIDON_REQUIRE(!d.clip, ConfigError, "consistency ", name,
                     " applies each worker's gradient on its own, so "
                     "clip_gradients (which needs the whole gradient of an "
                     "iteration) cannot be used with it");
    if (d.param.comm() == DistributedParameter::AUTO) {
      d.param.set_comm(DistributedParameter::PS);
    }
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
    POSEIDON_REQUIRE(static_cast<int>(roles.workers.size()) == comm->size() &&
                         roles.workers[comm->rank()] == d.servers.job->rank() &&
                         !roles.servers.empty(),
                     ConfigError, "dedicated servers: worker rank ",
                     comm->rank(), " of ", comm->size(), " is job rank ",
                     d.servers.job->rank(), ", but the roles name ",
                     roles.workers.size(), " workers and ",
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
              << (d.wait_free ? "wait-free backprop"
                              : "exchange after backward")
              << ", consistency "
              << ConsistencyName(d.consistency, param.staleness())
              << (d.consistency == Consistency::kBsp
                      ? StrCat(", staleness ", param.staleness())
                      : string())
              << ", block_size " << param.block_size()
              << " bytes, push/pull threads " << param.num_push_threads() << "/"
              << param.num_pull_threads() << " (" << param.bytes_in_flight()
              << " bytes in flight each), server lanes "
              << param.server_lanes() << ", comm "
              << CommTypeName(CommTypeFromProto(d.param.comm()));
    if (d.clip) {
      LOG(INFO) << "clip_gradients is set: every layer is updated after the "
                   "whole gradient arrives (no overlap with the next forward)";
    }
    for (const PlannedLayer& p : d.plan) {
      LOG(INFO) << "  " << p.reason;
    }
    LOG(INFO) << "Predicted traffic per rank per iteration: "
              << FormatBytes(d.predicted) << " (cost model: " << d.rates_line
              << ")";
  }
}

template <typename Dtype>
Synchronizer<Dtype>::~Synchronizer() {
  Impl& d = *impl_;
  // Join the collective thread (it finishes what was posted, which uses
  // the transports' buffers and the agreement) before they go; the
  // parameter server joins its own threads.
  d.collective.reset();
  d.GiveDiffsBack();  // out of the transports' memory
  d.transports.clear();
  d.agreement.reset();
  if (d.control) {
    // The servers have served every exchange posted (the transports
    // waited for them); they may go.
    const Status s = d.control->Stop();
    LOG_IF(ERROR, !s.ok()) << s.message();
  }
  d.solver->SetDistributedStrategy({});
  d.hooks.clear();
}

template <typename Dtype>
const vector<PlannedLayer>& Synchronizer<Dtype>::plan() const {
  Impl& d = *impl_;
  for (size_t gid = 0; gid < d.groups.size(); ++gid) {
    d.plan[gid].measured_bytes =
        d.groups[gid].via->group_bytes(d.groups[gid].index);
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
  uint64_t sum = 0;
  for (const auto& [type, t] : impl_->transports) {
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
