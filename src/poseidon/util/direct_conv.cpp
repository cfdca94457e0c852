// DirectConv: a convolution that multiplies like im2col + GEMM but loads
// its column vectors straight from a zero-padded copy of the image, with
// AVX-512 kernels, or on AVX2 CPUs through the AVX2 GEMM's implicit
// packing (Note [Implicit im2col] in util/sgemm_avx2.cpp).
//
// See Note [AVX-512 isolation] in util/avx512.hpp: only the functions
// marked POSEIDON_AVX512 contain AVX-512 instructions, reached through
// Forward and AccumulateWeightGrad, which need supported().
//
// Note [Direct convolution]
// With unit stride, output (y, x) of tap (i, j) reads image element
// (y - pad_h + i dh, x - pad_w + j dw). In a zero-padded copy of the image
// (padded_w wide) that is element (y + i dh) padded_w + x + j dw: along an
// output row, consecutive floats. So the K x S column matrix of im2col need
// not exist: the broadcast kernel (8 output channels x 2 vectors of 16
// output positions, one packed weight broadcast per row and (channel, tap))
// loads its column vectors straight from the padded copy. The vectors are
// "segments" of 16 consecutive output positions (all lanes used whatever
// the row width); one that spans rows is a few masked loads, one per row
// piece, with masks fixed per segment (they stay in mask registers and no
// lane reads outside the padded image). Results are stored straight into
// the top.
// The weight gradient is the same kind of kernel with the roles turned:
// rows are (channel, tap) pairs broadcasting padded-image elements, vectors
// run over output channels of the top diff transposed to (position,
// channel). The input gradient is a direct convolution of the top diff
// with the kernel flipped and channels and outputs swapped (pad dilation
// (kernel - 1) - pad), which is why PackWeights can flip. Measured on the
// 2-core development machine (Xeon, AVX-512), CIFAR-10 quick's 5x5 layers
// run about twice as fast as im2col + OpenBLAS, mostly from not writing and
// re-reading the column matrix.
//
// Note [Output vectors]
// On small maps the segments span rows: an 8 x 8 output (CIFAR-10 quick's
// conv3) makes every segment two masked row pieces, and a 7 x 7 one
// (GoogLeNet's 5x5 layers at 7 x 7) three. There the forward turns the
// roles round, as the weight gradient does: a tile is MR output positions
// x NV vectors of 16 output channels (6 x 4 or 8 x 1..3), each (channel,
// tap) step loads NV vectors of packed weights (k, then outputs rounded up
// to 16) and broadcasts one padded-image element per position, at the
// position's own offset plus the row's (row_offset_, position_offset_, as
// the AVX2 path keeps them), so no position needs a mask or a neighbour in
// its row. The tile writes a transposed output (positions x channels),
// transposed into the top once per image. K runs in blocks of
// kDirectBlockSteps as in the position kernel. kAuto takes it for rows
// narrower than 12 outputs with at most an eighth of the vector lanes idle
// (PreferOutputVectors); measured on a 2-core Xeon (AVX-512, 2 MiB L2),
// one thread, batch 100 or 8: CIFAR-10 quick's conv3 (32 -> 64, 8 x 8)
// forward 6.0 -> 5.3 ms and backward 12.2 -> 11.0 (its input gradient is
// the 64 -> 32 case: forward 6.1 -> 5.0), GoogLeNet's 5b 5x5 (48 -> 128,
// 7 x 7) forward 2.2 -> 1.1 ms and backward 3.5 -> 2.4; even at 14 x 14,
// 5% slower at 28 x 28 and 8-10% with 50 outputs (LeNet's conv2, 64 lanes
// for 50), so those keep the position vectors. Rows of 17 to 19 outputs
// use under 60% of the position vectors' lanes (17 of 32; segments across
// rows cost about as much in pieces), and there the output vectors are
// faster too: Inception-V3's 1x7 and 7x1 layers on 17 x 17 (128 to 128,
// batch 8, 1 thread, compare_builds.py --conv, medians of 3 interleaved
// runs) forward 5.18 -> 4.50 and 5.00 -> 4.49 ms, backward 9.30 -> 9.09
// and 8.97 -> 8.78; inside the net (batch 8, 3 interleaved runs) its four such
// layers 1.09-1.14 times as fast in both passes, at 1 and 2 threads. On 16 x 16
// (CIFAR-10 quick's conv2, every lane used) they were 2-4% slower. Past the
// direct path's 128 outputs (Note [Direct path]), the 160- and 192-output 1x7
// layers ran 5-15% faster alone with output vectors than by im2col + GEMM but
// 2-10% slower inside the net, so that limit stays.
//
// Note [Strided direct convolution]
// With stride sw along the rows, output x of tap j reads padded column
// x sw + j dw: not consecutive. Split each padded row into sw column phases
// (phase p holds columns p, p + sw, ...; phase_w_ = ceil(padded_w / sw)
// wide) and that column is phase (j dw) mod sw, element x + (j dw) div sw:
// consecutive again, for every stride (the row weight gradient's trick,
// Note [Row weight gradient] in util/row_weight_grad.cpp). A stride down
// the columns only steps whole padded rows (y sh phase_w_). So the padded
// copy is channels x sw phases of padded_h_ x phase_w_ (with unit stride
// the plain padded image), a (channel, tap) row starts at its channel's
// phase of the tap plus the tap's rows and element, and the AVX2 implicit
// GEMM packs from it as before: runs of 8 positions along an output row
// are plain loads. The AVX-512 kernels' segments assume unit stride, so
// strided geometries take the AVX2 path or none.
#include "poseidon/util/direct_conv.hpp"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>

#include "poseidon/util/sgemm_avx2.hpp"

#define POSEIDON_AVX512 __attribute__((target("avx512f,fma")))

namespace poseidon {
namespace {

// The output-vector kernel's packed width: outputs rounded up to 16.
int OutputWidth(int outputs) { return (outputs + 15) / 16 * 16; }

// The share of the position vectors' lanes that a row's own segments use
// (17 positions: 2 vectors, 17 of 32 lanes).
double RowLaneShare(int output_w) {
  return output_w / (16.0 * ((output_w + 15) / 16));
}

// See Note [Output vectors]: rows narrower than 12 outputs or using under
// 60% of the position vectors' lanes, and at most an eighth of the lanes of
// the output vectors idle.
bool PreferOutputVectors(const DirectConv::Geometry& g, int output_w) {
  return (output_w < 12 || RowLaneShare(output_w) < 0.6) &&
         OutputWidth(g.outputs) * 8 <= g.outputs * 9;
}

// Output channels per forward tile (rows of accumulators) and per
// weight-gradient tile (two vectors).
constexpr int kTileRows = 8;
constexpr int kTileCols = 32;
// The most top-diff bytes per band of the weight gradient (Note [Weight
// gradient in row bands]): well inside a 1-2 MB L2 beside the image rows.
constexpr size_t kWeightBandBytes = 256 * 1024;

// The first `n` of 16 lanes.
__mmask16 LaneMask(int n) {
  return n >= 16 ? __mmask16(0xFFFF)
                 : static_cast<__mmask16>((1u << (n > 0 ? n : 0)) - 1u);
}

// Loads of the direct kernels per K block (channels x taps): the packed
// weights of one block of 8 output channels then take 8 KB, and stay in L1
// while the tiles of every segment use them.
constexpr int kDirectBlockSteps = 256;

using Segment = DirectConv::Segment;

// What the forward kernel needs of a DirectConv plan.
struct DirectShape {
  int channels;
  int taps;
  ptrdiff_t plane;  // padded_h * padded_w
  int outputs;
  int positions;  // output_h * output_w
  int segments;   // even: an empty one pads an odd count
  const Segment* segment;
  const int* tap_offset;  // per tap: (i dh) padded_w + j dw
};

// The 16 lanes of segment s for the tap at `offset` of the padded plane x:
// one plain load for the first piece (lanes past it read the next floats
// of the copy: at most 15 past its last plane, which has that slack), then
// a masked load per further piece, over those lanes (the masks are the
// same for every tap and channel).
template <int P>
POSEIDON_AVX512 __m512 LoadSegment(const float* x, const Segment& s,
                                   const __mmask16* m, int offset) {
  __m512 v = _mm512_loadu_ps(x + s.start[0] + offset);
#pragma GCC unroll 4
  for (int p = 1; p < P; ++p) {
    v = _mm512_mask_loadu_ps(v, m[p], x + s.start[p] + offset);
  }
  return v;
}

// MR output channels x segments s0 and s1 over `channels` padded planes of
// x, from packed weights ap (8 floats per channel and tap, the first MR
// used). Writes (or, if `accumulate`, adds to) the segments' outputs in
// the MR rows of y, ldy apart.
template <int MR, int P>
POSEIDON_AVX512 void DirectForwardTile(int channels, int taps, ptrdiff_t plane,
                                       const float* ap, const float* x,
                                       const Segment& s0, const Segment& s1,
                                       const int* tap_offset, float* y,
                                       ptrdiff_t ldy, bool accumulate) {
  __mmask16 m0[P];
  __mmask16 m1[P];
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
    m0[p] = s0.mask[p];
    m1[p] = s1.mask[p];
  }
  __m512 acc0[MR];
  __m512 acc1[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    acc0[r] = _mm512_setzero_ps();
    acc1[r] = _mm512_setzero_ps();
  }
  for (int c = 0; c < channels; ++c) {
    for (int t = 0; t < taps; ++t) {
      const int offset = tap_offset[t];
      const __m512 b0 = LoadSegment<P>(x, s0, m0, offset);
      const __m512 b1 = LoadSegment<P>(x, s1, m1, offset);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m512 av = _mm512_set1_ps(ap[r]);
        acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
      }
      ap += kTileRows;
    }
    x += plane;
  }
  const __mmask16 store0 = s0.lanes;
  const __mmask16 store1 = s1.lanes;
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* y0 = y + r * ldy + s0.first;
    float* y1 = y + r * ldy + s1.first;
    if (accumulate) {
      acc0[r] = _mm512_add_ps(acc0[r], _mm512_maskz_loadu_ps(store0, y0));
      acc1[r] = _mm512_add_ps(acc1[r], _mm512_maskz_loadu_ps(store1, y1));
    }
    _mm512_mask_storeu_ps(y0, store0, acc0[r]);
    _mm512_mask_storeu_ps(y1, store1, acc1[r]);
  }
}

using DirectForwardFn = void (*)(int, int, ptrdiff_t, const float*,
                                 const float*, const Segment&, const Segment&,
                                 const int*, float*, ptrdiff_t, bool);

template <int MR>
DirectForwardFn DirectForwardFor(int pieces) {
  switch (pieces) {
    case 1:
      return DirectForwardTile<MR, 1>;
    case 2:
      return DirectForwardTile<MR, 2>;
    case 3:
      return DirectForwardTile<MR, 3>;
    default:
      return DirectForwardTile<MR, DirectConv::kMaxPieces>;
  }
}

DirectForwardFn DirectForwardFor(int rows, int pieces) {
  switch (rows) {
    case 1:
      return DirectForwardFor<1>(pieces);
    case 2:
      return DirectForwardFor<2>(pieces);
    case 3:
      return DirectForwardFor<3>(pieces);
    case 4:
      return DirectForwardFor<4>(pieces);
    case 5:
      return DirectForwardFor<5>(pieces);
    case 6:
      return DirectForwardFor<6>(pieces);
    case 7:
      return DirectForwardFor<7>(pieces);
    default:
      return DirectForwardFor<8>(pieces);
  }
}

// One padded image x into y (outputs x positions). K is split into blocks
// of whole channels (kDirectBlockSteps); later blocks add to the first
// one's result. An odd last segment is paired with the empty one.
void DirectForwardImage(const DirectShape& s, const float* packed,
                        const float* x, float* y) {
  const ptrdiff_t k_total = static_cast<ptrdiff_t>(s.channels) * s.taps;
  const int block = std::max(1, kDirectBlockSteps / s.taps);
  for (int c0 = 0; c0 < s.channels; c0 += block) {
    const int channels = std::min(block, s.channels - c0);
    for (int o0 = 0; o0 < s.outputs; o0 += kTileRows) {
      const int rows = std::min(kTileRows, s.outputs - o0);
      const float* ap = packed + o0 * k_total + c0 * s.taps * kTileRows;
      float* yo = y + static_cast<ptrdiff_t>(o0) * s.positions;
      for (int seg = 0; seg < s.segments; seg += 2) {
        const Segment& s0 = s.segment[seg];
        const Segment& s1 = s.segment[seg + 1];
        DirectForwardFor(rows, std::max(s0.pieces, s1.pieces))(
            channels, s.taps, s.plane, ap, x + c0 * s.plane, s0, s1,
            s.tap_offset, yo, s.positions, c0 > 0);
      }
    }
  }
}

// The output-vector kernel (Note [Output vectors]): MR output positions x
// NV vectors of 16 output channels, over every (channel, tap) row k of
// the padded image x: acc[m][v] += x[position[m] + row_offset[k]] *
// w[k][16 v .. 16 v + 15] (w rows ldw apart). Writes the MR rows of the
// transposed output yt (positions x channels, ldy apart), or adds to them
// if `accumulate`.
template <int MR, int NV>
POSEIDON_AVX512 void OutputVectorTile(int k_total, const ptrdiff_t* row_offset,
                                      const float* x, const int* position,
                                      const float* w, ptrdiff_t ldw, float* yt,
                                      ptrdiff_t ldy, bool accumulate) {
  const float* rows[MR];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) rows[m] = x + position[m];
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[m][v] = _mm512_setzero_ps();
  }
  for (int k = 0; k < k_total; ++k, w += ldw) {
    const ptrdiff_t offset = row_offset[k];
    __m512 wv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) wv[v] = _mm512_loadu_ps(w + 16 * v);
#pragma GCC unroll 8
    for (int m = 0; m < MR; ++m) {
      const __m512 a = _mm512_set1_ps(rows[m][offset]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        acc[m][v] = _mm512_fmadd_ps(a, wv[v], acc[m][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* out = yt + m * ldy + 16 * v;
      _mm512_storeu_ps(out, accumulate
                                ? _mm512_add_ps(acc[m][v], _mm512_loadu_ps(out))
                                : acc[m][v]);
    }
  }
}

// Vectors of output channels per tile, and positions per tile for NV
// vectors: MR x NV accumulators, at most 24 of the 32 registers.
constexpr int kOutputTileVectors = 4;
constexpr int OutputTileRows(int nv) { return nv >= 4 ? 6 : 8; }

using OutputVectorFn = void (*)(int, const ptrdiff_t*, const float*, const int*,
                                const float*, ptrdiff_t, float*, ptrdiff_t,
                                bool);

template <int NV, int... M>
constexpr std::array<OutputVectorFn, 8> OutputVectorRow(
    std::integer_sequence<int, M...>) {
  return {{&OutputVectorTile<std::min(M + 1, OutputTileRows(NV)), NV>...}};
}

// [NV - 1][MR - 1]; entries past OutputTileRows(NV) repeat its last one.
constexpr std::array<std::array<OutputVectorFn, 8>, kOutputTileVectors>
    kOutputVectorTiles = {
        OutputVectorRow<1>(std::make_integer_sequence<int, 8>()),
        OutputVectorRow<2>(std::make_integer_sequence<int, 8>()),
        OutputVectorRow<3>(std::make_integer_sequence<int, 8>()),
        OutputVectorRow<4>(std::make_integer_sequence<int, 8>())};

// The weight gradient transposed, dwt[(c, t)][o] = sum over positions p of
// xpad[c][p + tap offset t] * dyt[p][o], as a broadcast kernel: MR (channel,
// tap) rows x 32 output channels of accumulators; per position one image
// element broadcast per row and two vectors of the transposed top diff.
// rows[r] points at image row 0 of the padded plane of row r's channel,
// shifted by its tap; positions run over output rows (ow consecutive
// elements of padded row y) so the broadcasts walk memory in order. Adds
// the sums to dwt (rows ldc apart), columns masked by m0 / m1 unless kFull
// (all 32 columns: plain loads, no mask registers to keep).
// 16 columns of the weight-gradient tile: the lanes of m, or all of them.
template <bool kFull>
POSEIDON_AVX512 inline __m512 LoadColumns(__mmask16 m, const float* p) {
  if constexpr (kFull) {
    return _mm512_loadu_ps(p);
  } else {
    return _mm512_maskz_loadu_ps(m, p);
  }
}

template <int MR, bool kFull>
POSEIDON_AVX512 void DirectWeightTile(const float* const* rows,
                                      ptrdiff_t padded_width, int out_h,
                                      int out_w, const float* dyt,
                                      ptrdiff_t dyt_ld, __mmask16 m0,
                                      __mmask16 m1, float* dwt, ptrdiff_t ldc) {
  __m512 acc0[MR];
  __m512 acc1[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    acc0[r] = _mm512_setzero_ps();
    acc1[r] = _mm512_setzero_ps();
  }
  for (int y = 0; y < out_h; ++y) {
    const ptrdiff_t row_start = y * padded_width;
    for (int x = 0; x < out_w; ++x) {
      const __m512 b0 = LoadColumns<kFull>(m0, dyt);
      const __m512 b1 = LoadColumns<kFull>(m1, dyt + 16);
      dyt += dyt_ld;
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m512 av = _mm512_set1_ps(rows[r][row_start + x]);
        acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* c = dwt + r * ldc;
    const __m512 sum0 = _mm512_add_ps(acc0[r], LoadColumns<kFull>(m0, c));
    const __m512 sum1 = _mm512_add_ps(acc1[r], LoadColumns<kFull>(m1, c + 16));
    if (kFull) {
      _mm512_storeu_ps(c, sum0);
      _mm512_storeu_ps(c + 16, sum1);
    } else {
      _mm512_mask_storeu_ps(c, m0, sum0);
      _mm512_mask_storeu_ps(c + 16, m1, sum1);
    }
  }
}

using DirectWeightFn = void (*)(const float* const*, ptrdiff_t, int, int,
                                const float*, ptrdiff_t, __mmask16, __mmask16,
                                float*, ptrdiff_t);

template <bool kFull, int... R>
constexpr std::array<DirectWeightFn, kTileRows> DirectWeightRow(
    std::integer_sequence<int, R...>) {
  return {{&DirectWeightTile<R + 1, kFull>...}};
}

// [full][rows - 1]
constexpr std::array<std::array<DirectWeightFn, kTileRows>, 2>
    kDirectWeightTiles = {
        DirectWeightRow<false>(std::make_integer_sequence<int, kTileRows>()),
        DirectWeightRow<true>(std::make_integer_sequence<int, kTileRows>())};

}  // namespace

DirectConv::DirectConv(const Geometry& g, Kernel kernel) : g_(g) {
  const bool strided = g.stride_h != 1 || g.stride_w != 1;
  if (g.stride_h <= 0 || g.stride_w <= 0 || g.pad_h < 0 || g.pad_w < 0 ||
      g.dilation_h <= 0 || g.dilation_w <= 0 || g.kernel_h <= 0 ||
      g.kernel_w <= 0 || (strided && Avx512KernelsAvailable())) {
    return;
  }
  // The window's extent; the output is empty where it passes the padding.
  const int span_h = g.height + 2 * g.pad_h - g.dilation_h * (g.kernel_h - 1);
  const int span_w = g.width + 2 * g.pad_w - g.dilation_w * (g.kernel_w - 1);
  output_h_ = span_h <= 0 ? 0 : (span_h - 1) / g.stride_h + 1;
  output_w_ = span_w <= 0 ? 0 : (span_w - 1) / g.stride_w + 1;
  taps_ = g.kernel_h * g.kernel_w;
  if (!KernelsAvailable() || output_h_ <= 0 || output_w_ <= 0 ||
      g.channels <= 0 || g.outputs <= 0 || g.height <= 0 || g.width <= 0) {
    return;
  }
  padded_h_ = g.height + 2 * g.pad_h;
  padded_w_ = g.width + 2 * g.pad_w;
  // Past the padded row's width a stride adds phases of padding only.
  if (g.stride_w > padded_w_) return;
  phase_w_ = (padded_w_ - 1) / g.stride_w + 1;
  for (int t = 0; t < taps_; ++t) {
    tap_offset_.push_back((t / g.kernel_w) * g.dilation_h * padded_w_ +
                          (t % g.kernel_w) * g.dilation_w);
  }
  avx512_ = Avx512KernelsAvailable();
  if (avx512_) {
    output_vectors_ = kernel == Kernel::kAuto
                          ? PreferOutputVectors(g, output_w_)
                          : kernel == Kernel::kOutputVectors;
  }
  if (!avx512_ || output_vectors_) {
    // Note [Strided direct convolution]; with unit stride, phase_w_ is
    // padded_w_ and these are tap_offset_'s.
    const ptrdiff_t plane = static_cast<ptrdiff_t>(padded_h_) * phase_w_;
    for (int c = 0; c < g.channels; ++c) {
      for (int t = 0; t < taps_; ++t) {
        const int col = (t % g.kernel_w) * g.dilation_w;
        row_offset_.push_back(
            (static_cast<ptrdiff_t>(c) * g.stride_w + col % g.stride_w) *
                plane +
            static_cast<ptrdiff_t>(t / g.kernel_w) * g.dilation_h * phase_w_ +
            col / g.stride_w);
      }
    }
    for (int y = 0; y < output_h_; ++y) {
      for (int x = 0; x < output_w_; ++x) {
        position_offset_.push_back(y * g.stride_h * phase_w_ + x);
      }
    }
    supported_ = true;
    return;
  }
  // Two ways to cut the outputs into segments; keep the cheaper. Dense:
  // 16 consecutive positions, across rows (cut early where a piece more
  // would exceed kMaxPieces). Rows: each output row on its own, so one
  // piece. A further piece costs about half a segment (measured).
  const int positions = output_h_ * output_w_;
  std::vector<Segment> dense;
  double dense_cost = 0;
  for (int first = 0; first < positions;) {
    Segment s = {};
    s.first = first;
    int lanes = 0;
    while (lanes < 16 && first < positions && s.pieces < kMaxPieces) {
      const int y = first / output_w_;
      const int x = first % output_w_;
      const int run = std::min({16 - lanes, output_w_ - x, positions - first});
      s.start[s.pieces] = y * padded_w_ + x - lanes;
      s.mask[s.pieces] = static_cast<uint16_t>(((1u << run) - 1u) << lanes);
      ++s.pieces;
      lanes += run;
      first += run;
    }
    s.lanes = static_cast<uint16_t>((1u << lanes) - 1u);
    dense.push_back(s);
    dense_cost += 1 + 0.5 * (s.pieces - 1);
  }
  std::vector<Segment> rows;
  for (int y = 0; y < output_h_; ++y) {
    for (int x = 0; x < output_w_; x += 16) {
      Segment s = {};
      s.first = y * output_w_ + x;
      s.pieces = 1;
      s.start[0] = y * padded_w_ + x;
      s.mask[0] = s.lanes =
          static_cast<uint16_t>((1u << std::min(16, output_w_ - x)) - 1u);
      rows.push_back(s);
    }
  }
  segments_ = rows.size() <= dense_cost ? std::move(rows) : std::move(dense);
  // The partner of an odd last segment: no lanes, stores nothing.
  if (segments_.size() % 2 == 1) {
    Segment empty = {};
    empty.pieces = 1;
    segments_.push_back(empty);
  }
  supported_ = true;
}

size_t DirectConv::packed_size() const {
  if (!avx512_) {  // the plain (outputs, channels x taps) matrix
    return static_cast<size_t>(g_.outputs) * g_.channels * taps_;
  }
  if (output_vectors_) {  // (channels x taps, outputs rounded up to 16)
    return static_cast<size_t>(g_.channels) * taps_ * OutputWidth(g_.outputs);
  }
  const size_t row_blocks = (g_.outputs + kTileRows - 1) / kTileRows;
  return row_blocks * kTileRows * g_.channels * taps_;
}

// The position-vector kernel: blocks of 8 output channels; within a block,
// for each (channel, tap), the 8 weights (zero for rows past `outputs`).
// The output-vector kernel: for each (channel, tap), the weights of every
// output, zeros up to a multiple of 16. The AVX2 path: the plain matrix.
void DirectConv::PackWeights(const float* weights, bool flip_and_swap,
                             float* packed) const {
  const int k_total = g_.channels * taps_;
  // W[o][c][t] of this convolution.
  auto weight = [&](int o, int k) {
    const int c = k / taps_;
    const int t = k % taps_;
    return flip_and_swap
               ? weights[(static_cast<size_t>(c) * g_.outputs + o) * taps_ +
                         (taps_ - 1 - t)]
               : weights[static_cast<size_t>(o) * k_total + k];
  };
  if (!avx512_) {
    for (int o = 0; o < g_.outputs; ++o) {
      for (int k = 0; k < k_total; ++k) *packed++ = weight(o, k);
    }
    return;
  }
  if (output_vectors_) {
    const int width = OutputWidth(g_.outputs);
    for (int k = 0; k < k_total; ++k) {
      for (int o = 0; o < width; ++o) {
        *packed++ = o < g_.outputs ? weight(o, k) : 0.0f;
      }
    }
    return;
  }
  for (int o0 = 0; o0 < g_.outputs; o0 += kTileRows) {
    for (int k = 0; k < k_total; ++k) {
      for (int r = 0; r < kTileRows; ++r) {
        const int o = o0 + r;
        *packed++ = o < g_.outputs ? weight(o, k) : 0.0f;
      }
    }
  }
}

size_t DirectConv::padded_floats() const {
  return static_cast<size_t>(padded_h_) * phase_w_ * g_.stride_w * g_.channels +
         16;
}

void DirectConv::Pad(const float* bottom, float* out) const {
  const int sw = g_.stride_w;
  const ptrdiff_t image_plane = static_cast<ptrdiff_t>(g_.height) * g_.width;
  for (int c = 0; c < g_.channels; ++c, bottom += image_plane) {
    for (int p = 0; p < sw; ++p) {
      out = std::fill_n(out, static_cast<ptrdiff_t>(g_.pad_h) * phase_w_, 0.0f);
      for (int h = 0; h < g_.height; ++h) {
        const float* row = bottom + static_cast<ptrdiff_t>(h) * g_.width;
        if (sw == 1) {
          out = std::fill_n(out, g_.pad_w, 0.0f);
          out = std::copy(row, row + g_.width, out);
          out = std::fill_n(out, g_.pad_w, 0.0f);
          continue;
        }
        for (int q = 0; q < phase_w_; ++q) {  // padded column q sw + p
          const int w = q * sw + p - g_.pad_w;
          *out++ = w >= 0 && w < g_.width ? row[w] : 0.0f;
        }
      }
      out = std::fill_n(out, static_cast<ptrdiff_t>(g_.pad_h) * phase_w_, 0.0f);
    }
  }
  std::fill_n(out, 16, 0.0f);
}

// The image zero-padded, then the kernel from the padded copy into top.
void DirectConv::Forward(const float* packed, const float* bottom,
                         float* top) const {
  const ptrdiff_t plane = static_cast<ptrdiff_t>(padded_h_) * padded_w_;
  thread_local std::vector<float> padded;
  padded.resize(std::max(padded.size(), padded_floats()));
  Pad(bottom, padded.data());
  if (!avx512_) {
    const int k_total = g_.channels * taps_;
    const int positions = output_h_ * output_w_;
    const ImplicitColumns cols{padded.data(), row_offset_.data(),
                               position_offset_.data()};
    Avx2ImplicitForward(g_.outputs, positions, k_total, packed, k_total, cols,
                        0.0f, top, positions);
    return;
  }
  if (output_vectors_) {
    OutputVectorForward(packed, padded.data(), top);
    return;
  }
  const DirectShape s{g_.channels,
                      taps_,
                      plane,
                      g_.outputs,
                      output_h_ * output_w_,
                      static_cast<int>(segments_.size()),
                      segments_.data(),
                      tap_offset_.data()};
  DirectForwardImage(s, packed, padded.data(), top);
}

// See Note [Output vectors]: tiles of positions x 16-channel vectors into
// a transposed output (positions x channels), then transposed into top.
void DirectConv::OutputVectorForward(const float* packed, const float* padded,
                                     float* top) const {
  const int k_total = g_.channels * taps_;
  const int positions = output_h_ * output_w_;
  const int width = OutputWidth(g_.outputs);
  const int vectors = width / 16;
  thread_local std::vector<float> yt;
  yt.resize(std::max(yt.size(), static_cast<size_t>(positions) * width));
  for (int k0 = 0; k0 < k_total; k0 += kDirectBlockSteps) {
    const int steps = std::min(kDirectBlockSteps, k_total - k0);
    for (int v0 = 0; v0 < vectors; v0 += kOutputTileVectors) {
      const int nv = std::min(kOutputTileVectors, vectors - v0);
      const int rows = OutputTileRows(nv);
      for (int p0 = 0; p0 < positions; p0 += rows) {
        const int mr = std::min(rows, positions - p0);
        kOutputVectorTiles[nv - 1][mr - 1](
            steps, row_offset_.data() + k0, padded,
            position_offset_.data() + p0,
            packed + static_cast<ptrdiff_t>(k0) * width + 16 * v0, width,
            yt.data() + static_cast<ptrdiff_t>(p0) * width + 16 * v0, width,
            k0 > 0);
      }
    }
  }
  for (int o = 0; o < g_.outputs; ++o) {
    const float* in = yt.data() + o;
    for (int p = 0; p < positions; ++p, in += width) *top++ = *in;
  }
}

// Per image: the bottom zero-padded (so that every tap of every position is
// a plain load) and the top diff transposed to (position, output), then
// DirectWeightTile over blocks of 8 (channel, tap) rows x 32 outputs into a
// transposed gradient, added to weight_diff at the end.
//
// Note [Weight gradient in row bands]
// Every tile of 8 (channel, tap) rows streams the transposed top diff of
// the positions it covers. Over a whole image that is outputs x positions
// floats (6.4 MB for VGG-16's conv2_2, 128 x 112 x 112), read again by each
// of the channels x taps / 8 tiles (144 there): out of cache, about 0.9 GB
// per image. So the positions go in bands of whole output rows holding at
// most kWeightBandBytes of top diff, which stay in the core's L2 while every
// tile passes over them; each tile adds its band's sums to the gradient.
void DirectConv::AccumulateWeightGrad(int images, const float* bottom,
                                      ptrdiff_t bottom_step,
                                      const float* top_diff, ptrdiff_t top_step,
                                      float* weight_diff) const {
  // With the AVX-512 kernels (unit stride), the plain padded image.
  const int padded_w = padded_w_;
  const ptrdiff_t padded_plane = static_cast<ptrdiff_t>(padded_h_) * padded_w;
  const int positions = output_h_ * output_w_;
  const int k_total = g_.channels * taps_;
  std::vector<float> padded(padded_floats());
  // The AVX2 path reads the top diff in place (no transposed copy).
  std::vector<float> dyt(avx512_ ? static_cast<size_t>(positions) * g_.outputs
                                 : 0);
  std::vector<float> dwt(static_cast<size_t>(k_total) * g_.outputs, 0.0f);
  const float* rows[kTileRows];
  const int band_rows = std::max(
      1, static_cast<int>(kWeightBandBytes /
                          (sizeof(float) * static_cast<size_t>(output_w_) *
                           static_cast<size_t>(g_.outputs))));
  for (int n = 0; n < images; ++n) {
    Pad(bottom + n * bottom_step, padded.data());
    if (!avx512_) {  // dwt = col * dy^T, summed over the images
      const ImplicitColumns cols{padded.data(), row_offset_.data(),
                                 position_offset_.data()};
      Avx2ImplicitColumnsTimesBt(k_total, g_.outputs, positions, cols,
                                 top_diff + n * top_step, positions,
                                 n == 0 ? 0.0f : 1.0f, dwt.data(), g_.outputs);
      continue;
    }
    // Writes in order; the reads walk `outputs` rows side by side.
    const float* dy = top_diff + n * top_step;
    float* out = dyt.data();
    for (int p = 0; p < positions; ++p) {
      for (int o = 0; o < g_.outputs; ++o) {
        *out++ = dy[static_cast<ptrdiff_t>(o) * positions + p];
      }
    }
    // See Note [Weight gradient in row bands].
    for (int y0 = 0; y0 < output_h_; y0 += band_rows) {
      const int band = std::min(band_rows, output_h_ - y0);
      const ptrdiff_t band_start = static_cast<ptrdiff_t>(y0) * padded_w;
      const float* band_dyt =
          dyt.data() + static_cast<ptrdiff_t>(y0) * output_w_ * g_.outputs;
      for (int k0 = 0; k0 < k_total; k0 += kTileRows) {
        const int count = std::min(kTileRows, k_total - k0);
        for (int r = 0; r < count; ++r) {
          const int c = (k0 + r) / taps_;
          const int t = (k0 + r) % taps_;
          rows[r] = padded.data() + c * padded_plane + band_start +
                    (t / g_.kernel_w) * g_.dilation_h * padded_w +
                    (t % g_.kernel_w) * g_.dilation_w;
        }
        for (int o0 = 0; o0 < g_.outputs; o0 += kTileCols) {
          const bool full = g_.outputs - o0 >= kTileCols;
          kDirectWeightTiles[full][count - 1](
              rows, padded_w, band, output_w_, band_dyt + o0, g_.outputs,
              LaneMask(g_.outputs - o0), LaneMask(g_.outputs - o0 - 16),
              dwt.data() + static_cast<ptrdiff_t>(k0) * g_.outputs + o0,
              g_.outputs);
        }
      }
    }
  }
  for (int o = 0; o < g_.outputs; ++o) {
    for (int k = 0; k < k_total; ++k) {
      weight_diff[static_cast<ptrdiff_t>(o) * k_total + k] +=
          dwt[static_cast<size_t>(k) * g_.outputs + o];
    }
  }
}

}  // namespace poseidon
