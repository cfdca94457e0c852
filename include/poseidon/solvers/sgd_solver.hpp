// SGDSolver: stochastic gradient descent with momentum, and the base of the
// adaptive update rules (solvers/*_solver.hpp), which share its learning-rate
// schedule, gradient clipping, normalisation and weight decay.
//
// Each iteration, for the accumulated gradient g of every learnable param
// (Caffe's order, so results and files match Caffe):
//   1. ClipGradients: if clip_gradients >= 0 and ||g||_2 over all params
//      exceeds it, every g is scaled by clip_gradients / ||g||_2.
//   2. Normalize:  g /= iter_size.
//   3. Regularize: g += decay * w        (regularization_type "L2", default)
//                  g += decay * sign(w)  ("L1"),
//      decay = weight_decay * decay_mult of the param.
//   4. ComputeUpdateValue (SGD):  v = momentum * v + lr * lr_mult * g; g = v.
//   5. Net::Update:  w -= g.
//
// Learning-rate policies (lr_policy), with it = iter():
//   fixed      base_lr
//   step       base_lr * gamma ^ floor(it / stepsize)
//   exp        base_lr * gamma ^ it
//   inv        base_lr * (1 + gamma * it) ^ (-power)
//   multistep  base_lr * gamma ^ (number of stepvalue entries reached)
//   poly       base_lr * (1 - it / max_iter) ^ power
//   sigmoid    base_lr / (1 + exp(-gamma * (it - stepsize)))
//
// Prototxt fields: base_lr, lr_policy, gamma, power, stepsize, stepvalue,
// momentum (0), weight_decay (0), regularization_type ("L2"),
// clip_gradients (-1: off), iter_size (1).
//
// Steps 2-4 are the shared arithmetic of solvers/update_rule.hpp (Note [One
// update body]); a subclass names its rule (UpdateRule) and may override the
// hooks.
//
// State (.solverstate): history holds one blob per learnable param (the
// momentum v), two for AdaDelta and Adam: [0, P) then [P, 2P).
#ifndef POSEIDON_SOLVERS_SGD_SOLVER_HPP_
#define POSEIDON_SOLVERS_SGD_SOLVER_HPP_

#include <string>
#include <vector>

#include "poseidon/solver.hpp"
#include "poseidon/solvers/update_rule.hpp"

namespace poseidon {

template <typename Dtype>
class SGDSolver : public Solver<Dtype> {
 public:
  explicit SGDSolver(const SolverParameter& param);
  explicit SGDSolver(const string& param_file);

  const char* type() const override { return "SGD"; }
  void ApplyUpdate() override;
  // The rate for the current iteration; for "multistep" it also advances the
  // schedule by at most one step per call, as Caffe does.
  Dtype GetLearningRate();

  // The pieces of ApplyUpdate, for a distributed trainer that updates layer
  // by layer (distributed/synchronizer.hpp): ClipGradients over every learnable
  // param, then for one param steps 2-5 above with the rate and the
  // iteration number of the step the gradient belongs to (Adam's bias
  // correction uses it). ApplyUpdate() is ClipGradients() plus
  // ApplyUpdateToParam(i, GetLearningRate(), iter()) for every i.
  virtual void ClipGradients();
  // ClipGradients with the sum of squares of the whole gradient given: a
  // trainer whose parameter servers hold part of the gradient agrees on it
  // with them (Note [Clipping on the servers] in distributed/server_clip.hpp)
  // and scales what this solver holds.
  void ClipGradientsOfSumsq(Dtype sumsq);
  void ApplyUpdateToParam(int param_id, Dtype rate, int iter);
  const vector<shared_ptr<Blob<Dtype>>>& history() const { return history_; }
  UpdateRule rule() const { return rule_; }

 protected:
  // For the subclasses: the same solver with another update rule.
  SGDSolver(const SolverParameter& param, UpdateRule rule);
  SGDSolver(const string& param_file, UpdateRule rule);
  // Checks the settings (CheckUpdateSettings) and allocates the history:
  // HistoryArrays(rule) zeroed blobs per learnable param.
  void PreSolve();
  // The elements of learnable param `param_id` as one run, with what
  // `parts` names of its memory on `dev` (Normalize needs only the
  // gradient; asking for no more keeps the rest where it is).
  enum RunParts { kDiff, kDataAndDiff, kAll };
  ParamRun<Dtype> WholeParam(int param_id, RunParts parts);
  virtual void Normalize(int param_id);
  virtual void Regularize(int param_id);
  virtual void ComputeUpdateValue(int param_id, Dtype rate);

  void SnapshotSolverState(const string& model_filename) override;
  void RestoreSolverStateFromBinaryProto(const string& state_file) override;
  // Caffe's HDF5 layout (see solver.hpp); sgd_solver_hdf5.cpp.
  void SnapshotSolverStateToHDF5(const string& model_filename);
  void RestoreSolverStateFromHDF5(const string& state_file) override;

  // The update rule's state (saved in snapshots): one blob per parameter,
  // two for AdaDelta and Adam ([0, P) then [P, 2P)). The rules run in one pass
  // each (kernels/solver_kernels.hpp) and need no scratch space.
  vector<shared_ptr<Blob<Dtype>>> history_;
  // The iteration whose gradient ComputeUpdateValue is applying.
  int update_iter_ = 0;

 private:
  UpdateRule rule_;
};

}  // namespace poseidon

#endif  // POSEIDON_SOLVERS_SGD_SOLVER_HPP_
