// The synchroniser's state and steps (Synchronizer<Dtype>::Impl), shared by
// its four files: synchronizer.cpp (set-up, the hooks, the public calls),
// synchronizer_plan.cpp (the cost model's plan and the transports),
// synchronizer_servers.cpp (the parameter servers' side: shard state,
// dedicated servers, SSP/ASYNC serving, history for snapshots) and
// synchronizer_exchange.cpp (staging, posting, collecting and applying a
// group's exchange). Private to them: not installed.
#ifndef POSEIDON_DISTRIBUTED_SYNCHRONIZER_IMPL_HPP_
#define POSEIDON_DISTRIBUTED_SYNCHRONIZER_IMPL_HPP_

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

#include "poseidon/distributed/action_agreement.hpp"
#include "poseidon/distributed/comm_thread.hpp"
#include "poseidon/distributed/host_level.hpp"
#include "poseidon/distributed/param_uses.hpp"
#include "poseidon/distributed/server_clip.hpp"
#include "poseidon/distributed/server_process.hpp"
#include "poseidon/distributed/shard_state.hpp"
#include "poseidon/distributed/shared_flags.hpp"
#include "poseidon/distributed/sufficient_factor.hpp"
#include "poseidon/distributed/synchronizer.hpp"
#include "poseidon/distributed/transport.hpp"
#include "poseidon/distributed/wire.hpp"
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

// Seconds on the steady clock (the exchanges' timings, the cost model's
// measured rates).
inline double SteadySeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Note [Deferred updates]
// A group is a set of learnable params that travel together: those whose
// last backward use (the lowest layer index among the layers that use them
// and need backward) is the same layer, its "push layer". Its "wait layer"
// is the lowest layer index using any of them: the first forward that needs
// the new values. Per group and iteration j:
//   after_backward(push layer), last iter_size pass: the param diffs (or,
//       for SFB, the layer's top diff and bottom data) are copied into the
//       group's staging slot j % (staleness + 1) (through shared memory the
//       diffs may already live there: Note [Gradients born in shared
//       memory] in synchronizer_exchange.cpp) and posted to the
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
// runs num_push_threads push threads, num_pull_threads pull threads and, on
// a rank hosting a shard, server_lanes pairs of server threads; ALLREDUCE and SFB exchanges run on one collective thread
// (collectives must come from one thread, in the same order everywhere).
// ALLREDUCE through shared memory needs no thread: the training thread
// stages, publishes and sums (Note [Shared memory allreduce] in
// shared_allreduce.cpp).
// The collective thread also runs the asynchronous action agreement
// (action_agreement.hpp) and, posted by the training thread which then
// waits, the sum of the test scores, so that every collective keeps one
// order on every rank. Groups are posted in backward order, the same on
// every rank. Each transport is one file (transport.hpp lists them).

template <typename Dtype>
struct Synchronizer<Dtype>::Impl {
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
    int index = -1;
    int64_t next_apply = 0;  // the first iteration not yet applied
    int64_t last_posted = -1;
    // The iteration whose buffer in the transport the params' diffs point
    // into, or -1 (Note [Gradients born in shared memory]).
    int64_t home_iter = -1;
    std::vector<double> posted_at;  // per slot: when it was posted (s)
  };

  Solver<Dtype>* solver;
  SGDSolver<Dtype>* sgd;
  Net<Dtype>* net;
  Communicator* comm;
  DistributedParameter param;
  Timeline* timeline;
  vector<Net<Dtype>*> replicas;  // other device workers of this rank
  vector<Net<Dtype>*> workers;   // net, then the replicas (what Fill reads)
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
  // By the CommType of the groups each carries (PS, SFB, ALLREDUCE).
  std::map<CommType, std::unique_ptr<Transport<Dtype>>> transports;
  std::unique_ptr<ActionAgreement> agreement;
  // The servers own the PS groups' params (Note [Server-side update]):
  // this rank's shard's state, the partition it is cut by, which params
  // it covers (by net id), whether its weights or its history must be
  // seeded from the solver before the next exchange, and whether the
  // workers' history is behind the shards'.
  std::unique_ptr<BlockPartition> ps_partition;
  std::unique_ptr<ShardState<Dtype>> shard;
  // At the host level with a shard: the pieces of the slices of each
  // local rank, by local rank; this rank's are its shard's "params" (Note
  // [Shards at the host level]). Every rank keeps all of them: rank 0
  // unpacks every slice's history before a snapshot, and under SSP and
  // ASYNC every rank takes every slice's parameters at a barrier (Note
  // [Stale serving at the host level]). Empty otherwise.
  vector<vector<SlicePiece>> slice_pieces;
  // With clip_gradients: the shards' agreement on the gradient's norm
  // (Note [Clipping on the servers]); null otherwise.
  std::unique_ptr<ServerClip<Dtype>> server_clip;
  // With dedicated servers at the host level, on the ranks other than
  // their host's first: the norm comes from the first rank, which agrees
  // on it with the servers (Note [Host level with dedicated servers]).
  bool clip_from_first = false;
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
  // Subscriptions to the net's and solver's observation points, removed
  // when this object goes.
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
  // `ps_groups`: the PS groups in posting order (as the PS transport gets
  // them). Made anew by a second call.
  std::function<void(int64_t, int, void*)> MakeShard(
      const TransportContext& context, const vector<ExchangeSpec>& ps_groups);
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
  // SyncHistory at the host level (Note [Shards at the host level]), on
  // the collective thread; `into` as ShardState::Gather's.
  Status GatherHostShards(const std::function<Dtype*(int a, int p)>& into);
  // StaleBarrier's broadcast of the shards' parameters over `shards`.
  Status BroadcastShards(Communicator* shards, const vector<bool>& held_params,
                         const std::function<Dtype*(int p)>& into);
  bool MakeHostTransports(
      const TransportContext& context,
      const std::map<CommType, vector<ExchangeSpec>>& specs);
  void Attach();
  // Note [Gradients born in shared memory] in synchronizer_exchange.cpp.
  // Whether the params' diffs live in the transport's slots (Note
  // [Gradients born in shared memory]): without staleness. The transport
  // is told (TransportContext::diffs_born_in_slots) to keep the slot more.
  bool DiffsBornInSlots() const;
  void MoveDiffsHome(int gid);
  void MoveAllDiffsHome();
  void GiveDiffsBack();
  void Collect(int gid, int64_t iter);
  void Post(int gid, int64_t iter);
  void ApplyGroup(int gid, int64_t iter);
  void ApplyUpTo(int gid, int64_t must, bool take_done);
  void UpdatePoint();
  // UpdatePoint with clip_gradients on the servers (Note [Clipping on the
  // servers] in server_clip.hpp).
  void ClipOnServers(int64_t iter, Dtype rate);
  void SyncAll();
  // Runs `op` on the collective thread and waits for it: collectives must
  // keep one order on every rank, behind the exchanges already posted.
  // Runs op on the collective thread and waits for it; `what` names it in
  // this rank's wait notes.
  Status OnCollectiveThread(const char* what, std::function<Status()> op);
  string LayerName(int l) const { return net->layer_names()[l]; }
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_SYNCHRONIZER_IMPL_HPP_
