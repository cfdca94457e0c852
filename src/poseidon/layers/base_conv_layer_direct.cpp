// BaseConvolutionLayer's direct path: choosing it, and the convolution and
// its gradients with DirectConv (util/direct_conv.hpp).
#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>

#include "poseidon/layers/base_conv_layer.hpp"
#include "poseidon/util/parallel.hpp"

namespace poseidon {

// Note [Direct path]
// For float, 2-D (not force_nd_im2col), unit stride, on a CPU with AVX-512
// or AVX2 (util/direct_conv.hpp), kAuto skips im2col altogether: DirectConv
// reads the column vectors straight from the image, which on CIFAR-10
// quick's 5x5 layers is about twice as fast as im2col + OpenBLAS on
// AVX-512 (the column matrix of a 32-channel 5x5 layer is 25 times the
// image; writing and re-reading it cost as much as the multiplications),
// and on an AVX2 EPYC, whose 512 KiB L2 that matrix overflows, made the
// net's forward-backward 1.3 times as fast as im2col + the AVX2 GEMM (142
// -> 110 ms on 1 thread, 76 -> 59 ms on 2; docs/performance.md). The
// thresholds below were measured on AVX-512 and are kept for AVX2.
// Forward: the weights of each group are packed once per call, then images
// run independently on ParallelFor. Backward: the weight gradient accumulates per worker and
// is added in worker order, as in Note [Parallel chunks]; the input
// gradient is the direct convolution of the top diff with the kernel
// flipped and the channel axes swapped (pad dilation * (kernel - 1) - pad,
// so it needs pad <= dilation * (kernel - 1)). The per-image and batched
// paths stay the reference (kPerImage, kBatched) and serve double, strided
// and N-D convolutions, and CPUs with neither.
// kAuto takes the direct path only where it measured faster:
//  - the input gradient only for "same" convolutions, output as large as
//    the input: a smaller output (LeNet's unpadded 5x5 layers) makes it, as
//    a convolution over the zero-padded top diff, do (H W) / (OH OW) times
//    the useful work (2.25 times for LeNet's conv2), slower than col2im.
//    There the forward and the weight gradient run direct and the input
//    gradient takes the im2col path (GEMM, then col2im), which never
//    needs the im2col of the input itself;
//  - not for 1x1 convolutions, whose columns are the image itself: a GEMM
//    on the image (no im2col, see ForwardChunk) was 1.3-2.3x faster,
//    forward and backward, on ResNet-50's 1x1 shapes at batch 8 (256 to
//    64 channels at 56 x 56: forward 11.7 -> 5.4 ms on 2 threads, 19.9
//    -> 8.9 ms on 1);
//  - at most kDirectMaxOutputs outputs per group: with AlexNet's 256 to 384
//    outputs the column matrix is cheap next to the products, and
//    OpenBLAS's own AVX-512 kernels were 10-20% faster (its AVX2 ones,
//    OPENBLAS_CORETYPE=Haswell, were slower than the direct path).
namespace {

// The most outputs per group for which kAuto takes the direct path (see
// Note [Direct path]).
constexpr int kDirectMaxOutputs = 128;

}  // namespace

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::ChooseDirect() {
  direct_ = false;
  direct_input_grad_ = false;
  if (!std::is_same<Dtype, float>::value || algorithm_ != Algorithm::kAuto ||
      num_spatial_axes_ != 2 || force_nd_im2col_ || stride_[0] != 1 ||
      stride_[1] != 1 || conv_out_channels_ / group_ > kDirectMaxOutputs ||
      is_1x1_ || !DirectConv::KernelsAvailable()) {
    return;
  }
  const bool same_size = col_shape_[1] == conv_input_shape_[1] &&
                         col_shape_[2] == conv_input_shape_[2];
  DirectConv::Geometry g;
  g.channels = conv_in_channels_ / group_;
  g.height = conv_input_shape_[1];
  g.width = conv_input_shape_[2];
  g.outputs = conv_out_channels_ / group_;
  g.kernel_h = kernel_shape_[0];
  g.kernel_w = kernel_shape_[1];
  g.pad_h = pad_[0];
  g.pad_w = pad_[1];
  g.dilation_h = dilation_[0];
  g.dilation_w = dilation_[1];
  // The input gradient: the top diff (outputs x col side) convolved back.
  DirectConv::Geometry b = g;
  std::swap(b.channels, b.outputs);
  b.height = col_shape_[1];
  b.width = col_shape_[2];
  b.pad_h = g.dilation_h * (g.kernel_h - 1) - g.pad_h;
  b.pad_w = g.dilation_w * (g.kernel_w - 1) - g.pad_w;
  auto same = [](const DirectConv::Geometry& x, const DirectConv::Geometry& y) {
    return std::memcmp(&x, &y, sizeof(x)) == 0;
  };
  // Building a plan walks every output position; Reshape runs before every
  // Forward, so plans are kept while the shape stays.
  if (direct_forward_ == nullptr || !same(direct_forward_->geometry(), g)) {
    direct_forward_ = std::make_unique<DirectConv>(g);
  }
  direct_ = direct_forward_->supported() &&
            direct_forward_->output_h() == col_shape_[1] &&
            direct_forward_->output_w() == col_shape_[2];
  if (!direct_ || !same_size || b.pad_h < 0 || b.pad_w < 0) return;
  if (direct_backward_ == nullptr || !same(direct_backward_->geometry(), b)) {
    direct_backward_ = std::make_unique<DirectConv>(b);
  }
  direct_input_grad_ = direct_backward_->supported() &&
                       direct_backward_->output_h() == g.height &&
                       direct_backward_->output_w() == g.width;
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::ForwardDirect(const float* input,
                                                const float* weights,
                                                float* output) {
  const DirectConv& conv = *direct_forward_;
  const size_t packed_size = conv.packed_size();
  const size_t w_step =
      static_cast<size_t>(conv_out_channels_ / group_) * kernel_dim_;
  const size_t in_step = static_cast<size_t>(conv_input_dim_ / group_);
  const size_t out_step = static_cast<size_t>(conv_output_dim_ / group_);
  direct_packed_.resize(packed_size * group_);
  for (int g = 0; g < group_; ++g) {
    conv.PackWeights(weights + g * w_step, /*flip_and_swap=*/false,
                     direct_packed_.data() + g * packed_size);
  }
  auto run = [&](int begin, int end, int) {
    for (int n = begin; n < end; ++n) {
      for (int g = 0; g < group_; ++g) {
        conv.Forward(
            direct_packed_.data() + g * packed_size,
            input + static_cast<size_t>(n) * conv_input_dim_ + g * in_step,
            output + static_cast<size_t>(n) * conv_output_dim_ + g * out_step);
      }
    }
  };
  if (ParallelForWorkers(num_) <= 1) {
    run(0, num_, 0);
  } else {
    ParallelFor(num_, run);
  }
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::BackwardDirect(const float* input,
                                                 const float* output_diff,
                                                 const float* weights,
                                                 float* weight_diff,
                                                 float* input_diff) {
  CHECK(input_diff == nullptr || direct_input_grad_);
  const DirectConv& conv = *direct_forward_;
  const DirectConv* back = direct_backward_.get();
  const size_t packed_size = input_diff ? back->packed_size() : 0;
  const size_t w_step =
      static_cast<size_t>(conv_out_channels_ / group_) * kernel_dim_;
  const size_t in_step = static_cast<size_t>(conv_input_dim_ / group_);
  const size_t out_step = static_cast<size_t>(conv_output_dim_ / group_);
  if (input_diff != nullptr) {
    direct_packed_.resize(packed_size * group_);
    for (int g = 0; g < group_; ++g) {
      back->PackWeights(weights + g * w_step, /*flip_and_swap=*/true,
                        direct_packed_.data() + g * packed_size);
    }
  }
  // Per-worker weight-gradient accumulators when the images are split,
  // added in worker order below (deterministic for a thread count).
  const int workers = ParallelForWorkers(num_);
  const size_t w_count = w_step * group_;
  if (weight_diff != nullptr && workers > 1) {
    direct_accumulators_.assign(w_count * workers, 0.0f);
  }
  auto run = [&](int begin, int end, int w) {
    const size_t first_in = static_cast<size_t>(begin) * conv_input_dim_;
    const size_t first_out = static_cast<size_t>(begin) * conv_output_dim_;
    if (weight_diff != nullptr) {
      float* acc =
          workers > 1 ? direct_accumulators_.data() + w * w_count : weight_diff;
      for (int g = 0; g < group_; ++g) {
        conv.AccumulateWeightGrad(end - begin, input + first_in + g * in_step,
                                  conv_input_dim_,
                                  output_diff + first_out + g * out_step,
                                  conv_output_dim_, acc + g * w_step);
      }
    }
    if (input_diff == nullptr) return;
    for (int n = begin; n < end; ++n) {
      for (int g = 0; g < group_; ++g) {
        back->Forward(direct_packed_.data() + g * packed_size,
                      output_diff + static_cast<size_t>(n) * conv_output_dim_ +
                          g * out_step,
                      input_diff + static_cast<size_t>(n) * conv_input_dim_ +
                          g * in_step);
      }
    }
  };
  if (workers <= 1) {
    run(0, num_, 0);
    return;
  }
  ParallelFor(num_, run);
  if (weight_diff != nullptr) {
    for (int w = 0; w < workers; ++w) {
      cpu_axpy(static_cast<int>(w_count), 1.0f,
               direct_accumulators_.data() + w * w_count, weight_diff);
    }
  }
}

// The rest of the class is instantiated in base_conv_layer.cpp.
#define POSEIDON_INSTANTIATE_DIRECT(Dtype)                   \
  template void BaseConvolutionLayer<Dtype>::ChooseDirect(); \
  template void BaseConvolutionLayer<Dtype>::ForwardDirect(  \
      const float*, const float*, float*);                   \
  template void BaseConvolutionLayer<Dtype>::BackwardDirect( \
      const float*, const float*, const float*, float*, float*);
POSEIDON_INSTANTIATE_DIRECT(float)
POSEIDON_INSTANTIATE_DIRECT(double)
#undef POSEIDON_INSTANTIATE_DIRECT

}  // namespace poseidon
