// DirectConvAlgorithm: the float convolution and its gradients with
// DirectConv (util/direct_conv.hpp), no im2col.
#include <algorithm>
#include <cstring>
#include <memory>

#include "algorithms.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/parallel.hpp"
#include "poseidon/util/status.hpp"

namespace poseidon {

// Note [Direct path]
// For float, 2-D (not force_nd_im2col), unit stride with the AVX-512
// kernels and any stride with the AVX2 ones (util/direct_conv.hpp), kAuto
// skips im2col altogether: DirectConv reads the column vectors straight
// from the image, which on CIFAR-10
// quick's 5x5 layers is about twice as fast as im2col + OpenBLAS on
// AVX-512 (the column matrix of a 32-channel 5x5 layer is 25 times the
// image; writing and re-reading it cost as much as the multiplications),
// and on an AVX2 EPYC, whose 512 KiB L2 that matrix overflows, made the
// net's forward-backward 1.3 times as fast as im2col + the AVX2 GEMM (142
// -> 110 ms on 1 thread, 76 -> 59 ms on 2; docs/performance.md). The
// thresholds below were measured on AVX-512 and are kept for AVX2.
// Forward: the weights of each group are packed once per call, then images
// run independently on ParallelFor. Backward: the weight gradient accumulates
// per worker and is added in worker order, as in Note [Parallel chunks]; the
// input gradient is the direct convolution of the top diff with the kernel
// flipped and the channel axes swapped (pad dilation * (kernel - 1) - pad,
// so it needs pad <= dilation * (kernel - 1); a strided convolution's is
// not a convolution, and takes the im2col path). The per-image and batched
// paths stay the reference (kPerImage, kBatched) and serve double, N-D
// convolutions, strided ones on AVX-512 CPUs, and CPUs with neither.
// kAuto takes the direct path only where it measured faster:
//  - the input gradient only where the output is at most
//    kDirectInputGradMaxWork (1.25) times smaller than the input: a
//    smaller output makes it, as a convolution over the zero-padded top
//    diff, do (H W) / (OH OW) times the useful work, slower than col2im
//    for LeNet's unpadded 5x5 layers (2.25 times for conv2, 1.36 for
//    conv1). There the forward and the weight gradient run direct and the
//    input gradient takes the im2col path (GEMM, then col2im), which never
//    needs the im2col of the input itself. Up to 1.25 it pays (a 2-core
//    Xeon with AVX-512, compare_builds.py --conv, 1 thread, medians of 5
//    interleaved runs, backward with the weight gradient, which did not
//    change): Inception-V3's conv2_3x3 (32 channels, 147 x 147 to 145 x
//    145, 1.03, batch 8) 90.2 -> 58.1 ms (2 threads 52.4 -> 29.9), 24 to 24
//    channels 3x3 on 40 x 40 (1.11) 6.15 -> 5.14 (on the AVX2 kernels 7.55
//    -> 6.77), 32 on 30 x 30 (1.15) 4.46 -> 4.08, 40 on 24 x 24 (1.19)
//    5.58 -> 5.26, a 5x5 32 to 32 on 40 x 40 (1.23) 19.5 -> 17.4;
//  - not for 1x1 convolutions, whose columns are the image itself: a GEMM
//    on the image (no im2col, see BatchedIm2colConv::ForwardChunk) was 1.3-2.3x
//    faster, forward and backward, on ResNet-50's 1x1 shapes at batch 8 (256 to
//    64 channels at 56 x 56: forward 11.7 -> 5.4 ms on 2 threads, 19.9
//    -> 8.9 ms on 1); nor strided 1x1 ones, whose im2col is a subsampled
//    copy, a quarter of the image at stride 2 (ResNet-50's res3a_branch2a,
//    256 -> 128 channels at 56 x 56, batch 32, 2 threads, on an AVX2
//    EPYC: forward 13.7 ms by im2col, 24.6 direct, backward 35.1 and 50.0);
//  - strided convolutions (AVX2 only), measured there against im2col +
//    GEMM (scripts/bench/compare_builds.py, the bench nets' timing nets,
//    medians of 3 interleaved runs, 2 threads): the first layers' forward
//    1.24-1.31 times as fast (AlexNet's conv1 27.1 -> 21.9 ms, ResNet-50's
//    68.7 -> 52.5, GoogLeNet's 65.9 -> 52.1, Inception-V3's 21.7 -> 17.1),
//    AlexNet's conv1 backward (its weight gradient, now direct) 32.9 ->
//    23.0; Inception-V3's mixed_6a 3x3 (96 channels, stride 2) even;
//  - at most kDirectMaxOutputs outputs per group: with AlexNet's 256 to 384
//    outputs the column matrix is cheap next to the products, and
//    OpenBLAS's own AVX-512 kernels were 10-20% faster (its AVX2 ones,
//    OPENBLAS_CORETYPE=Haswell, were slower than the direct path).
namespace {

// The most outputs per group for which kAuto takes the direct path (see
// Note [Direct path]).
constexpr int kDirectMaxOutputs = 128;
// The most input positions per output position for which kAuto takes the
// direct input gradient (see Note [Direct path]).
constexpr double kDirectInputGradMaxWork = 1.25;

}  // namespace

const char* DirectConvAlgorithm::Reshape(const ConvShape& s,
                                         const ConvOptions& options) {
  s_ = &s;
  input_grad_ = false;
  if (const char* why_not = WhyNotFast2D(s, options)) return why_not;
  const bool strided = s.stride[0] != 1 || s.stride[1] != 1;
  if (strided && Avx512KernelsAvailable()) {
    return "strided (the AVX-512 kernels take unit strides)";
  }
  // The padded copy holds stride_w column phases (Note [Strided direct
  // convolution] in util/direct_conv.cpp): past the padded row's width,
  // phases of padding only (a stride of 10^9: a billion of them).
  if (s.stride[1] > s.input_shape[2] + 2 * s.pad[1]) {
    return "a stride wider than the padded row";
  }
  if (s.out_channels / s.group > kDirectMaxOutputs) {
    return "more than 128 outputs per group";
  }
  if (s.is_1x1) return "1x1: a GEMM on the image needs no im2col";
  if (s.kernel[0] == 1 && s.kernel[1] == 1) {
    return "strided 1x1: im2col's subsampled copy is cheaper";
  }
  if (!DirectConv::KernelsAvailable()) return "neither AVX-512 nor AVX2";
  auto g = KernelGeometry<DirectConv::Geometry>(s);
  g.stride_h = s.stride[0];
  g.stride_w = s.stride[1];
  // The input gradient: the top diff (outputs x col side) convolved back.
  DirectConv::Geometry b = g;
  std::swap(b.channels, b.outputs);
  b.height = s.col_shape[1];
  b.width = s.col_shape[2];
  b.pad_h = g.dilation_h * (g.kernel_h - 1) - g.pad_h;
  b.pad_w = g.dilation_w * (g.kernel_w - 1) - g.pad_w;
  auto same = [](const DirectConv::Geometry& x, const DirectConv::Geometry& y) {
    return std::memcmp(&x, &y, sizeof(x)) == 0;
  };
  // Building a plan walks every output position; Reshape runs before every
  // Forward, so plans are kept while the shape stays.
  if (forward_ == nullptr || !same(forward_->geometry(), g)) {
    forward_ = std::make_unique<DirectConv>(g);
  }
  if (!forward_->supported() || forward_->output_h() != s.col_shape[1] ||
      forward_->output_w() != s.col_shape[2]) {
    return "DirectConv does not take this geometry";
  }
  if (strided) {
    no_input_grad_ = "strided";
    return nullptr;
  }
  // The input gradient's work over the useful work (Note [Direct path]).
  const double work = static_cast<double>(s.input_shape[1]) * s.input_shape[2] /
                      (static_cast<double>(s.col_shape[1]) * s.col_shape[2]);
  if (work > kDirectInputGradMaxWork || b.pad_h < 0 || b.pad_w < 0) {
    no_input_grad_ = "the output is over 1.25 times smaller than the input";
    return nullptr;
  }
  if (backward_ == nullptr || !same(backward_->geometry(), b)) {
    backward_ = std::make_unique<DirectConv>(b);
  }
  input_grad_ = backward_->supported() && backward_->output_h() == g.height &&
                backward_->output_w() == g.width;
  return nullptr;
}

std::string DirectConvAlgorithm::Description() const {
  std::string s = !Avx512KernelsAvailable()
                      ? "direct (AVX2 GEMM, columns packed from the image)"
                  : forward_->output_vectors()
                      ? "direct (AVX-512 kernels, vectors of output channels)"
                      : "direct (AVX-512 kernels)";
  if (!input_grad_) {
    s += StrCat(", input gradient by im2col + GEMM (", no_input_grad_, ")");
  }
  return s;
}

void DirectConvAlgorithm::Forward(Poseidon::Brew, const float* input,
                                  const float* weights, float* output) {
  const ConvShape& s = *s_;
  const DirectConv& conv = *forward_;
  const size_t packed_size = conv.packed_size();
  const size_t w_step =
      static_cast<size_t>(s.out_channels / s.group) * s.kernel_dim;
  const size_t in_step = static_cast<size_t>(s.input_dim / s.group);
  const size_t out_step = static_cast<size_t>(s.output_dim / s.group);
  packed_.resize(packed_size * s.group);
  for (int g = 0; g < s.group; ++g) {
    conv.PackWeights(weights + g * w_step, /*flip_and_swap=*/false,
                     packed_.data() + g * packed_size);
  }
  auto run = [&](int begin, int end, int) {
    for (int n = begin; n < end; ++n) {
      for (int g = 0; g < s.group; ++g) {
        conv.Forward(
            packed_.data() + g * packed_size,
            input + static_cast<size_t>(n) * s.input_dim + g * in_step,
            output + static_cast<size_t>(n) * s.output_dim + g * out_step);
      }
    }
  };
  if (ParallelForWorkers(s.num) <= 1) {
    run(0, s.num, 0);
  } else {
    ParallelFor(s.num, run);
  }
}

void DirectConvAlgorithm::Backward(Poseidon::Brew, const float* input,
                                   const float* output_diff,
                                   const float* weights, float* weight_diff,
                                   float* input_diff) {
  CHECK(input_diff == nullptr || input_grad_)
      << "the direct path's input gradient needs a same-size convolution";
  if (weight_diff == nullptr && input_diff == nullptr) return;
  const ConvShape& s = *s_;
  const DirectConv& conv = *forward_;
  const DirectConv* back = backward_.get();
  const size_t packed_size = input_diff ? back->packed_size() : 0;
  const size_t w_step =
      static_cast<size_t>(s.out_channels / s.group) * s.kernel_dim;
  const size_t in_step = static_cast<size_t>(s.input_dim / s.group);
  const size_t out_step = static_cast<size_t>(s.output_dim / s.group);
  if (input_diff != nullptr) {
    packed_.resize(packed_size * s.group);
    for (int g = 0; g < s.group; ++g) {
      back->PackWeights(weights + g * w_step, /*flip_and_swap=*/true,
                        packed_.data() + g * packed_size);
    }
  }
  // Per-worker weight-gradient accumulators when the images are split,
  // added in worker order below (deterministic for a thread count).
  const int workers = ParallelForWorkers(s.num);
  const size_t w_count = w_step * s.group;
  if (weight_diff != nullptr && workers > 1) {
    accumulators_.assign(w_count * workers, 0.0f);
  }
  auto run = [&](int begin, int end, int w) {
    const size_t first_in = static_cast<size_t>(begin) * s.input_dim;
    const size_t first_out = static_cast<size_t>(begin) * s.output_dim;
    if (weight_diff != nullptr) {
      float* acc =
          workers > 1 ? accumulators_.data() + w * w_count : weight_diff;
      for (int g = 0; g < s.group; ++g) {
        conv.AccumulateWeightGrad(end - begin, input + first_in + g * in_step,
                                  s.input_dim,
                                  output_diff + first_out + g * out_step,
                                  s.output_dim, acc + g * w_step);
      }
    }
    if (input_diff == nullptr) return;
    for (int n = begin; n < end; ++n) {
      for (int g = 0; g < s.group; ++g) {
        back->Forward(
            packed_.data() + g * packed_size,
            output_diff + static_cast<size_t>(n) * s.output_dim + g * out_step,
            input_diff + static_cast<size_t>(n) * s.input_dim + g * in_step);
      }
    }
  };
  if (workers <= 1) {
    run(0, s.num, 0);
    return;
  }
  ParallelFor(s.num, run);
  if (weight_diff != nullptr) {
    for (int w = 0; w < workers; ++w) {
      cpu_axpy(static_cast<int>(w_count), 1.0f,
               accumulators_.data() + w * w_count, weight_diff);
    }
  }
}

}  // namespace poseidon
