// CPU/GPU agreement: runs one layer forward and backward on the CPU and on
// the GPU from the same bottoms, parameters and top diffs, and expects the
// tops, the bottom diffs and the parameter diffs to agree within a stated
// tolerance. Tests built on it carry "GPU" in their names and skip with the
// reason where no GPU is usable (test::GpuSkipReason()).
//
// Tolerance: |gpu - cpu| <= atol + rtol * |cpu| per element. The GPU sums in
// other orders (cuBLAS, cuDNN, parallel reductions) and its exp/log differ
// in the last bits, so exact equality is not expected; DefaultTolerance
// gives rtol 1e-4 / atol 1e-5 for float and rtol 1e-9 / atol 1e-11 for
// double.
#ifndef POSEIDON_TEST_GPU_AGREEMENT_HPP_
#define POSEIDON_TEST_GPU_AGREEMENT_HPP_

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/layer_factory.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace test {

struct Tolerance {
  double rtol;
  double atol;
};

template <typename Dtype>
Tolerance DefaultTolerance() {
  return sizeof(Dtype) == sizeof(float) ? Tolerance{1e-4, 1e-5}
                                        : Tolerance{1e-9, 1e-11};
}

// Expects a (GPU) and b (CPU), `count` elements, to agree; `what` names
// them in failures. Reports the first few differing elements.
template <typename Dtype>
void ExpectClose(const Dtype* gpu, const Dtype* cpu, int count,
                 const Tolerance& tol, const std::string& what) {
  int reported = 0;
  for (int i = 0; i < count; ++i) {
    const double g = gpu[i], c = cpu[i];
    const bool both_nan = std::isnan(g) && std::isnan(c);
    if (both_nan || std::fabs(g - c) <= tol.atol + tol.rtol * std::fabs(c)) {
      continue;
    }
    ADD_FAILURE() << what << "[" << i << "]: GPU " << g << " vs CPU " << c
                  << " (|diff| " << std::fabs(g - c) << " > " << tol.atol
                  << " + " << tol.rtol << " * |CPU|)";
    if (++reported == 5) {
      ADD_FAILURE() << what << ": further differences not shown";
      return;
    }
  }
}

// Runs `param`'s layer on both devices. `bottoms` are the inputs (their
// data is copied, never changed); `propagate_down` defaults to true for
// every bottom. Top diffs are Gaussian noise except on loss tops, which keep
// their loss weight. Does nothing but skip where no GPU is usable.
template <typename Dtype>
void ExpectCpuGpuAgree(const LayerParameter& param,
                       const vector<Blob<Dtype>*>& bottoms,
                       vector<bool> propagate_down = {},
                       Tolerance tol = DefaultTolerance<Dtype>()) {
  if (!GpuSkipReason().empty()) {
    GTEST_SKIP() << "GPU test skipped: " << GpuSkipReason();
  }
  if (propagate_down.empty()) propagate_down.assign(bottoms.size(), true);

  struct Run {
    std::shared_ptr<Layer<Dtype>> layer;
    vector<std::unique_ptr<Blob<Dtype>>> bottom, top;
    vector<Blob<Dtype>*> bottom_vec, top_vec;
  };
  auto make_run = [&](Run* run) {
    for (Blob<Dtype>* b : bottoms) {
      run->bottom.emplace_back(new Blob<Dtype>());
      run->bottom.back()->CopyFrom(*b, false, true);
      run->bottom_vec.push_back(run->bottom.back().get());
    }
    run->layer = LayerRegistry<Dtype>::CreateLayer(param);
    const int tops = std::max(1, param.top_size());
    for (int i = 0; i < tops; ++i) {
      run->top.emplace_back(new Blob<Dtype>());
      run->top_vec.push_back(run->top.back().get());
    }
    run->layer->SetUp(run->bottom_vec, run->top_vec);
  };

  // CPU run; its parameters and top diffs are reused on the GPU.
  Poseidon::set_mode(Poseidon::CPU);
  Run cpu;
  make_run(&cpu);
  vector<std::unique_ptr<Blob<Dtype>>> params;
  for (const auto& p : cpu.layer->blobs()) {
    params.emplace_back(new Blob<Dtype>());
    params.back()->CopyFrom(*p, false, true);
  }
  Poseidon::set_random_seed(1701);
  cpu.layer->Forward(cpu.bottom_vec, cpu.top_vec);
  vector<std::unique_ptr<Blob<Dtype>>> top_diffs;
  for (size_t i = 0; i < cpu.top_vec.size(); ++i) {
    top_diffs.emplace_back(new Blob<Dtype>(cpu.top_vec[i]->shape()));
    if (cpu.layer->loss(static_cast<int>(i)) != Dtype(0)) {
      top_diffs.back()->CopyFrom(*cpu.top_vec[i], true, false);
      cpu_copy(top_diffs.back()->count(), top_diffs.back()->cpu_diff(),
               top_diffs.back()->mutable_cpu_data());
    } else {
      FillGaussian(top_diffs.back().get());
      cpu_copy(cpu.top_vec[i]->count(), top_diffs.back()->cpu_data(),
               cpu.top_vec[i]->mutable_cpu_diff());
    }
  }
  for (const auto& p : cpu.layer->blobs()) {
    cpu_set(p->count(), Dtype(0), p->mutable_cpu_diff());
  }
  cpu.layer->Backward(cpu.top_vec, propagate_down, cpu.bottom_vec);

  // GPU run from the same inputs.
  Poseidon::set_mode(Poseidon::GPU);
  Run gpu;
  make_run(&gpu);
  ASSERT_EQ(gpu.layer->blobs().size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    gpu.layer->blobs()[i]->CopyFrom(*params[i], false, false);
    math::set<Dtype>(Poseidon::GPU, params[i]->count(), Dtype(0),
                     gpu.layer->blobs()[i]->mutable_gpu_diff());
  }
  Poseidon::set_random_seed(1701);
  gpu.layer->Forward(gpu.bottom_vec, gpu.top_vec);
  for (size_t i = 0; i < gpu.top_vec.size(); ++i) {
    ASSERT_EQ(gpu.top_vec[i]->shape(), cpu.top_vec[i]->shape())
        << param.type() << " top " << i;
    ExpectClose(gpu.top_vec[i]->cpu_data(), cpu.top_vec[i]->cpu_data(),
                cpu.top_vec[i]->count(), tol,
                StrCat(param.type(), " top ", i, " data"));
    cpu_copy(gpu.top_vec[i]->count(), top_diffs[i]->cpu_data(),
             gpu.top_vec[i]->mutable_cpu_diff());
  }
  gpu.layer->Backward(gpu.top_vec, propagate_down, gpu.bottom_vec);
  for (size_t i = 0; i < bottoms.size(); ++i) {
    if (!propagate_down[i]) continue;
    ExpectClose(gpu.bottom_vec[i]->cpu_diff(), cpu.bottom_vec[i]->cpu_diff(),
                cpu.bottom_vec[i]->count(), tol,
                StrCat(param.type(), " bottom ", i, " diff"));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    ExpectClose(gpu.layer->blobs()[i]->cpu_diff(),
                cpu.layer->blobs()[i]->cpu_diff(), params[i]->count(), tol,
                StrCat(param.type(), " param ", i, " diff"));
  }
  Poseidon::set_mode(Poseidon::CPU);
}

}  // namespace test
}  // namespace poseidon

#endif  // POSEIDON_TEST_GPU_AGREEMENT_HPP_
