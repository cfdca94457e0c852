// One group's exchange (Note [Deferred updates] in synchronizer_impl.hpp):
// staged into its slot after its layer's backward (by its transport: what a
// group sends depends on how it goes), posted to its transport, collected,
// and applied before the first forward that reads its parameters.
#include <algorithm>
#include <limits>
#include <vector>

#include "synchronizer_impl.hpp"

namespace poseidon {
namespace dist {

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
  if (control && consistency == Consistency::kBsp &&
      g.transport == CommType::PS && iter > last_iterated) {
    // After any seed: the servers take their commands in order. (Under
    // SSP and ASYNC one "serve stale" covers the Step: StaleBegin.)
    const Status s = control->Iterate(iter);
    POSEIDON_REQUIRE(s.ok(), DistributedError, s.message());
    last_iterated = iter;
  }
  g.via->Fill(g.index, workers, g.via->Stage(g.index, iter));
  g.via->Post(g.index, iter);
  g.posted_at.resize(slots);
  g.posted_at[iter % slots] = SteadySeconds();
}

// Note [Gradients born in shared memory]
// Through shared memory (SharedMemoryTransport: every rank on one host) a
// group's gradient need not be copied into this rank's slot after the
// backward: on the CPU, with one worker per rank and no BSP staleness, the
// params' diffs point into the slot of the iteration being computed
// (Transport::Home, SyncedMemory::set_cpu_data), so the Solver's
// ClearParamDiffs zeroes the slot, the backward accumulates the gradient
// there, and Fill finds it in place (StageGradient skips a diff already
// at its place). On LeNet that is fc1's 1.6 MB copy per iteration less.
// A slot, once published, is read by every rank and must not be written
// until all have released it; so the diffs move on to the slot of
// iteration last_posted + 1, which nobody reads before this rank
// publishes it, at the update point (after a Post, before anything
// collects into the diffs or clears them) and before any Collect writes a
// mean into them. Between a group's Post and the update point the diffs
// hold this rank's published gradient: they may be read, never written.
// Moving to the slot of j + 1 at the update point of j waits, as Slot
// does, until every rank has released what the slot held: with the three
// slots the transport then keeps (one more than the exchange needs),
// iteration j - 2, which every rank released before it published the
// gradient of j - 1 that this rank has collected. So the move never waits.
// (With two slots it waited for the others' forward of j, a new meeting
// point in every iteration: a two-rank job of a tiny net ran at 30 000
// instead of 48 000 iterations per second.) With staleness s > 0 a rank
// may be up to s iterations ahead and the move would hold it back, so the
// diffs stay home and Fill copies. The diffs get memory of their own again
// (SyncedMemory::own_cpu_data) before the shared memory goes.
template <typename Dtype>
bool Synchronizer<Dtype>::Impl::DiffsBornInSlots() const {
  return apply_lag == 0;
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::MoveDiffsHome(int gid) {
  if (Poseidon::mode() != Poseidon::CPU || !replicas.empty() ||
      !DiffsBornInSlots()) {
    return;
  }
  Group& g = groups[gid];
  const int64_t iter = std::max<int64_t>(g.last_posted + 1, solver->iter());
  if (g.home_iter == iter) return;
  Dtype* home = g.via->Home(g.index, iter);
  if (home == nullptr) return;
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  for (size_t i = 0; i < g.params.size(); ++i) {
    learnable[g.params[i]]->diff()->set_cpu_data(home + g.offset[i]);
  }
  g.home_iter = iter;
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::MoveAllDiffsHome() {
  for (int gid = 0; gid < static_cast<int>(groups.size()); ++gid) {
    MoveDiffsHome(gid);
  }
}

template <typename Dtype>
void Synchronizer<Dtype>::Impl::GiveDiffsBack() {
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  for (Group& g : groups) {
    if (g.home_iter < 0) continue;
    for (int p : g.params) learnable[p]->diff()->own_cpu_data();
    g.home_iter = -1;
  }
}

// Waits for group gid's exchange of `iter` and leaves the mean over ranks
// in its params' diffs.
template <typename Dtype>
void Synchronizer<Dtype>::Impl::Collect(int gid, int64_t iter) {
  Group& g = groups[gid];
  MoveDiffsHome(gid);  // the mean goes where no rank reads
  const double waiting = SteadySeconds();
  g.via->Wait(g.index, iter);
  const double done = SteadySeconds();
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
  MoveAllDiffsHome();  // for the next iteration's backward
  if (server_clip || clip_from_first) {
    ClipOnServers(iter, rate);
    return;
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

// Note [Clipping on the servers]: the other layers' gradients, their sum
// of squares to this rank's shard, the servers' parameters, then the
// agreed norm clips what this worker updates.
template <typename Dtype>
void Synchronizer<Dtype>::Impl::ClipOnServers(int64_t iter, Dtype rate) {
  const vector<Blob<Dtype>*>& learnable = net->learnable_params();
  for (int gid = 0; gid < static_cast<int>(groups.size()); ++gid) {
    if (!groups[gid].on_server) Collect(gid, iter);
  }
  Dtype sumsq = 0;
  for (int p = 0; p < static_cast<int>(learnable.size()); ++p) {
    if (!on_server[p]) sumsq += learnable[p]->sumsq_diff();
  }
  // The agreement before the pulls it lets the shards answer: a server
  // that is gone is named there first.
  Dtype total = 0;
  if (server_clip) {
    server_clip->WorkerPart(iter, sumsq);
    const Status s = server_clip->Total(iter, &total);
    POSEIDON_REQUIRE(s.ok(), DistributedError, s.message());
  }
  if (hosts && servers.job != nullptr) {
    // From the host's first rank (Note [Host level with dedicated
    // servers]).
    const Status s = hosts->local->Broadcast(&total, sizeof(total), 0);
    POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(),
                     ": the norm of the gradient from the first rank of "
                     "this host: ",
                     s.message());
  }
  for (int gid = 0; gid < static_cast<int>(groups.size()); ++gid) {
    if (groups[gid].on_server) Collect(gid, iter);
  }
  sgd->ClipGradientsOfSumsq(total);
  for (int p = 0; p < static_cast<int>(learnable.size()); ++p) {
    if (!on_server[p]) sgd->ApplyUpdateToParam(p, rate, static_cast<int>(iter));
  }
  rates.erase(iter);
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

#define POSEIDON_INSTANTIATE_EXCHANGE(Dtype)                              \
  template bool Synchronizer<Dtype>::Impl::DiffsBornInSlots() const;      \
  template void Synchronizer<Dtype>::Impl::MoveDiffsHome(int);            \
  template void Synchronizer<Dtype>::Impl::MoveAllDiffsHome();            \
  template void Synchronizer<Dtype>::Impl::GiveDiffsBack();               \
  template void Synchronizer<Dtype>::Impl::Post(int, int64_t);            \
  template void Synchronizer<Dtype>::Impl::Collect(int, int64_t);         \
  template Status Synchronizer<Dtype>::Impl::OnCollectiveThread(          \
      const char*, std::function<Status()>);                              \
  template void Synchronizer<Dtype>::Impl::ApplyGroup(int, int64_t);      \
  template void Synchronizer<Dtype>::Impl::ApplyUpTo(int, int64_t, bool); \
  template void Synchronizer<Dtype>::Impl::UpdatePoint();                 \
  template void Synchronizer<Dtype>::Impl::ClipOnServers(int64_t, Dtype); \
  template void Synchronizer<Dtype>::Impl::SyncAll();
POSEIDON_INSTANTIATE_EXCHANGE(float)
POSEIDON_INSTANTIATE_EXCHANGE(double)
#undef POSEIDON_INSTANTIATE_EXCHANGE

}  // namespace dist
}  // namespace poseidon
