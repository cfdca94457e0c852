// The training assembly shared by poseidon_train and the Python bindings.
#include "poseidon/dist/trainer.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "poseidon/solver_factory.hpp"
#include "poseidon/dist/sync_policy.hpp"

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

// Makes `net` sleep each layer's profiled time instead of computing it.
// Layers missing from the profile take no time.
template <typename Dtype>
void EmulateCompute(const std::string& profile, Net<Dtype>* net) {
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
    times[name] = {fwd, bwd};
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
            << " ms per forward-backward";
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
  if (!options_.emulate_compute.empty()) {
    EmulateCompute(options_.emulate_compute, solver_->net().get());
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
  if (ranks > 1) {
    sync_ = std::make_unique<Synchronizer<Dtype>>(
        solver_.get(), comm_, options_.settings, timeline_.get(),
        workers_->replicas());
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
