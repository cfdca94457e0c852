// The arithmetic of one solver step, as functions of the settings and the
// memory they update, shared by the solvers (solvers/*_solver.hpp, on whole
// parameters) and whatever else applies a solver's update to parameters it
// holds (a parameter-server shard, on the pieces of parameters it owns).
//
// Note [One update body]
// A solver's iteration is, per learnable parameter (SGDSolver's steps 2-4):
// normalise the gradient by iter_size, add the weight decay, and turn the
// gradient into the step with the rule's history. Every one of these is
// element-wise: element i of the step depends only on element i of the
// weights, the gradient and the history, and on scalars (the rate, the
// parameter's lr_mult and decay_mult, the iteration). So a run of
// consecutive elements of a parameter can be stepped on its own, and the
// elements come out bit for bit as when the whole parameter is stepped at
// once, whichever way the parameter is cut. The solvers step whole
// parameters through ComputeStep; a holder of pieces steps each piece
// through the same function with the piece's pointers and the multipliers
// of the parameter it belongs to. (Two things are not element-wise and stay
// with the caller: clip_gradients, which needs the norm over every
// parameter, and Blob::Update's w -= step.) The weight decay is computed
// element by element (kernels::L2Regularize) rather than by a BLAS axpy, so
// that no library's vector kernel, with its own treatment of a run's tail,
// decides how an element rounds.
#ifndef POSEIDON_SOLVERS_UPDATE_RULE_HPP_
#define POSEIDON_SOLVERS_UPDATE_RULE_HPP_

#include <string>

#include "poseidon/common.hpp"
#include "poseidon/proto/caffe.pb.h"

namespace poseidon {

// The six update rules, one per solver type.
enum class UpdateRule { kSGD, kNesterov, kAdaGrad, kRMSProp, kAdaDelta, kAdam };

// The rule of a solver type as SolverParameter.type names it ("SGD",
// "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"); ConfigError for
// another name.
UpdateRule UpdateRuleNamed(const std::string& type);
const char* UpdateRuleName(UpdateRule rule);

// History arrays the rule keeps per parameter: 2 for AdaDelta and Adam, 1
// for the others.
int HistoryArrays(UpdateRule rule);

// Checks the settings a step reads (lr_policy and its fields, stepvalue
// order, regularization_type, and what the rule refuses: momentum with
// AdaGrad and RMSProp, rms_decay outside [0, 1)); ConfigError naming the
// field and its value.
void CheckUpdateSettings(const SolverParameter& param, UpdateRule rule);

// The learning rate of iteration `iter` under param's lr_policy, with
// `step` the number of stepvalue entries reached ("multistep" only).
double ScheduledRate(const SolverParameter& param, int iter, int step);

// The number of stepvalue entries at or below `iter`: the multistep step
// of an iteration for a holder that starts anywhere (a solver advances its
// own step by one a call, as Caffe does, and stores it in snapshots).
int MultistepStepAt(const SolverParameter& param, int iter);

// clip_gradients (SGDSolver's step 1) given the sum of squares of every
// learnable param's gradient: the factor each gradient is multiplied by,
// clip / ||g||_2 when that norm exceeds clip_gradients (>= 0), else 1.
template <typename Dtype>
Dtype ClipScale(const SolverParameter& param, Dtype sumsq);

// A run of `count` consecutive elements of one learnable parameter.
template <typename Dtype>
struct ParamRun {
  int count = 0;
  const Dtype* data = nullptr;  // the weights w
  Dtype* diff = nullptr;        // the gradient g in, the step out
  // The rule's state for these elements: history[0] always, history[1] for
  // AdaDelta and Adam (HistoryArrays).
  Dtype* history[2] = {nullptr, nullptr};
  // The parameter's ParamSpec.lr_mult and decay_mult, as Net::params_lr()
  // and params_weight_decay() hold them (float, whatever Dtype: the decay is
  // weight_decay * decay_mult rounded to float, as in Caffe).
  float lr_mult = 1;
  float decay_mult = 1;
};

// SGDSolver's steps 2-4 on a run (on `dev`'s copy of the memory): g /=
// iter_size, the weight decay, then the rule turns g into the step and
// updates the history, at learning rate `rate` (times lr_mult) for the
// gradient of iteration `update_iter` (Adam's bias correction counts it).
template <typename Dtype>
void ComputeStep(Poseidon::Brew dev, const SolverParameter& param,
                 UpdateRule rule, Dtype rate, int update_iter,
                 const ParamRun<Dtype>& run);

// The three parts of ComputeStep, for the solvers' overridable hooks
// (SGDSolver::Normalize, Regularize, ComputeUpdateValue).
template <typename Dtype>
void NormalizeRun(Poseidon::Brew dev, const SolverParameter& param,
                  const ParamRun<Dtype>& run);
template <typename Dtype>
void RegularizeRun(Poseidon::Brew dev, const SolverParameter& param,
                   const ParamRun<Dtype>& run);
template <typename Dtype>
void RuleStepRun(Poseidon::Brew dev, const SolverParameter& param,
                 UpdateRule rule, Dtype rate, int update_iter,
                 const ParamRun<Dtype>& run);

}  // namespace poseidon

#endif  // POSEIDON_SOLVERS_UPDATE_RULE_HPP_
