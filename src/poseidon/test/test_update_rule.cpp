// The solver step as shared arithmetic (solvers/update_rule.hpp, Note [One
// update body]): a parameter stepped in pieces comes out bit for bit as when
// stepped whole, and a holder of flat pieces that cut across parameters (as
// a parameter-server shard holds them) stays bit-identical to the solver,
// for every rule, both regularisations and a schedule with steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "poseidon/sgd_solvers.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/solvers/update_rule.hpp"
#include "solver_test_util.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using std::vector;

const char* const kRules[] = {"SGD",     "Nesterov", "AdaGrad",
                              "RMSProp", "AdaDelta", "Adam"};

// Momentum where the rule allows it.
string RuleSettings(const string& type) {
  const bool momentum = type != "AdaGrad" && type != "RMSProp";
  return StrCat("type: '", type, "' momentum: ", momentum ? 0.9 : 0.0,
                " delta: 1e-6 ");
}

template <typename Dtype>
bool SameBits(const vector<Dtype>& a, const vector<Dtype>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(Dtype)) == 0;
}

// The memory of one parameter's worth of elements and its state.
template <typename Dtype>
struct Arrays {
  vector<Dtype> w, g, h0, h1;
  ParamRun<Dtype> Run(int begin, int end, float lr_mult, float decay_mult) {
    ParamRun<Dtype> run;
    run.count = end - begin;
    run.data = w.data() + begin;
    run.diff = g.data() + begin;
    run.history[0] = h0.data() + begin;
    run.history[1] = h1.data() + begin;
    run.lr_mult = lr_mult;
    run.decay_mult = decay_mult;
    return run;
  }
};

template <typename Dtype>
void ExpectPiecesStepLikeTheWhole() {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  constexpr int kCount = 37;
  Arrays<Dtype> start;
  for (auto* v : {&start.w, &start.g, &start.h0, &start.h1}) {
    for (int i = 0; i < kCount; ++i) v->push_back(Dtype(normal(rng)));
  }
  // Second moments are never negative.
  for (Dtype& x : start.h0) x = std::fabs(x);
  for (Dtype& x : start.h1) x = std::fabs(x);
  const int cuts[] = {0, 5, 6, 20, 21, kCount};
  for (const char* type : kRules) {
    for (const char* reg : {"L2", "L1"}) {
      for (int iter_size : {1, 3}) {
        const SolverParameter p = test::SolverTestParam(
            StrCat(RuleSettings(type), " weight_decay: 0.01",
                   " regularization_type: '", reg, "' iter_size: ", iter_size));
        const UpdateRule rule = UpdateRuleNamed(type);
        Arrays<Dtype> whole = start, pieces = start;
        ComputeStep(Poseidon::CPU, p, rule, Dtype(0.05), 4,
                    whole.Run(0, kCount, 0.5f, 2.0f));
        for (size_t c = 0; c + 1 < std::size(cuts); ++c) {
          ComputeStep(Poseidon::CPU, p, rule, Dtype(0.05), 4,
                      pieces.Run(cuts[c], cuts[c + 1], 0.5f, 2.0f));
        }
        const string what = StrCat(type, ", ", reg, ", iter_size ", iter_size);
        EXPECT_FALSE(SameBits(whole.g, start.g)) << what << ": no step taken";
        EXPECT_TRUE(SameBits(whole.g, pieces.g)) << what << ": step";
        EXPECT_TRUE(SameBits(whole.h0, pieces.h0)) << what << ": history";
        EXPECT_TRUE(SameBits(whole.h1, pieces.h1)) << what << ": history 2";
      }
    }
  }
}

TEST(UpdateRuleTest, APieceStepsLikeTheWholeParameterFloat) {
  ExpectPiecesStepLikeTheWhole<float>();
}

TEST(UpdateRuleTest, APieceStepsLikeTheWholeParameterDouble) {
  ExpectPiecesStepLikeTheWhole<double>();
}

// A holder of the net's parameters as one flat array cut into blocks of
// `block` elements that ignore the parameters' boundaries, stepping each
// block's pieces of parameters with the same functions: what a shard of
// the parameter server does with the blocks it owns.
template <typename Dtype>
class FlatHolder {
 public:
  FlatHolder(const SolverParameter& param, const Net<Dtype>& net, int block)
      : param_(param), rule_(UpdateRuleNamed(param.type())), block_(block) {
    for (size_t k = 0; k < net.learnable_params().size(); ++k) {
      const Blob<Dtype>* blob = net.learnable_params()[k];
      begin_.push_back(static_cast<int>(w_.size()));
      w_.insert(w_.end(), blob->cpu_data(), blob->cpu_data() + blob->count());
      lr_mult_.push_back(net.params_lr()[k]);
      decay_mult_.push_back(net.params_weight_decay()[k]);
    }
    begin_.push_back(static_cast<int>(w_.size()));
    h0_.assign(w_.size(), Dtype(0));
    h1_.assign(w_.size(), Dtype(0));
  }

  // One iteration with the gradients `g` (flat, as the net's diffs).
  void Step(int iter, vector<Dtype> g) {
    const Dtype rate = static_cast<Dtype>(
        ScheduledRate(param_, iter, MultistepStepAt(param_, iter)));
    const int total = static_cast<int>(w_.size());
    for (int b = 0; b < total; b += block_) {
      const int end = std::min(b + block_, total);
      // The block's pieces, one per parameter it touches.
      for (size_t k = 0; k + 1 < begin_.size(); ++k) {
        const int lo = std::max(b, begin_[k]);
        const int hi = std::min(end, begin_[k + 1]);
        if (lo >= hi) continue;
        ParamRun<Dtype> run;
        run.count = hi - lo;
        run.data = w_.data() + lo;
        run.diff = g.data() + lo;
        run.history[0] = h0_.data() + lo;
        run.history[1] = h1_.data() + lo;
        run.lr_mult = lr_mult_[k];
        run.decay_mult = decay_mult_[k];
        ComputeStep(Poseidon::CPU, param_, rule_, rate, iter, run);
      }
    }
    for (int i = 0; i < total; ++i) w_[i] -= g[i];
  }

  const vector<Dtype>& weights() const { return w_; }
  // History array `a` (0 or 1) as the solver lays it out.
  const vector<Dtype>& history(int a) const { return a == 0 ? h0_ : h1_; }

 private:
  const SolverParameter param_;
  const UpdateRule rule_;
  const int block_;
  vector<int> begin_;  // the parameters' first elements, then the end
  vector<float> lr_mult_, decay_mult_;
  vector<Dtype> w_, h0_, h1_;
};

template <typename Dtype>
vector<Dtype> Flat(const vector<Blob<Dtype>*>& blobs, bool diff) {
  vector<Dtype> out;
  for (const Blob<Dtype>* b : blobs) {
    const Dtype* p = diff ? b->cpu_diff() : b->cpu_data();
    out.insert(out.end(), p, p + b->count());
  }
  return out;
}

template <typename Dtype>
vector<Dtype> FlatHistory(const SGDSolver<Dtype>& solver, int array,
                          size_t num_params) {
  vector<Dtype> out;
  for (size_t k = 0; k < num_params; ++k) {
    const Blob<Dtype>& b = *solver.history()[array * num_params + k];
    out.insert(out.end(), b.cpu_data(), b.cpu_data() + b.count());
  }
  return out;
}

template <typename Dtype>
void ExpectHolderMatchesSolver(const string& type, const char* reg) {
  const SolverParameter param = test::SolverTestParam(
      StrCat(RuleSettings(type), " weight_decay: 0.02 regularization_type: '",
             reg,
             "' lr_policy: 'multistep' gamma: 0.5 stepvalue: 1 stepvalue: 3"));
  std::unique_ptr<Solver<Dtype>> solver = CreateSolver<Dtype>(param);
  auto* sgd = dynamic_cast<SGDSolver<Dtype>*>(solver.get());
  ASSERT_NE(sgd, nullptr);
  ASSERT_EQ(sgd->rule(), UpdateRuleNamed(type));
  Net<Dtype>* net = solver->net().get();
  test::FillSolverTestInputs(net);
  const auto& params = net->learnable_params();
  FlatHolder<Dtype> holder(param, *net, /*block=*/5);
  const int arrays = HistoryArrays(sgd->rule());
  for (int iter = 0; iter < 5; ++iter) {
    // The gradient the solver's step will compute (same weights, inputs).
    net->ClearParamDiffs();
    net->ForwardBackward();
    holder.Step(iter, Flat(params, /*diff=*/true));
    solver->Step(1);
    const string what = StrCat(type, ", ", reg, ", iteration ", iter);
    ASSERT_TRUE(SameBits(Flat(params, false), holder.weights())) << what;
    for (int a = 0; a < arrays; ++a) {
      ASSERT_TRUE(SameBits(FlatHistory(*sgd, a, params.size()),
                           holder.history(a)))
          << what << ", history " << a;
    }
  }
}

TEST(UpdateRuleTest, AHolderOfBlocksAcrossParametersMatchesTheSolver) {
  for (const char* type : kRules) {
    for (const char* reg : {"L2", "L1"}) {
      ExpectHolderMatchesSolver<float>(type, reg);
      ExpectHolderMatchesSolver<double>(type, reg);
    }
  }
}

TEST(UpdateRuleTest, MultistepStepCountsTheStepValuesReached) {
  const SolverParameter p = test::SolverTestParam(
      "lr_policy: 'multistep' stepvalue: 2 stepvalue: 5 gamma: 0.1");
  const int expected[] = {0, 0, 1, 1, 1, 2, 2};
  for (int iter = 0; iter < 7; ++iter) {
    EXPECT_EQ(MultistepStepAt(p, iter), expected[iter]) << iter;
  }
  EXPECT_DOUBLE_EQ(ScheduledRate(p, 6, MultistepStepAt(p, 6)),
                   double(p.base_lr()) * std::pow(double(p.gamma()), 2));
}

TEST(UpdateRuleTest, RulesAreNamedAsSolverTypes) {
  for (const char* type : kRules) {
    EXPECT_STREQ(UpdateRuleName(UpdateRuleNamed(type)), type);
  }
  EXPECT_EQ(HistoryArrays(UpdateRule::kAdam), 2);
  EXPECT_EQ(HistoryArrays(UpdateRule::kAdaDelta), 2);
  EXPECT_EQ(HistoryArrays(UpdateRule::kSGD), 1);
  EXPECT_THROW(UpdateRuleNamed("Adamax"), ConfigError);
}

TEST(UpdateRuleTest, SettingsTheRuleRefusesNameTheField) {
  SolverParameter p = test::SolverTestParam("momentum: 0.9");
  try {
    CheckUpdateSettings(p, UpdateRule::kRMSProp);
    FAIL() << "RMSProp took momentum";
  } catch (const ConfigError& e) {
    EXPECT_NE(string(e.what()).find("momentum"), string::npos) << e.what();
  }
  p = test::SolverTestParam("rms_decay: 1.5");
  EXPECT_THROW(CheckUpdateSettings(p, UpdateRule::kRMSProp), ConfigError);
  EXPECT_NO_THROW(CheckUpdateSettings(p, UpdateRule::kSGD));
  p = test::SolverTestParam("lr_policy: 'cosine'");
  EXPECT_THROW(CheckUpdateSettings(p, UpdateRule::kSGD), ConfigError);
}

}  // namespace
}  // namespace poseidon
