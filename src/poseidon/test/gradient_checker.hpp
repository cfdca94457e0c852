// Finite-difference gradient checking for layers.
//
// The checked objective is a random projection of the tops,
//   L = sum_t sum_i w_{t,i} * top_t[i],   w ~ N(0, 1) with a fixed seed,
// so the analytic gradient is Backward with top diffs set to w, and the
// numeric one is the central difference (L(x+h) - L(x-h)) / 2h for every
// element x of the checked bottoms and of the layer's parameter blobs. The
// layer's RNG is reseeded before each forward, so stochastic layers (Dropout)
// see the same mask in every evaluation. Elements within kink_range of a kink
// (e.g. 0 for ReLU) are skipped, as the function is not differentiable there.
#ifndef POSEIDON_TEST_GRADIENT_CHECKER_HPP_
#define POSEIDON_TEST_GRADIENT_CHECKER_HPP_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {
namespace test {

template <typename Dtype>
class GradientChecker {
 public:
  GradientChecker(Dtype stepsize, Dtype threshold, Dtype kink = 0,
                  Dtype kink_range = -1)
      : stepsize_(stepsize),
        threshold_(threshold),
        kink_(kink),
        kink_range_(kink_range) {}

  // Sets the layer up, then checks the gradient with respect to
  // bottom[check_bottom] (all bottoms if -1, none if -2) and every parameter
  // blob. Failures name the blob, element index, and both values.
  void CheckGradient(Layer<Dtype>* layer, const vector<Blob<Dtype>*>& bottom,
                     const vector<Blob<Dtype>*>& top, int check_bottom = -1) {
    layer->SetUp(bottom, top);
    CheckGradientAfterSetUp(layer, bottom, top, check_bottom);
  }

  void CheckGradientAfterSetUp(Layer<Dtype>* layer,
                               const vector<Blob<Dtype>*>& bottom,
                               const vector<Blob<Dtype>*>& top,
                               int check_bottom) {
    // Blobs to check: the selected bottoms, then the parameters.
    vector<Blob<Dtype>*> checked;
    vector<std::string> names;
    vector<bool> propagate_down(bottom.size(), false);
    for (size_t i = 0; i < bottom.size(); ++i) {
      if (check_bottom == -1 || check_bottom == static_cast<int>(i)) {
        checked.push_back(bottom[i]);
        names.push_back("bottom[" + std::to_string(i) + "]");
        propagate_down[i] = true;
      }
    }
    for (size_t i = 0; i < layer->blobs().size(); ++i) {
      if (!layer->param_propagate_down(static_cast<int>(i))) continue;
      checked.push_back(layer->blobs()[i].get());
      names.push_back("param[" + std::to_string(i) + "]");
    }

    // Analytic gradients.
    Forward(layer, bottom, top);
    vector<vector<Dtype>> weights = ProjectionWeights(top);
    for (size_t t = 0; t < top.size(); ++t) {
      std::copy(weights[t].begin(), weights[t].end(),
                top[t]->mutable_cpu_diff());
    }
    for (auto& p : layer->blobs()) {
      cpu_set(p->count(), Dtype(0), p->mutable_cpu_diff());
    }
    layer->Backward(top, propagate_down, bottom);
    vector<vector<Dtype>> analytic(checked.size());
    for (size_t b = 0; b < checked.size(); ++b) {
      analytic[b].assign(checked[b]->cpu_diff(),
                         checked[b]->cpu_diff() + checked[b]->count());
    }

    // Numeric gradients, one element at a time.
    for (size_t b = 0; b < checked.size(); ++b) {
      Blob<Dtype>* blob = checked[b];
      for (int i = 0; i < blob->count(); ++i) {
        const Dtype x = blob->cpu_data()[i];
        if (kink_range_ > 0 && std::fabs(x - kink_) < kink_range_) continue;
        blob->mutable_cpu_data()[i] = x + stepsize_;
        const Dtype plus = Objective(layer, bottom, top, weights);
        blob->mutable_cpu_data()[i] = x - stepsize_;
        const Dtype minus = Objective(layer, bottom, top, weights);
        blob->mutable_cpu_data()[i] = x;
        const Dtype numeric = (plus - minus) / (2 * stepsize_);
        const Dtype a = analytic[b][i];
        const Dtype scale =
            std::max<Dtype>(std::max(std::fabs(a), std::fabs(numeric)), 1);
        EXPECT_NEAR(a, numeric, threshold_ * scale)
            << layer->type() << " " << names[b] << " element " << i
            << " of shape " << blob->shape_string() << ": analytic " << a
            << ", numeric " << numeric;
      }
    }
  }

 private:
  void Forward(Layer<Dtype>* layer, const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) {
    Poseidon::set_random_seed(kSeed);
    layer->Forward(bottom, top);
  }

  Dtype Objective(Layer<Dtype>* layer, const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top,
                  const vector<vector<Dtype>>& weights) {
    Forward(layer, bottom, top);
    double sum = 0;
    for (size_t t = 0; t < top.size(); ++t) {
      const Dtype* data = top[t]->cpu_data();
      for (int i = 0; i < top[t]->count(); ++i) sum += weights[t][i] * data[i];
    }
    return static_cast<Dtype>(sum);
  }

  static vector<vector<Dtype>> ProjectionWeights(
      const vector<Blob<Dtype>*>& top) {
    std::mt19937 gen(4242);
    std::normal_distribution<double> dist(0, 1);
    vector<vector<Dtype>> w(top.size());
    for (size_t t = 0; t < top.size(); ++t) {
      w[t].resize(top[t]->count());
      for (auto& v : w[t]) v = static_cast<Dtype>(dist(gen));
    }
    return w;
  }

  static constexpr int64_t kSeed = 1701;
  Dtype stepsize_;
  Dtype threshold_;
  Dtype kink_;
  Dtype kink_range_;
};

}  // namespace test
}  // namespace poseidon

#endif  // POSEIDON_TEST_GRADIENT_CHECKER_HPP_
