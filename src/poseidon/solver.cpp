// The training loop shared by every update rule: net construction, the
// iteration loop with gradient accumulation, testing, logging, snapshots.
#include "poseidon/solver.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "poseidon/solvers/update_rule.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/snapshot_checks.hpp"

namespace poseidon {
namespace {

// "hh:mm:ss" (hours grow past two digits when needed).
string FormatDuration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "--:--:--";
  const long total = std::lround(seconds);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%02ld:%02ld:%02ld", total / 3600,
                (total / 60) % 60, total % 60);
  return buf;
}

// Splits "a.caffemodel,b.caffemodel" as Caffe's --weights does.
vector<string> SplitWeights(const string& list) {
  vector<string> out;
  std::stringstream ss(list);
  string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Reads a net prototxt the solver names. One of no layers is refused here,
// where the file is known, as Net's file constructor does.
void ReadNetFile(const string& file, NetParameter* param) {
  ReadNetParamsFromTextFile(file, param);
  POSEIDON_REQUIRE(param->layer_size() > 0 || param->layers_size() > 0 ||
                       param->input_size() > 0,
                   ConfigError, file,
                   ": the file defines no layers (is it empty, or not a net "
                   "prototxt?)");
}

template <typename Dtype>
void LoadWeights(const string& list, Net<Dtype>* net) {
  for (const string& file : SplitWeights(list)) {
    LOG(INFO) << "Loading weights for net " << net->name() << " from " << file;
    net->CopyTrainedLayersFrom(file);
  }
}

}  // namespace

bool UpgradeSolverAsNeeded(const string& source, SolverParameter* param) {
  if (!param->has_solver_type()) return false;
  string type;
  switch (param->solver_type()) {
    case SolverParameter::SGD:
      type = "SGD";
      break;
    case SolverParameter::NESTEROV:
      type = "Nesterov";
      break;
    case SolverParameter::ADAGRAD:
      type = "AdaGrad";
      break;
    case SolverParameter::RMSPROP:
      type = "RMSProp";
      break;
    case SolverParameter::ADADELTA:
      type = "AdaDelta";
      break;
    case SolverParameter::ADAM:
      type = "Adam";
      break;
  }
  POSEIDON_REQUIRE(!param->has_type() || param->type() == type, ConfigError,
                   source, ": the deprecated solver_type: ",
                   SolverParameter::SolverType_Name(param->solver_type()),
                   " contradicts type: \"", param->type(),
                   "\"; remove solver_type");
  LOG(INFO) << source << ": upgrading deprecated solver_type: "
            << SolverParameter::SolverType_Name(param->solver_type())
            << " to type: \"" << type << "\"";
  param->set_type(type);
  param->clear_solver_type();
  return true;
}

void ReadSolverParamsFromTextFile(const string& param_file,
                                  SolverParameter* param) {
  namespace fs = std::filesystem;
  ReadProtoFromTextFile(param_file, param);
  UpgradeSolverAsNeeded(param_file, param);
  if (!param->has_snapshot_prefix()) {
    param->set_snapshot_prefix(
        fs::path(param_file).replace_extension().string());
    LOG(INFO) << "snapshot_prefix was not specified and is set to "
              << param->snapshot_prefix();
  } else {
    std::error_code ec;
    if (fs::is_directory(param->snapshot_prefix(), ec)) {
      param->set_snapshot_prefix(
          (fs::path(param->snapshot_prefix()) / fs::path(param_file).stem())
              .string());
      LOG(INFO) << "snapshot_prefix is a directory and is set to "
                << param->snapshot_prefix();
    }
  }
}

template <typename Dtype>
Solver<Dtype>::Solver(const SolverParameter& param) {
  Init(param);
}

template <typename Dtype>
Solver<Dtype>::Solver(const string& param_file) {
  SolverParameter param;
  ReadSolverParamsFromTextFile(param_file, &param);
  Init(param);
}

template <typename Dtype>
void Solver<Dtype>::Init(const SolverParameter& param) {
  param_ = param;
  UpgradeSolverAsNeeded("SolverParameter", &param_);
  LOG_IF(INFO, Poseidon::root_solver())
      << "Initializing solver from parameters:\n"
      << param_.DebugString();
  POSEIDON_REQUIRE(param_.average_loss() >= 1, ConfigError,
                   "solver average_loss must be >= 1, got ",
                   param_.average_loss());
  POSEIDON_REQUIRE(param_.iter_size() >= 1, ConfigError,
                   "solver iter_size must be >= 1, got ", param_.iter_size());
  POSEIDON_REQUIRE(param_.max_iter() >= 0, ConfigError,
                   "solver max_iter must be >= 0, got ", param_.max_iter());
  POSEIDON_REQUIRE(param_.display() >= 0 && param_.snapshot() >= 0 &&
                       param_.test_interval() >= 0,
                   ConfigError,
                   "solver display, snapshot and test_interval must be >= 0 "
                   "(got ",
                   param_.display(), ", ", param_.snapshot(), ", ",
                   param_.test_interval(), ")");
#ifndef USE_HDF5
  POSEIDON_REQUIRE(
      param_.snapshot_format() == SolverParameter::BINARYPROTO, ConfigError,
      "snapshot_format: HDF5 needs a build with HDF5 (USE_HDF5=ON); use "
      "BINARYPROTO");
#endif
  CheckSnapshotWritePermissions();
  if (param_.random_seed() >= 0) {
    // Each device worker gets its own stream, as in Caffe.
    Poseidon::set_random_seed(param_.random_seed() + Poseidon::solver_rank());
  }
  InitTrainNet();
  InitTestNets();
  LOG_IF(INFO, Poseidon::root_solver()) << "Solver scaffolding done.";
  iter_ = 0;
  current_step_ = 0;
}

template <typename Dtype>
void Solver<Dtype>::InitTrainNet() {
  const int num_train_nets = param_.has_net() + param_.has_net_param() +
                             param_.has_train_net() +
                             param_.has_train_net_param();
  const char* fields = "net, net_param, train_net, train_net_param";
  POSEIDON_REQUIRE(num_train_nets >= 1, ConfigError,
                   "the solver must name a train net with one of: ", fields);
  POSEIDON_REQUIRE(num_train_nets <= 1, ConfigError, "the solver names ",
                   num_train_nets,
                   " train nets; give exactly one of: ", fields);
  NetParameter net_param;
  if (param_.has_train_net_param()) {
    LOG(INFO) << "Creating training net specified in train_net_param.";
    net_param.CopyFrom(param_.train_net_param());
  } else if (param_.has_train_net()) {
    LOG(INFO) << "Creating training net from train_net file: "
              << param_.train_net();
    ReadNetFile(param_.train_net(), &net_param);
  } else if (param_.has_net_param()) {
    LOG(INFO) << "Creating training net specified in net_param.";
    net_param.CopyFrom(param_.net_param());
  } else {
    LOG(INFO) << "Creating training net from net file: " << param_.net();
    ReadNetFile(param_.net(), &net_param);
  }
  // Precedence, lowest first: the solver's TRAIN default, the net's own
  // state, the solver's train_state.
  NetState net_state;
  net_state.set_phase(TRAIN);
  net_state.MergeFrom(net_param.state());
  net_state.MergeFrom(param_.train_state());
  *net_param.mutable_state() = net_state;
  train_net_param_ = net_param;
  net_ = std::make_shared<Net<Dtype>>(net_param);
  for (const string& weights : param_.weights()) {
    LoadWeights(weights, net_.get());
  }
}

template <typename Dtype>
void Solver<Dtype>::InitTestNets() {
  const bool has_net_param = param_.has_net_param();
  const bool has_net_file = param_.has_net();
  const int num_generic_nets = has_net_param + has_net_file;
  const int num_test_net_params = param_.test_net_param_size();
  const int num_test_net_files = param_.test_net_size();
  const int num_test_nets = num_test_net_params + num_test_net_files;
  if (num_generic_nets > 0) {
    POSEIDON_REQUIRE(
        param_.test_iter_size() >= num_test_nets, ConfigError,
        "test_iter must be given for each test net: ", num_test_nets,
        " test nets but ", param_.test_iter_size(), " test_iter values");
  } else {
    POSEIDON_REQUIRE(
        param_.test_iter_size() == num_test_nets, ConfigError,
        "test_iter must be given once per test net: ", num_test_nets,
        " test nets but ", param_.test_iter_size(), " test_iter values");
  }
  // With a generic net, each test_iter beyond the explicit test nets adds
  // one TEST-phase instance of it.
  const int num_instances = param_.test_iter_size();
  POSEIDON_REQUIRE(param_.test_state_size() == 0 ||
                       param_.test_state_size() == num_instances,
                   ConfigError,
                   "test_state must be unspecified or given once per test ",
                   "net: ", num_instances, " test nets but ",
                   param_.test_state_size(), " test_state values");
  if (num_instances > 0) {
    POSEIDON_REQUIRE(param_.test_interval() > 0, ConfigError, "the solver has ",
                     num_instances, " test net(s) but test_interval is ",
                     param_.test_interval(), "; set test_interval > 0");
  }
  for (int i = 0; i < num_instances; ++i) {
    POSEIDON_REQUIRE(param_.test_iter(i) >= 0, ConfigError, "test_iter[", i,
                     "] must be >= 0, got ", param_.test_iter(i));
  }
  vector<string> sources(num_instances);
  vector<NetParameter> net_params(num_instances);
  int id = 0;
  for (int i = 0; i < num_test_net_params; ++i, ++id) {
    sources[id] = "test_net_param";
    net_params[id].CopyFrom(param_.test_net_param(i));
  }
  for (int i = 0; i < num_test_net_files; ++i, ++id) {
    sources[id] = "test_net file: " + param_.test_net(i);
    ReadNetFile(param_.test_net(i), &net_params[id]);
  }
  for (; id < num_instances; ++id) {
    if (has_net_param) {
      sources[id] = "net_param";
      net_params[id].CopyFrom(param_.net_param());
    } else {
      sources[id] = "net file: " + param_.net();
      ReadNetFile(param_.net(), &net_params[id]);
    }
  }
  test_nets_.resize(num_instances);
  test_scores_.assign(num_instances, vector<Dtype>());
  for (int i = 0; i < num_instances; ++i) {
    NetState net_state;
    net_state.set_phase(TEST);
    net_state.MergeFrom(net_params[i].state());
    if (param_.test_state_size() > 0) {
      net_state.MergeFrom(param_.test_state(i));
    }
    *net_params[i].mutable_state() = net_state;
    LOG(INFO) << "Creating test net (#" << i << ") specified by " << sources[i];
    test_nets_[i] = std::make_shared<Net<Dtype>>(net_params[i]);
    test_nets_[i]->set_debug_info(param_.debug_info());
    for (const string& weights : param_.weights()) {
      LoadWeights(weights, test_nets_[i].get());
    }
    test_nets_[i]->ShareTrainedLayersWith(net_.get());
  }
}

template <typename Dtype>
void Solver<Dtype>::CheckSnapshotWritePermissions() const {
  if (!Poseidon::root_solver() || param_.snapshot() == 0) return;
  POSEIDON_REQUIRE(param_.has_snapshot_prefix(), ConfigError,
                   "the solver sets snapshot: ", param_.snapshot(),
                   " but no snapshot_prefix");
  CheckSnapshotFolderWritable(param_.snapshot_prefix());
}

// Note [Start-up checks]
// A run that cannot write its snapshots should end before its first
// iteration, not hours later at its first snapshot (or, with snapshot: 0,
// at the one snapshot_after_train writes when training is done). So Solve
// first checks, on the one worker of the job that writes snapshots and only
// when snapshots will be written:
//  - the snapshot_prefix's folder exists and a file can be created in it
//    (IOError naming the folder and snapshot_prefix otherwise);
//  - its file system has room for one snapshot: the bytes of every
//    parameter (twice with snapshot_diff) for the weights, plus the update
//    history's for the solver state; a warning only, as the estimate leaves
//    out the files' framing and other writers may free space meanwhile;
//  - the "<prefix>_iter_*.tmp.<pid>" files that killed runs left (Note
//    [Atomic writes] in util/io.cpp) are removed, when process <pid> is gone.
// Init already refuses an unwritable folder when snapshot > 0, as Caffe
// does (CheckSnapshotWritePermissions); Solve covers snapshot_after_train and
// the rest.

template <typename Dtype>
uint64_t Solver<Dtype>::SnapshotBytesEstimate() const {
  uint64_t param_bytes = 0;
  for (const auto& blob : net_->params()) {
    param_bytes += static_cast<uint64_t>(blob->count()) * sizeof(Dtype);
  }
  uint64_t learnable_bytes = 0;
  for (const Blob<Dtype>* blob : net_->learnable_params()) {
    learnable_bytes += static_cast<uint64_t>(blob->count()) * sizeof(Dtype);
  }
  // The built-in update rules keep one history array per learnable
  // parameter, AdaDelta and Adam two; another solver type counts as one.
  const string name = type();
  int history_arrays = 1;
  for (const char* known :
       {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"}) {
    if (name == known) history_arrays = HistoryArrays(UpdateRuleNamed(name));
  }
  return param_bytes * (param_.snapshot_diff() ? 2 : 1) +
         learnable_bytes * history_arrays;
}

template <typename Dtype>
void Solver<Dtype>::RunStartupChecks() const {
  // See Note [Start-up checks].
  if (!strategy_.writes_snapshots || !Poseidon::root_solver()) return;
  if (param_.snapshot() == 0 && !param_.snapshot_after_train()) return;
  const string& prefix = param_.snapshot_prefix();
  CheckSnapshotFolderWritable(prefix);
  for (const string& path : RemoveStaleSnapshotTemporaries(prefix)) {
    LOG(INFO) << "Removed " << path << ", the temporary file of a snapshot "
              << "whose writer was killed";
  }
  const string folder = SnapshotFolder(prefix);
  const std::optional<uint64_t> free_bytes = FreeBytes(folder);
  if (free_bytes) {
    const string warning =
        LowDiskWarning(folder, *free_bytes, SnapshotBytesEstimate());
    LOG_IF(WARNING, !warning.empty()) << warning;
  }
}

template <typename Dtype>
SolverAction Solver<Dtype>::GetRequestedAction(PollPoint where) const {
  const SolverAction local = action_request_function_
                                 ? action_request_function_()
                                 : SolverAction::NONE;
  return strategy_.agree_on_action ? strategy_.agree_on_action(local, where)
                                   : local;
}

template <typename Dtype>
void Solver<Dtype>::Step(int iters) {
  const int start_iter = iter_;
  const int stop_iter = iter_ + iters;
  const int average_loss = param_.average_loss();
  on_step_begin_.Run();
  losses_.clear();
  smoothed_loss_ = 0;
  requested_early_exit_ = false;
  display_start_ = std::chrono::steady_clock::now();
  iterations_last_ = iter_;

  while (iter_ < stop_iter) {
    // Diffs accumulate in Backward, so they start from zero each iteration.
    net_->ClearParamDiffs();
    if (param_.test_interval() > 0 && iter_ % param_.test_interval() == 0 &&
        (iter_ > 0 || param_.test_initialization())) {
      if (Poseidon::solver_rank() == 0) TestAll();
      if (requested_early_exit_) break;
    }
    on_start_.Run();
    const bool display = param_.display() > 0 && iter_ % param_.display() == 0;
    net_->set_debug_info(display && param_.debug_info());
    // Gradients of iter_size passes accumulate; the update rule divides
    // them by iter_size (SGDSolver::Normalize).
    Dtype loss = 0;
    for (int i = 0; i < param_.iter_size(); ++i) {
      loss += net_->ForwardBackward();
    }
    loss /= param_.iter_size();
    if (!std::isfinite(static_cast<double>(loss))) {
      POSEIDON_THROW(NumericError, "Iteration ", iter_, ": the loss is ", loss,
                     "; training diverged (lower base_lr or set "
                     "clip_gradients). ",
                     LastSnapshotNote());
    }
    UpdateSmoothedLoss(loss, start_iter, average_loss);
    if (display) DisplayProgress(stop_iter);
    on_gradients_ready_.Run();
    if (strategy_.apply_update) {
      strategy_.apply_update();
    } else {
      ApplyUpdate();
    }
    // iter_ counts the updates applied to the weights.
    ++iter_;

    const bool snapshot_due =
        param_.snapshot() > 0 && iter_ % param_.snapshot() == 0;
    const bool test_due = !test_nets_.empty() && param_.test_interval() > 0 &&
                          iter_ % param_.test_interval() == 0;
    const SolverAction request =
        GetRequestedAction(iter_ == stop_iter || snapshot_due || test_due
                               ? PollPoint::kBeforeMeeting
                               : PollPoint::kIteration);
    if ((snapshot_due && Poseidon::solver_rank() == 0) ||
        request == SolverAction::SNAPSHOT) {
      Snapshot();
    }
    if (request == SolverAction::STOP) {
      requested_early_exit_ = true;
      break;
    }
  }
  on_sync_weights_.Run();
  on_step_end_.Run();
}

template <typename Dtype>
void Solver<Dtype>::DisplayProgress(int stop_iter) {
  const auto now = std::chrono::steady_clock::now();
  const double lapse =
      std::chrono::duration<double>(now - display_start_).count();
  const int iters = iter_ - iterations_last_;
  const double per_s = iters / (lapse > 0 ? lapse : 1.0);
  if (iters > 0) {
    const double spi = lapse / iters;
    seconds_per_iter_avg_ = seconds_per_iter_avg_ < 0
                                ? spi
                                : 0.5 * seconds_per_iter_avg_ + 0.5 * spi;
  }
  int batch = 0;
  if (!net_->top_vecs().empty() && !net_->top_vecs()[0].empty() &&
      net_->top_vecs()[0][0]->num_axes() > 0) {
    batch = net_->top_vecs()[0][0]->shape(0);
  }
  const double images_per_s = per_s * batch * param_.iter_size();
  const string eta =
      seconds_per_iter_avg_ < 0
          ? FormatDuration(-1)
          : FormatDuration(seconds_per_iter_avg_ * (stop_iter - iter_));
  LOG_IF(INFO, Poseidon::root_solver())
      << "Iteration " << iter_ << " (" << per_s << " iter/s, " << images_per_s
      << " images/s, ETA " << eta << "), loss = " << smoothed_loss_;
  display_start_ = now;
  iterations_last_ = iter_;
  const vector<Blob<Dtype>*>& result = net_->output_blobs();
  int score_index = 0;
  for (size_t j = 0; j < result.size(); ++j) {
    const Dtype* values = result[j]->cpu_data();
    const int blob_id = net_->output_blob_indices()[j];
    const string& name = net_->blob_names()[blob_id];
    const Dtype loss_weight = net_->blob_loss_weights()[blob_id];
    for (int k = 0; k < result[j]->count(); ++k) {
      std::ostringstream loss_msg;
      if (loss_weight != 0) {
        loss_msg << " (* " << loss_weight << " = " << loss_weight * values[k]
                 << " loss)";
      }
      LOG_IF(INFO, Poseidon::root_solver())
          << "    Train net output #" << score_index++ << ": " << name << " = "
          << values[k] << loss_msg.str();
    }
  }
}

template <typename Dtype>
void Solver<Dtype>::UpdateSmoothedLoss(Dtype loss, int start_iter,
                                       int average_loss) {
  if (static_cast<int>(losses_.size()) < average_loss) {
    losses_.push_back(loss);
    const int size = static_cast<int>(losses_.size());
    smoothed_loss_ = (smoothed_loss_ * (size - 1) + loss) / size;
  } else {
    const int idx = (iter_ - start_iter) % average_loss;
    smoothed_loss_ += (loss - losses_[idx]) / average_loss;
    losses_[idx] = loss;
  }
}

template <typename Dtype>
void Solver<Dtype>::Solve(const char* resume_file) {
  LOG(INFO) << "Solving " << net_->name();
  LOG(INFO) << "Learning Rate Policy: " << param_.lr_policy();
  RunStartupChecks();
  if (resume_file != nullptr) {
    LOG(INFO) << "Restoring previous solver status from " << resume_file;
    Restore(resume_file);
  }
  const int start_iter = iter_;
  Step(param_.max_iter() - iter_);
  // Snapshot unless the schedule just wrote one for this iteration.
  if (param_.snapshot_after_train() &&
      (param_.snapshot() == 0 || iter_ % param_.snapshot() != 0)) {
    Snapshot();
  }
  if (requested_early_exit_) {
    LOG(INFO) << "Optimization stopped early.";
    return;
  }
  // One more forward pass to report the final loss (no update follows).
  if (param_.display() > 0 && iter_ % param_.display() == 0) {
    Dtype loss;
    net_->Forward(&loss);
    UpdateSmoothedLoss(loss, start_iter, param_.average_loss());
    LOG(INFO) << "Iteration " << iter_ << ", loss = " << smoothed_loss_;
  }
  if (param_.test_interval() > 0 && iter_ % param_.test_interval() == 0) {
    TestAll();
  }
  LOG(INFO) << "Optimization Done.";
}

template <typename Dtype>
void Solver<Dtype>::TestAll() {
  on_sync_weights_.Run();
  for (int id = 0;
       id < static_cast<int>(test_nets_.size()) && !requested_early_exit_;
       ++id) {
    Test(id);
  }
}

template <typename Dtype>
void Solver<Dtype>::Test(int test_net_id) {
  LOG(INFO) << "Iteration " << iter_ << ", Testing net (#" << test_net_id
            << ")";
  Net<Dtype>* test_net = test_nets_[test_net_id].get();
  test_net->ShareTrainedLayersWith(net_.get());
  // sums[0]: the loss; then one entry per element of each output blob.
  // Sized from the outputs up front, so a worker with no test iterations
  // of its own still joins the reduction with zeros.
  vector<double> sums(1, 0.0);
  vector<int> score_output_id;
  for (size_t j = 0; j < test_net->output_blobs().size(); ++j) {
    const int count = test_net->output_blobs()[j]->count();
    sums.resize(sums.size() + count, 0.0);
    score_output_id.insert(score_output_id.end(), count,
                           static_cast<int>(j));
  }
  const int test_iter = param_.test_iter(test_net_id);
  // Every worker goes through the same number of rounds (and so polls the
  // action function as often as its peers, which may agree on it over the
  // network); round k runs test iteration k * test_count + test_index here.
  const int test_count = strategy_.test_count;
  const int rounds = (test_iter + test_count - 1) / test_count;
  for (int round = 0; round < rounds; ++round) {
    const int i = round * test_count + strategy_.test_index;
    for (SolverAction request = GetRequestedAction(PollPoint::kTestRound);
         request != SolverAction::NONE;
         request = GetRequestedAction(PollPoint::kTestRound)) {
      if (request == SolverAction::SNAPSHOT) {
        Snapshot();
      } else if (request == SolverAction::STOP) {
        requested_early_exit_ = true;
      }
    }
    if (requested_early_exit_) break;
    if (i >= test_iter) continue;
    Dtype iter_loss;
    const vector<Blob<Dtype>*>& result = test_net->Forward(&iter_loss);
    if (param_.test_compute_loss()) sums[0] += iter_loss;
    size_t idx = 1;
    for (size_t j = 0; j < result.size(); ++j) {
      POSEIDON_REQUIRE(idx + result[j]->count() <= sums.size(), ShapeError,
                       "test net output '",
                       test_net->blob_names()[test_net->output_blob_indices()[j]],
                       "' changed size during testing");
      const Dtype* values = result[j]->cpu_data();
      for (int k = 0; k < result[j]->count(); ++k, ++idx) {
        sums[idx] += values[k];
      }
    }
  }
  if (requested_early_exit_) {
    LOG(INFO) << "Test interrupted.";
    return;
  }
  if (strategy_.sum_test_scores) strategy_.sum_test_scores(&sums);
  if (param_.test_compute_loss() && test_iter > 0) {
    LOG(INFO) << "Test loss: " << sums[0] / test_iter;
  }
  vector<Dtype> scores(sums.size() - 1);
  for (size_t i = 0; i < scores.size(); ++i) {
    const int blob_id = test_net->output_blob_indices()[score_output_id[i]];
    const string& name = test_net->blob_names()[blob_id];
    const Dtype loss_weight = test_net->blob_loss_weights()[blob_id];
    scores[i] = static_cast<Dtype>(sums[i + 1] / std::max(test_iter, 1));
    std::ostringstream loss_msg;
    if (loss_weight != 0) {
      loss_msg << " (* " << loss_weight << " = " << loss_weight * scores[i]
               << " loss)";
    }
    LOG(INFO) << "    Test net output #" << i << ": " << name << " = "
              << scores[i] << loss_msg.str();
  }
  test_scores_[test_net_id] = scores;
}

template <typename Dtype>
string Solver<Dtype>::SnapshotFilename(const string& extension) const {
  return StrCat(param_.snapshot_prefix(), "_iter_", iter_, extension);
}

template <typename Dtype>
void Solver<Dtype>::CheckWeightsFinite(const char* when) const {
  const vector<Blob<Dtype>*>& params = net_->learnable_params();
  for (size_t i = 0; i < params.size(); ++i) {
    if (cpu_all_finite(params[i]->count(), params[i]->cpu_data())) continue;
    const int net_id = net_->learnable_param_ids()[i];
    POSEIDON_THROW(NumericError, "Iteration ", iter_, ": parameter '",
                   net_->param_display_names()[net_id],
                   "' holds non-finite values ", when,
                   "; training diverged (lower base_lr or set "
                   "clip_gradients). ",
                   LastSnapshotNote());
  }
}

template <typename Dtype>
string Solver<Dtype>::LastSnapshotNote() const {
  return last_snapshot_.empty()
             ? string("No snapshot was written in this run.")
             : StrCat("Last good snapshot: ", last_snapshot_);
}

template <typename Dtype>
void Solver<Dtype>::SyncState() {
  on_sync_weights_.Run();
  on_sync_history_.Run();
}

template <typename Dtype>
void Solver<Dtype>::Snapshot() {
  SyncState();
  if (!strategy_.writes_snapshots) return;
  CheckWeightsFinite("(snapshot refused)");
  string model_filename;
  if (param_.snapshot_format() == SolverParameter::HDF5) {
    model_filename = SnapshotFilename(".caffemodel.h5");
    LOG(INFO) << "Snapshotting to HDF5 file " << model_filename;
    net_->ToHDF5(model_filename, param_.snapshot_diff());
  } else {
    model_filename = SnapshotFilename(".caffemodel");
    LOG(INFO) << "Snapshotting to binary proto file " << model_filename;
    NetParameter net_param;
    net_->ToProto(&net_param, param_.snapshot_diff());
    WriteProtoToBinaryFile(net_param, model_filename);
  }
  SnapshotSolverState(model_filename);
  last_snapshot_ = SnapshotFilename(
      param_.snapshot_format() == SolverParameter::HDF5 ? ".solverstate.h5"
                                                        : ".solverstate");
}

template <typename Dtype>
string Solver<Dtype>::ResolveLearnedNet(const string& state_file,
                                        const string& learned_net) {
  namespace fs = std::filesystem;
  if (FileExists(learned_net)) return learned_net;
  const fs::path dir = fs::path(state_file).parent_path();
  const fs::path beside = dir / learned_net;
  if (FileExists(beside.string())) return beside.string();
  const fs::path by_name = dir / fs::path(learned_net).filename();
  if (FileExists(by_name.string())) return by_name.string();
  POSEIDON_THROW(IOError, "solver state '", state_file, "' names weights '",
                 learned_net, "', which exist neither as given nor in '",
                 dir.string().empty() ? "." : dir.string(), "'");
}

// Note [Exact resume]
// Training N iterations, snapshotting, and resuming from the snapshot for M
// more gives the weights of N + M uninterrupted iterations, bit for bit
// (test_solver.cpp, test_snapshot_kill.sh). Besides the weights and the
// update history, three things carry the trajectory:
//  - the lr schedule position (iter, current_step), in the .solverstate as
//    in Caffe;
//  - the data: an uninterrupted run reads iteration N's batches next, a
//    fresh net its first ones. Each iteration reads iter_size batches from
//    every data layer of the train net, so Restore moves each one on by
//    (N - the iterations this solver already ran) x iter_size batches
//    (Layer::SkipBatches): the same records and, for random crops and
//    mirrors, the same draws of the prefetch thread's generator (Caffe
//    starts over at the first record);
//  - the training thread's random generator (Dropout, DummyData's fillers),
//    saved in the .solverstate's rng_state (a Poseidon field Caffe ignores)
//    and restored.
// Not covered: the generators of device workers other than worker 0
// (--threads > 1), and MemoryData, whose data the caller supplies.

template <typename Dtype>
void Solver<Dtype>::Restore(const char* state_file) {
  const string name(state_file);
  const int64_t iter_before = iter_;
  // By the name, as Caffe decides.
  if (name.size() >= 3 && name.compare(name.size() - 3, 3, ".h5") == 0) {
    RestoreSolverStateFromHDF5(name);
  } else {
    RestoreSolverStateFromBinaryProto(name);
  }
  on_restored_.Run();
  // See Note [Exact resume].
  const int64_t iter_size = std::max(1, param_.iter_size());
  const int64_t skip = (iter_ - iter_before) * iter_size;
  if (skip < 0) {
    LOG(WARNING) << "Restored iteration " << iter_ << " precedes the "
                 << iter_before << " this solver has run; its data layers "
                 << "keep their positions";
    return;
  }
  for (const auto& layer : net_->layers()) {
    try {
      layer->SkipBatches(static_cast<uint64_t>(skip));
    } catch (const Error&) {
      RethrowWithContext(StrCat("resuming from '", name, "': layer '",
                                layer->layer_param().name(),
                                "' could not move on ", skip, " batches"));
    }
  }
}

INSTANTIATE_CLASS(Solver);

}  // namespace poseidon
