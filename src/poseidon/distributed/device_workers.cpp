// Worker threads with net replicas and the deterministic local reduce.
#include "poseidon/distributed/device_workers.hpp"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "poseidon/distributed/nccl_reducer.hpp"
#include "poseidon/distributed/param_uses.hpp"
#include "poseidon/util/gpu_context.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {
namespace dist {

template <typename Dtype>
struct DeviceWorkers<Dtype>::Impl {
  Solver<Dtype>* solver = nullptr;
  Net<Dtype>* root = nullptr;
  int T = 1;
  int rank = 0;
  int ranks = 1;
  int num_layers = 0;
  int iter_size = 1;
  int root_pass = 0;
  // Per layer: the learnable params whose gradient is complete after that
  // layer's backward (the lowest layer using them that needs backward).
  vector<vector<int>> reduce_at;
  // Several GPUs: worker t's device, the reducer, and per layer the
  // learnable params (lr != 0) whose first forward use it is.
  vector<int> gpus;
  std::unique_ptr<NcclReducer> nccl;
  vector<vector<int>> broadcast_at;

  std::mutex mu;
  std::condition_variable cv;
  // GUARDED_BY(mu):
  int64_t generation = -1;      // the iteration the workers may run
  int64_t root_progress = -1;   // j * L + l: root finished forward(l) of j
  vector<vector<int64_t>> backward_done;  // [worker][layer] -> iteration
  int ready = 0;                // replicas built
  bool stopping = false;
  std::exception_ptr error;
  int error_worker = -1;

  vector<std::thread> threads;
  vector<Net<Dtype>*> nets;
  // The hooks on the solver and its net, removed when this object goes.
  vector<Subscription> hooks;

  void Fail(int t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) {
        error = std::current_exception();
        error_worker = t;
      }
    }
    cv.notify_all();
    // No device may wait for this worker's part of a collective.
    if (nccl) nccl->Abort(StrCat("device worker ", t, " failed"));
  }
  // Several GPUs: worker t's (or the root's, t = 0) part of the weight
  // broadcast before layer l's forward.
  void BroadcastLayer(int t, Net<Dtype>* net, int l) {
    for (int p : broadcast_at[l]) {
      Blob<Dtype>* b = net->learnable_params()[p];
      nccl->Broadcast(t, b->mutable_data_on(Poseidon::GPU),
                      static_cast<size_t>(b->count()));
    }
  }
  // Rethrows a worker's failure on the training thread. REQUIRES(mu).
  void RethrowLocked() {
    if (!error) return;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      POSEIDON_THROW(Error, "device worker ", error_worker, ": ", e.what());
    }
  }

  void Work(int t, Poseidon::DataShard shard, Poseidon::Brew mode);
  void ReduceLayer(int l, int64_t iter);
};

// Note [Device workers on one GPU]
// In GPU mode every worker thread computes on its own stream of the same
// GPU (util/gpu_context.hpp). A thread that hands results to another waits
// for its own stream first: a worker before it reports a layer's backward
// done (the training thread then sums its diffs on the device), and the
// training thread before it reports a layer's forward done (the workers'
// forward reads the weights that layer's update wrote). Several GPUs per
// process are the next step of the hierarchy.
namespace {

void WaitForStream() {
#ifndef CPU_ONLY
  if (Poseidon::mode() == Poseidon::GPU) gpu::Synchronize();
#endif
}

}  // namespace

template <typename Dtype>
void DeviceWorkers<Dtype>::Impl::Work(int t, Poseidon::DataShard shard,
                                      Poseidon::Brew mode) {
  std::unique_ptr<Net<Dtype>> net;
  try {
    if (gpus.empty()) {
      Poseidon::set_mode(mode);
    } else {
      Poseidon::set_thread_context(Poseidon::GPU, gpus[t]);
    }
    Poseidon::set_solver_rank(t);
    shard.index = rank * T + t;
    shard.count = ranks * T;
    Poseidon::set_data_shard(shard);
    net = std::make_unique<Net<Dtype>>(solver->train_net_param());
    net->set_share_diffs(root->share_diffs());
    const vector<Blob<Dtype>*>& mine = net->learnable_params();
    const vector<Blob<Dtype>*>& theirs = root->learnable_params();
    CHECK_EQ(mine.size(), theirs.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      // Another GPU's weights cannot be aliased: a copy, kept in step by
      // the broadcasts.
      if (root->params_lr()[i] != 0 && gpus.empty()) {
        mine[i]->ShareData(*theirs[i]);
      } else {
        mine[i]->CopyFrom(*theirs[i]);
      }
    }
    net->ShareWeights();  // re-alias shared params to the new owners
  } catch (...) {
    Fail(t);
    return;
  }
  int pass = 0;
  int64_t iter = -1;
  // The replica dies with this thread, and the hooks with it.
  Subscription wait_for_root = net->add_before_forward([&](int l) {
    if (l == 0) ++pass;
    if (pass != 1) return;
    std::unique_lock<std::mutex> lock(mu);
    const int64_t need = iter * num_layers + l;
    cv.wait(lock, [&] { return stopping || root_progress >= need; });
    if (stopping || !nccl) return;
    lock.unlock();
    BroadcastLayer(t, net.get(), l);
  });
  Subscription report_backward = net->add_after_backward([&, t](int l) {
    if (pass != iter_size || reduce_at[l].empty()) return;
    if (nccl) {
      for (int p : reduce_at[l]) {
        Blob<Dtype>* b = net->learnable_params()[p];
        nccl->Reduce(t, b->mutable_diff_on(Poseidon::GPU),
                     static_cast<size_t>(b->count()));
      }
    }
    WaitForStream();  // the training thread reads these diffs next
    {
      std::lock_guard<std::mutex> lock(mu);
      backward_done[t][l] = iter;
    }
    cv.notify_all();
  });
  {
    std::lock_guard<std::mutex> lock(mu);
    nets[t] = net.get();
    ++ready;
  }
  cv.notify_all();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return stopping || generation > iter; });
      if (stopping) return;
      iter = generation;
    }
    try {
      if (nccl) nccl->Settle(t);  // the last reduces read these diffs
      net->ClearParamDiffs();
      pass = 0;
      for (int i = 0; i < iter_size; ++i) net->ForwardBackward();
    } catch (...) {
      Fail(t);
      return;
    }
  }
}

template <typename Dtype>
void DeviceWorkers<Dtype>::Impl::ReduceLayer(int l, int64_t iter) {
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] {
      if (error) return true;
      for (int t = 1; t < T; ++t) {
        if (backward_done[t][l] < iter) return false;
      }
      return true;
    });
    RethrowLocked();
  }
  const Dtype scale = Dtype(1) / T;
  const Poseidon::Brew dev = Poseidon::mode();
  if (nccl) {
    for (int p : reduce_at[l]) {
      Blob<Dtype>* sum = root->learnable_params()[p];
      Dtype* diff = sum->mutable_diff_on(dev);
      nccl->Reduce(0, diff, static_cast<size_t>(sum->count()));
      math::scal<Dtype>(dev, sum->count(), scale, diff);
    }
    return;
  }
  for (int p : reduce_at[l]) {
    Blob<Dtype>* sum = root->learnable_params()[p];
    Dtype* diff = sum->mutable_diff_on(dev);
    for (int t = 1; t < T; ++t) {
      math::axpy<Dtype>(dev, sum->count(), Dtype(1),
                        nets[t]->learnable_params()[p]->diff_on(dev), diff);
    }
    math::scal<Dtype>(dev, sum->count(), scale, diff);
  }
}

template <typename Dtype>
DeviceWorkers<Dtype>::DeviceWorkers(Solver<Dtype>* solver, int threads,
                                    int rank, int ranks, vector<int> gpus)
    : impl_(new Impl) {
  POSEIDON_REQUIRE(threads >= 1, ConfigError,
                   "--threads must be at least 1, got ", threads);
  if (gpus.size() == 1) gpus.clear();  // one GPU: the workers share it
  if (!gpus.empty()) {
    POSEIDON_REQUIRE(static_cast<int>(gpus.size()) == threads, ConfigError,
                     "device workers on GPUs: one worker per GPU, got ",
                     threads, " workers for ", gpus.size(), " GPUs");
    POSEIDON_REQUIRE(Poseidon::mode() == Poseidon::GPU &&
                         Poseidon::device() == gpus[0],
                     ConfigError, "device workers on GPUs: the training "
                     "thread must compute on the first, GPU ", gpus[0]);
    impl_->nccl = std::make_unique<NcclReducer>(gpus);
    impl_->gpus = std::move(gpus);
  }
  Impl& d = *impl_;
  d.solver = solver;
  d.root = solver->net().get();
  d.T = threads;
  d.rank = rank;
  d.ranks = ranks;
  d.num_layers = static_cast<int>(d.root->layers().size());
  d.iter_size = solver->param().iter_size();
  if (threads == 1) return;

  // Where each learnable param's gradient is complete.
  const int L = d.num_layers;
  d.reduce_at.assign(L, {});
  const vector<ParamUse> uses = LearnableParamUses(*d.root);
  for (size_t p = 0; p < uses.size(); ++p) {
    if (uses[p].first_backward < L) {
      d.reduce_at[uses[p].first_backward].push_back(static_cast<int>(p));
    }
  }
  if (d.nccl) {
    d.broadcast_at.assign(L, {});
    for (size_t p = 0; p < uses.size(); ++p) {
      if (d.root->params_lr()[p] != 0 && uses[p].first_use < L) {
        d.broadcast_at[uses[p].first_use].push_back(static_cast<int>(p));
      }
    }
  }
  d.backward_done.assign(threads, vector<int64_t>(L, -1));
  d.nets.assign(threads, nullptr);

  const Poseidon::DataShard shard = Poseidon::data_shard();
  const Poseidon::Brew mode = Poseidon::mode();
  for (int t = 1; t < threads; ++t) {
    d.threads.emplace_back([&d, t, shard, mode] { d.Work(t, shard, mode); });
  }
  {
    std::unique_lock<std::mutex> lock(d.mu);
    d.cv.wait(lock, [&] { return d.error || d.ready == threads - 1; });
    if (d.error) {
      d.stopping = true;
      d.cv.notify_all();
      lock.unlock();
      for (auto& th : d.threads) th.join();
      d.threads.clear();
      std::lock_guard<std::mutex> relock(d.mu);
      d.RethrowLocked();
    }
  }
  Impl* self = &d;
  d.hooks.push_back(solver->add_on_start([self] {
    {
      std::lock_guard<std::mutex> lock(self->mu);
      self->generation = self->solver->iter();
      self->RethrowLocked();
    }
    self->root_pass = 0;
    self->cv.notify_all();
  }));
  d.hooks.push_back(d.root->add_before_forward([self](int l) {
    if (l == 0) ++self->root_pass;
  }));
  d.hooks.push_back(d.root->add_after_forward([self](int l) {
    if (self->root_pass != 1) return;
    // The workers' forward reads the weights this layer's update wrote.
    WaitForStream();
    {
      std::lock_guard<std::mutex> lock(self->mu);
      self->root_progress = std::max<int64_t>(
          self->root_progress, self->solver->iter() * self->num_layers + l);
    }
    self->cv.notify_all();
    if (self->nccl) self->BroadcastLayer(0, self->root, l);
  }));
  d.hooks.push_back(d.root->add_after_backward([self](int l) {
    if (self->root_pass != self->iter_size || self->reduce_at[l].empty()) {
      return;
    }
    self->ReduceLayer(l, self->solver->iter());
  }));
  LOG_IF(INFO, Poseidon::root_solver())
      << "Device workers: " << threads
      << (d.nccl ? StrCat(" workers on GPUs ", d.gpus[0], "..",
                          d.gpus.back(), " (", NcclReducer::Version(), ")")
          : Poseidon::mode() == Poseidon::GPU
              ? StrCat(" workers on GPU ", Poseidon::device())
              : string(" CPU workers"))
      << " in this process, "
      << "each on its own slice (data shard " << rank * threads << ".."
      << rank * threads + threads - 1 << " of " << ranks * threads
      << "), gradients summed locally";
}

template <typename Dtype>
DeviceWorkers<Dtype>::~DeviceWorkers() {
  Impl& d = *impl_;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    d.stopping = true;
  }
  d.cv.notify_all();
  for (auto& th : d.threads) th.join();
  d.hooks.clear();
}

template <typename Dtype>
vector<Net<Dtype>*> DeviceWorkers<Dtype>::replicas() const {
  if (impl_->T == 1) return {};
  return vector<Net<Dtype>*>(impl_->nets.begin() + 1, impl_->nets.end());
}

template <typename Dtype>
int DeviceWorkers<Dtype>::size() const {
  return impl_->T;
}

INSTANTIATE_CLASS(DeviceWorkers);

}  // namespace dist
}  // namespace poseidon
