// The training assembly shared by poseidon_train and the Python bindings.
#include "poseidon/distributed/trainer.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <utility>

#include "poseidon/distributed/sync_policy.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/solvers/sgd_solver.hpp"

namespace poseidon {
namespace dist {
namespace {

// Records each layer's forward and backward on the "compute" lane, for a
// process training alone (the synchroniser records its own).
template <typename Dtype>
std::vector<Subscription> AttachTimeline(Net<Dtype>* net, Timeline* timeline) {
  auto begin = std::make_shared<int64_t>(0);
  const int lane = timeline->Lane("compute");
  auto start = [timeline, begin](int) { *begin = timeline->NowMicros(); };
  std::vector<Subscription> subs;
  subs.push_back(net->add_before_forward(start));
  subs.push_back(net->add_before_backward(start));
  subs.push_back(net->add_after_forward([net, timeline, begin, lane](int l) {
    timeline->Complete(lane, net->layer_names()[l], "forward", *begin,
                       timeline->NowMicros());
  }));
  subs.push_back(net->add_after_backward([net, timeline, begin, lane](int l) {
    timeline->Complete(lane, net->layer_names()[l], "backward", *begin,
                       timeline->NowMicros());
  }));
  return subs;
}

// Makes `net` sleep each layer's profiled time, times `dilation`, instead of
// computing it. Layers missing from the profile take no time.
template <typename Dtype>
void EmulateCompute(const std::string& profile, double dilation,
                    Net<Dtype>* net) {
  std::ifstream in(profile);
  POSEIDON_REQUIRE(in.good(), IOError, "cannot read --emulate_compute file '",
                   profile, "'");
  std::map<std::string, std::pair<double, double>> times;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name;
    double fwd = 0, bwd = 0;
    POSEIDON_REQUIRE(static_cast<bool>(fields >> name >> fwd >> bwd),
                     ConfigError, profile, ":", line_no,
                     ": expected 'layer forward_ms backward_ms'");
    times[name] = {fwd * dilation, bwd * dilation};
  }
  const int n = static_cast<int>(net->layers().size());
  std::vector<double> fwd(n, 0), bwd(n, 0);
  double total = 0;
  for (int i = 0; i < n; ++i) {
    auto it = times.find(net->layer_names()[i]);
    if (it == times.end()) continue;
    fwd[i] = it->second.first;
    bwd[i] = it->second.second;
    total += fwd[i] + bwd[i];
  }
  net->SetEmulatedTimes(fwd, bwd);
  LOG(INFO) << "Emulating compute from " << profile << ": " << total
            << " ms per forward-backward"
            << (dilation != 1 ? StrCat(" (time dilated ", dilation, "x)") : "");
}

// Note [Shared emulated parameters]
// An emulated cluster runs every rank on one machine, and each rank holds
// its parameters, their gradients and the solver's history: 32 ranks of
// VGG19-22K (230M parameters, 2.8 GB a rank with SGD) would need 90 GB. With
// the layers emulated nothing reads those values for compute; they matter
// only as bytes to send and memory to sum and update. So every rank maps the
// same POSIX shared-memory object, named from the profile, the net and the
// size, and points these blobs into it (SyncedMemory::set_cpu_data): the
// machine holds one copy whatever the number of ranks. Ranks overwrite each
// other's values, so the numbers are garbage by design; the traffic, the
// sums and the updates are the real ones. The name is removed when the
// trainer ends; a job killed before that leaves /dev/shm/poseidon-emulate-*
// behind.
template <typename Dtype>
std::unique_ptr<emulation::SharedRegion> ShareParams(
    const std::string& profile, Solver<Dtype>* solver) {
  std::vector<SyncedMemory*> mems;
  for (Blob<Dtype>* p : solver->net()->learnable_params()) {
    mems.push_back(p->data().get());
    mems.push_back(p->diff().get());
  }
  if (auto* sgd = dynamic_cast<SGDSolver<Dtype>*>(solver)) {
    for (const auto& h : sgd->history()) mems.push_back(h->data().get());
  }
  auto aligned = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  size_t total = 0;
  for (SyncedMemory* m : mems) total += aligned(m->size());
  const size_t key = std::hash<std::string>()(
      StrCat(profile, "|", solver->net()->name(), "|", total, "|",
             sizeof(Dtype)));
  std::ostringstream name;
  name << "/poseidon-emulate-" << getuid() << "-" << std::hex << key;
  auto region = std::make_unique<emulation::SharedRegion>(name.str(), total);
  size_t offset = 0;
  for (SyncedMemory* m : mems) {
    m->set_cpu_data(region->data() + offset);
    offset += aligned(m->size());
  }
  LOG(INFO) << "Emulation: " << mems.size() << " parameter, gradient and "
            << "history blobs (" << FormatBytes(double(total))
            << ") in shared memory " << name.str() << ", shared with every "
            << "rank on this machine";
  return region;
}

}  // namespace

template <typename Dtype>
Trainer<Dtype>::Trainer(const SolverParameter& param, Communicator* comm,
                        TrainerOptions options)
    : comm_(comm), options_(std::move(options)) {
  const int T = options_.threads;
  POSEIDON_REQUIRE(T >= 1, ConfigError, "--threads must be >= 1, got ", T);
  const int rank = this->rank();
  const int ranks = this->size();
  if (ranks > 1 || T > 1 || options_.partitioned_data) {
    Poseidon::set_data_shard({rank * T, ranks * T, options_.partitioned_data});
  }
  solver_ = CreateSolver<Dtype>(param);
  // Before DeviceWorkers, whose replicas copy the setting.
  solver_->net()->set_share_diffs(options_.share_blob_diffs);
  if (!options_.emulate_compute.empty()) {
    emulation::SetDilation(options_.emulate_dilation);
    EmulateCompute(options_.emulate_compute, options_.emulate_dilation,
                   solver_->net().get());
    if (options_.emulate_shared_params) {
      shared_params_ = ShareParams(options_.emulate_compute, solver_.get());
    }
  } else {
    POSEIDON_REQUIRE(options_.emulate_dilation == 1 &&
                         !options_.emulate_shared_params,
                     ConfigError, "--emulate_dilation and "
                     "--emulate_shared_params need --emulate_compute");
  }
  workers_ = std::make_unique<DeviceWorkers<Dtype>>(solver_.get(), T, rank,
                                                    ranks, options_.gpus);
  if (!options_.timeline_path.empty()) {
    if (ranks > 1) {
      const Status s = comm_->Barrier();  // aligns clocks on one host
      POSEIDON_REQUIRE(s.ok(), DistributedError, s.message());
    }
    timeline_ = std::make_unique<Timeline>(rank, StrCat("rank ", rank));
    if (ranks == 1) {
      timeline_hooks_ = AttachTimeline(solver_->net().get(), timeline_.get());
    }
  }
  // One worker with dedicated servers synchronises too: the servers hold
  // the model.
  if (ranks > 1 || options_.servers.job != nullptr) {
    sync_ = std::make_unique<Synchronizer<Dtype>>(
        solver_.get(), comm_, options_.settings, timeline_.get(),
        workers_->replicas(), options_.servers);
  }
  if (options_.action) solver_->SetActionFunction(options_.action);
  start_iter_ = solver_->iter();
}

template <typename Dtype>
Trainer<Dtype>::~Trainer() {
  sync_.reset();
  timeline_hooks_.clear();
  workers_.reset();
  timeline_.reset();
  solver_.reset();
  if (shared_params_) shared_params_->Unlink();
}

template <typename Dtype>
void Trainer<Dtype>::Detach() {
  sync_.reset();
  workers_.reset();
}

template <typename Dtype>
void Trainer<Dtype>::Finish() {
  const int iters = solver_->iter() - start_iter_;
  if (sync_ && iters > 0) {
    const Synchronizer<Dtype>& sync = *sync_;
    LOG(INFO) << "Traffic of rank " << rank() << ": "
              << FormatBytes(double(sync.bytes_moved()) / iters)
              << " per iteration measured, "
              << FormatBytes(sync.predicted_bytes_per_iter())
              << " predicted by the cost model";
    for (auto t : {CommType::PS, CommType::SFB, CommType::ALLREDUCE}) {
      if (sync.predicted_bytes_per_iter(t) == 0) continue;
      LOG(INFO) << "  " << CommTypeName(t) << ": "
                << FormatBytes(double(sync.bytes_moved(t)) / iters)
                << " per iteration measured, "
                << FormatBytes(sync.predicted_bytes_per_iter(t))
                << " predicted";
    }
    LOG(INFO) << "Per layer and iteration, measured (predicted): bytes; "
              << "time from posting to done; of it, the training thread "
              << "blocked";
    for (const PlannedLayer& p : sync.plan()) {
      const double n = std::max<int64_t>(p.exchanges, 1);
      LOG(INFO) << "  " << p.layer << " " << CommTypeName(p.transport)
                << ": " << FormatBytes(p.measured_bytes / n) << " ("
                << FormatBytes(p.predicted_bytes) << "), "
                << FormatDuration(p.measured_seconds / n) << " ("
                << FormatDuration(p.predicted_seconds) << "); "
                << FormatDuration(p.blocked_seconds / n) << " blocked";
    }
  }
  if (emulation::Dilation() != 1) {
    LOG(INFO) << "Time dilation " << emulation::Dilation() << "x: "
              << FormatDuration(emulation::OverrunSeconds())
              << " of real compute could not be stretched (the machine was "
              << "too busy; 0 means the emulation kept up)";
  }
  if (timeline_) {
    const std::string path =
        TimelinePathForRank(options_.timeline_path, rank(), size());
    timeline_->Write(path);
    LOG(INFO) << "Timeline written to " << path;
  }
}

INSTANTIATE_CLASS(Trainer);

}  // namespace dist
}  // namespace poseidon
