// One solver step on a run of a parameter's elements (Note [One update
// body] in solvers/update_rule.hpp).
#include "poseidon/solvers/update_rule.hpp"

#include <cmath>

#include "poseidon/kernels/solver_kernels.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {
namespace {

constexpr struct {
  UpdateRule rule;
  const char* name;
} kRuleNames[] = {
    {UpdateRule::kSGD, "SGD"},           {UpdateRule::kNesterov, "Nesterov"},
    {UpdateRule::kAdaGrad, "AdaGrad"},   {UpdateRule::kRMSProp, "RMSProp"},
    {UpdateRule::kAdaDelta, "AdaDelta"}, {UpdateRule::kAdam, "Adam"},
};

}  // namespace

UpdateRule UpdateRuleNamed(const std::string& type) {
  for (const auto& r : kRuleNames) {
    if (type == r.name) return r.rule;
  }
  POSEIDON_THROW(ConfigError, "unknown solver type '", type,
                 "' (known: SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam)");
}

const char* UpdateRuleName(UpdateRule rule) {
  for (const auto& r : kRuleNames) {
    if (rule == r.rule) return r.name;
  }
  return "?";
}

int HistoryArrays(UpdateRule rule) {
  return rule == UpdateRule::kAdaDelta || rule == UpdateRule::kAdam ? 2 : 1;
}

void CheckUpdateSettings(const SolverParameter& p, UpdateRule rule) {
  const std::string& policy = p.lr_policy();
  POSEIDON_REQUIRE(policy == "fixed" || policy == "step" || policy == "exp" ||
                       policy == "inv" || policy == "multistep" ||
                       policy == "poly" || policy == "sigmoid",
                   ConfigError, "unknown lr_policy: \"", policy,
                   "\" (known: fixed, step, exp, inv, multistep, poly, "
                   "sigmoid)");
  POSEIDON_REQUIRE(policy != "step" || p.stepsize() > 0, ConfigError,
                   "lr_policy \"step\" needs stepsize > 0, got ", p.stepsize());
  POSEIDON_REQUIRE(policy != "poly" || p.max_iter() > 0, ConfigError,
                   "lr_policy \"poly\" needs max_iter > 0, got ", p.max_iter());
  for (int i = 1; i < p.stepvalue_size(); ++i) {
    POSEIDON_REQUIRE(p.stepvalue(i) > p.stepvalue(i - 1), ConfigError,
                     "stepvalue must increase, but stepvalue[", i,
                     "] = ", p.stepvalue(i), " follows ", p.stepvalue(i - 1));
  }
  POSEIDON_REQUIRE(
      p.regularization_type() == "L2" || p.regularization_type() == "L1",
      ConfigError, "unknown regularization_type: \"", p.regularization_type(),
      "\" (known: L1, L2)");
  if (rule == UpdateRule::kAdaGrad || rule == UpdateRule::kRMSProp) {
    POSEIDON_REQUIRE(p.momentum() == 0, ConfigError,
                     "momentum cannot be used with ", UpdateRuleName(rule),
                     " (got momentum: ", p.momentum(), ")");
  }
  if (rule == UpdateRule::kRMSProp) {
    POSEIDON_REQUIRE(p.rms_decay() >= 0 && p.rms_decay() < 1, ConfigError,
                     "RMSProp needs rms_decay in [0, 1), got ", p.rms_decay());
  }
}

double ScheduledRate(const SolverParameter& p, int iter, int step) {
  const std::string& policy = p.lr_policy();
  const double base_lr = p.base_lr();
  const double it = iter;
  if (policy == "fixed") return base_lr;
  if (policy == "step") {
    return base_lr * std::pow(double(p.gamma()), iter / p.stepsize());
  }
  if (policy == "exp") return base_lr * std::pow(double(p.gamma()), it);
  if (policy == "inv") {
    return base_lr * std::pow(1.0 + double(p.gamma()) * it, -double(p.power()));
  }
  if (policy == "multistep") {
    return base_lr * std::pow(double(p.gamma()), step);
  }
  if (policy == "poly") {
    return base_lr * std::pow(1.0 - it / p.max_iter(), double(p.power()));
  }
  if (policy == "sigmoid") {
    return base_lr / (1.0 + std::exp(-double(p.gamma()) * (it - p.stepsize())));
  }
  POSEIDON_THROW(ConfigError, "unknown lr_policy: \"", policy, "\"");
}

int MultistepStepAt(const SolverParameter& p, int iter) {
  int step = 0;
  while (step < p.stepvalue_size() && iter >= p.stepvalue(step)) ++step;
  return step;
}

template <typename Dtype>
void NormalizeRun(Poseidon::Brew dev, const SolverParameter& p,
                  const ParamRun<Dtype>& run) {
  if (p.iter_size() == 1) return;
  math::scal<Dtype>(dev, run.count, Dtype(1) / p.iter_size(), run.diff);
}

template <typename Dtype>
void RegularizeRun(Poseidon::Brew dev, const SolverParameter& p,
                   const ParamRun<Dtype>& run) {
  const Dtype decay = p.weight_decay() * run.decay_mult;  // in float
  if (decay == 0) return;
  if (p.regularization_type() == "L2") {
    for_each(dev, run.count,
             kernels::L2Regularize<Dtype>{run.data, run.diff, decay});
  } else {
    for_each(dev, run.count,
             kernels::L1Regularize<Dtype>{run.data, run.diff, decay});
  }
}

template <typename Dtype>
void RuleStepRun(Poseidon::Brew dev, const SolverParameter& p, UpdateRule rule,
                 Dtype rate, int update_iter, const ParamRun<Dtype>& run) {
  const Dtype local_rate = rate * run.lr_mult;
  Dtype* g = run.diff;
  Dtype* h = run.history[0];
  switch (rule) {
    case UpdateRule::kSGD:
      // v = momentum * v + r * g; step = v
      for_each(dev, run.count,
               kernels::SgdUpdate<Dtype>{g, h, Dtype(p.momentum()),
                                         local_rate});
      return;
    case UpdateRule::kNesterov:
      // v' = momentum * v + r * g; step = (1 + momentum) v' - momentum v
      for_each(dev, run.count,
               kernels::NesterovUpdate<Dtype>{g, h, Dtype(p.momentum()),
                                              local_rate});
      return;
    case UpdateRule::kAdaGrad:
      // h += g^2; step = r * g / (sqrt(h) + delta)
      for_each(dev, run.count,
               kernels::AdaGradUpdate<Dtype>{g, h, Dtype(p.delta()),
                                             local_rate});
      return;
    case UpdateRule::kRMSProp:
      // h = rms_decay * h + (1 - rms_decay) * g^2;
      // step = r * g / (sqrt(h) + delta)
      for_each(dev, run.count,
               kernels::RmsPropUpdate<Dtype>{g, h, Dtype(p.rms_decay()),
                                             Dtype(p.delta()), local_rate});
      return;
    case UpdateRule::kAdaDelta:
      // Eg = rho * Eg + (1 - rho) * g^2;
      // u = g * sqrt((Ex + delta) / (Eg + delta));
      // Ex = rho * Ex + (1 - rho) * u^2; step = r * u
      for_each(dev, run.count,
               kernels::AdaDeltaUpdate<Dtype>{g, h, run.history[1],
                                              Dtype(p.momentum()),
                                              Dtype(p.delta()), local_rate});
      return;
    case UpdateRule::kAdam: {
      // m = b1 * m + (1 - b1) * g; v = b2 * v + (1 - b2) * g^2;
      // step = r * correction * m / (sqrt(v) + eps), t = update_iter + 1
      const double beta1 = Dtype(p.momentum());
      const double beta2 = Dtype(p.momentum2());
      const int t = update_iter + 1;
      const Dtype correction = static_cast<Dtype>(
          std::sqrt(1.0 - std::pow(beta2, t)) / (1.0 - std::pow(beta1, t)));
      for_each(dev, run.count,
               kernels::AdamUpdate<Dtype>{
                   g, h, run.history[1], Dtype(beta1), Dtype(beta2),
                   Dtype(p.delta()), Dtype(local_rate * correction)});
      return;
    }
  }
}

template <typename Dtype>
void ComputeStep(Poseidon::Brew dev, const SolverParameter& p, UpdateRule rule,
                 Dtype rate, int update_iter, const ParamRun<Dtype>& run) {
  NormalizeRun(dev, p, run);
  RegularizeRun(dev, p, run);
  RuleStepRun(dev, p, rule, rate, update_iter, run);
}

template <typename Dtype>
Dtype ClipScale(const SolverParameter& p, Dtype sumsq) {
  const Dtype clip = p.clip_gradients();
  if (clip < 0) return Dtype(1);
  const Dtype l2norm = std::sqrt(sumsq);
  return l2norm > clip ? clip / l2norm : Dtype(1);
}

#define POSEIDON_INSTANTIATE_UPDATE_RULE(Dtype)                              \
  template Dtype ClipScale<Dtype>(const SolverParameter&, Dtype);            \
  template void NormalizeRun<Dtype>(Poseidon::Brew, const SolverParameter&,  \
                                    const ParamRun<Dtype>&);                 \
  template void RegularizeRun<Dtype>(Poseidon::Brew, const SolverParameter&, \
                                     const ParamRun<Dtype>&);                \
  template void RuleStepRun<Dtype>(Poseidon::Brew, const SolverParameter&,   \
                                   UpdateRule, Dtype, int,                   \
                                   const ParamRun<Dtype>&);                  \
  template void ComputeStep<Dtype>(Poseidon::Brew, const SolverParameter&,   \
                                   UpdateRule, Dtype, int,                   \
                                   const ParamRun<Dtype>&)
POSEIDON_INSTANTIATE_UPDATE_RULE(float);
POSEIDON_INSTANTIATE_UPDATE_RULE(double);

}  // namespace poseidon
