// RowWeightGradConv: the weight gradient of float first layers with
// RowWeightGradient (util/row_weight_grad.hpp); the table gives the other
// passes to another algorithm.
#include <algorithm>
#include <cstring>
#include <memory>

#include "algorithms.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/parallel.hpp"
#include "poseidon/util/status.hpp"
#include "poseidon/util/thread_scratch.hpp"

namespace poseidon {

// Note [Row weight-gradient path]
// For float 2-D convolutions (any stride, pad and dilation; not
// force_nd_im2col) with at most kRowMaxChannels input channels and
// kRowMaxPairs (channel, tap) pairs per group, on a CPU where the AVX-512
// or the AVX2 kernels run (Note [Row weight gradient on AVX2]; the limits
// are the AVX-512 measurements'), the table gives the weight gradient to
// RowWeightGradConv, which computes it with RowWeightGradient (Note [Row
// weight gradient] in util/row_weight_grad.cpp), whatever path runs the
// forward pass and the input gradient. These are the first layers of image nets, whose input gradient is
// usually not needed (the bottom is the data), so their backward pass is this
// gradient alone. The limits as measured (poseidon_train time, 2 threads): with
// 32 channels (CIFAR-10 quick's conv2 and conv3, 8 x 8 to 16 x 16 maps) the row
// gradient made the backward pass 1.5 and 4 ms slower than the direct path's;
// with 363 pairs (AlexNet's conv1) it was slower than im2col + GEMM. The
// gradient splits the padded image into stride_w column phases; with a stride
// wider than the padded row, the phases past it hold only padding (stride
// 1000000000 on an 8-pixel row: a billion of them), so such a geometry takes
// the im2col path instead. Threads: with at least as many images as threads,
// the images are split over the workers, each summing into its own zeroed copy
// of the gradient, added to weight_diff in worker order (the same result on
// every run with the same thread count); with fewer images, blocks of 4 outputs
// are split instead, each worker adding to its own rows.
namespace {

// The most input channels per group for which kAuto takes the row weight
// gradient (Note [Row weight-gradient path]).
constexpr int kRowMaxChannels = 4;
// ... and the most (channel, tap) pairs per group.
constexpr int kRowMaxPairs = 256;

// Floats rounded up to whole 64-byte lines, so scratch slices stay aligned.
size_t Lines(size_t floats) { return (floats + 15) / 16 * 16; }

}  // namespace

const char* RowWeightGradConv::Reshape(const ConvShape& s,
                                       const ConvOptions& options) {
  s_ = &s;
  if (const char* why_not = WhyNotFast2D(s, options)) return why_not;
  if (s.in_channels / s.group > kRowMaxChannels) {
    return "more than 4 input channels per group";
  }
  if (s.kernel_dim > kRowMaxPairs) {
    return "more than 256 (channel, tap) pairs per group";
  }
  if (!Avx512KernelsAvailable() && !Avx2KernelsAvailable()) {
    return "neither AVX-512 nor AVX2 kernels";
  }
  if (s.stride[1] > s.input_shape[2] + 2 * s.pad[1]) {
    return "a stride wider than the padded row";
  }
  auto g = KernelGeometry<RowWeightGradient::Geometry>(s);
  g.stride_h = s.stride[0];
  g.stride_w = s.stride[1];
  if (plan_ == nullptr || std::memcmp(&plan_->geometry(), &g, sizeof(g)) != 0) {
    plan_ = std::make_unique<RowWeightGradient>(g);
  }
  if (!plan_->supported() || plan_->output_h() != s.col_shape[1] ||
      plan_->output_w() != s.col_shape[2]) {
    return "RowWeightGradient does not take this geometry";
  }
  return nullptr;
}

std::string RowWeightGradConv::Description() const {
  return StrCat("weight gradient by rows (", s_->in_channels / s_->group,
                " input channels)");
}

void RowWeightGradConv::Forward(Poseidon::Brew, const float*, const float*,
                                float*) {
  LOG(FATAL) << "the row weight gradient has no forward pass";
}

void RowWeightGradConv::Backward(Poseidon::Brew, const float* input,
                                 const float* output_diff, const float*,
                                 float* weight_diff, float* input_diff) {
  CHECK(input_diff == nullptr)
      << "the row weight gradient has no input gradient";
  if (weight_diff == nullptr) return;
  const ConvShape& s = *s_;
  const RowWeightGradient& plan = *plan_;
  const int outputs = s.out_channels / s.group;
  const size_t w_step = static_cast<size_t>(outputs) * s.kernel_dim;
  const size_t w_count = w_step * s.group;
  const size_t in_step = static_cast<size_t>(s.input_dim / s.group);
  const size_t out_step = static_cast<size_t>(s.output_dim / s.group);
  // Images n0 to n1, outputs o0 to o1 of every group, onto dw.
  auto accumulate = [&](int n0, int n1, int o0, int o1, float* dw,
                        float* scratch) {
    for (int g = 0; g < s.group; ++g) {
      plan.Accumulate(
          n1 - n0, input + static_cast<size_t>(n0) * s.input_dim + g * in_step,
          s.input_dim,
          output_diff + static_cast<size_t>(n0) * s.output_dim + g * out_step,
          s.output_dim, o0, o1, dw + g * w_step, scratch);
    }
  };
  if (s.num >= Poseidon::num_threads()) {
    const int workers = ParallelForWorkers(s.num);
    if (workers <= 1) {
      float* scratch = static_cast<float*>(
          ThreadScratch(plan.scratch_size(outputs) * sizeof(float)));
      accumulate(0, s.num, 0, outputs, weight_diff, scratch);
      return;
    }
    // Per worker: the kernel's scratch, then a copy of the gradient.
    const size_t slice = Lines(plan.scratch_size(outputs)) + Lines(w_count);
    float* base = static_cast<float*>(
        ThreadScratch(slice * static_cast<size_t>(workers) * sizeof(float)));
    ParallelFor(s.num, [&](int begin, int end, int w) {
      float* scratch = base + slice * w;
      float* dw = scratch + Lines(plan.scratch_size(outputs));
      std::fill(dw, dw + w_count, 0.0f);
      accumulate(begin, end, 0, outputs, dw, scratch);
    });
    for (int w = 0; w < workers; ++w) {
      cpu_axpy(static_cast<int>(w_count), 1.0f,
               base + slice * w + Lines(plan.scratch_size(outputs)),
               weight_diff);
    }
    return;
  }
  const int blocks = (outputs + 3) / 4;
  const int workers = std::max(ParallelForWorkers(blocks), 1);
  const size_t slice = Lines(plan.scratch_size(outputs));
  float* base = static_cast<float*>(
      ThreadScratch(slice * static_cast<size_t>(workers) * sizeof(float)));
  auto run = [&](int begin, int end, int w) {
    accumulate(0, s.num, begin * 4, std::min(end * 4, outputs), weight_diff,
               base + slice * w);
  };
  if (workers <= 1) {
    run(0, blocks, 0);
  } else {
    ParallelFor(blocks, run);
  }
}

}  // namespace poseidon
