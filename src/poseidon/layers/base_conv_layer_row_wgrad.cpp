// BaseConvolutionLayer's row weight gradient: choosing it, and the weight
// gradient with RowWeightGradient (util/row_weight_grad.hpp).
#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>

#include "poseidon/layers/base_conv_layer.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/parallel.hpp"
#include "poseidon/util/thread_scratch.hpp"

namespace poseidon {

// Note [Row weight-gradient path]
// For float 2-D convolutions (any stride, pad and dilation; not
// force_nd_im2col) with at most kRowMaxChannels input channels and
// kRowMaxPairs (channel, tap) pairs per group, on a CPU where the AVX-512
// kernels run, kAuto computes the weight gradient with RowWeightGradient
// (Note [Row weight gradient] in util/row_weight_grad.cpp), whatever path
// runs the forward pass and the input gradient. These are the first layers
// of image nets, whose input gradient is usually not needed (the bottom is
// the data), so their backward pass is this gradient alone. The limits as
// measured (poseidon_train time, 2 threads): with 32 channels (CIFAR-10
// quick's conv2 and conv3, 8 x 8 to 16 x 16 maps) the row gradient made
// the backward pass 1.5 and 4 ms slower than the direct path's; with 363
// pairs (AlexNet's conv1) it was slower than im2col + GEMM.
// The gradient splits the padded image into stride_w column phases; with a
// stride wider than the padded row, the phases past it hold only padding
// (stride 1000000000 on an 8-pixel row: a billion of them), so such a
// geometry takes the im2col path instead.
// Threads: with at least as many images as threads, the images are split
// over the workers, each summing into its own zeroed copy of the gradient,
// added to weight_diff in worker order (the same result on every run with
// the same thread count); with fewer images, blocks of 4 outputs are split
// instead, each worker adding to its own rows.
namespace {

// The most input channels per group for which kAuto takes the row weight
// gradient (Note [Row weight-gradient path]).
constexpr int kRowMaxChannels = 4;
// ... and the most (channel, tap) pairs per group.
constexpr int kRowMaxPairs = 256;

// Floats rounded up to whole 64-byte lines, so scratch slices stay aligned.
size_t Lines(size_t floats) { return (floats + 15) / 16 * 16; }

}  // namespace

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::ChooseRowWeightGrad() {
  row_weight_grad_ = false;
  if (!std::is_same<Dtype, float>::value || algorithm_ != Algorithm::kAuto ||
      num_spatial_axes_ != 2 || force_nd_im2col_ ||
      conv_in_channels_ / group_ > kRowMaxChannels ||
      kernel_dim_ > kRowMaxPairs || !Avx512KernelsAvailable() ||
      stride_[1] > conv_input_shape_[2] + 2 * pad_[1]) {
    return;
  }
  RowWeightGradient::Geometry g;
  g.channels = conv_in_channels_ / group_;
  g.height = conv_input_shape_[1];
  g.width = conv_input_shape_[2];
  g.outputs = conv_out_channels_ / group_;
  g.kernel_h = kernel_shape_[0];
  g.kernel_w = kernel_shape_[1];
  g.pad_h = pad_[0];
  g.pad_w = pad_[1];
  g.stride_h = stride_[0];
  g.stride_w = stride_[1];
  g.dilation_h = dilation_[0];
  g.dilation_w = dilation_[1];
  const auto& plan = row_weight_grad_plan_;
  if (plan == nullptr || std::memcmp(&plan->geometry(), &g, sizeof(g)) != 0) {
    row_weight_grad_plan_ = std::make_unique<RowWeightGradient>(g);
  }
  row_weight_grad_ = row_weight_grad_plan_->supported() &&
                     row_weight_grad_plan_->output_h() == col_shape_[1] &&
                     row_weight_grad_plan_->output_w() == col_shape_[2];
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::BackwardWeightsRows(const float* input,
                                                      const float* output_diff,
                                                      float* weight_diff) {
  const RowWeightGradient& plan = *row_weight_grad_plan_;
  const int outputs = conv_out_channels_ / group_;
  const size_t w_step = static_cast<size_t>(outputs) * kernel_dim_;
  const size_t w_count = w_step * group_;
  const size_t in_step = static_cast<size_t>(conv_input_dim_ / group_);
  const size_t out_step = static_cast<size_t>(conv_output_dim_ / group_);
  // Images n0 to n1, outputs o0 to o1 of every group, onto dw.
  auto accumulate = [&](int n0, int n1, int o0, int o1, float* dw,
                        float* scratch) {
    for (int g = 0; g < group_; ++g) {
      plan.Accumulate(
          n1 - n0,
          input + static_cast<size_t>(n0) * conv_input_dim_ + g * in_step,
          conv_input_dim_,
          output_diff + static_cast<size_t>(n0) * conv_output_dim_ +
              g * out_step,
          conv_output_dim_, o0, o1, dw + g * w_step, scratch);
    }
  };
  if (num_ >= Poseidon::num_threads()) {
    const int workers = ParallelForWorkers(num_);
    if (workers <= 1) {
      float* scratch = static_cast<float*>(
          ThreadScratch(plan.scratch_size(outputs) * sizeof(float)));
      accumulate(0, num_, 0, outputs, weight_diff, scratch);
      return;
    }
    // Per worker: the kernel's scratch, then a copy of the gradient.
    const size_t slice = Lines(plan.scratch_size(outputs)) + Lines(w_count);
    float* base = static_cast<float*>(
        ThreadScratch(slice * static_cast<size_t>(workers) * sizeof(float)));
    ParallelFor(num_, [&](int begin, int end, int w) {
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
    accumulate(0, num_, begin * 4, std::min(end * 4, outputs), weight_diff,
               base + slice * w);
  };
  if (workers <= 1) {
    run(0, blocks, 0);
  } else {
    ParallelFor(blocks, run);
  }
}

// The rest of the class is instantiated in base_conv_layer.cpp.
#define POSEIDON_INSTANTIATE_ROW_WGRAD(Dtype)                       \
  template void BaseConvolutionLayer<Dtype>::ChooseRowWeightGrad(); \
  template void BaseConvolutionLayer<Dtype>::BackwardWeightsRows(   \
      const float*, const float*, float*);
POSEIDON_INSTANTIATE_ROW_WGRAD(float)
POSEIDON_INSTANTIATE_ROW_WGRAD(double)
#undef POSEIDON_INSTANTIATE_ROW_WGRAD

}  // namespace poseidon
