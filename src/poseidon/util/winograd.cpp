// WinogradConv: 3x3 and 5x5 stride-1 convolutions by Winograd's F(4x4, 3x3),
// F(2x2, 5x5) and F(4x4, 5x5), 1x7 and 7x1 ones by F(2, 7) along the kernel's
// long axis, the channel sums of each transform position as one GEMM per tile
// block; also the weight gradient, summed in the transform domain.
//
// Note [Winograd]
// Matrices. F(4, 3) (4 outputs of a 3-tap correlation from 6 inputs) by
// Cook-Toom with the interpolation points 0, 1, -1, 2, -2 and infinity
// (Lavin and Gray 2015):
//   y = A^T [(G g) .* (B^T d)],  and in 2-D  Y = A^T [(G g G^T) .* (B^T d B)] A
// with
//   B^T = [ 4  0 -5  0  1  0 ]   G = [  1/4     0     0  ]
//         [ 0 -4 -4  1  1  0 ]       [ -1/6  -1/6  -1/6  ]
//         [ 0  4 -4 -1  1  0 ]       [ -1/6   1/6  -1/6  ]
//         [ 0 -2 -1  2  1  0 ]       [  1/24  1/12  1/6  ]
//         [ 0  2 -1 -2  1  0 ]       [  1/24 -1/12  1/6  ]
//         [ 0  4  0 -5  0  1 ]       [   0     0     1   ]
//   A^T = [ 1  1  1  1  1  0 ]
//         [ 0  1 -1  2 -2  0 ]
//         [ 0  1  1  4  4  0 ]
//         [ 0  1 -1  8 -8  1 ]
// (column k of A^T is (1, p, p^2, p^3) at point p; the last is infinity).
// F(2, 5) (2 outputs of a 5-tap correlation, also from 6 inputs) with the
// same points has the same B^T (it depends on the points alone, with G's
// rows scaled as above), and
//   G = [  1/4    0     0     0     0   ]   A^T = [ 1  1  1  1  1  0 ]
//       [ -1/6  -1/6  -1/6  -1/6  -1/6  ]         [ 0  1 -1  2 -2  1 ]
//       [ -1/6   1/6  -1/6   1/6  -1/6  ]
//       [  1/24  1/12  1/6   1/3   2/3  ]
//       [  1/24 -1/12  1/6  -1/3   2/3  ]
//       [   0     0     0     0     1   ]
// (row k of G is (1, p, ..., p^4) times the same scale at point k): 36
// multiplications per 2x2 output tile instead of 100. Both forms share the
// 6x6 transform domain, and so the input transform, the GEMMs and the
// scratch; only G, A^T and the tile edge m (4 or 2) differ. The transforms
// (ApplyG, in double, for the weights; ApplyBt; ApplyAt) are written out
// as the sums these rows give.
// F(4, 5) (4 outputs of a 5-tap correlation from 8 inputs) takes the
// points of F(2, 7) (Note [One-dimensional Winograd] below): 0, 1, -1, 2,
// -2, 1/2, -1/2 and infinity, and with them its 8 x 8 B^T; A^T is 4 x 8,
// column k (1, p, p^2, p^3) at point p (the last (0, 0, 0, 1)), and row k
// of G (8 x 5) is c_k (1, p, ..., p^4) with c = (1, -2/9, -2/9, 1/90,
// 1/90, 32/45, 32/45) and (0, 0, 0, 0, 1) last. In 2-D, F(4x4, 5x5): 64
// multiplications per 4x4 tile instead of 400, 4 per output against F(2x2,
// 5x5)'s 9, on the 8x8 transform domain: 64 GEMMs, and 8x8 windows m = 4
// apart. The generic transforms and the AVX2 ones are templates on the
// domain's edge, 6 or 8. (Checked by exact rational arithmetic that these
// matrices give the correlation, before they were written here.)
//
// Tiles. The output of each image is cut into tiles_h x tiles_w tiles of
// m x m (the last row and column of tiles partial); tile (ty, tx) reads the
// 6x6 input window whose corner is (m ty - pad_h, m tx - pad_w), zero
// outside the image, and writes only its outputs inside output_h x
// output_w. The tiles of the `images` of a Forward call are numbered image
// by image, row by row, and processed in blocks of tile_block()
// consecutive tiles, which may span images. For a block of T tiles:
//   V[pos] (channels x T) = the input transforms, position pos,
//   M[pos] (outputs x T)  = U[pos] (outputs x channels) V[pos],
// then the output transform of each (output, tile) column of M. The
// generic transforms run over 16 tiles at a time with the tiles innermost,
// so the compiler vectorises them without intrinsics (GCC 12 with the
// project's flags, -O3: SSE2 vectors for baseline x86-64, AVX2 in the
// second compilation, Note [Transforms on AVX2]); in float on AVX2 CPUs
// they are written with intrinsics (Note [Input transform on AVX2]).
//
// Blocking. Scratch is V and M of one block, P (channels + outputs) T
// elements, P the positions (36; 64 for F(4x4, 5x5), 8 for F(2, 7)). T is
// chosen so that they take about 2 MiB (an L2 of a server core, where they are
// written, multiplied and read back), but at least 64 tiles (narrower GEMMs
// re-read U, P outputs channels elements, for fewer tiles; on the shared
// 2-core development machine, one thread, float, layers of 64 to 512 channels
// ran 5-10% faster with blocks of 64 tiles than of 32, and 128 or 256 were
// within the noise of 64) and at most 256, a multiple of 16. So scratch stays
// bounded whatever the batch (9.4 MB for 512 channels and outputs in float),
// and the layer can keep one buffer per thread.
//
// Error. The transforms multiply by up to 8 (A^T) and 5 (B^T), and G's
// entries 1/6, 1/12 and 1/24 are not exact in binary, so in float the
// result differs from a direct sum by more than direct summation's
// rounding, and an output's error comes from its tile's whole 6x6 input
// window, not only from its r x r receptive field. Measured against
//   sum over c of |W[o][c]|_1 max |bottom[c]| over the square around the
//   receptive field reaching m - 1 further on each side (9x9 for 3x3, 7x7
//   for 5x5: it holds the window of the output's tile),
// with inputs and weights in [-1, 1], the error of F(4x4, 3x3) reached
// about 23 epsilon in float and 35 in double over 31 seeds of the test
// shapes, F(2x2, 5x5)'s 11 (forward) and 14 (weight gradient); F(4x4,
// 5x5)'s (one seed, its 11x11 square around the receptive field) 12.5 in
// float and 11.7 in double forward, 28 and 21 in the weight gradient, its
// G^T's 32/45 and 2^j / 90 summing the most terms; the tests allow 100
// epsilon. Against the receptive field's own sum of
// |W| |bottom|, a corner output of a padded image (one pixel in its
// receptive field, 16 or more in its window) shows errors many times
// larger. Larger tiles (F(6x6, 3x3)) are reported to lose about another
// decimal digit in float, which is why this is F(4x4, 3x3).
//
// Weight gradient. By transposition of Y's formula, dg = G^T [(A dY A^T)
// .* (B^T d B)] G per tile; the bracket is summed over tiles as P GEMMs
// per block (one per position), dU[pos] (outputs x channels) += Z[pos] (outputs
// x T) V[pos]^T, with V the forward's input transform and Z the top diff's (A
// has entries up to 8, as A^T), and the sum is taken back by G^T . G once, in
// double. Its error, against the sum over images and outputs of |dY| times the
// largest |x| of the channel (inputs in [-1, 1]), was at most 3.1 epsilon
// in float and 4.9 in double on the test shapes; the tests allow 100.
//
// Speed (bench program not in the tree; one thread, float, pad 1, the
// shared and loaded 2-core development machine, so +-20%): against
// im2col + cpu_gemm, 1.3x faster at 64 channels and outputs on 56x56,
// 1.5x at 128 on 28x28, 1.7x at 256 on 14x14, 2.5x at 512 on 7x7; 5x
// slower at 3 channels and 32 outputs on 32x32 (36 GEMMs with K = 3 are
// mostly packing), so a layer should not choose it for few channels.
// TransformWeights took 6.6 ms for 512 x 512 kernels (a forward of two
// 14x14 images took 7.5).
//
// Note [One-dimensional Winograd]
// A 1x7 (or 7x1) kernel is a 7-tap correlation along each row (column):
// F(2, 7), 2 outputs from an 8-input window, 8 multiplications instead of
// 14, with the interpolation points 0, 1, -1, 2, -2, 1/2, -1/2 and
// infinity (Cook-Toom as above; G's rows scaled so that B^T has the
// small entries, row 0 of both negated):
//   B^T = [ 1   0   -21/4   0    21/4    0   -1  0 ]
//         [ 0   1     1   -17/4 -17/4    1    1  0 ]
//         [ 0  -1     1    17/4 -17/4   -1    1  0 ]
//         [ 0  1/2   1/4   -5/2  -5/4    2    1  0 ]
//         [ 0 -1/2   1/4    5/2  -5/4   -2    1  0 ]
//         [ 0   2     4    -5/2   -5    1/2   1  0 ]
//         [ 0  -2     4     5/2   -5   -1/2   1  0 ]
//         [ 0  -1     0    21/4    0  -21/4   0  1 ]
//   G   = row k: 1/f(p) (1, p, ..., p^6) at point p = p_k, f(p) the
//         product of p - q over the other finite points q: rows 1 0 ... 0;
//         -2/9 (1, 1, ...); -2/9 (1, -1, ...); 1/90 (1, 2, 4, ..., 64);
//         1/90 (1, -2, ...); 32/45 (1, 1/2, ..., 1/64); 32/45 (1, -1/2,
//         ...); 0 ... 0 1
//   A^T = [ 1  1   1  1   1   1     1    0 ]
//         [ 0  1  -1  2  -2  1/2  -1/2   1 ]
// (B^T is that of F(6, 3) on these points, which depends on the points
// alone; the entries of B^T and A^T are exact in binary.) Tiles are 1 x 2
// (2 x 1) outputs numbered as the square ones; a tile's window is the 8
// inputs from its first output's, less the pad, along the axis; the 8
// positions' GEMMs, the blocking and the weight gradient go as above
// with 8 in place of 36. Error, measured as for the square forms (against
// the tests' bound over the 1 x 9 (9 x 1) strip that holds the tile's
// window): at most 4.5 epsilon in float and 3.5 in double on the test
// shapes, forward and both gradients, under the 100 the tests allow.
#include "poseidon/util/winograd.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "poseidon/common.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/math_functions.hpp"
#include "winograd_tiles.hpp"

#define POSEIDON_AVX2 __attribute__((target("avx2,fma")))
#define POSEIDON_ALWAYS_INLINE __attribute__((always_inline))

namespace poseidon {
namespace {

using winograd::DownColumns;
using winograd::GatherPadded;
using winograd::kRun;
using winograd::OneDimensional;
using winograd::RunAt;
using winograd::RunTopDiffRows;
using winograd::RunWindows;
using winograd::TileOrigins;
using winograd::TileRun;
using winograd::Tiling;
using winograd::WriteRunOutputs;
// Tiles per vectorised transform step.
constexpr int kLanes = 16;
// See Note [Winograd], "Blocking".
constexpr size_t kBlockBytes = size_t{2} << 20;
constexpr int kMinBlock = 64;
constexpr int kMaxBlock = 256;

// out[k][l] = sum over r of G[k][r] in[r][l] for the R rows r, 6 rows k
// and lanes l, rows `stride` apart in both (G of Note [Winograd], R = 3
// or 5).
template <int R>
inline void ApplyG6(const double* in, int stride, double* out) {
  for (int l = 0; l < kLanes; ++l) {
    if constexpr (R == 3) {
      const double g0 = in[l], g1 = in[stride + l], g2 = in[2 * stride + l];
      const double p = (g0 + g2) * (-1.0 / 6), q = g1 * (1.0 / 6);
      const double r = g0 * (1.0 / 24) + g2 * (1.0 / 6), s = g1 * (1.0 / 12);
      out[l] = g0 * (1.0 / 4);
      out[stride + l] = p - q;
      out[2 * stride + l] = p + q;
      out[3 * stride + l] = r + s;
      out[4 * stride + l] = r - s;
      out[5 * stride + l] = g2;
    } else {
      static_assert(R == 5, "Winograd kernels are 3x3 or 5x5");
      const double g0 = in[l], g1 = in[stride + l], g2 = in[2 * stride + l];
      const double g3 = in[3 * stride + l], g4 = in[4 * stride + l];
      // The even and odd parts at 1 and 2: g(p) = even(p) + odd(p).
      const double even1 = g0 + g2 + g4, odd1 = g1 + g3;
      const double even2 = g0 + 4 * g2 + 16 * g4, odd2 = 2 * g1 + 8 * g3;
      out[l] = g0 * (1.0 / 4);
      out[stride + l] = (even1 + odd1) * (-1.0 / 6);
      out[2 * stride + l] = (even1 - odd1) * (-1.0 / 6);
      out[3 * stride + l] = (even2 + odd2) * (1.0 / 24);
      out[4 * stride + l] = (even2 - odd2) * (1.0 / 24);
      out[5 * stride + l] = g4;
    }
  }
}

// out[k][l] = sum over r of B^T[k][r] in[r][l] for the 6 rows r, k, lanes
// l: in[r][l] at in[r * stride + l], likewise out.
template <typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyBt6(const Dtype* in, int stride,
                                            Dtype* out) {
  for (int l = 0; l < kLanes; ++l) {
    const Dtype d0 = in[l], d1 = in[stride + l], d2 = in[2 * stride + l];
    const Dtype d3 = in[3 * stride + l], d4 = in[4 * stride + l];
    const Dtype d5 = in[5 * stride + l];
    const Dtype p = d4 - 4 * d2, q = d3 - 4 * d1;
    const Dtype r = d4 - d2, s = 2 * (d3 - d1);
    out[l] = 4 * d0 - 5 * d2 + d4;
    out[stride + l] = p + q;
    out[2 * stride + l] = p - q;
    out[3 * stride + l] = r + s;
    out[4 * stride + l] = r - s;
    out[5 * stride + l] = 4 * d1 - 5 * d3 + d5;
  }
}

// out[k][l] = sum over r of A^T[k][r] in[r][l], 6 rows in, M out (4 or
// 2); rows `stride` apart in both.
template <int M, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyAt6(const Dtype* in, int stride,
                                            Dtype* out) {
  for (int l = 0; l < kLanes; ++l) {
    const Dtype m0 = in[l], m1 = in[stride + l], m2 = in[2 * stride + l];
    const Dtype m3 = in[3 * stride + l], m4 = in[4 * stride + l];
    const Dtype m5 = in[5 * stride + l];
    const Dtype a = m1 + m2, b = m1 - m2, c = m3 + m4, e = m3 - m4;
    if constexpr (M == 4) {
      out[l] = m0 + a + c;
      out[stride + l] = b + 2 * e;
      out[2 * stride + l] = a + 4 * c;
      out[3 * stride + l] = b + 8 * e + m5;
    } else {
      static_assert(M == 2, "Winograd output tiles are 4x4 or 2x2");
      out[l] = m0 + a + c;
      out[stride + l] = b + 2 * e + m5;
    }
  }
}

// out[k][l] = sum over i of A[k][i] in[i][l] (A = (A^T)^T: M rows in, 6
// out), rows `stride` apart in both: the top diff's transform.
template <int M, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyA6(const Dtype* in, int stride,
                                           Dtype* out) {
  for (int l = 0; l < kLanes; ++l) {
    if constexpr (M == 4) {
      const Dtype y0 = in[l], y1 = in[stride + l], y2 = in[2 * stride + l];
      const Dtype y3 = in[3 * stride + l];
      const Dtype even = y0 + y2, odd = y1 + y3;
      const Dtype even4 = y0 + 4 * y2, odd8 = 2 * y1 + 8 * y3;
      out[l] = y0;
      out[stride + l] = even + odd;
      out[2 * stride + l] = even - odd;
      out[3 * stride + l] = even4 + odd8;
      out[4 * stride + l] = even4 - odd8;
      out[5 * stride + l] = y3;
    } else {
      const Dtype y0 = in[l], y1 = in[stride + l];
      out[l] = y0;
      out[stride + l] = y0 + y1;
      out[2 * stride + l] = y0 - y1;
      out[3 * stride + l] = y0 + 2 * y1;
      out[4 * stride + l] = y0 - 2 * y1;
      out[5 * stride + l] = y1;
    }
  }
}

// out[r][l] = sum over k of G[k][r] in[k][l] (G^T: 6 rows in, R out), rows
// `stride` apart in both: the weight gradient's way back.
template <int R>
inline void ApplyGt6(const double* in, int stride, double* out) {
  for (int l = 0; l < kLanes; ++l) {
    const double m0 = in[l], m1 = in[stride + l], m2 = in[2 * stride + l];
    const double m3 = in[3 * stride + l], m4 = in[4 * stride + l];
    const double m5 = in[5 * stride + l];
    const double sum12 = m1 + m2, sum34 = m3 + m4;
    const double diff21 = m2 - m1, diff34 = m3 - m4;
    if constexpr (R == 3) {
      out[l] = m0 * (1.0 / 4) - sum12 * (1.0 / 6) + sum34 * (1.0 / 24);
      out[stride + l] = diff21 * (1.0 / 6) + diff34 * (1.0 / 12);
      out[2 * stride + l] = (sum34 - sum12) * (1.0 / 6) + m5;
    } else {
      // Column j of G at the points 1, -1, 2, -2: -1/6 (1, (-1)^j) and
      // 2^j / 24 (1, (-1)^j).
      out[l] = m0 * (1.0 / 4) - sum12 * (1.0 / 6) + sum34 * (1.0 / 24);
      out[stride + l] = diff21 * (1.0 / 6) + diff34 * (1.0 / 12);
      out[2 * stride + l] = -sum12 * (1.0 / 6) + sum34 * (1.0 / 6);
      out[3 * stride + l] = diff21 * (1.0 / 6) + diff34 * (1.0 / 3);
      out[4 * stride + l] = -sum12 * (1.0 / 6) + sum34 * (2.0 / 3) + m5;
    }
  }
}

// F(2, 7) (Note [One-dimensional Winograd]): the window, the output tile
// and the kernel along the long axis.
constexpr int kAlpha1 = 8;
constexpr int kOut1 = 2;
constexpr int kTaps1 = 7;

// G of F(2, 7), row k at point p_k: (1, p, ..., p^6) / f(p_k).
constexpr double kG7[kAlpha1][kTaps1] = {
    {1, 0, 0, 0, 0, 0, 0},
    {-2.0 / 9, -2.0 / 9, -2.0 / 9, -2.0 / 9, -2.0 / 9, -2.0 / 9, -2.0 / 9},
    {-2.0 / 9, 2.0 / 9, -2.0 / 9, 2.0 / 9, -2.0 / 9, 2.0 / 9, -2.0 / 9},
    {1.0 / 90, 2.0 / 90, 4.0 / 90, 8.0 / 90, 16.0 / 90, 32.0 / 90, 64.0 / 90},
    {1.0 / 90, -2.0 / 90, 4.0 / 90, -8.0 / 90, 16.0 / 90, -32.0 / 90,
     64.0 / 90},
    {64.0 / 90, 32.0 / 90, 16.0 / 90, 8.0 / 90, 4.0 / 90, 2.0 / 90, 1.0 / 90},
    {64.0 / 90, -32.0 / 90, 16.0 / 90, -8.0 / 90, 4.0 / 90, -2.0 / 90,
     1.0 / 90},
    {0, 0, 0, 0, 0, 0, 1}};

// Note [F(2, 7) transforms]
// F(2, 7)'s tiles of one tile row are consecutive in the tile numbering,
// and their windows are one input row (1x7) or eight (7x1) read across: so
// the transforms run over runs of tiles within a tile row, up to kRun at a
// time, with the run innermost, as contiguous vectors. Down columns,
// window element s of the run's tiles is a stretch of input row s, read
// where it lies (or from zeros); along rows, it is every other element of
// the row from s on, so the row is split into its even and odd elements
// once and element s read from s / 2 on in one of them. The transform,
// elementwise across those eight rows, writes its rows into V where they
// lie; the output and top-diff transforms go the same way back. Compiled
// as the square forms' generic transforms are (Note [Transforms on
// AVX2]), for float too. The loops are written so that GCC neither calls
// memcpy for short copies (a call per row of 9 tiles cost more than the
// transform) nor compiles a lambda for baseline x86-64.
// The transforms below go over a run in steps of kVec elements, the last
// step moved back to end at the run's end (it recomputes some of the step
// before, the same values to the same places), so that GCC compiles each
// step as whole vectors with no scalar remainder; runs shorter than kVec
// go element by element.
constexpr int kVec = 8;

// out[k][i] = sum over s of B^T[k][s] d_s[i] for i in [i0, i0 + kWidth),
// F(2, 7)'s 8 x 8 B^T: rows (1, 2), (3, 4) and (5, 6) are an even part
// plus and minus an odd part. out's rows `stride` apart.
template <int kWidth, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyBt8Step(
    const Dtype* __restrict d0, const Dtype* __restrict d1,
    const Dtype* __restrict d2, const Dtype* __restrict d3,
    const Dtype* __restrict d4, const Dtype* __restrict d5,
    const Dtype* __restrict d6, const Dtype* __restrict d7, int i0,
    Dtype* __restrict out, size_t stride) {
  for (int l = 0; l < kWidth; ++l) {
    const int i = i0 + l;
    out[i] = d0[i] - d6[i] + Dtype(5.25) * (d4[i] - d2[i]);
    out[7 * stride + i] = d7[i] - d1[i] + Dtype(5.25) * (d3[i] - d5[i]);
    const Dtype e1 = d2[i] + d6[i] - Dtype(4.25) * d4[i];
    const Dtype o1 = d1[i] + d5[i] - Dtype(4.25) * d3[i];
    out[stride + i] = e1 + o1;
    out[2 * stride + i] = e1 - o1;
    const Dtype e2 = d6[i] + Dtype(0.25) * d2[i] - Dtype(1.25) * d4[i];
    const Dtype o2 = Dtype(0.5) * d1[i] - Dtype(2.5) * d3[i] + 2 * d5[i];
    out[3 * stride + i] = e2 + o2;
    out[4 * stride + i] = e2 - o2;
    const Dtype e3 = d6[i] + 4 * d2[i] - 5 * d4[i];
    const Dtype o3 = 2 * d1[i] - Dtype(2.5) * d3[i] + Dtype(0.5) * d5[i];
    out[5 * stride + i] = e3 + o3;
    out[6 * stride + i] = e3 - o3;
  }
}

// The step above over i < n.
template <typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyBt8(const Dtype* const* d, int n,
                                            Dtype* out, size_t stride) {
  if (n < kVec) {
    for (int i = 0; i < n; ++i) {
      ApplyBt8Step<1>(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], i, out,
                      stride);
    }
    return;
  }
  for (int i = 0; i < n; i += kVec) {
    ApplyBt8Step<kVec>(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7],
                       std::min(i, n - kVec), out, stride);
  }
}

// y_j[i] = sum over k of A^T[j][k] m[k][i], F(2, 7)'s 2 x 8 A^T, for i in
// [i0, i0 + kWidth), written or added; m's rows `stride` apart. (Added
// twice where a moved-back step repeats an element: so accumulating steps
// do not overlap, see ApplyAt8.)
template <int kWidth, bool kAccumulate, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyAt8Step(const Dtype* __restrict m,
                                                size_t stride, int i0,
                                                Dtype* __restrict y0,
                                                Dtype* __restrict y1) {
  for (int l = 0; l < kWidth; ++l) {
    const int i = i0 + l;
    const Dtype m0 = m[i], m1 = m[stride + i], m2 = m[2 * stride + i];
    const Dtype m3 = m[3 * stride + i], m4 = m[4 * stride + i];
    const Dtype m5 = m[5 * stride + i], m6 = m[6 * stride + i];
    const Dtype m7 = m[7 * stride + i];
    const Dtype v0 = m0 + (m1 + m2) + (m3 + m4) + (m5 + m6);
    const Dtype v1 = (m1 - m2) + 2 * (m3 - m4) + Dtype(0.5) * (m5 - m6) + m7;
    if constexpr (kAccumulate) {
      y0[i] += v0;
      y1[i] += v1;
    } else {
      y0[i] = v0;
      y1[i] = v1;
    }
  }
}

// The step above over i < n: whole steps, then the rest element by
// element where adding (a moved-back step would add some twice).
template <bool kAccumulate, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyAt8(const Dtype* m, size_t stride,
                                            int n, Dtype* y0, Dtype* y1) {
  int i = 0;
  if (n >= kVec) {
    for (; i + kVec <= n; i += kVec) {
      ApplyAt8Step<kVec, kAccumulate>(m, stride, i, y0, y1);
    }
    if (!kAccumulate && i < n) {
      ApplyAt8Step<kVec, kAccumulate>(m, stride, n - kVec, y0, y1);
      return;
    }
  }
  for (; i < n; ++i) ApplyAt8Step<1, kAccumulate>(m, stride, i, y0, y1);
}

// z[k][i] = sum over j of A[k][j] y_j[i] (A = (A^T)^T: 2 rows in, 8 out),
// for i in [i0, i0 + kWidth): the top diff's transform; z's rows `stride`
// apart.
template <int kWidth, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyA8Step(const Dtype* __restrict y0,
                                               const Dtype* __restrict y1,
                                               int i0, Dtype* __restrict z,
                                               size_t stride) {
  for (int l = 0; l < kWidth; ++l) {
    const int i = i0 + l;
    const Dtype a = y0[i], b = y1[i];
    z[i] = a;
    z[stride + i] = a + b;
    z[2 * stride + i] = a - b;
    z[3 * stride + i] = a + 2 * b;
    z[4 * stride + i] = a - 2 * b;
    z[5 * stride + i] = a + Dtype(0.5) * b;
    z[6 * stride + i] = a - Dtype(0.5) * b;
    z[7 * stride + i] = b;
  }
}

template <typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyA8(const Dtype* y0, const Dtype* y1,
                                           int n, Dtype* z, size_t stride) {
  if (n < kVec) {
    for (int i = 0; i < n; ++i) ApplyA8Step<1>(y0, y1, i, z, stride);
    return;
  }
  for (int i = 0; i < n; i += kVec) {
    ApplyA8Step<kVec>(y0, y1, std::min(i, n - kVec), z, stride);
  }
}

// F(4x4, 5x5)'s 8-point forms over kLanes lanes, rows `stride` apart in
// both (Note [Winograd]): G (5 rows in, 8 out, in double), B^T (that of
// F(2, 7)), A^T (8 in, 4 out), A (4 in, 8 out) and G^T (8 in, 5 out).
// Row k of G is c_k (1, p, ..., p^4) at point p_k, c = (1, -2/9, -2/9,
// 1/90, 1/90, 32/45, 32/45), the last row (0, 0, 0, 0, 1); each point
// pair +-p is an even part plus and minus an odd part.
inline void ApplyG8(const double* in, int stride, double* out) {
  for (int l = 0; l < kLanes; ++l) {
    const double g0 = in[l], g1 = in[stride + l], g2 = in[2 * stride + l];
    const double g3 = in[3 * stride + l], g4 = in[4 * stride + l];
    const double even1 = g0 + g2 + g4, odd1 = g1 + g3;
    const double even2 = g0 + 4 * g2 + 16 * g4, odd2 = 2 * g1 + 8 * g3;
    const double even_half = g0 + g2 / 4 + g4 / 16, odd_half = g1 / 2 + g3 / 8;
    out[l] = g0;
    out[stride + l] = (even1 + odd1) * (-2.0 / 9);
    out[2 * stride + l] = (even1 - odd1) * (-2.0 / 9);
    out[3 * stride + l] = (even2 + odd2) * (1.0 / 90);
    out[4 * stride + l] = (even2 - odd2) * (1.0 / 90);
    out[5 * stride + l] = (even_half + odd_half) * (32.0 / 45);
    out[6 * stride + l] = (even_half - odd_half) * (32.0 / 45);
    out[7 * stride + l] = g4;
  }
}

template <typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyBt8Lanes(const Dtype* in, int stride,
                                                 Dtype* out) {
  ApplyBt8Step<kLanes>(in, in + stride, in + 2 * stride, in + 3 * stride,
                       in + 4 * stride, in + 5 * stride, in + 6 * stride,
                       in + 7 * stride, 0, out, stride);
}

template <typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyAt8Lanes(const Dtype* in, int stride,
                                                 Dtype* out) {
  for (int l = 0; l < kLanes; ++l) {
    const Dtype m0 = in[l], m1 = in[stride + l], m2 = in[2 * stride + l];
    const Dtype m3 = in[3 * stride + l], m4 = in[4 * stride + l];
    const Dtype m5 = in[5 * stride + l], m6 = in[6 * stride + l];
    const Dtype m7 = in[7 * stride + l];
    const Dtype s1 = m1 + m2, d1 = m1 - m2, s2 = m3 + m4, d2 = m3 - m4;
    const Dtype sh = m5 + m6, dh = m5 - m6;
    out[l] = m0 + s1 + (s2 + sh);
    out[stride + l] = d1 + Dtype(0.5) * dh + 2 * d2;
    out[2 * stride + l] = s1 + Dtype(0.25) * sh + 4 * s2;
    out[3 * stride + l] = d1 + Dtype(0.125) * dh + 8 * d2 + m7;
  }
}

template <typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyA8Lanes(const Dtype* in, int stride,
                                                Dtype* out) {
  for (int l = 0; l < kLanes; ++l) {
    const Dtype y0 = in[l], y1 = in[stride + l], y2 = in[2 * stride + l];
    const Dtype y3 = in[3 * stride + l];
    const Dtype even1 = y0 + y2, odd1 = y1 + y3;
    const Dtype even2 = y0 + 4 * y2, odd2 = 2 * y1 + 8 * y3;
    const Dtype even_half = y0 + Dtype(0.25) * y2;
    const Dtype odd_half = Dtype(0.5) * y1 + Dtype(0.125) * y3;
    out[l] = y0;
    out[stride + l] = even1 + odd1;
    out[2 * stride + l] = even1 - odd1;
    out[3 * stride + l] = even2 + odd2;
    out[4 * stride + l] = even2 - odd2;
    out[5 * stride + l] = even_half + odd_half;
    out[6 * stride + l] = even_half - odd_half;
    out[7 * stride + l] = y3;
  }
}

// G^T: out[j] = sum over k of c_k p_k^j in[k], plus in[7] for j = 4.
inline void ApplyGt8(const double* in, int stride, double* out) {
  for (int l = 0; l < kLanes; ++l) {
    const double m1 = in[stride + l], m2 = in[2 * stride + l];
    const double m3 = in[3 * stride + l], m4 = in[4 * stride + l];
    const double m5 = in[5 * stride + l], m6 = in[6 * stride + l];
    const double sum1 = m1 + m2, diff1 = m1 - m2;
    const double sum2 = m3 + m4, diff2 = m3 - m4;
    const double sum_half = m5 + m6, diff_half = m5 - m6;
    double two_j = 1, half_j = 1;
    for (int j = 0; j < 5; ++j) {
      const bool even = j % 2 == 0;
      out[j * stride + l] = (even ? sum1 : diff1) * (-2.0 / 9) +
                            (even ? sum2 : diff2) * (two_j / 90) +
                            (even ? sum_half : diff_half) * (half_j * 32 / 45);
      two_j *= 2;
      half_j /= 2;
    }
    out[l] += in[l];
    out[4 * stride + l] += in[7 * stride + l];
  }
}

// The square forms by the transform domain's edge A: 6 (F(4x4, 3x3) and
// F(2x2, 5x5)) or 8 (F(4x4, 5x5)); R the kernel's edge, M the output
// tile's.
template <int A, int R>
inline void ApplyG(const double* in, int stride, double* out) {
  if constexpr (A == 6) {
    ApplyG6<R>(in, stride, out);
  } else {
    static_assert(A == 8 && R == 5, "the 8x8 domain is F(4x4, 5x5)'s");
    ApplyG8(in, stride, out);
  }
}

template <int A, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyBt(const Dtype* in, int stride,
                                           Dtype* out) {
  if constexpr (A == 6) {
    ApplyBt6(in, stride, out);
  } else {
    static_assert(A == 8, "square transform domains are 6x6 or 8x8");
    ApplyBt8Lanes(in, stride, out);
  }
}

template <int A, int M, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyAt(const Dtype* in, int stride,
                                           Dtype* out) {
  if constexpr (A == 6) {
    ApplyAt6<M>(in, stride, out);
  } else {
    static_assert(A == 8 && M == 4, "the 8x8 domain has 4x4 tiles");
    ApplyAt8Lanes(in, stride, out);
  }
}

template <int A, int M, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void ApplyA(const Dtype* in, int stride,
                                          Dtype* out) {
  if constexpr (A == 6) {
    ApplyA6<M>(in, stride, out);
  } else {
    static_assert(A == 8 && M == 4, "the 8x8 domain has 4x4 tiles");
    ApplyA8Lanes(in, stride, out);
  }
}

template <int A, int R>
inline void ApplyGt(const double* in, int stride, double* out) {
  if constexpr (A == 6) {
    ApplyGt6<R>(in, stride, out);
  } else {
    static_assert(A == 8 && R == 5, "the 8x8 domain is F(4x4, 5x5)'s");
    ApplyGt8(in, stride, out);
  }
}

// F(2, 7)'s InputTransform (Note [F(2, 7) transforms]): the 8-input
// windows of tiles [first, first + count), transformed into V (8 channels
// x count matrices).
template <typename Dtype>
POSEIDON_ALWAYS_INLINE inline void InputTransform1D(const Tiling& g,
                                                    int64_t first, int count,
                                                    const Dtype* bottom,
                                                    ptrdiff_t bottom_step,
                                                    Dtype* V) {
  const int C = g.channels;
  const size_t image_plane = static_cast<size_t>(g.height) * g.width;
  const size_t v_plane = static_cast<size_t>(C) * count;
  const int64_t end = first + count;
  const Dtype* d[kAlpha1];
  for (int64_t t = first; t < end;) {
    const TileRun run = RunAt(g, t, end);
    const Dtype* image = bottom + run.image * bottom_step;
    Dtype* out = V + (t - first);
    RunWindows<Dtype> windows(g, run);
    for (int c = 0; c < C; ++c) {
      windows.Point(image + c * image_plane, d);
      ApplyBt8(d, run.n, out + static_cast<size_t>(c) * count, v_plane);
    }
    t += run.n;
  }
}

// F(2, 7)'s OutputTransform: the products M (8 outputs x count matrices)
// of tiles [first, first + count) back, their valid outputs written or
// added.
template <bool kAccumulate, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void OutputTransform1D(const Tiling& g,
                                                     int64_t first, int count,
                                                     const Dtype* M, Dtype* top,
                                                     ptrdiff_t top_step) {
  const int O = g.outputs, OH = g.output_h, OW = g.output_w;
  const bool down = DownColumns(g);
  const size_t top_plane = static_cast<size_t>(OH) * OW;
  const size_t m_plane = static_cast<size_t>(O) * count;
  const int64_t end = first + count;
  // Outputs with nowhere to go (down columns, a second output row below
  // the image), and along rows the two outputs of each tile before they
  // are interleaved.
  Dtype spare[kRun] = {};
  Dtype y[kOut1 * kRun];
  for (int64_t t = first; t < end;) {
    const TileRun run = RunAt(g, t, end);
    const int n = run.n;
    for (int o = 0; o < O; ++o) {
      const Dtype* m = M + static_cast<size_t>(o) * count + (t - first);
      Dtype* plane = top + run.image * top_step + o * top_plane;
      if (down) {
        // Straight into the run's two output rows.
        Dtype* dst = plane + static_cast<size_t>(2 * run.row) * OW + run.col;
        ApplyAt8<kAccumulate>(m, m_plane, n, dst,
                              2 * run.row + 1 < OH ? dst + OW : spare);
      } else {
        ApplyAt8<false>(m, m_plane, n, y, y + kRun);
        WriteRunOutputs(g, run, y, y + kRun, kAccumulate, plane);
      }
    }
    t += n;
  }
}

// F(2, 7)'s TopDiffTransform: the 2-output top-diff tiles [first, first +
// count) (zero beyond the output) of outputs [output_begin, output_end),
// transformed into Z (8 (output_end - output_begin) x count matrices).
template <typename Dtype>
POSEIDON_ALWAYS_INLINE inline void TopDiffTransform1D(
    const Tiling& g, int64_t first, int count, const Dtype* top_diff,
    ptrdiff_t top_step, int output_begin, int output_end, Dtype* Z) {
  const size_t top_plane = static_cast<size_t>(g.output_h) * g.output_w;
  const size_t z_plane = static_cast<size_t>(output_end - output_begin) * count;
  const int64_t end = first + count;
  const Dtype *y0, *y1;
  for (int64_t t = first; t < end;) {
    const TileRun run = RunAt(g, t, end);
    RunTopDiffRows<Dtype> rows(g, run);
    for (int o = output_begin; o < output_end; ++o) {
      rows.Point(top_diff + run.image * top_step + o * top_plane, &y0, &y1);
      ApplyA8(y0, y1, run.n,
              Z + static_cast<size_t>(o - output_begin) * count + (t - first),
              z_plane);
    }
    t += run.n;
  }
}

// Note [Transforms on AVX2]
// The three tile transforms below are compiled twice: for baseline x86-64
// (SSE2 vectors of the 16 tiles) and, through the POSEIDON_AVX2 wrappers,
// with AVX2 and FMA (vectors twice as wide, the multiply-adds fused), which
// run wherever the AVX2 kernels do (Avx2KernelsAvailable: AVX-512 CPUs
// too, unless POSEIDON_KERNELS=blas). Their bodies are one template each,
// forced inline into both wrappers. The two compilations may round
// differently (FMA), so results repeat bit for bit within one CPU and
// setting, as the GEMM's do, not across them. Measured on a 2-core AVX2
// EPYC (scripts/bench/compare_builds.py, VGG-16 at batch 16, 2 threads,
// medians of 3 interleaved runs): 9.6 -> 8.4 s a batch, each 3x3 layer
// 1.03-1.46 times as fast. Since then float runs the transforms written
// with intrinsics instead (winograd_avx2.cpp, Note [Input transform on
// AVX2]), and the AVX2 compilation serves double.

// Gathers and transforms tiles [first, first + count) of the images at
// bottom into V (kA^2 channels x count matrices); kA is the transform
// domain's edge, 6 or 8.
template <int kA, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void InputTransform(const Tiling& g,
                                                  int64_t first, int count,
                                                  const Dtype* bottom,
                                                  ptrdiff_t bottom_step,
                                                  Dtype* V) {
  const int C = g.channels, H = g.height, W = g.width;
  const size_t image_plane = static_cast<size_t>(H) * W;
  const size_t v_plane = static_cast<size_t>(C) * count;
  // d[r][s][l]: the kA x kA windows of up to kLanes tiles; t after the row
  // pass, then the transformed tiles.
  Dtype d[kA * kA * kLanes];
  Dtype t[kA * kA * kLanes];
  for (int t0 = 0; t0 < count; t0 += kLanes) {
    const int lanes = std::min(kLanes, count - t0);
    // Where each lane's window starts: image, top row, left column.
    int64_t image[kLanes];
    int y0[kLanes], x0[kLanes];
    bool inside[kLanes];
    TileOrigins(g, first + t0, lanes, image, y0, x0);
    for (int l = 0; l < lanes; ++l) {
      y0[l] -= g.pad_h;
      x0[l] -= g.pad_w;
      inside[l] =
          y0[l] >= 0 && y0[l] + kA <= H && x0[l] >= 0 && x0[l] + kA <= W;
    }
    if (lanes < kLanes) std::memset(d, 0, sizeof(d));
    for (int c = 0; c < C; ++c) {
      for (int l = 0; l < lanes; ++l) {
        const Dtype* src = bottom + image[l] * bottom_step + c * image_plane;
        if (inside[l]) {
          src += static_cast<size_t>(y0[l]) * W + x0[l];
          for (int r = 0; r < kA; ++r) {
            for (int s = 0; s < kA; ++s) {
              d[(r * kA + s) * kLanes + l] = src[r * W + s];
            }
          }
        } else {
          for (int r = 0; r < kA; ++r) {
            const int y = y0[l] + r;
            for (int s = 0; s < kA; ++s) {
              const int x = x0[l] + s;
              d[(r * kA + s) * kLanes + l] =
                  y >= 0 && y < H && x >= 0 && x < W
                      ? src[static_cast<size_t>(y) * W + x]
                      : Dtype(0);
            }
          }
        }
      }
      // B^T d: down each of the kA columns; then (B^T d) B: along each row.
      for (int s = 0; s < kA; ++s) {
        ApplyBt<kA>(d + s * kLanes, kA * kLanes, t + s * kLanes);
      }
      for (int r = 0; r < kA; ++r) {
        ApplyBt<kA>(t + r * kA * kLanes, kLanes, d + r * kA * kLanes);
      }
      // ApplyBt along rows wrote into d: d now holds the transformed
      // tiles, which the next channel's gather overwrites.
      Dtype* v = V + static_cast<size_t>(c) * count + t0;
      for (int pos = 0; pos < kA * kA; ++pos) {
        std::memcpy(v + pos * v_plane, d + pos * kLanes, sizeof(Dtype) * lanes);
      }
    }
  }
}

// Transforms the products M (kA^2 outputs x count matrices) of tiles
// [first, first + count) back and writes (or adds) their valid part;
// kOut is the output tile's edge, m.
template <int kA, int kOut, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void OutputTransform(const Tiling& g,
                                                   int64_t first, int count,
                                                   const Dtype* M, Dtype* top,
                                                   ptrdiff_t top_step,
                                                   bool accumulate) {
  const int O = g.outputs, OH = g.output_h, OW = g.output_w;
  const size_t top_plane = static_cast<size_t>(OH) * OW;
  const size_t m_plane = static_cast<size_t>(O) * count;
  Dtype m[kA * kA * kLanes];
  Dtype t[kOut * kA * kLanes];
  Dtype y[kOut * kOut * kLanes];
  for (int t0 = 0; t0 < count; t0 += kLanes) {
    const int lanes = std::min(kLanes, count - t0);
    int64_t image[kLanes];
    int oy[kLanes], ox[kLanes];
    TileOrigins(g, first + t0, lanes, image, oy, ox);
    if (lanes < kLanes) std::memset(m, 0, sizeof(m));
    for (int o = 0; o < O; ++o) {
      const Dtype* src = M + static_cast<size_t>(o) * count + t0;
      for (int pos = 0; pos < kA * kA; ++pos) {
        std::memcpy(m + pos * kLanes, src + pos * m_plane,
                    sizeof(Dtype) * lanes);
      }
      // A^T m: down each of the kA columns (m rows out); then (A^T m) A:
      // along each of those m rows.
      for (int s = 0; s < kA; ++s) {
        ApplyAt<kA, kOut>(m + s * kLanes, kA * kLanes, t + s * kLanes);
      }
      for (int r = 0; r < kOut; ++r) {
        ApplyAt<kA, kOut>(t + r * kA * kLanes, kLanes, y + r * kOut * kLanes);
      }
      for (int l = 0; l < lanes; ++l) {
        Dtype* dst = top + image[l] * top_step + o * top_plane +
                     static_cast<size_t>(oy[l]) * OW + ox[l];
        const int rows = std::min(kOut, OH - oy[l]);
        const int cols = std::min(kOut, OW - ox[l]);
        for (int r = 0; r < rows; ++r) {
          for (int s = 0; s < cols; ++s) {
            const Dtype value = y[(r * kOut + s) * kLanes + l];
            if (accumulate) {
              dst[r * OW + s] += value;
            } else {
              dst[r * OW + s] = value;
            }
          }
        }
      }
    }
  }
}

// Gathers the m x m top-diff tiles [first, first + count) (zero beyond the
// output) of outputs [output_begin, output_end) and transforms them into
// Z (kA^2 (output_end - output_begin) x count matrices), A dY A^T; kOut
// is m.
template <int kA, int kOut, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void TopDiffTransform(
    const Tiling& g, int64_t first, int count, const Dtype* top_diff,
    ptrdiff_t top_step, int output_begin, int output_end, Dtype* Z) {
  const int OH = g.output_h, OW = g.output_w;
  const size_t top_plane = static_cast<size_t>(OH) * OW;
  const size_t z_plane = static_cast<size_t>(output_end - output_begin) * count;
  // y[r][s][l]: the m x m tiles of up to kLanes tiles; t = A y (kA x m),
  // then z = A y A^T (kA x kA).
  Dtype y[kOut * kOut * kLanes];
  Dtype t[kA * kOut * kLanes];
  Dtype z[kA * kA * kLanes];
  for (int t0 = 0; t0 < count; t0 += kLanes) {
    const int lanes = std::min(kLanes, count - t0);
    int64_t image[kLanes];
    int oy[kLanes], ox[kLanes], rows[kLanes], cols[kLanes];
    TileOrigins(g, first + t0, lanes, image, oy, ox);
    for (int l = 0; l < lanes; ++l) {
      rows[l] = std::min(kOut, OH - oy[l]);
      cols[l] = std::min(kOut, OW - ox[l]);
    }
    if (lanes < kLanes) std::memset(y, 0, sizeof(y));
    for (int o = output_begin; o < output_end; ++o) {
      for (int l = 0; l < lanes; ++l) {
        const Dtype* src = top_diff + image[l] * top_step + o * top_plane +
                           static_cast<size_t>(oy[l]) * OW + ox[l];
        for (int r = 0; r < kOut; ++r) {
          for (int s = 0; s < kOut; ++s) {
            y[(r * kOut + s) * kLanes + l] =
                r < rows[l] && s < cols[l] ? src[r * OW + s] : Dtype(0);
          }
        }
      }
      // A y: down each of the m columns (kA rows out); then (A y) A^T:
      // along each of those kA rows (m elements in, kA out).
      for (int s = 0; s < kOut; ++s) {
        ApplyA<kA, kOut>(y + s * kLanes, kOut * kLanes, t + s * kLanes);
      }
      for (int r = 0; r < kA; ++r) {
        ApplyA<kA, kOut>(t + r * kOut * kLanes, kLanes, z + r * kA * kLanes);
      }
      Dtype* dst = Z + static_cast<size_t>(o - output_begin) * count + t0;
      for (int pos = 0; pos < kA * kA; ++pos) {
        std::memcpy(dst + pos * z_plane, z + pos * kLanes,
                    sizeof(Dtype) * lanes);
      }
    }
  }
}

// The AVX2 compilations (Note [Transforms on AVX2]), which double runs;
// float has the intrinsics of winograd_avx2.cpp instead.
template <int kA, typename Dtype>
POSEIDON_AVX2 void InputTransformCompiled(const Tiling& g, int64_t first,
                                          int count, const Dtype* bottom,
                                          ptrdiff_t bottom_step, Dtype* V) {
  InputTransform<kA>(g, first, count, bottom, bottom_step, V);
}

template <int kA, int kOut, typename Dtype>
POSEIDON_AVX2 void OutputTransformCompiled(const Tiling& g, int64_t first,
                                           int count, const Dtype* M,
                                           Dtype* top, ptrdiff_t top_step,
                                           bool accumulate) {
  OutputTransform<kA, kOut>(g, first, count, M, top, top_step, accumulate);
}

template <int kA, int kOut, typename Dtype>
POSEIDON_AVX2 void TopDiffTransformCompiled(const Tiling& g, int64_t first,
                                            int count, const Dtype* top_diff,
                                            ptrdiff_t top_step,
                                            int output_begin, int output_end,
                                            Dtype* Z) {
  TopDiffTransform<kA, kOut>(g, first, count, top_diff, top_step, output_begin,
                             output_end, Z);
}

// F(2, 7)'s transforms compiled for AVX2, which float runs too.
template <typename Dtype>
POSEIDON_AVX2 void InputTransform1DCompiled(const Tiling& g, int64_t first,
                                            int count, const Dtype* bottom,
                                            ptrdiff_t bottom_step, Dtype* V) {
  InputTransform1D(g, first, count, bottom, bottom_step, V);
}

template <typename Dtype>
POSEIDON_AVX2 void OutputTransform1DCompiled(const Tiling& g, int64_t first,
                                             int count, const Dtype* M,
                                             Dtype* top, ptrdiff_t top_step,
                                             bool accumulate) {
  if (accumulate) {
    OutputTransform1D<true>(g, first, count, M, top, top_step);
  } else {
    OutputTransform1D<false>(g, first, count, M, top, top_step);
  }
}

template <typename Dtype>
POSEIDON_AVX2 void TopDiffTransform1DCompiled(const Tiling& g, int64_t first,
                                              int count, const Dtype* top_diff,
                                              ptrdiff_t top_step,
                                              int output_begin, int output_end,
                                              Dtype* Z) {
  TopDiffTransform1D(g, first, count, top_diff, top_step, output_begin,
                     output_end, Z);
}

// The transforms of one call: the generic ones where the AVX2 kernels do
// not run, else the intrinsics (float) or the AVX2 compilation (double);
// chosen once per call.
template <int kA, typename Dtype>
void InputTransformOf(const Tiling& g, bool avx2, int64_t first, int count,
                      const Dtype* bottom, ptrdiff_t bottom_step, Dtype* V) {
  if (!avx2) {
    InputTransform<kA>(g, first, count, bottom, bottom_step, V);
  } else if constexpr (std::is_same_v<Dtype, float>) {
    winograd::InputTransformAvx2<kA>(g, first, count, bottom, bottom_step, V);
  } else {
    InputTransformCompiled<kA>(g, first, count, bottom, bottom_step, V);
  }
}

template <typename Dtype>
void RunInputTransform(const Tiling& g, bool avx2, int64_t first, int count,
                       const Dtype* bottom, ptrdiff_t bottom_step, Dtype* V) {
  if (OneDimensional(g)) {
    if (!avx2) {
      InputTransform1D(g, first, count, bottom, bottom_step, V);
    } else if constexpr (std::is_same_v<Dtype, float>) {
      winograd::InputTransform1DAvx2(g, first, count, bottom, bottom_step, V);
    } else {
      InputTransform1DCompiled(g, first, count, bottom, bottom_step, V);
    }
  } else if (g.alpha == 8) {
    InputTransformOf<8>(g, avx2, first, count, bottom, bottom_step, V);
  } else {
    InputTransformOf<6>(g, avx2, first, count, bottom, bottom_step, V);
  }
}

template <int kA, int kOut, typename Dtype>
void OutputTransformOf(const Tiling& g, bool avx2, int64_t first, int count,
                       const Dtype* M, Dtype* top, ptrdiff_t top_step,
                       bool accumulate) {
  if (!avx2) {
    OutputTransform<kA, kOut>(g, first, count, M, top, top_step, accumulate);
  } else if constexpr (std::is_same_v<Dtype, float>) {
    winograd::OutputTransformAvx2<kA, kOut>(g, first, count, M, top, top_step,
                                            accumulate);
  } else {
    OutputTransformCompiled<kA, kOut>(g, first, count, M, top, top_step,
                                      accumulate);
  }
}

template <typename Dtype>
void RunOutputTransform(const Tiling& g, bool avx2, int64_t first, int count,
                        const Dtype* M, Dtype* top, ptrdiff_t top_step,
                        bool accumulate) {
  if (OneDimensional(g)) {
    if (!avx2) {
      if (accumulate) {
        OutputTransform1D<true>(g, first, count, M, top, top_step);
      } else {
        OutputTransform1D<false>(g, first, count, M, top, top_step);
      }
    } else if constexpr (std::is_same_v<Dtype, float>) {
      winograd::OutputTransform1DAvx2(g, first, count, M, top, top_step,
                                      accumulate);
    } else {
      OutputTransform1DCompiled(g, first, count, M, top, top_step, accumulate);
    }
  } else if (g.alpha == 8) {
    OutputTransformOf<8, 4>(g, avx2, first, count, M, top, top_step,
                            accumulate);
  } else if (g.tile_w == 4) {
    OutputTransformOf<6, 4>(g, avx2, first, count, M, top, top_step,
                            accumulate);
  } else {
    OutputTransformOf<6, 2>(g, avx2, first, count, M, top, top_step,
                            accumulate);
  }
}

template <int kA, int kOut, typename Dtype>
void TopDiffTransformOf(const Tiling& g, bool avx2, int64_t first, int count,
                        const Dtype* top_diff, ptrdiff_t top_step,
                        int output_begin, int output_end, Dtype* Z) {
  if (!avx2) {
    TopDiffTransform<kA, kOut>(g, first, count, top_diff, top_step,
                               output_begin, output_end, Z);
  } else if constexpr (std::is_same_v<Dtype, float>) {
    winograd::TopDiffTransformAvx2<kA, kOut>(
        g, first, count, top_diff, top_step, output_begin, output_end, Z);
  } else {
    TopDiffTransformCompiled<kA, kOut>(g, first, count, top_diff, top_step,
                                       output_begin, output_end, Z);
  }
}

template <typename Dtype>
void RunTopDiffTransform(const Tiling& g, bool avx2, int64_t first, int count,
                         const Dtype* top_diff, ptrdiff_t top_step,
                         int output_begin, int output_end, Dtype* Z) {
  if (OneDimensional(g)) {
    if (!avx2) {
      TopDiffTransform1D(g, first, count, top_diff, top_step, output_begin,
                         output_end, Z);
    } else if constexpr (std::is_same_v<Dtype, float>) {
      winograd::TopDiffTransform1DAvx2(g, first, count, top_diff, top_step,
                                       output_begin, output_end, Z);
    } else {
      TopDiffTransform1DCompiled(g, first, count, top_diff, top_step,
                                 output_begin, output_end, Z);
    }
  } else if (g.alpha == 8) {
    TopDiffTransformOf<8, 4>(g, avx2, first, count, top_diff, top_step,
                             output_begin, output_end, Z);
  } else if (g.tile_w == 4) {
    TopDiffTransformOf<6, 4>(g, avx2, first, count, top_diff, top_step,
                             output_begin, output_end, Z);
  } else {
    TopDiffTransformOf<6, 2>(g, avx2, first, count, top_diff, top_step,
                             output_begin, output_end, Z);
  }
}

// CHECK-fails unless [begin, end) is a range of the `outputs` outputs.
void CheckOutputRange(int begin, int end, int outputs) {
  CHECK(0 <= begin && begin <= end && end <= outputs)
      << "Winograd: outputs [" << begin << ", " << end << ") of " << outputs;
}

template <typename Dtype>
Tiling TilingOf(const WinogradConv<Dtype>& w) {
  const auto& g = w.geometry();
  return {g.channels,
          g.outputs,
          g.height,
          g.width,
          g.pad_h,
          g.pad_w,
          w.output_h(),
          w.output_w(),
          (w.output_w() + w.tile_w() - 1) / w.tile_w(),
          w.tiles_per_image(),
          w.tile_h(),
          w.tile_w(),
          w.alpha()};
}

}  // namespace

template <typename Dtype>
WinogradConv<Dtype>::WinogradConv(const Geometry& g) : g_(g) {
  CHECK_GE(g.channels, 1) << "Winograd channels";
  CHECK_GE(g.outputs, 1) << "Winograd outputs";
  CHECK_GE(g.height, 1) << "Winograd height";
  CHECK_GE(g.width, 1) << "Winograd width";
  CHECK_GE(g.pad_h, 0) << "Winograd pad_h";
  CHECK_GE(g.pad_w, 0) << "Winograd pad_w";
  CHECK_GE(g.tile_block, 0) << "Winograd tile_block";
  const int kh = g.kernel_h, kw = g.kernel_w;
  CHECK((kh == kw && (kh == 3 || kh == 5)) || (kh == 1 && kw == kTaps1) ||
        (kh == kTaps1 && kw == 1))
      << "Winograd: a " << kh << "x" << kw << " kernel";
  // The square forms' output tiles: 4 x 4 for 3x3, 2 x 2 or 4 x 4 for 5x5.
  const int tile = g.tile == 0 ? (kh == 3 ? 4 : 2) : g.tile;
  CHECK(kh != kw || tile == 4 || (kh == 5 && tile == 2))
      << "Winograd: a " << tile << "x" << tile << " tile for a " << kh << "x"
      << kw << " kernel";
  CHECK(kh == kw || g.tile == 0)
      << "Winograd: F(2, 7)'s tile is fixed, not " << g.tile;
  if (kh == kw) {
    tile_h_ = tile_w_ = tile;
    alpha_ = tile + kh - 1;
    positions_ = alpha_ * alpha_;
  } else {
    tile_h_ = kh == 1 ? 1 : kOut1;
    tile_w_ = kw == 1 ? 1 : kOut1;
    alpha_ = kAlpha1;
    positions_ = kAlpha1;
  }
  output_h_ = g.height + 2 * g.pad_h - (kh - 1);
  output_w_ = g.width + 2 * g.pad_w - (kw - 1);
  CHECK_GE(output_h_, 1) << "Winograd: empty output for height " << g.height
                         << " pad_h " << g.pad_h;
  CHECK_GE(output_w_, 1) << "Winograd: empty output for width " << g.width
                         << " pad_w " << g.pad_w;
  tiles_h_ = (output_h_ + tile_h_ - 1) / tile_h_;
  tiles_w_ = (output_w_ + tile_w_ - 1) / tile_w_;
  if (g.tile_block > 0) {
    tile_block_ = g.tile_block;
  } else {
    const size_t per_tile = sizeof(Dtype) * positions_ *
                            (static_cast<size_t>(g.channels) + g.outputs);
    const size_t fit = kBlockBytes / per_tile;
    tile_block_ =
        static_cast<int>(std::clamp<size_t>(fit, kMinBlock, kMaxBlock));
    tile_block_ -= tile_block_ % kLanes;
  }
}

template <typename Dtype>
size_t WinogradConv<Dtype>::weights_size() const {
  return static_cast<size_t>(positions_) * g_.outputs * g_.channels;
}

template <typename Dtype>
void WinogradConv<Dtype>::TransformWeights(const Dtype* weights,
                                           bool flip_and_swap, Dtype* U) const {
  TransformWeights(weights, flip_and_swap, U, 0, g_.outputs);
}

template <typename Dtype>
void WinogradConv<Dtype>::TransformWeights(const Dtype* weights,
                                           bool flip_and_swap, Dtype* U,
                                           int output_begin,
                                           int output_end) const {
  CheckOutputRange(output_begin, output_end, g_.outputs);
  if (positions_ == kAlpha1) {
    TransformWeights1D(weights, flip_and_swap, U, output_begin, output_end);
  } else if (g_.kernel_h == 3) {
    TransformWeightsOf<6, 3>(weights, flip_and_swap, U, output_begin,
                             output_end);
  } else if (alpha_ == 6) {
    TransformWeightsOf<6, 5>(weights, flip_and_swap, U, output_begin,
                             output_end);
  } else {
    TransformWeightsOf<8, 5>(weights, flip_and_swap, U, output_begin,
                             output_end);
  }
}

template <typename Dtype>
template <int A, int R>
void WinogradConv<Dtype>::TransformWeightsOf(const Dtype* weights,
                                             bool flip_and_swap, Dtype* U,
                                             int output_begin,
                                             int output_end) const {
  const int C = g_.channels, O = g_.outputs;
  const size_t plane = static_cast<size_t>(O) * C;
  // kLanes kernels (o, c0 + l) at a time: k[R i + j][l], then G k
  // (gk[R a + j][l]), then G k G^T (u[A a + b][l]).
  double k[R * R * kLanes] = {};
  double gk[A * R * kLanes];
  double u[A * A * kLanes];
  for (int o = output_begin; o < output_end; ++o) {
    for (int c0 = 0; c0 < C; c0 += kLanes) {
      const int lanes = std::min(kLanes, C - c0);
      for (int l = 0; l < lanes; ++l) {
        const int c = c0 + l;
        if (flip_and_swap) {
          const Dtype* w = weights + (static_cast<size_t>(c) * O + o) * R * R;
          for (int t = 0; t < R * R; ++t) k[t * kLanes + l] = w[R * R - 1 - t];
        } else {
          const Dtype* w = weights + (static_cast<size_t>(o) * C + c) * R * R;
          for (int t = 0; t < R * R; ++t) k[t * kLanes + l] = w[t];
        }
      }
      for (int j = 0; j < R; ++j) {
        ApplyG<A, R>(k + j * kLanes, R * kLanes, gk + j * kLanes);
      }
      for (int a = 0; a < A; ++a) {
        ApplyG<A, R>(gk + a * R * kLanes, kLanes, u + a * A * kLanes);
      }
      Dtype* dst = U + static_cast<size_t>(o) * C + c0;
      for (int pos = 0; pos < A * A; ++pos) {
        for (int l = 0; l < lanes; ++l) {
          dst[pos * plane + l] = static_cast<Dtype>(u[pos * kLanes + l]);
        }
      }
    }
  }
}

template <typename Dtype>
size_t WinogradConv<Dtype>::scratch_size(int images) const {
  const int64_t tiles = static_cast<int64_t>(images) * tiles_per_image();
  const int64_t block = std::min<int64_t>(tile_block_, tiles);
  return static_cast<size_t>(positions_) *
         (static_cast<size_t>(g_.channels) + g_.outputs) *
         static_cast<size_t>(block);
}

template <typename Dtype>
void WinogradConv<Dtype>::Forward(int images, const Dtype* U,
                                  const Dtype* bottom, Dtype* top,
                                  Dtype* scratch, bool accumulate) const {
  Forward(images, U, bottom,
          static_cast<ptrdiff_t>(g_.channels) * g_.height * g_.width, top,
          static_cast<ptrdiff_t>(g_.outputs) * output_h_ * output_w_, scratch,
          accumulate);
}

template <typename Dtype>
void WinogradConv<Dtype>::Forward(int images, const Dtype* U,
                                  const Dtype* bottom, ptrdiff_t bottom_step,
                                  Dtype* top, ptrdiff_t top_step,
                                  Dtype* scratch, bool accumulate) const {
  const int C = g_.channels, O = g_.outputs;
  const int64_t tiles = static_cast<int64_t>(images) * tiles_per_image();
  const Tiling tiling = TilingOf(*this);
  const bool avx2 = Avx2KernelsAvailable();
  for (int64_t first = 0; first < tiles; first += tile_block_) {
    const int count =
        static_cast<int>(std::min<int64_t>(tile_block_, tiles - first));
    Dtype* V = scratch;
    Dtype* M = scratch + static_cast<size_t>(positions_) * C * count;
    RunInputTransform(tiling, avx2, first, count, bottom, bottom_step, V);
    for (int pos = 0; pos < positions_; ++pos) {
      cpu_gemm<Dtype>(CblasNoTrans, CblasNoTrans, O, count, C, Dtype(1),
                      U + static_cast<size_t>(pos) * O * C,
                      V + static_cast<size_t>(pos) * C * count, Dtype(0),
                      M + static_cast<size_t>(pos) * O * count);
    }
    RunOutputTransform(tiling, avx2, first, count, M, top, top_step,
                       accumulate);
  }
}

template <typename Dtype>
void WinogradConv<Dtype>::AccumulateWeightGradient(
    int images, const Dtype* bottom, ptrdiff_t bottom_step,
    const Dtype* top_diff, ptrdiff_t top_step, int64_t tile_begin,
    int64_t tile_end, int output_begin, int output_end, Dtype* dU,
    Dtype* scratch, bool accumulate) const {
  const int C = g_.channels, O = g_.outputs;
  const int64_t tiles = static_cast<int64_t>(images) * tiles_per_image();
  CHECK(0 <= tile_begin && tile_begin <= tile_end && tile_end <= tiles)
      << "Winograd: tiles [" << tile_begin << ", " << tile_end << ") of "
      << tiles;
  CheckOutputRange(output_begin, output_end, O);
  const int rows = output_end - output_begin;
  // Row output_begin of position pos's matrix.
  auto dU_at = [&](int pos) {
    return dU + (static_cast<size_t>(pos) * O + output_begin) * C;
  };
  if (!accumulate && tile_begin == tile_end) {
    for (int pos = 0; pos < positions_; ++pos) {
      std::fill_n(dU_at(pos), static_cast<size_t>(rows) * C, Dtype(0));
    }
    return;
  }
  const Tiling tiling = TilingOf(*this);
  const bool avx2 = Avx2KernelsAvailable();
  for (int64_t first = tile_begin; first < tile_end; first += tile_block_) {
    // The first block overwrites dU unless accumulating.
    const Dtype beta = accumulate || first != tile_begin ? Dtype(1) : Dtype(0);
    const int count =
        static_cast<int>(std::min<int64_t>(tile_block_, tile_end - first));
    Dtype* V = scratch;
    Dtype* Z = scratch + static_cast<size_t>(positions_) * C * count;
    RunInputTransform(tiling, avx2, first, count, bottom, bottom_step, V);
    RunTopDiffTransform(tiling, avx2, first, count, top_diff, top_step,
                        output_begin, output_end, Z);
    for (int pos = 0; pos < positions_; ++pos) {
      cpu_gemm<Dtype>(CblasNoTrans, CblasTrans, rows, C, count, Dtype(1),
                      Z + static_cast<size_t>(pos) * rows * count,
                      V + static_cast<size_t>(pos) * C * count, beta,
                      dU_at(pos));
    }
  }
}

template <typename Dtype>
void WinogradConv<Dtype>::TransformWeightGradient(const Dtype* const* dU,
                                                  int parts, Dtype* weight_diff,
                                                  int output_begin,
                                                  int output_end) const {
  CheckOutputRange(output_begin, output_end, g_.outputs);
  CHECK_GE(parts, 1) << "Winograd: no weight gradient parts";
  if (positions_ == kAlpha1) {
    TransformWeightGradient1D(dU, parts, weight_diff, output_begin, output_end);
  } else if (g_.kernel_h == 3) {
    TransformWeightGradientOf<6, 3>(dU, parts, weight_diff, output_begin,
                                    output_end);
  } else if (alpha_ == 6) {
    TransformWeightGradientOf<6, 5>(dU, parts, weight_diff, output_begin,
                                    output_end);
  } else {
    TransformWeightGradientOf<8, 5>(dU, parts, weight_diff, output_begin,
                                    output_end);
  }
}

template <typename Dtype>
template <int A, int R>
void WinogradConv<Dtype>::TransformWeightGradientOf(const Dtype* const* dU,
                                                    int parts,
                                                    Dtype* weight_diff,
                                                    int output_begin,
                                                    int output_end) const {
  const int C = g_.channels, O = g_.outputs;
  const size_t plane = static_cast<size_t>(O) * C;
  // kLanes kernels (o, c0 + l) at a time: the summed transform m[A a +
  // b][l], then G^T m (t[R i + b][l]), then G^T m G (w[R i + j][l]).
  double m[A * A * kLanes] = {};
  double t[R * A * kLanes];
  double w[R * R * kLanes];
  for (int o = output_begin; o < output_end; ++o) {
    for (int c0 = 0; c0 < C; c0 += kLanes) {
      const int lanes = std::min(kLanes, C - c0);
      const size_t at = static_cast<size_t>(o) * C + c0;
      for (int pos = 0; pos < A * A; ++pos) {
        for (int l = 0; l < lanes; ++l) {
          double sum = 0;
          for (int p = 0; p < parts; ++p) sum += dU[p][pos * plane + at + l];
          m[pos * kLanes + l] = sum;
        }
      }
      for (int b = 0; b < A; ++b) {
        ApplyGt<A, R>(m + b * kLanes, A * kLanes, t + b * kLanes);
      }
      for (int i = 0; i < R; ++i) {
        ApplyGt<A, R>(t + i * A * kLanes, kLanes, w + i * R * kLanes);
      }
      for (int l = 0; l < lanes; ++l) {
        Dtype* dst = weight_diff + (at + l) * R * R;
        for (int k = 0; k < R * R; ++k) {
          dst[k] += static_cast<Dtype>(w[k * kLanes + l]);
        }
      }
    }
  }
}

template <typename Dtype>
void WinogradConv<Dtype>::TransformWeights1D(const Dtype* weights,
                                             bool flip_and_swap, Dtype* U,
                                             int output_begin,
                                             int output_end) const {
  const int C = g_.channels, O = g_.outputs;
  const size_t plane = static_cast<size_t>(O) * C;
  for (int o = output_begin; o < output_end; ++o) {
    for (int c = 0; c < C; ++c) {
      // The 7 taps (of a 1x7 or a 7x1 kernel: contiguous either way),
      // reversed for the input-gradient form.
      double k[kTaps1];
      if (flip_and_swap) {
        const Dtype* w = weights + (static_cast<size_t>(c) * O + o) * kTaps1;
        for (int j = 0; j < kTaps1; ++j) k[j] = w[kTaps1 - 1 - j];
      } else {
        const Dtype* w = weights + (static_cast<size_t>(o) * C + c) * kTaps1;
        for (int j = 0; j < kTaps1; ++j) k[j] = w[j];
      }
      // G k (kG7) through the kernel polynomial's even and odd parts at
      // 1, 2 and 1/2 (the last times 64).
      const double even1 = k[0] + k[2] + k[4] + k[6], odd1 = k[1] + k[3] + k[5];
      const double even2 = k[0] + 4 * k[2] + 16 * k[4] + 64 * k[6];
      const double odd2 = 2 * k[1] + 8 * k[3] + 32 * k[5];
      const double even3 = 64 * k[0] + 16 * k[2] + 4 * k[4] + k[6];
      const double odd3 = 32 * k[1] + 8 * k[3] + 2 * k[5];
      const double u[kAlpha1] = {k[0],
                                 (even1 + odd1) * (-2.0 / 9),
                                 (even1 - odd1) * (-2.0 / 9),
                                 (even2 + odd2) * (1.0 / 90),
                                 (even2 - odd2) * (1.0 / 90),
                                 (even3 + odd3) * (1.0 / 90),
                                 (even3 - odd3) * (1.0 / 90),
                                 k[6]};
      Dtype* dst = U + static_cast<size_t>(o) * C + c;
      for (int pos = 0; pos < kAlpha1; ++pos) {
        dst[pos * plane] = static_cast<Dtype>(u[pos]);
      }
    }
  }
}

template <typename Dtype>
void WinogradConv<Dtype>::TransformWeightGradient1D(const Dtype* const* dU,
                                                    int parts,
                                                    Dtype* weight_diff,
                                                    int output_begin,
                                                    int output_end) const {
  const int C = g_.channels, O = g_.outputs;
  const size_t plane = static_cast<size_t>(O) * C;
  for (int o = output_begin; o < output_end; ++o) {
    for (int c = 0; c < C; ++c) {
      const size_t at = static_cast<size_t>(o) * C + c;
      double m[kAlpha1];
      for (int pos = 0; pos < kAlpha1; ++pos) {
        double sum = 0;
        for (int p = 0; p < parts; ++p) sum += dU[p][pos * plane + at];
        m[pos] = sum;
      }
      // G^T m (kG7's columns): tap j takes -2/9, 2^j / 90 and 2^(6 - j) /
      // 90 of the sums (even j) or differences (odd j) of positions 1 and
      // 2, 3 and 4, 5 and 6.
      const double sum1 = m[1] + m[2], diff1 = m[1] - m[2];
      const double sum2 = (m[3] + m[4]) * (1.0 / 90);
      const double diff2 = (m[3] - m[4]) * (1.0 / 90);
      const double sum3 = (m[5] + m[6]) * (1.0 / 90);
      const double diff3 = (m[5] - m[6]) * (1.0 / 90);
      Dtype* dst = weight_diff + at * kTaps1;
      for (int j = 0; j < kTaps1; ++j) {
        const bool even = j % 2 == 0;
        double w = (even ? sum1 : diff1) * (-2.0 / 9) +
                   (even ? sum2 : diff2) * static_cast<double>(1 << j) +
                   (even ? sum3 : diff3) * static_cast<double>(1 << (6 - j));
        if (j == 0) w += m[0];
        if (j == kTaps1 - 1) w += m[7];
        dst[j] += static_cast<Dtype>(w);
      }
    }
  }
}

INSTANTIATE_CLASS(WinogradConv);

}  // namespace poseidon
