// The parameter servers' side of the synchroniser: the shard state this
// rank serves (Note [Server-side update] in shard_state.hpp), the dedicated
// servers' plan (Note [Dedicated servers] in server_process.hpp), SSP and
// ASYNC serving (Note [Stale-synchronous serving] in stale_shard.hpp), and
// the servers' weights and history brought back to the workers.
#include <algorithm>
#include <functional>
#include <vector>

#include "poseidon/distributed/tags.hpp"
#include "synchronizer_impl.hpp"

namespace poseidon {
namespace dist {

template <typename Dtype>
std::function<void(int64_t, int, void*)> Synchronizer<Dtype>::Impl::MakeShard(
    const TransportContext& context, const vector<ExchangeSpec>& ps_groups) {
  shard.reset();
  ps_partition.reset();
  slice_pieces.clear();
  server_clip.reset();
  clip_from_first = false;
  for (Group& g : groups) g.on_server = false;
  on_server.clear();
  if (!param.server_update() || ps_groups.empty()) return {};
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  ServerUpdateSettings settings;
  settings.solver = solver->param();
  settings.rule = sgd->rule();
  settings.workers = comm->size();
  if (consistency != Consistency::kBsp) {
    // Who pushes each block once an iteration: the servers' workers (the
    // hosts' first ranks at the host level), the hosts' ranks of one local
    // rank each at the host level (Note [Stale serving at the host level]),
    // or every rank.
    settings.pushers = servers.job != nullptr
                           ? static_cast<int>(context.ps_roles.workers.size())
                       : hosts ? hosts->layout.hosts
                               : comm->size();
  }
  settings.on_server.assign(learnable.size(), false);
  settings.lr_mult = net->params_lr();
  settings.decay_mult = net->params_weight_decay();
  for (Group& g : groups) {
    g.on_server = g.transport == CommType::PS;
    if (!g.on_server) continue;
    for (int p : g.params) settings.on_server[p] = true;
  }
  on_server = settings.on_server;
  if (servers.job != nullptr) {
    // The dedicated servers update (StartServers sends them the settings).
    server_settings = std::make_unique<ServerUpdateSettings>(settings);
    const vector<int>& agreeing = context.ps_roles.workers;
    if (clip && std::find(agreeing.begin(), agreeing.end(),
                          servers.job->rank()) == agreeing.end()) {
      clip_from_first = true;  // a host's rank other than its first
    } else if (clip) {
      // Note [Clipping on the servers]: this worker's part of the norm.
      server_clip = std::make_unique<ServerClip<Dtype>>(
          servers.job, nullptr, solver->param(), context.ps_roles);
    }
    return {};
  }
  int rank = comm->rank();
  if (hosts) {
    // Shard `host` of the PS between hosts over this rank's slices' pieces
    // (Note [Shards at the host level]): its "params" are the pieces.
    const HostLayout& layout = hosts->layout;
    for (int l = 0; l < layout.local_size; ++l) {
      slice_pieces.push_back(
          HostPieces(ps_groups, context.param_counts, layout.local_size, l));
    }
    const vector<SlicePiece>& mine = slice_pieces[layout.local_rank];
    TransportContext inner = context;
    inner.comm = hosts->cross.get();
    inner.param_counts.clear();
    ServerUpdateSettings pieces = settings;
    pieces.on_server.clear();
    pieces.lr_mult.clear();
    pieces.decay_mult.clear();
    for (const SlicePiece& piece : mine) {
      inner.param_counts.push_back(piece.count);
      pieces.on_server.push_back(true);
      pieces.lr_mult.push_back(settings.lr_mult[piece.param]);
      pieces.decay_mult.push_back(settings.decay_mult[piece.param]);
    }
    ps_partition = MakePsPartition(inner, sizeof(Dtype));
    settings = std::move(pieces);
    rank = hosts->cross->rank();
  } else {
    ps_partition = MakePsPartition(context, sizeof(Dtype));
  }
  shard = std::make_unique<ShardState<Dtype>>(ps_partition.get(), rank,
                                              std::move(settings));
  ShardState<Dtype>* state = shard.get();
  if (clip) {
    // Note [Clipping on the servers]: stage, agree, then update.
    PsRoles everyone;
    for (int r = 0; r < comm->size(); ++r) {
      everyone.workers.push_back(r);
      everyone.servers.push_back(r);
    }
    server_clip = std::make_unique<ServerClip<Dtype>>(
        comm, state, solver->param(), everyone);
    ServerClip<Dtype>* agree = server_clip.get();
    return [state, agree](int64_t iter, int block, void* values) {
      state->Stage(block, static_cast<const Dtype*>(values));
      agree->BlockStaged(iter, block);
    };
  }
  return [state](int64_t iter, int block, void* values) {
    state->Apply(iter, block, static_cast<Dtype*>(values));
  };
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::StartServers(const TransportContext& context) {
  ServerPlan server_plan;
  server_plan.dtype_bytes = sizeof(Dtype);
  server_plan.block_bytes = static_cast<size_t>(param.block_size());
  server_plan.roles = context.ps_roles;
  server_plan.push_threads = param.num_push_threads();
  server_plan.pull_threads = param.num_pull_threads();
  server_plan.bytes_in_flight = static_cast<size_t>(param.bytes_in_flight());
  server_plan.server_lanes = param.server_lanes();
  server_plan.blob_counts = context.param_counts;
  // The PS groups' blocks in the order Post sends them.
  const std::unique_ptr<BlockPartition> partition =
      MakePsPartition(context, sizeof(Dtype));
  for (int gid : PostingOrder()) {
    const Group& g = groups[gid];
    if (g.transport != CommType::PS) continue;
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
  server_plan.consistency = consistency;
  server_plan.staleness = param.staleness();
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
    POSEIDON_REQUIRE(g.transport == CommType::PS, ConfigError, "layer '",
                     plan[gid].layer, "' goes by ", CommTypeName(g.transport),
                     " (", plan[gid].reason, "), but consistency ", name,
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
      transports.count(CommType::PS) == 0) {
    return;
  }
  if (seed_weights || seed_history) SeedShard();
  if (control) {
    // After the seed: the servers take their commands in order.
    const Status s = control->ServeStale(solver->iter());
    POSEIDON_REQUIRE(s.ok(), DistributedError, s.message());
  }
  vector<int> order;
  for (int gid : PostingOrder()) order.push_back(groups[gid].index);
  transports.at(CommType::PS)->BeginStale(order, solver->iter());
  stale_serving = true;
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::StaleBarrier() {
  if (!stale_serving) return;
  stale_serving = false;
  Status s = transports.at(CommType::PS)->EndStale(solver->iter());
  POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(), ": ending ",
                   ConsistencyName(consistency, param.staleness()),
                   " serving at iteration ", solver->iter(), ": ", s.message());
  // Every worker takes the servers' parameters into the params' host
  // memory (taken here, on the training thread): shard r's held blocks
  // broadcast from rank r, or sent by each dedicated server; at the host
  // level, see Note [Stale serving at the host level].
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  vector<Dtype*> into(learnable.size(), nullptr);
  for (size_t p = 0; p < learnable.size(); ++p) {
    if (on_server[p]) into[p] = learnable[p]->mutable_cpu_data();
  }
  s = OnCollectiveThread("taking the servers' parameters", [&] {
    auto whole = [&into](int p) { return into[p]; };
    if (!hosts) {
      return control ? control->TakeWeights(whole)
                     : BroadcastShards(comm, on_server, whole);
    }
    Status st;
    if (control) {
      // The servers send to their workers, the hosts' first ranks.
      if (hosts->layout.local_rank == 0) st = control->TakeWeights(whole);
      for (size_t p = 0; p < learnable.size() && st.ok(); ++p) {
        if (into[p] == nullptr) continue;
        st = hosts->local->Broadcast(into[p],
                                     learnable[p]->count() * sizeof(Dtype), 0);
        if (!st.ok()) {
          return Status::Failure(
              StrCat("the servers' parameters from this host's first rank: ",
                     st.message()));
        }
      }
      return st;
    }
    // Shard h over slice l's pieces: to the ranks of slice l first, then
    // every slice from its rank to the host's others.
    const vector<SlicePiece>& mine = slice_pieces[hosts->layout.local_rank];
    st = BroadcastShards(
        hosts->cross.get(), vector<bool>(mine.size(), true),
        [&](int i) { return into[mine[i].param] + mine[i].offset; });
    vector<Dtype> packed;
    for (int k = 0; k < hosts->layout.local_size && st.ok(); ++k) {
      const vector<SlicePiece>& pieces = slice_pieces[k];
      size_t total = 0;
      for (const SlicePiece& piece : pieces) total += piece.count;
      if (total == 0) continue;
      packed.resize(total);
      const bool own = k == hosts->layout.local_rank;
      size_t at = 0;
      for (const SlicePiece& piece : pieces) {
        Dtype* w = into[piece.param] + piece.offset;
        if (own) std::copy(w, w + piece.count, packed.begin() + at);
        at += piece.count;
      }
      st = hosts->local->Broadcast(packed.data(), total * sizeof(Dtype), k);
      if (!st.ok()) {
        return Status::Failure(StrCat("the parameters of slice ", k,
                                      " of this host: ", st.message()));
      }
      at = 0;
      for (const SlicePiece& piece : pieces) {
        std::copy(packed.begin() + at, packed.begin() + at + piece.count,
                  into[piece.param] + piece.offset);
        at += piece.count;
      }
    }
    return st;
  });
  POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(), ": ",
                   s.message());
}

// Every shard of `shards` (this rank's ps_partition, one shard per rank of
// `shards`) broadcasts its held blocks' parameters from its rank, and every
// rank unpacks them through `into` (by the partition's params).
template <typename Dtype>
Status Synchronizer<Dtype>::Impl::BroadcastShards(
    Communicator* shards, const vector<bool>& held_params,
    const std::function<Dtype*(int p)>& into) {
  std::vector<Dtype> packed;
  for (int r = 0; r < shards->size(); ++r) {
    const vector<int> held =
        ShardState<Dtype>::HeldBlocks(*ps_partition, r, held_params);
    packed.resize(BlockElements(*ps_partition, held));
    if (packed.empty()) continue;
    if (r == shards->rank()) {
      std::copy(shard->weights(), shard->weights() + packed.size(),
                packed.begin());
    }
    const Status st =
        shards->Broadcast(packed.data(), packed.size() * sizeof(Dtype), r);
    if (!st.ok()) {
      return Status::Failure(StrCat("the parameters of the shard of rank ",
                                    shards->JobRank(r), ": ", st.message()));
    }
    UnpackBlocks<Dtype>(*ps_partition, held, packed.data(), into);
  }
  return Status::OK();
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
  } else if (hosts) {
    // The shard's params are pieces of the net's (Note [Shards at the host
    // level]).
    const vector<SlicePiece>& pieces = slice_pieces[hosts->layout.local_rank];
    auto piece_history = from_solver;
    if (from_solver) {
      piece_history = [&](int a, int i) -> const Dtype* {
        const SlicePiece& piece = pieces[i];
        const Dtype* h = from_solver(a, piece.param);
        return h == nullptr ? nullptr : h + piece.offset;
      };
    }
    shard->Seed(
        [&](int i) { return weights(pieces[i].param) + pieces[i].offset; },
        piece_history);
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
  const Status s =
      OnCollectiveThread("gathering the servers' solver history", [&] {
        if (control) return control->Gather(into_solver);
        if (hosts) return GatherHostShards(into_solver);
        return shard->Gather(comm, /*root=*/0, into_solver);
      });
  POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(), ": ",
                   s.message());
  history_behind = false;
}

// Note [Shards at the host level]: each cross communicator gathers its
// shards' history at the host of rank 0, packed piece after piece; that
// host's ranks send theirs to rank 0, which unpacks every local rank's
// pieces into its solver.
template <typename Dtype>
Status Synchronizer<Dtype>::Impl::GatherHostShards(
    const std::function<Dtype*(int a, int p)>& into) {
  const HostLayout& layout = hosts->layout;
  const int arrays = HistoryArrays(sgd->rule());
  const int root_host = layout.host_of[0];
  const int root_local = layout.local_rank_of[0];
  // Where each piece starts in a packed array.
  auto starts = [](const vector<SlicePiece>& pieces, size_t* total) {
    vector<size_t> at;
    *total = 0;
    for (const SlicePiece& piece : pieces) {
      at.push_back(*total);
      *total += piece.count;
    }
    return at;
  };
  size_t total = 0;
  const vector<size_t> at = starts(slice_pieces[layout.local_rank], &total);
  vector<vector<Dtype>> packed(arrays);
  if (layout.host == root_host) {
    for (auto& a : packed) a.resize(total);
  }
  Status s =
      shard->Gather(hosts->cross.get(), root_host, [&](int a, int i) -> Dtype* {
        return packed[a].empty() ? nullptr : packed[a].data() + at[i];
      });
  if (!s.ok() || layout.host != root_host) return s;
  Communicator* local = hosts->local.get();
  if (layout.local_rank != root_local) {
    for (int a = 0; a < arrays && total > 0; ++a) {
      s = local->Send(packed[a].data(), total * sizeof(Dtype), root_local,
                      kHistoryTag);
      if (!s.ok()) {
        return Status::Failure(
            StrCat("sending the solver history of this host's slice ",
                   layout.local_rank, " to rank ", comm->JobRank(0), ": ",
                   s.message()));
      }
    }
    return Status::OK();
  }
  // Rank 0: every local rank's pieces, its own from `packed`.
  for (int k = 0; k < layout.local_size; ++k) {
    const vector<SlicePiece>& pieces = slice_pieces[k];
    size_t count = 0;
    const vector<size_t> places = starts(pieces, &count);
    vector<vector<Dtype>> received(arrays);
    for (int a = 0; a < arrays && count > 0 && k != root_local; ++a) {
      received[a].resize(count);
      s = local->Recv(received[a].data(), count * sizeof(Dtype), k,
                      kHistoryTag);
      if (!s.ok()) {
        return Status::Failure(StrCat("gathering the solver history of slice ",
                                      k, " of the host of rank ",
                                      comm->JobRank(0), ": ", s.message()));
      }
    }
    for (int a = 0; a < arrays && count > 0; ++a) {
      const Dtype* from =
          k == root_local ? packed[a].data() : received[a].data();
      for (size_t i = 0; i < pieces.size(); ++i) {
        Dtype* dst = into(a, pieces[i].param);
        if (dst == nullptr) continue;
        std::copy(from + places[i], from + places[i] + pieces[i].count,
                  dst + pieces[i].offset);
      }
    }
  }
  return Status::OK();
}

#define POSEIDON_INSTANTIATE_SERVERS(Dtype)                             \
  template std::function<void(int64_t, int, void*)>                     \
  Synchronizer<Dtype>::Impl::MakeShard(const TransportContext&,         \
                                       const vector<ExchangeSpec>&);    \
  template void Synchronizer<Dtype>::Impl::StartServers(                \
      const TransportContext&);                                         \
  template vector<int> Synchronizer<Dtype>::Impl::PostingOrder() const; \
  template void Synchronizer<Dtype>::Impl::CheckStalePlan() const;      \
  template void Synchronizer<Dtype>::Impl::StaleBegin();                \
  template void Synchronizer<Dtype>::Impl::StaleBarrier();              \
  template void Synchronizer<Dtype>::Impl::SeedShard();                 \
  template void Synchronizer<Dtype>::Impl::SyncHistory();               \
  template Status Synchronizer<Dtype>::Impl::GatherHostShards(          \
      const std::function<Dtype*(int, int)>&);                          \
  template Status Synchronizer<Dtype>::Impl::BroadcastShards(           \
      Communicator*, const vector<bool>&, const std::function<Dtype*(int)>&);
POSEIDON_INSTANTIATE_SERVERS(float)
POSEIDON_INSTANTIATE_SERVERS(double)
#undef POSEIDON_INSTANTIATE_SERVERS

}  // namespace dist
}  // namespace poseidon
