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
//
// Note [Row weight gradient on AVX2]
// With 16 ymm registers of 8 lanes the AVX2 kernel keeps 3 outputs x 4
// pairs of partial sums (12 registers, 3 for the top diff, 1 for the
// image: 7 loads per 12 FMAs), in plain loads but for the last, masked,
// vector of a row; the bands, the prefetch and the order of the sums
// otherwise as above (the lanes added as a tree of 8). Against the path it
// replaced there (the direct path's implicit GEMM, or im2col + GEMM for
// strided layers), on a 2-core AVX2 EPYC, scripts/bench/compare_builds.py,
// 2 threads, the bench nets' batches, medians of 3 interleaved runs, the
// layer's backward: VGG-16 conv1_1 42.1 -> 27.5 ms, ResNet-50 conv1 93.8 ->
// 68.2, GoogLeNet conv1 88.6 -> 78.1, Inception-V3 conv1 29.3 -> 17.2,
// CIFAR-10 quick conv1 5.4 -> 3.6.
#include "poseidon/util/row_weight_grad.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "poseidon/util/avx512.hpp"

#define POSEIDON_AVX512 __attribute__((target("avx512f,fma")))
#define POSEIDON_AVX2 __attribute__((target("avx2,fma")))

namespace poseidon {
namespace {

// Register blocks: kMaxOut outputs x kMaxPairs (channel, tap) pairs of
// partial-sum vectors at most (the AVX-512 kernel's; the AVX2 one, with 16
// registers of 8 lanes, keeps 3 x 4).
constexpr int kMaxOut = 4;
constexpr int kMaxPairs = 6;
// The most bytes of a block's top diff per band of output rows (Note [Row
// weight gradient]): a third of a 48 KB L1.
constexpr size_t kBandBytes = 16 * 1024;

// ceil(a / b) for a >= 0 and b > 0, without a + b (which may pass INT_MAX
// for a stride b).
int Ceil(int a, int b) { return a == 0 ? 0 : (a - 1) / b + 1; }

// acc (kOut x kPairs vectors of kLanes lanes, in that order) += over
// `rows` rows of `width` positions: dy[o][r step + x] * col[p][r col_step
// + x]. With kPrefetch, also asks for next[o][r step + x], the top diff the
// next band will read (Note [Row weight gradient]).
template <bool kPrefetch>
POSEIDON_AVX512 void RowBlockAvx512(const float* const* dy,
                                    const float* const* col, int rows,
                                    ptrdiff_t dy_step, ptrdiff_t col_step,
                                    int width, const float* const* next,
                                    float* acc) {
  constexpr int kOut = 4, kPairs = 6;
  __m512 a[kOut][kPairs];
#pragma GCC unroll 4
  for (int o = 0; o < kOut; ++o) {
#pragma GCC unroll 6
    for (int p = 0; p < kPairs; ++p) {
      a[o][p] = _mm512_load_ps(acc + (o * kPairs + p) * 16);
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
      __m512 d[kOut];
#pragma GCC unroll 4
      for (int o = 0; o < kOut; ++o) {
        d[o] = _mm512_maskz_loadu_ps(m, dy[o] + dy_row + x);
        if (kPrefetch) {
          _mm_prefetch(reinterpret_cast<const char*>(next[o] + dy_row + x),
                       _MM_HINT_T1);
        }
      }
#pragma GCC unroll 6
      for (int p = 0; p < kPairs; ++p) {
        const __m512 v = _mm512_maskz_loadu_ps(m, col[p] + col_row + x);
#pragma GCC unroll 4
        for (int o = 0; o < kOut; ++o) {
          a[o][p] = _mm512_fmadd_ps(d[o], v, a[o][p]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int o = 0; o < kOut; ++o) {
#pragma GCC unroll 6
    for (int p = 0; p < kPairs; ++p) {
      _mm512_store_ps(acc + (o * kPairs + p) * 16, a[o][p]);
    }
  }
}

// One vector of positions of RowBlockAvx2: a += d (kAvx2Out outputs) x v
// (kAvx2Pairs pairs); kMasked loads only the lanes of `tail`.
constexpr int kAvx2Out = 3, kAvx2Pairs = 4;

template <bool kPrefetch, bool kMasked>
POSEIDON_AVX2 __attribute__((always_inline)) inline void RowStepAvx2(
    __m256 (&a)[kAvx2Out][kAvx2Pairs], const float* const* dy,
    const float* const* col, ptrdiff_t dy_at, ptrdiff_t col_at, __m256i tail,
    const float* const* next) {
  __m256 d[kAvx2Out];
#pragma GCC unroll 3
  for (int o = 0; o < kAvx2Out; ++o) {
    d[o] = kMasked ? _mm256_maskload_ps(dy[o] + dy_at, tail)
                   : _mm256_loadu_ps(dy[o] + dy_at);
    if (kPrefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(next[o] + dy_at), _MM_HINT_T1);
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < kAvx2Pairs; ++p) {
    const __m256 v = kMasked ? _mm256_maskload_ps(col[p] + col_at, tail)
                             : _mm256_loadu_ps(col[p] + col_at);
#pragma GCC unroll 3
    for (int o = 0; o < kAvx2Out; ++o) {
      a[o][p] = _mm256_fmadd_ps(d[o], v, a[o][p]);
    }
  }
}

// The AVX2 kernel (Note [Row weight gradient on AVX2]): RowBlockAvx512's
// contract with kAvx2Out x kAvx2Pairs vectors of 8 lanes; the partial
// vector at a row's end is a masked load, the others plain ones.
template <bool kPrefetch>
POSEIDON_AVX2 void RowBlockAvx2(const float* const* dy, const float* const* col,
                                int rows, ptrdiff_t dy_step, ptrdiff_t col_step,
                                int width, const float* const* next,
                                float* acc) {
  __m256 a[kAvx2Out][kAvx2Pairs];
#pragma GCC unroll 3
  for (int o = 0; o < kAvx2Out; ++o) {
#pragma GCC unroll 4
    for (int p = 0; p < kAvx2Pairs; ++p) {
      a[o][p] = _mm256_load_ps(acc + (o * kAvx2Pairs + p) * 8);
    }
  }
  const int full = width / 8 * 8;
  const __m256i tail =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(width - full),
                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int r = 0; r < rows; ++r) {
    const ptrdiff_t dy_row = r * dy_step;
    const ptrdiff_t col_row = r * col_step;
    for (int x = 0; x < full; x += 8) {
      RowStepAvx2<kPrefetch, false>(a, dy, col, dy_row + x, col_row + x, tail,
                                    next);
    }
    if (full < width) {
      RowStepAvx2<kPrefetch, true>(a, dy, col, dy_row + full, col_row + full,
                                   tail, next);
    }
  }
#pragma GCC unroll 3
  for (int o = 0; o < kAvx2Out; ++o) {
#pragma GCC unroll 4
    for (int p = 0; p < kAvx2Pairs; ++p) {
      _mm256_store_ps(acc + (o * kAvx2Pairs + p) * 8, a[o][p]);
    }
  }
}

using RowBlockFn = void (*)(const float* const*, const float* const*, int,
                            ptrdiff_t, ptrdiff_t, int, const float* const*,
                            float*);

// A kernel's register block and its entry points (with, without prefetch).
struct RowKernel {
  int out_block, pair_block, lanes;
  RowBlockFn prefetching, plain;
  int block_floats() const { return out_block * pair_block * lanes; }
};

constexpr RowKernel kAvx512Kernel{4, 6, 16, &RowBlockAvx512<true>,
                                  &RowBlockAvx512<false>};
constexpr RowKernel kAvx2Kernel{kAvx2Out, kAvx2Pairs, 8, &RowBlockAvx2<true>,
                                &RowBlockAvx2<false>};

const RowKernel& KernelFor(RowWeightGradient::Isa isa) {
  return isa == RowWeightGradient::Isa::kAvx512 ? kAvx512Kernel : kAvx2Kernel;
}

// weight_diff[o * k_total + k] += the sum of the lanes of block
// (o / out_block, k / pair_block)'s vector for (o, k), o < outputs, added
// as a tree (the upper half of the lanes onto the lower, repeated).
void AddLanes(const RowKernel& kernel, const float* acc, int outputs,
              int k_total, float* weight_diff) {
  const int k_blocks = Ceil(k_total, kernel.pair_block);
  for (int o = 0; o < outputs; ++o) {
    for (int k = 0; k < k_total; ++k) {
      const float* v =
          acc +
          static_cast<ptrdiff_t>((o / kernel.out_block) * k_blocks +
                                 k / kernel.pair_block) *
              kernel.block_floats() +
          ((o % kernel.out_block) * kernel.pair_block + k % kernel.pair_block) *
              kernel.lanes;
      float lanes[16];
      std::copy(v, v + kernel.lanes, lanes);
      for (int width = kernel.lanes / 2; width >= 1; width /= 2) {
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
  isa_ = Avx512KernelsAvailable() ? Isa::kAvx512
         : Avx2KernelsAvailable() ? Isa::kAvx2
                                  : Isa::kNone;
  supported_ = isa_ != Isa::kNone && g.channels > 0 && g.outputs > 0 &&
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
  if (!supported_) return 0;
  const RowKernel& kernel = KernelFor(isa_);
  const size_t blocks =
      static_cast<size_t>(Ceil(outputs, kernel.out_block)) *
      static_cast<size_t>(Ceil(g_.channels * taps_, kernel.pair_block));
  const size_t planes = static_cast<size_t>(g_.channels) * g_.stride_w *
                        static_cast<size_t>(padded_h_) * phase_w_;
  return blocks * kernel.block_floats() + planes;
}

void RowWeightGradient::Accumulate(int images, const float* bottom,
                                   ptrdiff_t bottom_step, const float* top_diff,
                                   ptrdiff_t top_step, int output_begin,
                                   int output_end, float* weight_diff,
                                   float* scratch) const {
  const int outputs = output_end - output_begin;
  if (images <= 0 || outputs <= 0) return;
  const RowKernel& kernel = KernelFor(isa_);
  const int out_block = kernel.out_block;
  const int pair_block = kernel.pair_block;
  const size_t block_floats = kernel.block_floats();
  const int k_total = g_.channels * taps_;
  const int k_blocks = Ceil(k_total, pair_block);
  const int o_blocks = Ceil(outputs, out_block);
  const size_t acc_floats =
      static_cast<size_t>(o_blocks) * k_blocks * block_floats;
  float* acc = scratch;
  float* planes = scratch + acc_floats;
  std::memset(acc, 0, acc_floats * sizeof(float));

  const int sw = g_.stride_w;
  const ptrdiff_t plane = static_cast<ptrdiff_t>(padded_h_) * phase_w_;
  const ptrdiff_t positions = static_cast<ptrdiff_t>(output_h_) * output_w_;
  const ptrdiff_t col_step = static_cast<ptrdiff_t>(g_.stride_h) * phase_w_;
  const int band_rows = std::max(
      1, static_cast<int>(kBandBytes / (sizeof(float) * out_block *
                                        static_cast<size_t>(output_w_))));
  // The rows of output block ob's band from output row y0, in image dy_n.
  auto BandRows = [&](const float* dy_n, int ob, int y0, int begin, int end,
                      const float** rows) {
    for (int o = 0; o < out_block; ++o) {
      const int out = std::min(begin + ob * out_block + o, end - 1);
      rows[o] = dy_n + out * positions + static_cast<ptrdiff_t>(y0) * output_w_;
    }
  };
  const float* col[kMaxPairs];
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
    const float* dy[kMaxOut];
    const float* next[kMaxOut];
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
          for (int p = 0; p < pair_block; ++p) {
            const int k = std::min(kb * pair_block + p, k_total - 1);
            col[p] = planes + pair_start_[k] + y0 * col_step;
          }
          float* block_acc =
              acc + static_cast<ptrdiff_t>(ob * k_blocks + kb) * block_floats;
          if (kb == 0 && !last) {
            kernel.prefetching(dy, col, rows, output_w_, col_step, output_w_,
                               next, block_acc);
          } else {
            kernel.plain(dy, col, rows, output_w_, col_step, output_w_, nullptr,
                         block_acc);
          }
        }
      }
    }
  }
  AddLanes(kernel, acc, outputs, k_total,
           weight_diff + static_cast<ptrdiff_t>(output_begin) * k_total);
}

}  // namespace poseidon
