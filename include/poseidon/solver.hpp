// Solver: drives training of a Net from a SolverParameter (solver.prototxt).
// It builds the train net and the test nets, runs forward/backward
// (accumulating gradients over iter_size passes), hands the gradients to the
// update rule (ApplyUpdate, implemented by the subclasses in solvers/), tests
// every test_interval iterations, logs progress and writes snapshots.
//
// The interface follows Caffe's Solver so that pycaffe's Solver class maps onto
// it method for method: Solve, Step, Restore, Snapshot, net, test_nets, iter,
// param, type, and add_callback (add_on_start with add_on_gradients_ready).
//
// Files: snapshots are "<snapshot_prefix>_iter_<N>.caffemodel" (a NetParameter)
// and "<snapshot_prefix>_iter_<N>.solverstate" (a SolverState), binary
// protobuf, each written atomically (temporary file renamed into place). With
// snapshot_format: HDF5 they are Caffe's HDF5 files instead,
// "..._iter_<N>.caffemodel.h5" (Net::ToHDF5) and "..._iter_<N>.solverstate.h5"
// (scalars iter, current_step, the string learned_net and the group history
// of datasets "0", "1", ...); Restore reads a state file whose name ends in
// ".h5" that way, as Caffe does.
//
// Errors: an inconsistent solver description throws ConfigError; unreadable or
// unwritable files throw IOError; a non-finite loss, or non-finite weights
// about to be snapshotted, throw NumericError naming the iteration and the
// last snapshot written, and no snapshot of such weights is ever written.
//
// Thread safety: a Solver and its nets belong to the thread that calls Step.
// Observers, the strategy's functions and the action function run on that
// thread.
#ifndef POSEIDON_SOLVER_HPP_
#define POSEIDON_SOLVER_HPP_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/net.hpp"
#include "poseidon/proto/caffe.pb.h"
#include "poseidon/util/callback_list.hpp"

namespace poseidon {

// What the solver should do after the current iteration; requested
// asynchronously (signals) through the action function.
enum class SolverAction { NONE = 0, STOP = 1, SNAPSHOT = 2 };

using ActionCallback = std::function<SolverAction()>;

// Note [Solver observation points]
// Whatever watches the training loop (the distributed synchroniser, the
// device workers, pycaffe's add_callback, tests) subscribes to one of the
// solver's CallbackLists (util/callback_list.hpp) with add_on_<point> and
// holds the Subscription it gets: the callback runs on the training thread
// each time the point is reached, after those subscribed before it, for as
// long as that handle lives. The points (the first six in the order a Step
// that tests and snapshots first meets them; Restore runs the last):
//
//   step_begin       Step begins, before its first iteration (the weights
//                    may have been set outside training: from Python, by
//                    fine-tuning weights)
//   sync_weights     the solver is about to read the weights: in TestAll
//                    before testing, in Snapshot, and when Step ends;
//                    whoever holds pending updates applies them
//   start            each iteration, after the scheduled test, before the
//                    iter_size forward passes (pycaffe's on_start)
//   gradients_ready  each iteration, after the iter_size backward passes
//                    and the display line, before the update (pycaffe's
//                    on_gradients_ready)
//   sync_history     in Snapshot after sync_weights, on every worker
//                    (collective there), before it decides whether this
//                    worker writes: whoever keeps the update history
//                    elsewhere (parameter-server shards, Note [Server-side
//                    update] in distributed/shard_state.hpp) brings history() up
//                    to date
//   step_end         Step ends, after sync_weights, on every worker at the
//                    same iteration (stale-synchronous serving ends there)
//   restored         Restore has loaded a solver state (weights and
//                    history), before the data layers move on
//
// Two things steer the solver without being observers, so they are not
// lists:
//  - DistributedStrategy: what a distributed trainer decides in the
//    solver's place (how the update is applied, which test iterations run
//    here and how their scores add up, whether this worker writes
//    snapshots, which stop/snapshot request every worker acts on). Each
//    member replaces a piece of the solver's behaviour or gives it an
//    answer, which two parties could not both do; so it is one value, set
//    whole by its one owner (the synchroniser) and cleared with {}.
//  - The action function: the one provider of this process's own
//    stop/snapshot requests (a signal handler).
// A subscriber whose callbacks capture `this` holds its Subscriptions as
// members, so they go with it (either side may go first); the strategy's
// owner clears it with {} before it goes.

template <typename Dtype>
class Solver {
 public:
  // Builds the nets described by `param` (upgraded first, see
  // UpgradeSolverAsNeeded).
  explicit Solver(const SolverParameter& param);
  // Reads a solver prototxt with ReadSolverParamsFromTextFile.
  explicit Solver(const string& param_file);
  virtual ~Solver() = default;
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Solver);

  // Trains until max_iter, optionally resuming from a .solverstate first;
  // snapshots at the end unless snapshot_after_train is false.
  virtual void Solve(const char* resume_file = nullptr);
  void Solve(const string& resume_file) { Solve(resume_file.c_str()); }
  // Runs `iters` training iterations (testing and snapshotting on schedule).
  void Step(int iters);
  // Loads a .solverstate and the weights it names. The weights file is looked
  // up as written in the state, then relative to the state file's directory.
  void Restore(const char* state_file);
  void Restore(const string& state_file) { Restore(state_file.c_str()); }
  // Writes <prefix>_iter_<iter>.caffemodel and .solverstate.
  void Snapshot();
  // Evaluates every test net (test_iter[i] forward passes each) and logs the
  // mean of each output.
  void TestAll();

  // The update rule: turns the accumulated gradients into parameter steps
  // and applies them (does not advance iter()).
  virtual void ApplyUpdate() = 0;
  // The solver's prototxt type name ("SGD", "Adam", ...).
  virtual const char* type() const = 0;

  const SolverParameter& param() const { return param_; }
  const shared_ptr<Net<Dtype>>& net() const { return net_; }
  // The train net's description as built (file read, state merged), for
  // building replicas of it (distributed/device_workers.hpp).
  const NetParameter& train_net_param() const { return train_net_param_; }
  const vector<shared_ptr<Net<Dtype>>>& test_nets() const { return test_nets_; }
  int iter() const { return iter_; }
  // Roughly the bytes of one snapshot: every parameter (twice with
  // snapshot_diff) and the update rule's history arrays.
  uint64_t SnapshotBytesEstimate() const;
  int max_iter() const { return param_.max_iter(); }
  Dtype smoothed_loss() const { return smoothed_loss_; }
  // The mean scores of each test net's outputs from the last TestAll, in
  // output order (one entry per element of each output blob).
  const vector<vector<Dtype>>& test_scores() const { return test_scores_; }
  // The .solverstate file of the last snapshot, "" when none was written.
  const string& last_snapshot() const { return last_snapshot_; }
  bool requested_early_exit() const { return requested_early_exit_; }

  // The observation points (Note [Solver observation points]); each
  // callback stays registered while its Subscription lives.
  Subscription add_on_step_begin(std::function<void()> fn) {
    return on_step_begin_.Add(std::move(fn));
  }
  Subscription add_on_start(std::function<void()> fn) {
    return on_start_.Add(std::move(fn));
  }
  Subscription add_on_gradients_ready(std::function<void()> fn) {
    return on_gradients_ready_.Add(std::move(fn));
  }
  Subscription add_on_sync_weights(std::function<void()> fn) {
    return on_sync_weights_.Add(std::move(fn));
  }
  Subscription add_on_sync_history(std::function<void()> fn) {
    return on_sync_history_.Add(std::move(fn));
  }
  Subscription add_on_step_end(std::function<void()> fn) {
    return on_step_end_.Add(std::move(fn));
  }
  Subscription add_on_restored(std::function<void()> fn) {
    return on_restored_.Add(std::move(fn));
  }
  // Runs the sync points (on_sync_weights, then on_sync_history) so that
  // net() and the update history hold the job's current values, as
  // Snapshot does before writing. Collective on every worker of a
  // distributed job; does nothing when no one subscribed.
  void SyncState();

  // Where the action function is polled: after a training iteration;
  // after the last iteration before every worker meets (a test, a snapshot
  // or the end of the Step follows); between test iterations.
  enum class PollPoint { kIteration, kBeforeMeeting, kTestRound };
  // What a distributed trainer (distributed/synchronizer.hpp) decides in the
  // solver's place: a strategy, not observers (Note [Solver observation
  // points]). Every member is optional; the defaults train alone.
  struct DistributedStrategy {
    // Called instead of ApplyUpdate() once per iteration.
    std::function<void()> apply_update;
    // Test iteration i runs on this worker when i % test_count ==
    // test_index; sum_test_scores then adds the workers' sums (the loss sum
    // first, then each output's) so the means cover the test set once.
    int test_index = 0;
    int test_count = 1;
    std::function<void(vector<double>*)> sum_test_scores;
    // Only one worker of a job writes snapshots.
    bool writes_snapshots = true;
    // Turns this worker's own request (from the action function) into the
    // one every worker acts on at the same point; `where` says which kind
    // of poll asks.
    std::function<SolverAction(SolverAction local, PollPoint where)>
        agree_on_action;
  };
  // Replaces the whole strategy; {} trains alone again.
  void SetDistributedStrategy(DistributedStrategy strategy) {
    strategy_ = std::move(strategy);
  }

  // The action function, polled once per iteration (and per test
  // iteration); the tools connect it to the SIGINT/SIGHUP handler. A
  // provider, not an observer: the solver asks it one question and acts on
  // its one answer, so there is one function (setting it again replaces
  // it), not a list. A distributed trainer turns each answer into the
  // action all workers agree on (DistributedStrategy::agree_on_action).
  void SetActionFunction(ActionCallback func) {
    action_request_function_ = std::move(func);
  }
  SolverAction GetRequestedAction(
      PollPoint where = PollPoint::kIteration) const;

 protected:
  void Init(const SolverParameter& param);
  void InitTrainNet();
  void InitTestNets();
  void CheckSnapshotWritePermissions() const;
  // Before the first iteration: the snapshot folder is writable and has
  // room, stale temporary files are removed. See Note [Start-up checks].
  void RunStartupChecks() const;
  void Test(int test_net_id);
  void UpdateSmoothedLoss(Dtype loss, int start_iter, int average_loss);
  void DisplayProgress(int stop_iter);
  string SnapshotFilename(const string& extension) const;
  // Throws NumericError if a learnable parameter holds a non-finite value.
  void CheckWeightsFinite(const char* when) const;
  string LastSnapshotNote() const;
  // Finds the weights file a .solverstate names: as written, else relative
  // to the state file's directory, else by its file name in that directory.
  static string ResolveLearnedNet(const string& state_file,
                                  const string& learned_net);

  // Update-rule state, saved in and restored from the .solverstate.
  virtual void SnapshotSolverState(const string& model_filename) = 0;
  virtual void RestoreSolverStateFromBinaryProto(const string& state_file) = 0;
  virtual void RestoreSolverStateFromHDF5(const string& state_file) = 0;

  SolverParameter param_;
  int iter_ = 0;
  // The lr schedule position for the step and multistep policies.
  int current_step_ = 0;
  shared_ptr<Net<Dtype>> net_;
  NetParameter train_net_param_;
  vector<shared_ptr<Net<Dtype>>> test_nets_;
  vector<vector<Dtype>> test_scores_;
  CallbackList<> on_step_begin_;
  CallbackList<> on_start_;
  CallbackList<> on_gradients_ready_;
  CallbackList<> on_sync_weights_;
  CallbackList<> on_sync_history_;
  CallbackList<> on_step_end_;
  CallbackList<> on_restored_;
  vector<Dtype> losses_;
  Dtype smoothed_loss_ = 0;
  ActionCallback action_request_function_;
  bool requested_early_exit_ = false;
  string last_snapshot_;
  DistributedStrategy strategy_;

  // Throughput and ETA bookkeeping for the display lines.
  std::chrono::steady_clock::time_point display_start_;
  int iterations_last_ = 0;
  double seconds_per_iter_avg_ = -1;
};

// Reads a solver prototxt (ConfigError with file:line:column on syntax errors,
// IOError when missing), upgrades it, and, as Caffe does, derives
// snapshot_prefix from the file name when absent (or puts the file's stem
// inside snapshot_prefix when that names a directory).
void ReadSolverParamsFromTextFile(const string& param_file,
                                  SolverParameter* param);
// Moves the deprecated `solver_type` enum into the `type` string
// (SGD -> "SGD", NESTEROV -> "Nesterov", ...). Throws ConfigError naming
// `source` when both are given and disagree. Returns whether it changed.
bool UpgradeSolverAsNeeded(const string& source, SolverParameter* param);

}  // namespace poseidon

#endif  // POSEIDON_SOLVER_HPP_
