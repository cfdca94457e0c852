// WinogradConvAlgorithm: the float 3x3, 5x5, 1x7 and 7x1 convolutions and
// both gradients by Winograd's F(4x4, 3x3), F(4x4, 5x5) or F(2x2, 5x5), and
// F(2, 7) with WinogradConv (util/winograd.hpp).
#include <algorithm>
#include <memory>
#include <vector>

#include "algorithms.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/parallel.hpp"
#include "poseidon/util/thread_scratch.hpp"

namespace poseidon {

// Note [Winograd path]
// For float 2-D 3x3 convolutions with unit stride and dilation and pad at
// most 2, with at least WinogradMinChannels() input channels and outputs
// per group (48 with the AVX-512 kernels, 32 on output rows narrower than
// 12, for F(4x4, 5x5) or with the AVX2 kernels) and at least WinogradMinTiles()
// 4x4 output tiles in the batch (100 with the AVX-512 kernels, 32 with the AVX2
// ones), on a CPU where the AVX-512
// or the AVX2 kernels run (they also do its GEMMs; POSEIDON_KERNELS=blas keeps
// the im2col reference), kAuto computes the forward pass and both gradients by
// Winograd's F(4x4, 3x3): 36 GEMMs of a quarter of the multiplications per tile
// block (Note [Winograd] in util/winograd.cpp), in place of the direct path
// (Note [Direct path] in direct_conv_algorithm.cpp) or im2col + GEMM. The input
// gradient of such a convolution is the convolution of the top diff with the
// kernel rotated, channels and outputs swapped, pad 2 - pad; the weight
// gradient is summed in the transform domain and taken back once per call.
// 5x5 convolutions go the same way with pad at most 4 (the input
// gradient's pad 4 - pad) by F(2x2, 5x5), 36 multiplications per 2 x 2 tile
// instead of 100 (the same floors, tiles of 2 x 2 counted). Measured on a
// 2-core AVX2 EPYC (compare_builds.py on
// one-layer nets, one thread, medians of 3 interleaved runs; forward and
// weight gradient ms, against the direct path): CIFAR-10 quick's conv2 (32
// to 32 on 16 x 16, batch 100) 24.6 -> 19.3 and 24.1 -> 21.2, its conv3 (32
// to 64 on 8 x 8) 11.6 -> 8.4 and 11.4 -> 8.8; GoogLeNet's 5x5 (batch 8) 32
// to 96 on 28 x 28 15.6 -> 11.5 and 15.9 -> 12.0, 32 to 128 on 14 x 14 5.9
// -> 4.8 and 5.8 -> 4.9; Inception-V3's 48 to 64 on 35 x 35 26.8 -> 18.3
// and 27.9 -> 18.5; AlexNet's conv2 (two groups of 48 to 128 on 27 x 27,
// batch 32) 235 -> 188 and 232 -> 185. Before the transforms were written
// for AVX2 (Note [Input transform on AVX2] in util/winograd.cpp) the
// 32-channel layers had been 1.25 times slower than the direct path.
// With the AVX-512 kernels, whose GEMM makes the direct path about twice as
// fast, on a 2-core Xeon with AVX-512 (compare_builds.py --conv, 1 thread
// unless said, medians of 3 interleaved runs, forward + backward with the
// input gradient against the direct path): 48 channels and more pay,
// AlexNet's conv2 335.8 -> 267.1 ms (2 threads 175.6 -> 136.2),
// Inception-V3's 48 to 64 on 35 x 35 37.0 -> 32.0 (2 threads, 5 runs, 22.0
// -> 16.8), GoogLeNet's 48 to 128 on 7 x 7 even (3.36 -> 3.28); 32
// channels do not: CIFAR-10 quick's conv2 29.1 -> 41.3 (its conv3 16.1 ->
// 14.2), GoogLeNet's 32 to 96 on 28 x 28 21.8 -> 22.4, and in 3x3,
// Inception-V3's stem (32 channels on 147 x 147) 116.7 -> 105.1 and 166.2
// -> 168.7, the forward pass slower in both. Hence the floor of 48 there,
// except on output rows narrower than 12, where the direct path runs its
// output-vector kernel (Note [Output vectors] in util/direct_conv.cpp) and
// 32 channels pay (5 runs): CIFAR-10 quick's conv3 16.1 -> 13.7 ms, 32 to
// 128 5x5 on 8 x 8 (batch 16) 4.70 -> 4.41, 3x3 32 to 32 on 8 x 8 (batch
// 32) 1.18 -> 0.76, 40 to 40 on 10 x 10 (batch 16) 1.81 -> 1.10. In
// the nets: CIFAR-10 quick's conv3 forward 5.41 -> 4.68 ms and backward
// 10.45 -> 9.57 at 1 thread (the net 67.5 -> 66.0), even at 2 threads;
// GoogLeNet's 5a 5x5 (32 to 128 on 7 x 7, 128 tiles) 2.50 -> 2.69 ms at 1
// thread and 2.00 -> 2.09 at 2, within the net's noise.
// Since then 5x5 convolutions go by F(4x4, 5x5) (4 multiplications per
// output instead of 9, on 8x8 windows) wherever the batch has the tile
// floor's 4 x 4 tiles, and by F(2x2, 5x5) where only its 2 x 2 ones reach
// it. Against F(2x2, 5x5) on the AVX2 EPYC (Zen 3), compare_builds.py
// --conv, forward + backward ms, medians of 5 interleaved runs, 1 thread /
// 2 threads: CIFAR-10 quick's conv2 52.5 -> 25.2 / 27.0 -> 12.5, its conv3
// 16.9 -> 9.4 / 8.8 -> 4.9; Inception-V3's 48 to 64 on 35 x 35 (batch 8)
// 43.5 -> 22.8 / 20.6 -> 12.0; GoogLeNet's 32 to 96 on 28 x 28 36.2 ->
// 19.0 / 13.4 -> 8.9, 32 to 128 on 14 x 14 13.1 -> 8.7 / 6.4 -> 3.2, 48
// to 128 on 7 x 7 (32 tiles of 4 x 4) 6.5 -> 4.8 / 2.4 -> 1.9; AlexNet's
// conv2 (batch 32) 354 -> 191 / 188 -> 98: 1.28 to 2.16 times as fast.
// With the AVX-512 kernels, on a 2-core Xeon (family 6, model 167),
// F(4x4, 5x5) pays from 32 channels on rows of any width, where F(2x2,
// 5x5) had not (compare_builds.py --model, in the nets, against the
// direct path, forward / backward ms, 1 thread): CIFAR-10 quick's conv2
// (batch 100; 5 runs) 9.66 / 20.20 -> 7.01 / 13.28, the net 64.7 -> 54.7
// (2 threads 42.5 -> 39.1); GoogLeNet's 32 to 96 on 28 x 28 31.6 / 64.1 ->
// 15.9 / 34.7, 32 to 64 and 32 to 128 on 14 x 14 1.6-1.8 times as fast
// (batch 32, 3 runs). Hence its floor of 32 there. F(4x4, 3x3) from 32
// channels still does not pay there (Inception-V3's stem at batch 8, 3
// runs: conv2_3x3 0.80 times as fast forward and 0.82 backward, conv3_3x3
// 0.96 and 1.11).
//
// Measured (poseidon_train time, batch 8, 2 threads, interleaved runs):
//  - against im2col + GEMM (more than 128 outputs; a 2-core Xeon):
//    VGG-16 3226 -> 2617 ms a batch; ResNet-50's res4 3x3 forward (256
//    channels, 14 x 14) 7.4 -> 6.0 ms. But its res5 (512 on 7 x 7: 32
//    tiles in the batch) ran 1.8-2x slower: the weight transform (four
//    times the weights' size) cost as much as the products; hence the
//    tile floor;
//  - the weight gradient (a 2-core AMD EPYC; before, the direct path's or
//    im2col's): VGG-16's backward pass 1217 -> 1013 ms, conv2_2 to conv4_3
//    backward 25-30% faster each (conv3_2 130 -> 92 ms), conv5_x (128
//    tiles in the batch) even;
//  - against the direct path (at most 128 outputs per group), with the
//    Winograd weight gradient (the same EPYC): VGG-16's conv1_2 (64 -> 64
//    at 224 x 224) forward 108 -> 73 ms, backward 196 -> 140, conv2_1
//    forward 41 -> 30; whole nets VGG-16 1553 -> 1436 ms, GoogLeNet and
//    Inception-V3 1.5-2% faster, ResNet-50 even. (On the Xeon, with the
//    weight gradient still direct, conv1_2 had been slower, forward 122
//    -> 137 ms, and Winograd took over there only from 128 channels.)
//  - the standalone kernel (one thread) was 5x slower than im2col + GEMM
//    with 3 input channels (36 GEMMs with K = 3): the channel floor.
//  - on an AVX2 EPYC (no AVX-512; before, the direct path on the AVX2 GEMM
//    or im2col), scripts/bench/compare_builds.py, 2 threads, medians of 3
//    interleaved runs, the bench nets' batches: VGG-16 (16) 13.1 -> 7.6 s
//    a batch, each 3x3 layer from conv1_2 on 1.3-2.1 times as fast;
//    ResNet-50 (32) 8.0 -> 6.6 s, its 3x3 layers 1.2-1.8 times as fast,
//    res5's (128 tiles) too; at batch 8, with the AVX2 transforms, 1610
//    -> 1350 ms (5 runs). The channel floor is 32 there: Inception-V3's
//    stem (32 channels on 147 x 147, batch 32) conv2 347 -> 296 ms forward
//    + backward, conv3 576 -> 452 against the direct path
//    (compare_builds.py, 3 runs).
//  - the tile floor with the AVX2 kernels, on a Zen 1 EPYC (AVX2 on
//    128-bit units, its GEMM 37 GFLOP/s a core), compare_builds.py
//    --conv, forward + backward against im2col + GEMM, medians of 3: 512
//    channels and outputs on 7 x 7 (ResNet-50's res5) at batch 8, 32
//    tiles, 171.8 -> 122.5 ms at 1 thread and 95.3 -> 70.0 at 2; 192 to
//    384 on 7 x 7 (GoogLeNet's 5b), 32 tiles, 48.2 -> 37.6; res5 at batch
//    4, 16 tiles, even (85.6 -> 87.1). Hence 32 tiles with the AVX2
//    kernels, 100 with the AVX-512 ones. On the AVX2 EPYC (Zen 3, its
//    GEMM 2.5 times the Zen 1's) the savings are smaller but there (5
//    runs): res5 at batch 8 70.4 -> 64.3 ms at 1 thread, 40.0 -> 37.5 at
//    2; GoogLeNet's 5b 18.9 -> 18.8 and 16.1 -> 13.9.
//
//  - 1x7 and 7x1 convolutions (pad at most 6 along the kernel, none
//    across it, so that the input gradient is one too) go by F(2, 7)
//    along the kernel (Note [One-dimensional Winograd] in
//    util/winograd.cpp), 8 multiplications for 2 outputs instead of 14,
//    with the same floors, 1 x 2 tiles counted. Inception-V3's, on 17 x 17
//    maps, had run at the GEMM's peak on the direct path (128 outputs) or
//    im2col (more) and still lost to PyTorch on every machine measured.
//    On a 2-core AVX2 EPYC (family 25, model 1: Zen 3), compare_builds.py
//    --conv, batch 8, one thread, forward + backward, medians of 5
//    interleaved runs: 128 to 128 1x7 21.9 -> 17.8 ms, 160 to 192 7x1
//    37.6 -> 28.5, 192 to 192 1x7 48.6 -> 34.8; in the whole net (batch
//    32, one thread, 3 runs) its 26 1x7 and 7x1 layers 3410 -> 2535 ms,
//    the net 12578 -> 11646. With the AVX-512 kernels (the Xeon above),
//    7x1 pays and 1x7 does not: in the net at batch 32, 2 threads, 3
//    runs, against the direct path (128 outputs) or im2col, the 7x1
//    layers 1.0-1.28 times as fast forward and 0.95-1.19 backward, the
//    1x7 ones 0.73-1.06 and 0.71-0.95. So 1x7 goes by F(2, 7) with the
//    AVX2 kernels only; taking it back from F(2, 7) there (batch 8, 5
//    runs) made the 13 1x7 layers 1.03 times as fast at 1 thread and
//    1.09 at 2.
//
// Threads. Forward and input gradient: the weights are transformed once
// per group (4 times their size, in this thread's scratch with the
// workers' tile buffers, so the net keeps one such buffer, not one per
// layer), the outputs split over the workers, then images run on
// ParallelFor, a contiguous range per worker. Weight gradient, where each
// worker would get at least two tile blocks: the batch's tiles split over
// the workers in runs of 16, each worker summing into a transform-domain
// gradient of its own (4 times the weights' size), which are then summed in
// worker order and taken back per output, outputs split over the workers:
// the same result on every run with the same thread count. With fewer
// tiles the outputs are split instead, on one sum, each worker transforming
// every tile's input (ResNet-50's res4, 128 tiles at batch 8: backward of
// its six 3x3 layers 58.5 -> 50.1 ms in all at 2 threads; its res2, 1568
// tiles, 33.8 ms split by outputs against 28.8 by tiles; medians of 3
// interleaved runs).
//
// Float results differ from im2col's by more than rounding (about 20
// epsilon of the magnitude of the tile's inputs times the weights,
// measured in the kernel's tests).
namespace {

// The channel floor (Note [Winograd path]): on AVX2, where the GEMMs run at
// half the AVX-512 kernel's rate, Winograd pays from fewer channels; with
// the AVX-512 kernels too where output rows are narrower than 12, the
// ground of the direct path's output-vector kernel, and for F(4x4, 5x5)
// (`tile` 4 with a 5x5 kernel), 4 multiplications per output against the
// direct path's 25.
int WinogradMinChannels(const ConvShape& s, int tile) {
  if (!Avx512KernelsAvailable()) return 32;
  if (s.kernel[0] == 5 && tile == 4) return 32;
  return s.col_shape[2] >= 12 ? 48 : 32;
}

// The tile floor (Note [Winograd path]): the weight transform has to be
// repaid by the GEMMs' savings, which take longer on the AVX2 kernels'
// GEMM, so fewer tiles suffice there.
int64_t WinogradMinTiles() { return Avx512KernelsAvailable() ? 100 : 32; }

}  // namespace

const char* WinogradConvAlgorithm::Reshape(const ConvShape& s,
                                           const ConvOptions& options) {
  s_ = &s;
  if (const char* why_not = WhyNotFast2D(s, options)) return why_not;
  const int kh = s.kernel[0], kw = s.kernel[1];
  const bool square = kh == kw && (kh == 3 || kh == 5);
  if (!square && !(kh == 1 && kw == 7) && !(kh == 7 && kw == 1)) {
    return "not a 3x3, 5x5, 1x7 or 7x1 kernel";
  }
  if (s.stride[0] != 1 || s.stride[1] != 1 || s.dilation[0] != 1 ||
      s.dilation[1] != 1) {
    return "strided or dilated";
  }
  if (s.pad[0] > kh - 1 || s.pad[1] > kw - 1) {
    if (!square) return "padded across the kernel or by more than 6 along it";
    return kh == 3 ? "pad above 2" : "pad above 4";
  }
  if (!Avx512KernelsAvailable() && !Avx2KernelsAvailable()) {
    return "neither AVX-512 nor AVX2 kernels";
  }
  if (kh == 1 && Avx512KernelsAvailable()) {
    return "1x7 with the AVX-512 kernels (F(2, 7) along rows is slower "
           "there)";
  }
  using Wino = WinogradConv<float>;
  auto g = GroupGeometry<Wino::Geometry>(s);
  g.kernel_h = kh;
  g.kernel_w = kw;
  // Too few tiles to repay the weight transform (Note [Winograd path]).
  // The output tile: 4 x 4 for 3x3, 4 x 4 (F(4x4, 5x5)) or else 2 x 2
  // (F(2x2, 5x5)) for 5x5, F(2, 7)'s 2 along the kernel.
  auto tiles_of = [&](int tile_h, int tile_w) {
    return static_cast<int64_t>(s.num) *
           ((s.col_shape[1] + tile_h - 1) / tile_h) *
           ((s.col_shape[2] + tile_w - 1) / tile_w);
  };
  if (square) {
    g.tile = 4;
    if (kh == 5 && tiles_of(4, 4) < WinogradMinTiles()) g.tile = 2;
  }
  const int min_channels = WinogradMinChannels(s, g.tile);
  if (s.in_channels / s.group < min_channels ||
      s.out_channels / s.group < min_channels) {
    return min_channels == 48
               ? "fewer than 48 input channels or outputs per group (32 on "
                 "output rows narrower than 12 and for F(4x4, 5x5))"
               : "fewer than 32 input channels or outputs per group";
  }
  const int64_t tiles = square ? tiles_of(g.tile, g.tile)
                               : tiles_of(kh == 1 ? 1 : 2, kw == 1 ? 1 : 2);
  if (tiles < WinogradMinTiles()) {
    return Avx512KernelsAvailable() ? "fewer than 100 tiles in the batch"
                                    : "fewer than 32 tiles in the batch";
  }
  if (g.height + 2 * g.pad_h - (kh - 1) != s.col_shape[1] ||
      g.width + 2 * g.pad_w - (kw - 1) != s.col_shape[2] ||
      s.col_shape[1] < 1 || s.col_shape[2] < 1) {
    return "the output is not the kernel window's";
  }
  Wino::Geometry b = g;
  std::swap(b.channels, b.outputs);
  b.height = s.col_shape[1];
  b.width = s.col_shape[2];
  b.pad_h = kh - 1 - g.pad_h;
  b.pad_w = kw - 1 - g.pad_w;
  auto same = [](const Wino::Geometry& x, const Wino::Geometry& y) {
    return x.channels == y.channels && x.height == y.height &&
           x.width == y.width && x.outputs == y.outputs && x.pad_h == y.pad_h &&
           x.pad_w == y.pad_w && x.kernel_h == y.kernel_h &&
           x.kernel_w == y.kernel_w && x.tile == y.tile;
  };
  if (forward_ == nullptr || !same(forward_->geometry(), g)) {
    forward_ = std::make_unique<Wino>(g);
  }
  if (backward_ == nullptr || !same(backward_->geometry(), b)) {
    backward_ = std::make_unique<Wino>(b);
  }
  return nullptr;
}

std::string WinogradConvAlgorithm::Description() const {
  // The GEMMs' kernels, then the tile transforms' (Note [Transforms on
  // AVX2] in util/winograd.cpp).
  const int kh = s_->kernel[0];
  const std::string form =
      kh == 5   ? (forward_->tile_h() == 4 ? "Winograd F(4x4, 5x5)"
                                           : "Winograd F(2x2, 5x5)")
      : kh == 3 ? "Winograd F(4x4, 3x3)"
      : kh == 1 ? "Winograd F(2, 7) along rows"
                : "Winograd F(2, 7) down columns";
  return form + (Avx512KernelsAvailable() ? " (AVX-512 GEMM, AVX2 transforms)"
                                          : " (AVX2 GEMM and transforms)");
}

void WinogradConvAlgorithm::Forward(Poseidon::Brew, const float* input,
                                    const float* weights, float* output) {
  Run(*forward_, /*flip_and_swap=*/false, weights, input, s_->input_dim, output,
      s_->output_dim);
}

void WinogradConvAlgorithm::Backward(Poseidon::Brew, const float* input,
                                     const float* output_diff,
                                     const float* weights, float* weight_diff,
                                     float* input_diff) {
  if (input_diff != nullptr) {
    Run(*backward_, /*flip_and_swap=*/true, weights, output_diff,
        s_->output_dim, input_diff, s_->input_dim);
  }
  if (weight_diff != nullptr) BackwardWeights(input, output_diff, weight_diff);
}

void WinogradConvAlgorithm::Run(const WinogradConv<float>& conv,
                                bool flip_and_swap, const float* weights,
                                const float* input, size_t input_dim,
                                float* output, size_t output_dim) const {
  const ConvShape& s = *s_;
  const int workers = ParallelForWorkers(s.num);
  const int per_worker = (s.num + workers - 1) / workers;
  const size_t u_size = conv.weights_size();
  const size_t scratch = conv.scratch_size(per_worker);
  float* base = static_cast<float*>(
      ThreadScratch(sizeof(float) * (u_size * s.group + scratch * workers)));
  const size_t w_step =
      static_cast<size_t>(s.out_channels / s.group) * s.kernel_dim;
  // The weights of every group, outputs split over the workers.
  const int outputs = conv.geometry().outputs;
  auto transform = [&](int begin, int end, int) {
    for (int g = 0; g < s.group; ++g) {
      conv.TransformWeights(weights + g * w_step, flip_and_swap,
                            base + g * u_size, begin, end);
    }
  };
  if (ParallelForWorkers(outputs) <= 1) {
    transform(0, outputs, 0);
  } else {
    ParallelFor(outputs, transform);
  }
  const size_t in_step = input_dim / s.group;
  const size_t out_step = output_dim / s.group;
  auto run = [&](int begin, int end, int w) {
    float* tiles = base + u_size * s.group + w * scratch;
    for (int g = 0; g < s.group; ++g) {
      conv.Forward(end - begin, base + g * u_size,
                   input + begin * input_dim + g * in_step,
                   static_cast<ptrdiff_t>(input_dim),
                   output + begin * output_dim + g * out_step,
                   static_cast<ptrdiff_t>(output_dim), tiles);
    }
  };
  if (workers <= 1) {
    run(0, s.num, 0);
  } else {
    ParallelFor(s.num, run);
  }
}

void WinogradConvAlgorithm::BackwardWeights(const float* input,
                                            const float* output_diff,
                                            float* weight_diff) const {
  const ConvShape& s = *s_;
  const WinogradConv<float>& conv = *forward_;
  const int64_t tiles = static_cast<int64_t>(s.num) * conv.tiles_per_image();
  const int outputs = conv.geometry().outputs;
  const size_t u_size = conv.weights_size();
  const size_t in_step = s.input_dim / s.group;
  const size_t out_step = s.output_dim / s.group;
  const size_t w_step =
      static_cast<size_t>(s.out_channels / s.group) * s.kernel_dim;
  const size_t tile_scratch = conv.scratch_size(s.num);
  // Adds worker w's share for outputs [o0, o1) and tiles [t0, t1) of every
  // group into dU (all groups).
  auto accumulate = [&](int64_t t0, int64_t t1, int o0, int o1, float* dU,
                        float* scratch) {
    for (int g = 0; g < s.group; ++g) {
      conv.AccumulateWeightGradient(
          s.num, input + g * in_step, static_cast<ptrdiff_t>(s.input_dim),
          output_diff + g * out_step, static_cast<ptrdiff_t>(s.output_dim), t0,
          t1, o0, o1, dU + g * u_size, scratch, /*accumulate=*/false);
    }
  };
  const int workers = ParallelForWorkers(outputs);
  if (tiles < int64_t{2} * workers * conv.tile_block()) {
    // Few tiles (Note [Winograd path], "Threads"): by outputs, on one sum.
    float* dU = static_cast<float*>(ThreadScratch(
        sizeof(float) * (u_size * s.group + tile_scratch * workers)));
    ParallelFor(outputs, [&](int begin, int end, int w) {
      accumulate(0, tiles, begin, end, dU,
                 dU + u_size * s.group + w * tile_scratch);
      for (int g = 0; g < s.group; ++g) {
        const float* sum = dU + g * u_size;
        conv.TransformWeightGradient(&sum, 1, weight_diff + g * w_step, begin,
                                     end);
      }
    });
    return;
  }
  // By tiles, in runs of 16, each worker on a sum of its own; the sums are
  // then added in worker order and taken back per output.
  constexpr int kStep = 16;
  const int steps = static_cast<int>((tiles + kStep - 1) / kStep);
  const int parts = std::max(1, ParallelForWorkers(steps));
  const size_t per_worker = u_size * s.group + tile_scratch;
  float* base =
      static_cast<float*>(ThreadScratch(sizeof(float) * per_worker * parts));
  ParallelFor(steps, [&](int begin, int end, int w) {
    float* dU = base + w * per_worker;
    accumulate(static_cast<int64_t>(begin) * kStep,
               std::min<int64_t>(tiles, int64_t{end} * kStep), 0, outputs, dU,
               dU + u_size * s.group);
  });
  std::vector<const float*> sums(static_cast<size_t>(parts) * s.group);
  for (int g = 0; g < s.group; ++g) {
    for (int w = 0; w < parts; ++w) {
      sums[g * parts + w] = base + w * per_worker + g * u_size;
    }
  }
  ParallelFor(outputs, [&](int begin, int end, int) {
    for (int g = 0; g < s.group; ++g) {
      conv.TransformWeightGradient(sums.data() + g * parts, parts,
                                   weight_diff + g * w_step, begin, end);
    }
  });
}

}  // namespace poseidon
