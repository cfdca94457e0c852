// RowWeightGradient: a convolution's weight gradient with vectors along the
// output rows (util/row_weight_grad.hpp).
//
// See Note [AVX-512 isolation] in util/avx512.hpp: only the functions
// marked POSEIDON_AVX512 contain AVX-512 instructions, reached through
// Accumulate, which needs supported().
//
// Note [Row weight gradient]
// dW (outputs x K, K = channels x taps) is a product whose inner dimension
// is the output positions: dW = dY col^T, with dY (outputs x positions)
// the top diff and col (K x positions) im2col's matrix. For a first layer
// (3 input channels, K = 27 for VGG-16's conv1_1, 147 for ResNet-50's
// 7x7 conv1) K is small and the positions are many (401,408 for conv1_1
// at batch 8). The direct path (util/direct_conv.cpp) runs its vectors
// over the outputs and first transposes the top diff to (position,
// output) with scalar code, which there cost more than the products
// (conv1_1's backward took 33 ms on 2 threads, 42 GFLOP/s); im2col + GEMM
// writes and re-reads a column matrix K / channels = 9 to 49 times the
// image. Here both operands are read in place: for output (y, x), tap
// (i, j) of channel c reads the padded image at row y sh + i dh, column
// x sw + j dw. Split each padded row into sw column phases (phase p holds
// columns p, p + sw, ...) and that element is phase (j dw) mod sw, column
// x + (j dw) div sw: consecutive x are consecutive floats for every
// stride. So a vector of 16 output positions of one row is one load from
// the top diff row and one from the phase row, for each (channel, tap).
// The kernel keeps a block of 4 outputs x 6 (channel, tap) pairs of
// 16-lane partial sums in registers (24 FMAs per 10 loads) over a band of
// output rows, and keeps them between bands and images in the scratch; the
// lanes are added once at the end. Lanes past a row's end load zeros
// (masked loads). Tails of the blocks repeat the last output or pair, and
// their sums are dropped. Per element the order of the sums depends on the
// geometry and the output range only.
// Memory, not arithmetic, is the limit: with its operands in L1 the kernel
// ran at 250 GFLOP/s on one core of the development machine (AMD EPYC),
// but conv1_1's top diff is 103 MB at batch 8, read once. So each output
// block walks its four top-diff rows through memory in order, in bands of
// kBandBytes (held in L1 while every pair block passes over them), and
// the first pass over a band asks for the next band (prefetch into L2):
// VGG-16 conv1_1, 4 images on one thread, 6.4 -> 5.3 ms (with the top diff
// already in cache, 3.7 ms). Copies of the image with every tap's vectors
// aligned (one per channel and tap column) were no faster: the unaligned
// loads cost 14% in L1 and nothing measurable here.
// Against the other paths (poseidon_train time, batch 8 (CIFAR-10: 100), 2
// threads; backward of the layer): VGG-16 conv1_1 34.4 -> 7.0 ms,
// ResNet-50 conv1 10.5 -> 5.7, GoogLeNet conv1 10.8 -> 5.9, Inception-V3
// conv1 4.3 -> 2.5, CIFAR-10 quick conv1 2.8 -> 1.8. AlexNet's conv1
// (11x11, stride 4: 363 pairs, im2col only 7.6 times the image) was
// slower, 23.7 -> 27.4 ms, so the layer keeps im2col + GEMM there
// (Note [Row weight-gradient path] in
// layers/conv_algorithms/row_weight_grad_conv.cpp).
#include "poseidon/util/row_weight_grad.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "poseidon/util/avx512.hpp"

#define POSEIDON_AVX512 __attribute__((target("avx512f,fma")))

namespace poseidon {
namespace {

constexpr int kOutBlock = 4;   // outputs per register block
constexpr int kPairBlock = 6;  // (channel, tap) pairs per register block
constexpr int kBlockFloats = kOutBlock * kPairBlock * 16;
// The most bytes of a block's top diff per band of output rows (Note [Row
// weight gradient]): a third of a 48 KB L1.
constexpr size_t kBandBytes = 16 * 1024;

// ceil(a / b) for a >= 0 and b > 0, without a + b (which may pass INT_MAX
// for a stride b).
int Ceil(int a, int b) { return a == 0 ? 0 : (a - 1) / b + 1; }

// acc (kOutBlock x kPairBlock vectors of 16 lanes) += over `rows` rows of
// `width` positions: dy[o][r step + x] * col[p][r col_step + x]. With
// kPrefetch, also asks for next[o][r step + x], the top diff the next band
// will read (Note [Row weight gradient]).
template <bool kPrefetch>
POSEIDON_AVX512 void RowBlock(const float* const* dy, const float* const* col,
                              int rows, ptrdiff_t dy_step, ptrdiff_t col_step,
                              int width, const float* const* next, float* acc) {
  __m512 a[kOutBlock][kPairBlock];
#pragma GCC unroll 4
  for (int o = 0; o < kOutBlock; ++o) {
#pragma GCC unroll 6
    for (int p = 0; p < kPairBlock; ++p) {
      a[o][p] = _mm512_load_ps(acc + (o * kPairBlock + p) * 16);
    }
  }
  for (int r = 0; r < rows; ++r) {
    const ptrdiff_t dy_row = r * dy_step;
    const ptrdiff_t col_row = r * col_step;
    for (int x = 0; x < width; x += 16) {
      const int left = width - x;
      const __mmask16 m = left >= 16
                              ? __mmask16(0xFFFF)
                              : static_cast<__mmask16>((1u << left) - 1u);
      __m512 d[kOutBlock];
#pragma GCC unroll 4
      for (int o = 0; o < kOutBlock; ++o) {
        d[o] = _mm512_maskz_loadu_ps(m, dy[o] + dy_row + x);
        if (kPrefetch) {
          _mm_prefetch(reinterpret_cast<const char*>(next[o] + dy_row + x),
                       _MM_HINT_T1);
        }
      }
#pragma GCC unroll 6
      for (int p = 0; p < kPairBlock; ++p) {
        const __m512 v = _mm512_maskz_loadu_ps(m, col[p] + col_row + x);
#pragma GCC unroll 4
        for (int o = 0; o < kOutBlock; ++o) {
          a[o][p] = _mm512_fmadd_ps(d[o], v, a[o][p]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int o = 0; o < kOutBlock; ++o) {
#pragma GCC unroll 6
    for (int p = 0; p < kPairBlock; ++p) {
      _mm512_store_ps(acc + (o * kPairBlock + p) * 16, a[o][p]);
    }
  }
}

// weight_diff[o * k_total + k] += the sum of the 16 lanes of block
// (o / kOutBlock, k / kPairBlock)'s vector for (o, k), o < outputs, added
// as a tree (lane l + 8 onto l, then + 4, + 2, + 1).
void AddLanes(const float* acc, int outputs, int k_total, float* weight_diff) {
  const int k_blocks = Ceil(k_total, kPairBlock);
  for (int o = 0; o < outputs; ++o) {
    for (int k = 0; k < k_total; ++k) {
      const float* v =
          acc +
          static_cast<ptrdiff_t>((o / kOutBlock) * k_blocks + k / kPairBlock) *
              kBlockFloats +
          ((o % kOutBlock) * kPairBlock + k % kPairBlock) * 16;
      float lanes[16];
      std::copy(v, v + 16, lanes);
      for (int width = 8; width >= 1; width /= 2) {
        for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
      }
      weight_diff[static_cast<ptrdiff_t>(o) * k_total + k] += lanes[0];
    }
  }
}

}  // namespace

RowWeightGradient::RowWeightGradient(const Geometry& g) : g_(g) {
  if (g.stride_h <= 0 || g.stride_w <= 0 || g.dilation_h <= 0 ||
      g.dilation_w <= 0 || g.kernel_h <= 0 || g.kernel_w <= 0 || g.pad_h < 0 ||
      g.pad_w < 0) {
    return;
  }
  padded_h_ = g.height + 2 * g.pad_h;
  const int padded_w = g.width + 2 * g.pad_w;
  output_h_ =
      (padded_h_ - g.dilation_h * (g.kernel_h - 1) - 1) / g.stride_h + 1;
  output_w_ = (padded_w - g.dilation_w * (g.kernel_w - 1) - 1) / g.stride_w + 1;
  phase_w_ = Ceil(padded_w, g.stride_w);
  taps_ = g.kernel_h * g.kernel_w;
  supported_ = Avx512KernelsAvailable() && g.channels > 0 && g.outputs > 0 &&
               g.height > 0 && g.width > 0 &&
               padded_h_ >= g.dilation_h * (g.kernel_h - 1) + 1 &&
               padded_w >= g.dilation_w * (g.kernel_w - 1) + 1;
  if (!supported_) return;
  // Where pair k's rows start in the phases, for output row 0.
  const ptrdiff_t plane = static_cast<ptrdiff_t>(padded_h_) * phase_w_;
  pair_start_.resize(static_cast<size_t>(g.channels) * taps_);
  for (size_t k = 0; k < pair_start_.size(); ++k) {
    const int c = static_cast<int>(k) / taps_;
    const int i = (static_cast<int>(k) % taps_) / g.kernel_w;
    const int j = (static_cast<int>(k) % taps_) % g.kernel_w;
    const int col = j * g.dilation_w;
    pair_start_[k] =
        (static_cast<ptrdiff_t>(c) * g.stride_w + col % g.stride_w) * plane +
        static_cast<ptrdiff_t>(i) * g.dilation_h * phase_w_ + col / g.stride_w;
  }
}

size_t RowWeightGradient::scratch_size(int outputs) const {
  const size_t blocks =
      static_cast<size_t>(Ceil(outputs, kOutBlock)) *
      static_cast<size_t>(Ceil(g_.channels * taps_, kPairBlock));
  const size_t planes = static_cast<size_t>(g_.channels) * g_.stride_w *
                        static_cast<size_t>(padded_h_) * phase_w_;
  return blocks * kBlockFloats + planes;
}

void RowWeightGradient::Accumulate(int images, const float* bottom,
                                   ptrdiff_t bottom_step, const float* top_diff,
                                   ptrdiff_t top_step, int output_begin,
                                   int output_end, float* weight_diff,
                                   float* scratch) const {
  const int outputs = output_end - output_begin;
  if (images <= 0 || outputs <= 0) return;
  const int k_total = g_.channels * taps_;
  const int k_blocks = Ceil(k_total, kPairBlock);
  const int o_blocks = Ceil(outputs, kOutBlock);
  const size_t acc_floats =
      static_cast<size_t>(o_blocks) * k_blocks * kBlockFloats;
  float* acc = scratch;
  float* planes = scratch + acc_floats;
  std::memset(acc, 0, acc_floats * sizeof(float));

  const int sw = g_.stride_w;
  const ptrdiff_t plane = static_cast<ptrdiff_t>(padded_h_) * phase_w_;
  const ptrdiff_t positions = static_cast<ptrdiff_t>(output_h_) * output_w_;
  const ptrdiff_t col_step = static_cast<ptrdiff_t>(g_.stride_h) * phase_w_;
  const int band_rows = std::max(
      1, static_cast<int>(kBandBytes / (sizeof(float) * kOutBlock *
                                        static_cast<size_t>(output_w_))));
  // The rows of output block ob's band from output row y0, in image dy_n.
  auto BandRows = [&](const float* dy_n, int ob, int y0, int begin, int end,
                      const float** rows) {
    for (int o = 0; o < kOutBlock; ++o) {
      const int out = std::min(begin + ob * kOutBlock + o, end - 1);
      rows[o] = dy_n + out * positions + static_cast<ptrdiff_t>(y0) * output_w_;
    }
  };
  const float* col[kPairBlock];
  for (int n = 0; n < images; ++n) {
    // The image's padded rows, split into column phases.
    const float* x = bottom + n * bottom_step;
    for (int c = 0; c < g_.channels; ++c) {
      for (int p = 0; p < sw; ++p) {
        float* phase = planes + (static_cast<ptrdiff_t>(c) * sw + p) * plane;
        for (int r = 0; r < padded_h_; ++r) {
          float* row = phase + static_cast<ptrdiff_t>(r) * phase_w_;
          const int h = r - g_.pad_h;
          if (h < 0 || h >= g_.height) {
            std::fill(row, row + phase_w_, 0.0f);
            continue;
          }
          const float* src =
              x + (static_cast<ptrdiff_t>(c) * g_.height + h) * g_.width;
          for (int q = 0; q < phase_w_; ++q) {
            const int w = q * sw + p - g_.pad_w;
            row[q] = w >= 0 && w < g_.width ? src[w] : 0.0f;
          }
        }
      }
    }
    // Bands of rows of one output block at a time: the block's top diff is
    // then four long runs through memory, each band's fetched while the
    // band before runs (the first pass over a band asks for the next).
    const float* dy_n = top_diff + n * top_step;
    const float* dy[kOutBlock];
    const float* next[kOutBlock];
    for (int ob = 0; ob < o_blocks; ++ob) {
      for (int y0 = 0; y0 < output_h_; y0 += band_rows) {
        const int rows = std::min(band_rows, output_h_ - y0);
        BandRows(dy_n, ob, y0, output_begin, output_end, dy);
        // The next band: this block's, else the next block's first.
        const bool last_band = y0 + band_rows >= output_h_;
        const bool last = last_band && ob + 1 == o_blocks;
        if (!last) {
          BandRows(dy_n, last_band ? ob + 1 : ob,
                   last_band ? 0 : y0 + band_rows, output_begin, output_end,
                   next);
        }
        for (int kb = 0; kb < k_blocks; ++kb) {
          for (int p = 0; p < kPairBlock; ++p) {
            const int k = std::min(kb * kPairBlock + p, k_total - 1);
            col[p] = planes + pair_start_[k] + y0 * col_step;
          }
          float* block_acc =
              acc + static_cast<ptrdiff_t>(ob * k_blocks + kb) * kBlockFloats;
          if (kb == 0 && !last) {
            RowBlock<true>(dy, col, rows, output_w_, col_step, output_w_, next,
                           block_acc);
          } else {
            RowBlock<false>(dy, col, rows, output_w_, col_step, output_w_,
                            nullptr, block_acc);
          }
        }
      }
    }
  }
  AddLanes(acc, outputs, k_total,
           weight_diff + static_cast<ptrdiff_t>(output_begin) * k_total);
}

}  // namespace poseidon
