// WinogradConv: 3x3 and 5x5 stride-1 convolutions by Winograd's F(4x4, 3x3)
// and F(2x2, 5x5), the channel sums of each transform position as one GEMM
// per tile block; also the weight gradient, summed in the transform domain.
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
// Blocking. Scratch is V and M of one block, 36 (channels + outputs) T
// elements. T is chosen so that they take about 2 MiB (an L2 of a
// server core, where they are written, multiplied and read back), but
// at least 64 tiles (narrower GEMMs re-read U, 36 outputs channels
// elements, for fewer tiles; on the shared 2-core development machine,
// one thread, float, layers of 64 to 512 channels ran 5-10% faster with
// blocks of 64 tiles than of 32, and 128 or 256 were within the noise of
// 64) and at most 256, a multiple of 16. So scratch stays bounded
// whatever the batch (9.4 MB for 512 channels and outputs in float), and
// the layer can keep one buffer per thread.
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
// shapes, F(2x2, 5x5)'s 11 (forward) and 14 (weight gradient); the tests
// allow 100 epsilon. Against the receptive field's own sum of
// |W| |bottom|, a corner output of a padded image (one pixel in its
// receptive field, 16 or more in its window) shows errors many times
// larger. Larger tiles (F(6x6, 3x3)) are reported to lose about another
// decimal digit in float, which is why this is F(4x4, 3x3).
//
// Weight gradient. By transposition of Y's formula, dg = G^T [(A dY A^T)
// .* (B^T d B)] G per tile; the bracket is summed over tiles as 36 GEMMs
// per block, dU[pos] (outputs x channels) += Z[pos] (outputs x T) V[pos]^T,
// with V the forward's input transform and Z the top diff's (A has entries
// up to 8, as A^T), and the sum is taken back by G^T . G once, in double.
// Its error, against the sum over images and outputs of |dY| times the
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
#include "poseidon/util/winograd.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "poseidon/common.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/math_functions.hpp"

#define POSEIDON_AVX2 __attribute__((target("avx2,fma")))
#define POSEIDON_ALWAYS_INLINE __attribute__((always_inline))

namespace poseidon {
namespace {

// The transformed tile's edge, m + r - 1 for both forms: F(4x4, 3x3) and
// F(2x2, 5x5) share it, and with it B^T (Note [Winograd]).
constexpr int kAlpha = 6;
constexpr int kPos = kAlpha * kAlpha;
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
inline void ApplyG(const double* in, int stride, double* out) {
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
POSEIDON_ALWAYS_INLINE inline void ApplyBt(const Dtype* in, int stride,
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
POSEIDON_ALWAYS_INLINE inline void ApplyAt(const Dtype* in, int stride,
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
POSEIDON_ALWAYS_INLINE inline void ApplyA(const Dtype* in, int stride,
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
inline void ApplyGt(const double* in, int stride, double* out) {
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

// What the tile transforms need of a WinogradConv3x3's geometry.
struct Tiling {
  int channels, outputs, height, width, pad_h, pad_w;
  int output_h, output_w, tiles_w, tiles_per_image;
  int tile;  // the output tile's edge, m: 4 or 2
};

// For tiles first .. first + lanes - 1: the image each is in and the
// top-left corner of its m x m of output.
inline void TileOrigins(const Tiling& g, int64_t first, int lanes,
                        int64_t* image, int* oy, int* ox) {
  for (int l = 0; l < lanes; ++l) {
    const int64_t tile = first + l;
    image[l] = tile / g.tiles_per_image;
    const int rest = static_cast<int>(tile % g.tiles_per_image);
    oy[l] = (rest / g.tiles_w) * g.tile;
    ox[l] = (rest % g.tiles_w) * g.tile;
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
// 1.03-1.46 times as fast.

// Gathers and transforms tiles [first, first + count) of the images at
// bottom into V (36 channels x count matrices).
template <typename Dtype>
POSEIDON_ALWAYS_INLINE inline void InputTransform(const Tiling& g,
                                                  int64_t first, int count,
                                                  const Dtype* bottom,
                                                  ptrdiff_t bottom_step,
                                                  Dtype* V) {
  const int C = g.channels, H = g.height, W = g.width;
  const size_t image_plane = static_cast<size_t>(H) * W;
  const size_t v_plane = static_cast<size_t>(C) * count;
  // d[r][s][l]: the 6x6 windows of up to kLanes tiles; t after the row
  // pass, then the transformed tiles.
  Dtype d[kPos * kLanes];
  Dtype t[kPos * kLanes];
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
      inside[l] = y0[l] >= 0 && y0[l] + kAlpha <= H && x0[l] >= 0 &&
                  x0[l] + kAlpha <= W;
    }
    if (lanes < kLanes) std::memset(d, 0, sizeof(d));
    for (int c = 0; c < C; ++c) {
      for (int l = 0; l < lanes; ++l) {
        const Dtype* src = bottom + image[l] * bottom_step + c * image_plane;
        if (inside[l]) {
          src += static_cast<size_t>(y0[l]) * W + x0[l];
          for (int r = 0; r < kAlpha; ++r) {
            for (int s = 0; s < kAlpha; ++s) {
              d[(r * kAlpha + s) * kLanes + l] = src[r * W + s];
            }
          }
        } else {
          for (int r = 0; r < kAlpha; ++r) {
            const int y = y0[l] + r;
            for (int s = 0; s < kAlpha; ++s) {
              const int x = x0[l] + s;
              d[(r * kAlpha + s) * kLanes + l] =
                  y >= 0 && y < H && x >= 0 && x < W
                      ? src[static_cast<size_t>(y) * W + x]
                      : Dtype(0);
            }
          }
        }
      }
      // B^T d: down each of the 6 columns; then (B^T d) B: along each row.
      for (int s = 0; s < kAlpha; ++s) {
        ApplyBt(d + s * kLanes, kAlpha * kLanes, t + s * kLanes);
      }
      for (int r = 0; r < kAlpha; ++r) {
        ApplyBt(t + r * kAlpha * kLanes, kLanes, d + r * kAlpha * kLanes);
      }
      // ApplyBt along rows wrote into d: d now holds the transformed
      // tiles, which the next channel's gather overwrites.
      Dtype* v = V + static_cast<size_t>(c) * count + t0;
      for (int pos = 0; pos < kPos; ++pos) {
        std::memcpy(v + pos * v_plane, d + pos * kLanes, sizeof(Dtype) * lanes);
      }
    }
  }
}

// Transforms the products M (36 outputs x count matrices) of tiles
// [first, first + count) back and writes (or adds) their valid part;
// kOut is the output tile's edge, m.
template <int kOut, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void OutputTransform(const Tiling& g,
                                                   int64_t first, int count,
                                                   const Dtype* M, Dtype* top,
                                                   ptrdiff_t top_step,
                                                   bool accumulate) {
  const int O = g.outputs, OH = g.output_h, OW = g.output_w;
  const size_t top_plane = static_cast<size_t>(OH) * OW;
  const size_t m_plane = static_cast<size_t>(O) * count;
  Dtype m[kPos * kLanes];
  Dtype t[kOut * kAlpha * kLanes];
  Dtype y[kOut * kOut * kLanes];
  for (int t0 = 0; t0 < count; t0 += kLanes) {
    const int lanes = std::min(kLanes, count - t0);
    int64_t image[kLanes];
    int oy[kLanes], ox[kLanes];
    TileOrigins(g, first + t0, lanes, image, oy, ox);
    if (lanes < kLanes) std::memset(m, 0, sizeof(m));
    for (int o = 0; o < O; ++o) {
      const Dtype* src = M + static_cast<size_t>(o) * count + t0;
      for (int pos = 0; pos < kPos; ++pos) {
        std::memcpy(m + pos * kLanes, src + pos * m_plane,
                    sizeof(Dtype) * lanes);
      }
      // A^T m: down each of the 6 columns (m rows out); then (A^T m) A:
      // along each of those m rows.
      for (int s = 0; s < kAlpha; ++s) {
        ApplyAt<kOut>(m + s * kLanes, kAlpha * kLanes, t + s * kLanes);
      }
      for (int r = 0; r < kOut; ++r) {
        ApplyAt<kOut>(t + r * kAlpha * kLanes, kLanes, y + r * kOut * kLanes);
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
// Z (36 (output_end - output_begin) x count matrices), A dY A^T; kOut is
// m.
template <int kOut, typename Dtype>
POSEIDON_ALWAYS_INLINE inline void TopDiffTransform(
    const Tiling& g, int64_t first, int count, const Dtype* top_diff,
    ptrdiff_t top_step, int output_begin, int output_end, Dtype* Z) {
  const int OH = g.output_h, OW = g.output_w;
  const size_t top_plane = static_cast<size_t>(OH) * OW;
  const size_t z_plane = static_cast<size_t>(output_end - output_begin) * count;
  // y[r][s][l]: the m x m tiles of up to kLanes tiles; t = A y (6 x m),
  // then z = A y A^T (6 x 6).
  Dtype y[kOut * kOut * kLanes];
  Dtype t[kAlpha * kOut * kLanes];
  Dtype z[kPos * kLanes];
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
      // A y: down each of the m columns (6 rows out); then (A y) A^T:
      // along each of those 6 rows (m elements in, 6 out).
      for (int s = 0; s < kOut; ++s) {
        ApplyA<kOut>(y + s * kLanes, kOut * kLanes, t + s * kLanes);
      }
      for (int r = 0; r < kAlpha; ++r) {
        ApplyA<kOut>(t + r * kOut * kLanes, kLanes, z + r * kAlpha * kLanes);
      }
      Dtype* dst = Z + static_cast<size_t>(o - output_begin) * count + t0;
      for (int pos = 0; pos < kPos; ++pos) {
        std::memcpy(dst + pos * z_plane, z + pos * kLanes,
                    sizeof(Dtype) * lanes);
      }
    }
  }
}

// The AVX2 compilations (Note [Transforms on AVX2]).
template <typename Dtype>
POSEIDON_AVX2 void InputTransformAvx2(const Tiling& g, int64_t first, int count,
                                      const Dtype* bottom,
                                      ptrdiff_t bottom_step, Dtype* V) {
  InputTransform(g, first, count, bottom, bottom_step, V);
}

// Note [Input transform on AVX2]
// The float transforms on AVX2 CPUs are written with intrinsics rather
// than left to the compiler. The generic input transform gathers each
// tile's 6 x 6 window element by element (with a bounds test per element
// for tiles that touch the padding: most of them on small maps, 12 of 16
// on CIFAR-10 quick's 8 x 8) and copies the transformed tiles out with a
// memcpy per row; in F(2x2, 5x5)'s first profile (perf, CIFAR-10 quick,
// one thread) it took 1.5 times as long as the 36 GEMMs it feeds, and the
// output and top-diff transforms together as long again. Here 16 tiles
// go at a time, two vectors of 8 lanes: each row of a tile's window is
// one load (a plain load ANDed with the mask of its columns inside the
// image where all 8 floats lie in the channel's plane; a masked load
// elsewhere, so nothing outside the image is read: masked loads alone
// took most of the time on the AVX2 EPYC), an 8 x 8 transpose turns 8
// tiles' rows into 6 vectors of a column each, B^T runs along the row
// and, after the 6 rows, down the columns, straight into V's rows, each
// store a whole 64-byte line. The output transform loads M's rows the
// same way, and the top diff's stores into Z likewise; their m x m of
// output is still written element by element. The arithmetic is the
// generic sums' with FMA. Measured (scripts/bench/compare_builds.py on
// one-layer nets, one thread, medians of 3 interleaved runs, forward and
// weight gradient ms, against the generic transforms): 3x3, 64 channels
// on 56 x 56, batch 8: 21.1 -> 14.4 and 20.1 -> 14.4; 256 on 14 x 14:
// 23.0 -> 18.8 and 23.3 -> 18.2; 64 to 96 on 35 x 35: 13.6 -> 8.0 and
// 13.7 -> 7.3; 256 on 56 x 56, batch 4 (5 runs): 204 -> 181 and 154 ->
// 136.
namespace avx2 {

// The 8 x 8 transpose: row l of in becomes lane l of out[0 .. 7].
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void Transpose8(__m256 in[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(in[0], in[1]);
  const __m256 t1 = _mm256_unpackhi_ps(in[0], in[1]);
  const __m256 t2 = _mm256_unpacklo_ps(in[2], in[3]);
  const __m256 t3 = _mm256_unpackhi_ps(in[2], in[3]);
  const __m256 t4 = _mm256_unpacklo_ps(in[4], in[5]);
  const __m256 t5 = _mm256_unpackhi_ps(in[4], in[5]);
  const __m256 t6 = _mm256_unpacklo_ps(in[6], in[7]);
  const __m256 t7 = _mm256_unpackhi_ps(in[6], in[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44);
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44);
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44);
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44);
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  in[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  in[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  in[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  in[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  in[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  in[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  in[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  in[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// out[k * step] = (B^T d)[k] for the 6 vectors d[0 .. 5] (ApplyBt's sums).
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void Bt(const __m256* d,
                                                    __m256* out, int step) {
  const __m256 four = _mm256_set1_ps(4), five = _mm256_set1_ps(5);
  const __m256 two = _mm256_set1_ps(2);
  const __m256 p = _mm256_fnmadd_ps(four, d[2], d[4]);
  const __m256 q = _mm256_fnmadd_ps(four, d[1], d[3]);
  const __m256 r = _mm256_sub_ps(d[4], d[2]);
  const __m256 s = _mm256_mul_ps(two, _mm256_sub_ps(d[3], d[1]));
  out[0] = _mm256_add_ps(
      _mm256_fnmadd_ps(five, d[2], _mm256_mul_ps(four, d[0])), d[4]);
  out[step] = _mm256_add_ps(p, q);
  out[2 * step] = _mm256_sub_ps(p, q);
  out[3 * step] = _mm256_add_ps(r, s);
  out[4 * step] = _mm256_sub_ps(r, s);
  out[5 * step] = _mm256_add_ps(
      _mm256_fnmadd_ps(five, d[3], _mm256_mul_ps(four, d[1])), d[5]);
}

// out[k * step] = (A^T m)[k], k < M, for the 6 vectors m[0 .. 5]
// (ApplyAt's sums).
template <int M>
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void At(const __m256* m,
                                                    __m256* out, int step) {
  const __m256 a = _mm256_add_ps(m[1], m[2]), b = _mm256_sub_ps(m[1], m[2]);
  const __m256 c = _mm256_add_ps(m[3], m[4]), e = _mm256_sub_ps(m[3], m[4]);
  const __m256 two = _mm256_set1_ps(2);
  out[0] = _mm256_add_ps(_mm256_add_ps(m[0], a), c);
  if constexpr (M == 4) {
    const __m256 four = _mm256_set1_ps(4), eight = _mm256_set1_ps(8);
    out[step] = _mm256_fmadd_ps(two, e, b);
    out[2 * step] = _mm256_fmadd_ps(four, c, a);
    out[3 * step] = _mm256_add_ps(_mm256_fmadd_ps(eight, e, b), m[5]);
  } else {
    out[step] = _mm256_add_ps(_mm256_fmadd_ps(two, e, b), m[5]);
  }
}

// out[k * step] = (A y)[k], k < 6, for the M vectors y[0 .. M - 1]
// (ApplyA's sums).
template <int M>
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void A(const __m256* y, __m256* out,
                                                   int step) {
  const __m256 two = _mm256_set1_ps(2);
  if constexpr (M == 4) {
    const __m256 four = _mm256_set1_ps(4), eight = _mm256_set1_ps(8);
    const __m256 even = _mm256_add_ps(y[0], y[2]);
    const __m256 odd = _mm256_add_ps(y[1], y[3]);
    const __m256 even4 = _mm256_fmadd_ps(four, y[2], y[0]);
    const __m256 odd8 = _mm256_fmadd_ps(eight, y[3], _mm256_mul_ps(two, y[1]));
    out[0] = y[0];
    out[step] = _mm256_add_ps(even, odd);
    out[2 * step] = _mm256_sub_ps(even, odd);
    out[3 * step] = _mm256_add_ps(even4, odd8);
    out[4 * step] = _mm256_sub_ps(even4, odd8);
    out[5 * step] = y[3];
  } else {
    out[0] = y[0];
    out[step] = _mm256_add_ps(y[0], y[1]);
    out[2 * step] = _mm256_sub_ps(y[0], y[1]);
    out[3 * step] = _mm256_fmadd_ps(two, y[1], y[0]);
    out[4 * step] = _mm256_fnmadd_ps(two, y[1], y[0]);
    out[5 * step] = y[1];
  }
}

// Stores the first `lanes` of v at dst (all 8 with one store).
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void StoreLanes(float* dst,
                                                            __m256 v,
                                                            int lanes) {
  if (lanes == 8) {
    _mm256_storeu_ps(dst, v);
  } else {
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, v);
    for (int l = 0; l < lanes; ++l) dst[l] = tmp[l];
  }
}

// Loads the first `lanes` floats at src, the other lanes zero.
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline __m256 LoadLanes(const float* src,
                                                             int lanes) {
  if (lanes == 8) return _mm256_loadu_ps(src);
  alignas(32) float tmp[8] = {};
  for (int l = 0; l < lanes; ++l) tmp[l] = src[l];
  return _mm256_load_ps(tmp);
}

}  // namespace avx2

POSEIDON_AVX2 void InputTransformAvx2(const Tiling& g, int64_t first, int count,
                                      const float* bottom,
                                      ptrdiff_t bottom_step, float* V) {
  const int C = g.channels, H = g.height, W = g.width;
  const size_t image_plane = static_cast<size_t>(H) * W;
  const size_t v_plane = static_cast<size_t>(C) * count;
  const __m256i column = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  // 16 tiles at a time, two vectors, so that each store to V fills a
  // 64-byte line.
  for (int t0 = 0; t0 < count; t0 += 16) {
    const int lanes = std::min(16, count - t0);
    int64_t image[16];
    int y0[16], x0[16];
    TileOrigins(g, first + t0, lanes, image, y0, x0);
    // Per tile: its window's first element's offset from bottom (as an
    // address, since it may lie outside the image), the columns inside
    // the image (of the first 6), the rows inside it (bit r of rows) and
    // those whose 8 elements from the window's first column lie inside
    // the channel's plane (bit r of whole), read by a plain load.
    uintptr_t at[16];
    __m256i mask[16];
    unsigned rows[16], whole[16];
    for (int l = 0; l < 16; ++l) {
      rows[l] = whole[l] = 0;
      if (l >= lanes) {
        at[l] = 0;
        mask[l] = _mm256_setzero_si256();
        continue;
      }
      const int y = y0[l] - g.pad_h, x = x0[l] - g.pad_w;
      at[l] = reinterpret_cast<uintptr_t>(bottom) +
              sizeof(float) *
                  static_cast<uintptr_t>(image[l] * bottom_step +
                                         static_cast<ptrdiff_t>(y) * W + x);
      // Column x + s is inside for -x <= s < W - x, and s < 6.
      const __m256i lo = _mm256_set1_epi32(-x - 1);
      const __m256i hi = _mm256_set1_epi32(std::min(W - x, kAlpha));
      mask[l] = _mm256_and_si256(_mm256_cmpgt_epi32(column, lo),
                                 _mm256_cmpgt_epi32(hi, column));
      for (int r = 0; r < kAlpha; ++r) {
        if (y + r < 0 || y + r >= H) continue;
        rows[l] |= 1u << r;
        const int64_t from = static_cast<int64_t>(y + r) * W + x;
        if (from >= 0 && from + 8 <= static_cast<int64_t>(image_plane)) {
          whole[l] |= 1u << r;
        }
      }
    }
    for (int c = 0; c < C; ++c) {
      const uintptr_t channel = sizeof(float) * c * image_plane;
      // e[h][r][j]: row r of the window after B^T along it (column j), of
      // tiles 8 h to 8 h + 7.
      __m256 e[2][kPos];
      for (int h = 0; h < 2; ++h) {
        for (int r = 0; r < kAlpha; ++r) {
          __m256 d[8];
          for (int i = 0; i < 8; ++i) {
            const int l = 8 * h + i;
            // Masked loads are slow on some CPUs (on the AVX2 EPYC most of
            // this function's time went to them): a plain load and the mask
            // where the 8 elements are the plane's.
            const float* row = reinterpret_cast<const float*>(
                at[l] + channel + sizeof(float) * r * W);
            if ((whole[l] >> r) & 1u) {
              d[i] = _mm256_and_ps(_mm256_loadu_ps(row),
                                   _mm256_castsi256_ps(mask[l]));
            } else if ((rows[l] >> r) & 1u) {
              d[i] = _mm256_maskload_ps(row, mask[l]);
            } else {
              d[i] = _mm256_setzero_ps();
            }
          }
          avx2::Transpose8(d);
          avx2::Bt(d, e[h] + r * kAlpha, 1);
        }
      }
      float* v = V + static_cast<size_t>(c) * count + t0;
      for (int j = 0; j < kAlpha; ++j) {
        __m256 column_j[2][kAlpha], u[2][kAlpha];
        for (int r = 0; r < kAlpha; ++r) {
          column_j[0][r] = e[0][r * kAlpha + j];
          column_j[1][r] = e[1][r * kAlpha + j];
        }
        avx2::Bt(column_j[0], u[0], 1);
        avx2::Bt(column_j[1], u[1], 1);
        for (int k = 0; k < kAlpha; ++k) {
          float* dst = v + (k * kAlpha + j) * v_plane;
          if (lanes == 16) {
            _mm256_storeu_ps(dst, u[0][k]);
            _mm256_storeu_ps(dst + 8, u[1][k]);
          } else {
            avx2::StoreLanes(dst, u[0][k], std::min(lanes, 8));
            avx2::StoreLanes(dst + 8, u[1][k], std::max(lanes - 8, 0));
          }
        }
      }
    }
  }
}

// The float output transform on AVX2 CPUs (Note [Input transform on
// AVX2], the other way): 8 tiles at a time, the products loaded straight
// from M's rows, A^T down the columns and along the rows in registers,
// then each tile's m x m written (or added) where it lies in the output.
template <int kOut>
POSEIDON_AVX2 void OutputTransformAvx2(const Tiling& g, int64_t first,
                                       int count, const float* M, float* top,
                                       ptrdiff_t top_step, bool accumulate) {
  const int O = g.outputs, OH = g.output_h, OW = g.output_w;
  const size_t top_plane = static_cast<size_t>(OH) * OW;
  const size_t m_plane = static_cast<size_t>(O) * count;
  // 16 tiles at a time, two vectors: each load from M reads a 64-byte line.
  for (int t0 = 0; t0 < count; t0 += 16) {
    const int lanes = std::min(16, count - t0);
    int64_t image[16];
    int oy[16], ox[16], rows[16], cols[16];
    TileOrigins(g, first + t0, lanes, image, oy, ox);
    for (int l = 0; l < lanes; ++l) {
      rows[l] = std::min(kOut, OH - oy[l]);
      cols[l] = std::min(kOut, OW - ox[l]);
    }
    const int low = std::min(lanes, 8), high = std::max(lanes - 8, 0);
    for (int o = 0; o < O; ++o) {
      const float* src = M + static_cast<size_t>(o) * count + t0;
      // t[h][k][j]: A^T down column j of the 6 x 6 of tiles 8 h to 8 h + 7.
      __m256 t[2][kOut * kAlpha];
      for (int j = 0; j < kAlpha; ++j) {
        __m256 m[2][kAlpha];
        for (int r = 0; r < kAlpha; ++r) {
          const float* at = src + (r * kAlpha + j) * m_plane;
          if (lanes == 16) {
            m[0][r] = _mm256_loadu_ps(at);
            m[1][r] = _mm256_loadu_ps(at + 8);
          } else {
            m[0][r] = avx2::LoadLanes(at, low);
            m[1][r] = avx2::LoadLanes(at + 8, high);
          }
        }
        avx2::At<kOut>(m[0], t[0] + j, kAlpha);
        avx2::At<kOut>(m[1], t[1] + j, kAlpha);
      }
      alignas(32) float y[kOut * kOut * 16];
      for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < kOut; ++k) {
          __m256 out[kOut];
          avx2::At<kOut>(t[h] + k * kAlpha, out, 1);
          for (int s = 0; s < kOut; ++s) {
            _mm256_store_ps(y + (k * kOut + s) * 16 + 8 * h, out[s]);
          }
        }
      }
      for (int l = 0; l < lanes; ++l) {
        float* dst = top + image[l] * top_step + o * top_plane +
                     static_cast<size_t>(oy[l]) * OW + ox[l];
        for (int r = 0; r < rows[l]; ++r) {
          for (int s = 0; s < cols[l]; ++s) {
            const float value = y[(r * kOut + s) * 16 + l];
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

// The float top-diff transform on AVX2 CPUs, likewise: each tile's m x m
// gathered (zero beyond the output), A down the columns and along the rows
// in registers, stored straight into Z's rows.
template <int kOut>
POSEIDON_AVX2 void TopDiffTransformAvx2(const Tiling& g, int64_t first,
                                        int count, const float* top_diff,
                                        ptrdiff_t top_step, int output_begin,
                                        int output_end, float* Z) {
  const int OH = g.output_h, OW = g.output_w;
  const size_t top_plane = static_cast<size_t>(OH) * OW;
  const size_t z_plane = static_cast<size_t>(output_end - output_begin) * count;
  // 16 tiles at a time, two vectors: each store to Z fills a 64-byte line.
  for (int t0 = 0; t0 < count; t0 += 16) {
    const int lanes = std::min(16, count - t0);
    int64_t image[16];
    int oy[16], ox[16], rows[16], cols[16];
    TileOrigins(g, first + t0, lanes, image, oy, ox);
    for (int l = 0; l < 16; ++l) {
      rows[l] = l < lanes ? std::min(kOut, OH - oy[l]) : 0;
      cols[l] = l < lanes ? std::min(kOut, OW - ox[l]) : 0;
    }
    const int low = std::min(lanes, 8), high = std::max(lanes - 8, 0);
    for (int o = output_begin; o < output_end; ++o) {
      alignas(32) float y[kOut * kOut * 16];
      for (int l = 0; l < 16; ++l) {
        const float* src =
            rows[l] == 0 ? nullptr
                         : top_diff + image[l] * top_step + o * top_plane +
                               static_cast<size_t>(oy[l]) * OW + ox[l];
        for (int r = 0; r < kOut; ++r) {
          for (int s = 0; s < kOut; ++s) {
            y[(r * kOut + s) * 16 + l] =
                r < rows[l] && s < cols[l] ? src[r * OW + s] : 0.0f;
          }
        }
      }
      // t[h][i][s]: A down column s (6 rows out of m) of tiles 8 h to
      // 8 h + 7.
      __m256 t[2][kAlpha * kOut];
      for (int h = 0; h < 2; ++h) {
        for (int s = 0; s < kOut; ++s) {
          __m256 column[kOut];
          for (int r = 0; r < kOut; ++r) {
            column[r] = _mm256_load_ps(y + (r * kOut + s) * 16 + 8 * h);
          }
          avx2::A<kOut>(column, t[h] + s, kOut);
        }
      }
      float* dst = Z + static_cast<size_t>(o - output_begin) * count + t0;
      for (int i = 0; i < kAlpha; ++i) {
        __m256 z[2][kAlpha];
        avx2::A<kOut>(t[0] + i * kOut, z[0], 1);
        avx2::A<kOut>(t[1] + i * kOut, z[1], 1);
        for (int j = 0; j < kAlpha; ++j) {
          float* at = dst + (i * kAlpha + j) * z_plane;
          if (lanes == 16) {
            _mm256_storeu_ps(at, z[0][j]);
            _mm256_storeu_ps(at + 8, z[1][j]);
          } else {
            avx2::StoreLanes(at, z[0][j], low);
            avx2::StoreLanes(at + 8, z[1][j], high);
          }
        }
      }
    }
  }
}

template <int kOut, typename Dtype>
POSEIDON_AVX2 void OutputTransformAvx2(const Tiling& g, int64_t first,
                                       int count, const Dtype* M, Dtype* top,
                                       ptrdiff_t top_step, bool accumulate) {
  OutputTransform<kOut>(g, first, count, M, top, top_step, accumulate);
}

template <int kOut, typename Dtype>
POSEIDON_AVX2 void TopDiffTransformAvx2(const Tiling& g, int64_t first,
                                        int count, const Dtype* top_diff,
                                        ptrdiff_t top_step, int output_begin,
                                        int output_end, Dtype* Z) {
  TopDiffTransform<kOut>(g, first, count, top_diff, top_step, output_begin,
                         output_end, Z);
}

// The transforms of one call, for the tile edge and the compilation
// (Note [Transforms on AVX2]) chosen once per call.
template <typename Dtype>
void RunInputTransform(const Tiling& g, bool avx2, int64_t first, int count,
                       const Dtype* bottom, ptrdiff_t bottom_step, Dtype* V) {
  if (avx2) {
    InputTransformAvx2(g, first, count, bottom, bottom_step, V);
  } else {
    InputTransform(g, first, count, bottom, bottom_step, V);
  }
}

template <typename Dtype>
void RunOutputTransform(const Tiling& g, bool avx2, int64_t first, int count,
                        const Dtype* M, Dtype* top, ptrdiff_t top_step,
                        bool accumulate) {
  if (g.tile == 4) {
    if (avx2) {
      OutputTransformAvx2<4>(g, first, count, M, top, top_step, accumulate);
    } else {
      OutputTransform<4>(g, first, count, M, top, top_step, accumulate);
    }
  } else if (avx2) {
    OutputTransformAvx2<2>(g, first, count, M, top, top_step, accumulate);
  } else {
    OutputTransform<2>(g, first, count, M, top, top_step, accumulate);
  }
}

template <typename Dtype>
void RunTopDiffTransform(const Tiling& g, bool avx2, int64_t first, int count,
                         const Dtype* top_diff, ptrdiff_t top_step,
                         int output_begin, int output_end, Dtype* Z) {
  if (g.tile == 4) {
    if (avx2) {
      TopDiffTransformAvx2<4>(g, first, count, top_diff, top_step, output_begin,
                              output_end, Z);
    } else {
      TopDiffTransform<4>(g, first, count, top_diff, top_step, output_begin,
                          output_end, Z);
    }
  } else if (avx2) {
    TopDiffTransformAvx2<2>(g, first, count, top_diff, top_step, output_begin,
                            output_end, Z);
  } else {
    TopDiffTransform<2>(g, first, count, top_diff, top_step, output_begin,
                        output_end, Z);
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
  const int tile = w.tile();
  return {g.channels,
          g.outputs,
          g.height,
          g.width,
          g.pad_h,
          g.pad_w,
          w.output_h(),
          w.output_w(),
          (w.output_w() + tile - 1) / tile,
          w.tiles_per_image(),
          tile};
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
  CHECK(g.kernel == 3 || g.kernel == 5)
      << "Winograd: a " << g.kernel << "x" << g.kernel << " kernel";
  tile_ = kAlpha + 1 - g.kernel;
  output_h_ = g.height + 2 * g.pad_h - (g.kernel - 1);
  output_w_ = g.width + 2 * g.pad_w - (g.kernel - 1);
  CHECK_GE(output_h_, 1) << "Winograd: empty output for height " << g.height
                         << " pad_h " << g.pad_h;
  CHECK_GE(output_w_, 1) << "Winograd: empty output for width " << g.width
                         << " pad_w " << g.pad_w;
  tiles_h_ = (output_h_ + tile_ - 1) / tile_;
  tiles_w_ = (output_w_ + tile_ - 1) / tile_;
  if (g.tile_block > 0) {
    tile_block_ = g.tile_block;
  } else {
    const size_t per_tile =
        sizeof(Dtype) * kPos * (static_cast<size_t>(g.channels) + g.outputs);
    const size_t fit = kBlockBytes / per_tile;
    tile_block_ =
        static_cast<int>(std::clamp<size_t>(fit, kMinBlock, kMaxBlock));
    tile_block_ -= tile_block_ % kLanes;
  }
}

template <typename Dtype>
size_t WinogradConv<Dtype>::weights_size() const {
  return static_cast<size_t>(kPos) * g_.outputs * g_.channels;
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
  if (g_.kernel == 3) {
    TransformWeightsOf<3>(weights, flip_and_swap, U, output_begin, output_end);
  } else {
    TransformWeightsOf<5>(weights, flip_and_swap, U, output_begin, output_end);
  }
}

template <typename Dtype>
template <int R>
void WinogradConv<Dtype>::TransformWeightsOf(const Dtype* weights,
                                             bool flip_and_swap, Dtype* U,
                                             int output_begin,
                                             int output_end) const {
  const int C = g_.channels, O = g_.outputs;
  const size_t plane = static_cast<size_t>(O) * C;
  // kLanes kernels (o, c0 + l) at a time: k[R i + j][l], then G k
  // (gk[R a + j][l]), then G k G^T (u[6 a + b][l]).
  double k[R * R * kLanes] = {};
  double gk[kAlpha * R * kLanes];
  double u[kPos * kLanes];
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
        ApplyG<R>(k + j * kLanes, R * kLanes, gk + j * kLanes);
      }
      for (int a = 0; a < kAlpha; ++a) {
        ApplyG<R>(gk + a * R * kLanes, kLanes, u + a * kAlpha * kLanes);
      }
      Dtype* dst = U + static_cast<size_t>(o) * C + c0;
      for (int pos = 0; pos < kPos; ++pos) {
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
  return static_cast<size_t>(kPos) *
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
    Dtype* M = scratch + static_cast<size_t>(kPos) * C * count;
    RunInputTransform(tiling, avx2, first, count, bottom, bottom_step, V);
    for (int pos = 0; pos < kPos; ++pos) {
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
    for (int pos = 0; pos < kPos; ++pos) {
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
    Dtype* Z = scratch + static_cast<size_t>(kPos) * C * count;
    RunInputTransform(tiling, avx2, first, count, bottom, bottom_step, V);
    RunTopDiffTransform(tiling, avx2, first, count, top_diff, top_step,
                        output_begin, output_end, Z);
    for (int pos = 0; pos < kPos; ++pos) {
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
  if (g_.kernel == 3) {
    TransformWeightGradientOf<3>(dU, parts, weight_diff, output_begin,
                                 output_end);
  } else {
    TransformWeightGradientOf<5>(dU, parts, weight_diff, output_begin,
                                 output_end);
  }
}

template <typename Dtype>
template <int R>
void WinogradConv<Dtype>::TransformWeightGradientOf(const Dtype* const* dU,
                                                    int parts,
                                                    Dtype* weight_diff,
                                                    int output_begin,
                                                    int output_end) const {
  const int C = g_.channels, O = g_.outputs;
  const size_t plane = static_cast<size_t>(O) * C;
  // kLanes kernels (o, c0 + l) at a time: the summed transform m[6 a +
  // b][l], then G^T m (t[R i + b][l]), then G^T m G (w[R i + j][l]).
  double m[kPos * kLanes] = {};
  double t[R * kAlpha * kLanes];
  double w[R * R * kLanes];
  for (int o = output_begin; o < output_end; ++o) {
    for (int c0 = 0; c0 < C; c0 += kLanes) {
      const int lanes = std::min(kLanes, C - c0);
      const size_t at = static_cast<size_t>(o) * C + c0;
      for (int pos = 0; pos < kPos; ++pos) {
        for (int l = 0; l < lanes; ++l) {
          double sum = 0;
          for (int p = 0; p < parts; ++p) sum += dU[p][pos * plane + at + l];
          m[pos * kLanes + l] = sum;
        }
      }
      for (int b = 0; b < kAlpha; ++b) {
        ApplyGt<R>(m + b * kLanes, kAlpha * kLanes, t + b * kLanes);
      }
      for (int i = 0; i < R; ++i) {
        ApplyGt<R>(t + i * kAlpha * kLanes, kLanes, w + i * R * kLanes);
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

INSTANTIATE_CLASS(WinogradConv);

}  // namespace poseidon
