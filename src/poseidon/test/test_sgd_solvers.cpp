// The update rules (SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam) against
// an independent reference written element by element from the published
// formulas, the learning-rate policies against their closed forms, and
// iter_size against a larger batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/sgd_solvers.hpp"
#include "poseidon/solver_factory.hpp"
#include "solver_test_util.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using std::vector;

// The settings of one reference run.
struct UpdateConfig {
  string type;
  double base_lr = 0.1;
  double momentum = 0;
  double momentum2 = 0.999;
  double rms_decay = 0.99;
  double delta = 1e-8;
  double weight_decay = 0;
  string regularization = "L2";
  double clip = -1;
  int iter_size = 1;
};

string ToSolverText(const UpdateConfig& c) {
  return StrCat("type: '", c.type, "' base_lr: ", c.base_lr,
                " lr_policy: 'inv' gamma: 0.1 power: 0.75",
                " momentum: ", c.momentum, " momentum2: ", c.momentum2,
                " rms_decay: ", c.rms_decay, " delta: ", c.delta,
                " weight_decay: ", c.weight_decay, " regularization_type: '",
                c.regularization, "' clip_gradients: ", c.clip,
                " iter_size: ", c.iter_size);
}

// The solver's settings as the float fields of SolverParameter hold them, so
// the reference starts from the same numbers.
UpdateConfig AsStored(const UpdateConfig& c, const SolverParameter& p) {
  UpdateConfig s = c;
  s.base_lr = p.base_lr();
  s.momentum = p.momentum();
  s.momentum2 = p.momentum2();
  s.rms_decay = p.rms_decay();
  s.delta = p.delta();
  s.weight_decay = p.weight_decay();
  s.clip = p.clip_gradients();
  return s;
}

// One reference step for every parameter. w and g are the weights and the
// accumulated (un-normalised) gradients; h1/h2 the rule's state. Returns
// whether clipping fired.
bool ReferenceStep(const UpdateConfig& c, const SolverParameter& p, int iter,
                   const vector<vector<double>>& w, vector<vector<double>> g,
                   vector<vector<double>>* h1, vector<vector<double>>* h2,
                   vector<vector<double>>* w_new) {
  const double rate =
      double(p.base_lr()) *
      std::pow(1.0 + double(p.gamma()) * iter, -double(p.power()));
  bool clipped = false;
  if (c.clip >= 0) {
    double sumsq = 0;
    for (const auto& gp : g) {
      for (double v : gp) sumsq += v * v;
    }
    const double norm = std::sqrt(sumsq);
    if (norm > c.clip) {
      clipped = true;
      for (auto& gp : g) {
        for (double& v : gp) v *= c.clip / norm;
      }
    }
  }
  *w_new = w;
  for (size_t k = 0; k < w.size(); ++k) {
    const double r = rate * test::kSolverLrMult[k];
    const double decay = c.weight_decay * test::kSolverDecayMult[k];
    for (size_t i = 0; i < w[k].size(); ++i) {
      double gi = g[k][i] / c.iter_size;
      const double sign = (w[k][i] > 0) - (w[k][i] < 0);
      gi += decay * (c.regularization == "L2" ? w[k][i] : sign);
      double& a = (*h1)[k][i];
      double& b = (*h2)[k][i];
      double step = 0;
      if (c.type == "SGD") {
        a = c.momentum * a + r * gi;
        step = a;
      } else if (c.type == "Nesterov") {
        const double old = a;
        a = c.momentum * a + r * gi;
        step = (1 + c.momentum) * a - c.momentum * old;
      } else if (c.type == "AdaGrad") {
        a += gi * gi;
        step = r * gi / (std::sqrt(a) + c.delta);
      } else if (c.type == "RMSProp") {
        a = c.rms_decay * a + (1 - c.rms_decay) * gi * gi;
        step = r * gi / (std::sqrt(a) + c.delta);
      } else if (c.type == "AdaDelta") {
        a = c.momentum * a + (1 - c.momentum) * gi * gi;
        const double u = gi * std::sqrt((b + c.delta) / (a + c.delta));
        b = c.momentum * b + (1 - c.momentum) * u * u;
        step = r * u;
      } else if (c.type == "Adam") {
        const int t = iter + 1;
        a = c.momentum * a + (1 - c.momentum) * gi;
        b = c.momentum2 * b + (1 - c.momentum2) * gi * gi;
        step = r * std::sqrt(1 - std::pow(c.momentum2, t)) /
               (1 - std::pow(c.momentum, t)) * a / (std::sqrt(b) + c.delta);
      } else {
        ADD_FAILURE() << "no reference for " << c.type;
      }
      (*w_new)[k][i] -= step;
    }
  }
  return clipped;
}

template <typename Dtype>
vector<vector<double>> ToDouble(const vector<vector<Dtype>>& v) {
  vector<vector<double>> out;
  for (const auto& row : v) out.emplace_back(row.begin(), row.end());
  return out;
}

template <typename Dtype>
double Tolerance(double expected) {
  const double rel = sizeof(Dtype) == 4 ? 3e-5 : 1e-10;
  return rel * std::max(1.0, std::fabs(expected));
}

template <typename TypeParam>
class SGDSolversTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  // Runs `iters` iterations of the solver and of the reference side by
  // side, comparing weights and history after each.
  void CheckAgainstReference(const UpdateConfig& config, int iters = 3) {
    const SolverParameter param = test::SolverTestParam(ToSolverText(config));
    const UpdateConfig c = AsStored(config, param);
    std::unique_ptr<Solver<Dtype>> solver = CreateSolver<Dtype>(param);
    ASSERT_EQ(string(solver->type()), config.type);
    auto* sgd = dynamic_cast<SGDSolver<Dtype>*>(solver.get());
    ASSERT_NE(sgd, nullptr);
    Net<Dtype>* net = solver->net().get();
    test::FillSolverTestInputs(net);
    ASSERT_EQ(net->learnable_params().size(), 4u);

    vector<vector<double>> h1, h2;
    for (const Blob<Dtype>* blob : net->learnable_params()) {
      h1.emplace_back(blob->count(), 0.0);
      h2.emplace_back(blob->count(), 0.0);
    }
    bool any_clipped = false;
    for (int iter = 0; iter < iters; ++iter) {
      // The gradient the solver is about to see, accumulated as it will be.
      net->ClearParamDiffs();
      for (int i = 0; i < c.iter_size; ++i) net->ForwardBackward();
      const auto w = ToDouble(test::LearnableValues(*net));
      const auto g = ToDouble(test::LearnableDiffs(*net));
      vector<vector<double>> expected;
      any_clipped |= ReferenceStep(c, param, iter, w, g, &h1, &h2, &expected);

      solver->Step(1);
      ASSERT_EQ(solver->iter(), iter + 1);
      const auto actual = test::LearnableValues(*net);
      for (size_t k = 0; k < expected.size(); ++k) {
        for (size_t i = 0; i < expected[k].size(); ++i) {
          ASSERT_NEAR(actual[k][i], expected[k][i],
                      Tolerance<Dtype>(expected[k][i]))
              << c.type << " iteration " << iter << ", param " << k
              << ", element " << i;
        }
      }
      // The state layout matters for .solverstate compatibility.
      const bool two = c.type == "AdaDelta" || c.type == "Adam";
      ASSERT_EQ(sgd->history().size(), (two ? 2 : 1) * h1.size());
      for (size_t k = 0; k < h1.size(); ++k) {
        for (size_t i = 0; i < h1[k].size(); ++i) {
          ASSERT_NEAR(sgd->history()[k]->cpu_data()[i], h1[k][i],
                      Tolerance<Dtype>(h1[k][i]))
              << c.type << " history, iteration " << iter;
          if (two) {
            ASSERT_NEAR(sgd->history()[h1.size() + k]->cpu_data()[i], h2[k][i],
                        Tolerance<Dtype>(h2[k][i]))
                << c.type << " second history, iteration " << iter;
          }
        }
      }
    }
    if (c.clip >= 0) {
      EXPECT_TRUE(any_clipped) << "clip_gradients " << c.clip
                               << " never fired; the test is too weak";
    }
  }

  // L2 decay and the rule's own settings.
  void CheckPlain(UpdateConfig c) {
    c.weight_decay = 0.05;
    CheckAgainstReference(c);
  }

  // L1 decay, gradient clipping and two accumulated passes.
  void CheckClippedL1IterSize(UpdateConfig c) {
    c.weight_decay = 0.02;
    c.regularization = "L1";
    c.clip = 0.05;
    c.iter_size = 2;
    CheckAgainstReference(c);
  }
};

TYPED_TEST_SUITE(SGDSolversTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

UpdateConfig Config(const string& type) {
  UpdateConfig c;
  c.type = type;
  if (type == "SGD" || type == "Nesterov") c.momentum = 0.9;
  if (type == "RMSProp") c.rms_decay = 0.9;
  if (type == "AdaDelta") {
    c.base_lr = 1.0;
    c.momentum = 0.95;
    c.delta = 1e-6;
  }
  if (type == "Adam") {
    c.base_lr = 0.01;
    c.momentum = 0.9;
  }
  return c;
}

TYPED_TEST(SGDSolversTest, SGD) { this->CheckPlain(Config("SGD")); }
TYPED_TEST(SGDSolversTest, SGDClipL1IterSize) {
  this->CheckClippedL1IterSize(Config("SGD"));
}
TYPED_TEST(SGDSolversTest, SGDWithoutMomentum) {
  UpdateConfig c = Config("SGD");
  c.momentum = 0;
  this->CheckPlain(c);
}
TYPED_TEST(SGDSolversTest, Nesterov) { this->CheckPlain(Config("Nesterov")); }
TYPED_TEST(SGDSolversTest, NesterovClipL1IterSize) {
  this->CheckClippedL1IterSize(Config("Nesterov"));
}
TYPED_TEST(SGDSolversTest, AdaGrad) { this->CheckPlain(Config("AdaGrad")); }
TYPED_TEST(SGDSolversTest, AdaGradClipL1IterSize) {
  this->CheckClippedL1IterSize(Config("AdaGrad"));
}
TYPED_TEST(SGDSolversTest, RMSProp) { this->CheckPlain(Config("RMSProp")); }
TYPED_TEST(SGDSolversTest, RMSPropClipL1IterSize) {
  this->CheckClippedL1IterSize(Config("RMSProp"));
}
TYPED_TEST(SGDSolversTest, AdaDelta) { this->CheckPlain(Config("AdaDelta")); }
TYPED_TEST(SGDSolversTest, AdaDeltaClipL1IterSize) {
  this->CheckClippedL1IterSize(Config("AdaDelta"));
}
TYPED_TEST(SGDSolversTest, Adam) { this->CheckPlain(Config("Adam")); }
TYPED_TEST(SGDSolversTest, AdamClipL1IterSize) {
  this->CheckClippedL1IterSize(Config("Adam"));
}

// iter_size 2 over batches of K equals iter_size 1 over the 2K samples.
template <typename Dtype>
vector<vector<Dtype>> TrainWithIterSize(const string& type, int batch,
                                        int iter_size, int iters) {
  const UpdateConfig base = Config(type);
  SolverParameter param = test::SolverTestParam(
      StrCat("type: '", type, "' base_lr: ", base.base_lr, " momentum: ",
             base.momentum, " weight_decay: 0.01", " iter_size: ", iter_size),
      batch);
  std::unique_ptr<Solver<Dtype>> solver = CreateSolver<Dtype>(param);
  Net<Dtype>* net = solver->net().get();
  const int ip1 = net->layer_index("ip1");
  int pass = 0;
  // Each pass of an iteration sees the next slice of the same 2K samples.
  net->add_before_forward([net, ip1, batch, iter_size, &pass](int layer) {
    if (layer != ip1) return;
    test::FillSolverTestInputs(net, (pass % iter_size) * batch);
    ++pass;
  }).Detach();
  solver->Step(iters);
  EXPECT_EQ(pass, iters * iter_size);
  return test::LearnableValues(*net);
}

template <typename Dtype>
void ExpectIterSizeEquivalence(const string& type) {
  const auto accumulated = TrainWithIterSize<Dtype>(type, 3, 2, 3);
  const auto big_batch = TrainWithIterSize<Dtype>(type, 6, 1, 3);
  ASSERT_EQ(accumulated.size(), big_batch.size());
  for (size_t k = 0; k < accumulated.size(); ++k) {
    for (size_t i = 0; i < accumulated[k].size(); ++i) {
      EXPECT_NEAR(accumulated[k][i], big_batch[k][i], 1e-5)
          << type << " param " << k << " element " << i;
    }
  }
}

TYPED_TEST(SGDSolversTest, IterSizeMatchesLargerBatch) {
  using Dtype = typename TypeParam::Dtype;
  for (const char* type :
       {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"}) {
    ExpectIterSizeEquivalence<Dtype>(type);
  }
}

// Exposes the schedule at chosen iterations.
template <typename Dtype>
class LrProbe : public SGDSolver<Dtype> {
 public:
  using SGDSolver<Dtype>::SGDSolver;
  Dtype RateAt(int iter) {
    this->iter_ = iter;
    return this->GetLearningRate();
  }
};

template <typename Dtype>
void ExpectSchedule(
    const string& settings,
    const std::function<double(const SolverParameter&, int)>& formula,
    int last_iter = 30) {
  const SolverParameter param = test::SolverTestParam(settings);
  LrProbe<Dtype> probe(param);
  // In order, as training calls it (multistep advances one step per call).
  for (int iter = 0; iter <= last_iter; ++iter) {
    const double expected = formula(param, iter);
    EXPECT_NEAR(probe.RateAt(iter), expected,
                2e-6 * std::max(1e-3, std::fabs(expected)))
        << settings << " at iteration " << iter;
  }
}

TYPED_TEST(SGDSolversTest, LearningRatePolicies) {
  using Dtype = typename TypeParam::Dtype;
  using P = const SolverParameter&;
  ExpectSchedule<Dtype>("lr_policy: 'fixed' base_lr: 0.25",
                        [](P p, int) { return double(p.base_lr()); });
  ExpectSchedule<Dtype>(
      "lr_policy: 'step' base_lr: 0.1 gamma: 0.5 stepsize: 7", [](P p, int it) {
        return double(p.base_lr()) * std::pow(double(p.gamma()), it / 7);
      });
  ExpectSchedule<Dtype>(
      "lr_policy: 'exp' base_lr: 0.1 gamma: 0.9", [](P p, int it) {
        return double(p.base_lr()) * std::pow(double(p.gamma()), it);
      });
  ExpectSchedule<Dtype>(
      "lr_policy: 'inv' base_lr: 0.1 gamma: 0.1 power: 0.75", [](P p, int it) {
        return double(p.base_lr()) *
               std::pow(1 + double(p.gamma()) * it, -double(p.power()));
      });
  ExpectSchedule<Dtype>(
      "lr_policy: 'multistep' base_lr: 0.1 gamma: 0.1 stepvalue: 2 "
      "stepvalue: 5 stepvalue: 6 stepvalue: 20",
      [](P p, int it) {
        int steps = 0;
        for (int v : p.stepvalue()) steps += it >= v;
        return double(p.base_lr()) * std::pow(double(p.gamma()), steps);
      });
  ExpectSchedule<Dtype>(
      "lr_policy: 'poly' base_lr: 0.1 power: 2 max_iter: 30", [](P p, int it) {
        return double(p.base_lr()) *
               std::pow(1.0 - double(it) / p.max_iter(), double(p.power()));
      });
  ExpectSchedule<Dtype>(
      "lr_policy: 'sigmoid' base_lr: 0.1 gamma: -0.5 stepsize: 10",
      [](P p, int it) {
        return double(p.base_lr()) /
               (1 + std::exp(-double(p.gamma()) * (it - p.stepsize())));
      });
}

TYPED_TEST(SGDSolversTest, ScheduleErrors) {
  using Dtype = typename TypeParam::Dtype;
  EXPECT_THROW(SGDSolver<Dtype>(test::SolverTestParam("lr_policy: 'cosine'")),
               ConfigError);
  EXPECT_THROW(SGDSolver<Dtype>(test::SolverTestParam("lr_policy: 'step'")),
               ConfigError);
  EXPECT_THROW(SGDSolver<Dtype>(test::SolverTestParam("lr_policy: 'poly'")),
               ConfigError);
  EXPECT_THROW(SGDSolver<Dtype>(test::SolverTestParam(
                   "lr_policy: 'multistep' stepvalue: 5 stepvalue: 3")),
               ConfigError);
  EXPECT_THROW(
      SGDSolver<Dtype>(test::SolverTestParam("regularization_type: 'L3'")),
      ConfigError);
  EXPECT_THROW(AdaGradSolver<Dtype>(test::SolverTestParam("momentum: 0.9")),
               ConfigError);
  EXPECT_THROW(RMSPropSolver<Dtype>(test::SolverTestParam("momentum: 0.9")),
               ConfigError);
  EXPECT_THROW(RMSPropSolver<Dtype>(test::SolverTestParam("rms_decay: 1")),
               ConfigError);
}

}  // namespace
}  // namespace poseidon
