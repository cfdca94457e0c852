// The float Winograd tile transforms written with AVX2 intrinsics, for
// util/winograd.cpp (which keeps the generic ones, the reference).
//
// Note [Input transform on AVX2]
// The float transforms on AVX2 CPUs are written with intrinsics rather than
// left to the compiler, one template for the 6x6 and the 8x8 transform
// domains (below, 6x6's figures). The generic input transform gathers each
// tile's 6 x 6 window element by element (with a bounds test per element
// for tiles that touch the padding: most of them on small maps, 12 of 16 on
// CIFAR-10 quick's 8 x 8) and copies the transformed tiles out with a
// memcpy per row; in F(2x2, 5x5)'s first profile (perf, CIFAR-10 quick, one
// thread) it took 1.5 times as long as the 36 GEMMs it feeds, and the
// output and top-diff transforms together as long again. Here 16 tiles go
// at a time, two vectors of 8 lanes: each row of a tile's window is one
// load (a plain load ANDed with the mask of its columns inside the image
// where all 8 floats lie in the channel's plane; a masked load elsewhere,
// so nothing outside the image is read: masked loads alone took most of the
// time on the AVX2 EPYC), an 8 x 8 transpose turns 8 tiles' rows into 6 (8)
// vectors of a column each, B^T runs along the row and, after the 6 (8)
// rows, down the columns, straight into V's rows, each store a whole
// 64-byte line. The output transform loads M's rows the same way, and the
// top diff's stores into Z likewise; their m x m of output is still written
// element by element. The arithmetic is the generic sums' with FMA.
// Measured (scripts/bench/compare_builds.py on one-layer nets, one thread,
// medians of 3 interleaved runs, forward and weight gradient ms, against
// the generic transforms): 3x3, 64 channels on 56 x 56, batch 8: 21.1 ->
// 14.4 and 20.1 -> 14.4; 256 on 14 x 14: 23.0 -> 18.8 and 23.3 -> 18.2; 64
// to 96 on 35 x 35: 13.6 -> 8.0 and 13.7 -> 7.3; 256 on 56 x 56, batch 4 (5
// runs): 204 -> 181 and 154 -> 136.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "winograd_tiles.hpp"

#define POSEIDON_AVX2 __attribute__((target("avx2,fma")))
#define POSEIDON_ALWAYS_INLINE __attribute__((always_inline))

namespace poseidon {
namespace winograd {
namespace {

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
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void Bt6(const __m256* d,
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
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void At6(const __m256* m,
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
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void A6(const __m256* y,
                                                    __m256* out, int step) {
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

// F(4x4, 5x5)'s 8-point forms (Note [Winograd] in winograd.cpp): out[k *
// step] = (B^T d)[k] for the 8 vectors d[0 .. 7], B^T that of F(2, 7).
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void Bt8(const __m256* d,
                                                     __m256* out, int step) {
  const __m256 c5_25 = _mm256_set1_ps(5.25f), c4_25 = _mm256_set1_ps(4.25f);
  const __m256 c2_5 = _mm256_set1_ps(2.5f), c1_25 = _mm256_set1_ps(1.25f);
  const __m256 c0_5 = _mm256_set1_ps(0.5f), c0_25 = _mm256_set1_ps(0.25f);
  const __m256 c2 = _mm256_set1_ps(2.0f), c4 = _mm256_set1_ps(4.0f);
  const __m256 c5 = _mm256_set1_ps(5.0f);
  out[0] = _mm256_fmadd_ps(c5_25, _mm256_sub_ps(d[4], d[2]),
                           _mm256_sub_ps(d[0], d[6]));
  out[7 * step] = _mm256_fmadd_ps(c5_25, _mm256_sub_ps(d[3], d[5]),
                                  _mm256_sub_ps(d[7], d[1]));
  const __m256 e1 = _mm256_fnmadd_ps(c4_25, d[4], _mm256_add_ps(d[2], d[6]));
  const __m256 o1 = _mm256_fnmadd_ps(c4_25, d[3], _mm256_add_ps(d[1], d[5]));
  out[step] = _mm256_add_ps(e1, o1);
  out[2 * step] = _mm256_sub_ps(e1, o1);
  const __m256 e2 =
      _mm256_fnmadd_ps(c1_25, d[4], _mm256_fmadd_ps(c0_25, d[2], d[6]));
  const __m256 o2 = _mm256_fmadd_ps(
      c2, d[5], _mm256_fnmadd_ps(c2_5, d[3], _mm256_mul_ps(c0_5, d[1])));
  out[3 * step] = _mm256_add_ps(e2, o2);
  out[4 * step] = _mm256_sub_ps(e2, o2);
  const __m256 e3 = _mm256_fnmadd_ps(c5, d[4], _mm256_fmadd_ps(c4, d[2], d[6]));
  const __m256 o3 = _mm256_fmadd_ps(
      c0_5, d[5], _mm256_fnmadd_ps(c2_5, d[3], _mm256_mul_ps(c2, d[1])));
  out[5 * step] = _mm256_add_ps(e3, o3);
  out[6 * step] = _mm256_sub_ps(e3, o3);
}

// out[k * step] = (A^T m)[k], k < 4, for the 8 vectors m[0 .. 7].
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void At8(const __m256* m,
                                                     __m256* out, int step) {
  const __m256 s1 = _mm256_add_ps(m[1], m[2]), d1 = _mm256_sub_ps(m[1], m[2]);
  const __m256 s2 = _mm256_add_ps(m[3], m[4]), d2 = _mm256_sub_ps(m[3], m[4]);
  const __m256 sh = _mm256_add_ps(m[5], m[6]), dh = _mm256_sub_ps(m[5], m[6]);
  out[0] = _mm256_add_ps(_mm256_add_ps(m[0], s1), _mm256_add_ps(s2, sh));
  out[step] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), d2,
                              _mm256_fmadd_ps(_mm256_set1_ps(0.5f), dh, d1));
  out[2 * step] = _mm256_fmadd_ps(
      _mm256_set1_ps(4.0f), s2, _mm256_fmadd_ps(_mm256_set1_ps(0.25f), sh, s1));
  out[3 * step] = _mm256_add_ps(
      _mm256_fmadd_ps(_mm256_set1_ps(8.0f), d2,
                      _mm256_fmadd_ps(_mm256_set1_ps(0.125f), dh, d1)),
      m[7]);
}

// out[k * step] = (A y)[k], k < 8, for the 4 vectors y[0 .. 3].
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void A8(const __m256* y,
                                                    __m256* out, int step) {
  const __m256 e1 = _mm256_add_ps(y[0], y[2]), o1 = _mm256_add_ps(y[1], y[3]);
  const __m256 e2 = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), y[2], y[0]);
  const __m256 o2 =
      _mm256_fmadd_ps(_mm256_set1_ps(8.0f), y[3], _mm256_add_ps(y[1], y[1]));
  const __m256 eh = _mm256_fmadd_ps(_mm256_set1_ps(0.25f), y[2], y[0]);
  const __m256 oh = _mm256_fmadd_ps(_mm256_set1_ps(0.125f), y[3],
                                    _mm256_mul_ps(_mm256_set1_ps(0.5f), y[1]));
  out[0] = y[0];
  out[step] = _mm256_add_ps(e1, o1);
  out[2 * step] = _mm256_sub_ps(e1, o1);
  out[3 * step] = _mm256_add_ps(e2, o2);
  out[4 * step] = _mm256_sub_ps(e2, o2);
  out[5 * step] = _mm256_add_ps(eh, oh);
  out[6 * step] = _mm256_sub_ps(eh, oh);
  out[7 * step] = y[3];
}

// The forms by the transform domain's edge, kA: 6 (F(4x4, 3x3), F(2x2,
// 5x5)) or 8 (F(4x4, 5x5)).
template <int kA>
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void Bt(const __m256* d,
                                                    __m256* out, int step) {
  if constexpr (kA == 6) {
    Bt6(d, out, step);
  } else {
    static_assert(kA == 8, "square transform domains are 6x6 or 8x8");
    Bt8(d, out, step);
  }
}

template <int kA, int M>
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void At(const __m256* m,
                                                    __m256* out, int step) {
  if constexpr (kA == 6) {
    At6<M>(m, out, step);
  } else {
    static_assert(kA == 8 && M == 4, "the 8x8 domain has 4x4 tiles");
    At8(m, out, step);
  }
}

template <int kA, int M>
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void A(const __m256* y, __m256* out,
                                                   int step) {
  if constexpr (kA == 6) {
    A6<M>(y, out, step);
  } else {
    static_assert(kA == 8 && M == 4, "the 8x8 domain has 4x4 tiles");
    A8(y, out, step);
  }
}

// Sixteen tiles' values of one transform-domain point: lanes 0-7 in lo,
// 8-15 in hi.
struct Lanes16 {
  __m256 lo, hi;
};

// Stores the first `lanes` (at most 16) of v at dst: a 64-byte line in two
// plain stores when all 16 are there.
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void Store16(float* dst, Lanes16 v,
                                                         int lanes) {
  if (lanes == 16) {
    _mm256_storeu_ps(dst, v.lo);
    _mm256_storeu_ps(dst + 8, v.hi);
    return;
  }
  alignas(32) float tmp[16];
  _mm256_store_ps(tmp, v.lo);
  _mm256_store_ps(tmp + 8, v.hi);
  for (int l = 0; l < lanes; ++l) dst[l] = tmp[l];
}

// Loads the first `lanes` (at most 16) floats at src, the other lanes zero.
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline Lanes16 Load16(const float* src,
                                                           int lanes) {
  if (lanes == 16) return {_mm256_loadu_ps(src), _mm256_loadu_ps(src + 8)};
  alignas(32) float tmp[16] = {};
  for (int l = 0; l < lanes; ++l) tmp[l] = src[l];
  return {_mm256_load_ps(tmp), _mm256_load_ps(tmp + 8)};
}

template <int kA>
POSEIDON_AVX2 void InputTransformImpl(const Tiling& g, int64_t first, int count,
                                      const float* bottom,
                                      ptrdiff_t bottom_step, float* V) {
  constexpr int kP = kA * kA;
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
    // the image (of the first kA), the rows inside it (bit r of rows) and
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
      // Column x + s is inside for -x <= s < W - x, and s < kA.
      const __m256i lo = _mm256_set1_epi32(-x - 1);
      const __m256i hi = _mm256_set1_epi32(std::min(W - x, kA));
      mask[l] = _mm256_and_si256(_mm256_cmpgt_epi32(column, lo),
                                 _mm256_cmpgt_epi32(hi, column));
      for (int r = 0; r < kA; ++r) {
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
      __m256 e[2][kP];
      for (int h = 0; h < 2; ++h) {
        for (int r = 0; r < kA; ++r) {
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
          Transpose8(d);
          Bt<kA>(d, e[h] + r * kA, 1);
        }
      }
      float* v = V + static_cast<size_t>(c) * count + t0;
      for (int j = 0; j < kA; ++j) {
        __m256 column_j[2][kA], u[2][kA];
        for (int r = 0; r < kA; ++r) {
          column_j[0][r] = e[0][r * kA + j];
          column_j[1][r] = e[1][r * kA + j];
        }
        Bt<kA>(column_j[0], u[0], 1);
        Bt<kA>(column_j[1], u[1], 1);
        for (int k = 0; k < kA; ++k) {
          Store16(v + (k * kA + j) * v_plane, {u[0][k], u[1][k]}, lanes);
        }
      }
    }
  }
}

// The float output transform on AVX2 CPUs (Note [Input transform on
// AVX2], the other way): 8 tiles at a time, the products loaded straight
// from M's rows, A^T down the columns and along the rows in registers,
// then each tile's m x m written (or added) where it lies in the output.
template <int kA, int kOut>
POSEIDON_AVX2 void OutputTransformImpl(const Tiling& g, int64_t first,
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
    for (int o = 0; o < O; ++o) {
      const float* src = M + static_cast<size_t>(o) * count + t0;
      // t[h][k][j]: A^T down column j of the kA x kA of tiles 8 h to
      // 8 h + 7.
      __m256 t[2][kOut * kA];
      for (int j = 0; j < kA; ++j) {
        __m256 m[2][kA];
        for (int r = 0; r < kA; ++r) {
          const Lanes16 v = Load16(src + (r * kA + j) * m_plane, lanes);
          m[0][r] = v.lo;
          m[1][r] = v.hi;
        }
        At<kA, kOut>(m[0], t[0] + j, kA);
        At<kA, kOut>(m[1], t[1] + j, kA);
      }
      alignas(32) float y[kOut * kOut * 16];
      for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < kOut; ++k) {
          __m256 out[kOut];
          At<kA, kOut>(t[h] + k * kA, out, 1);
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
template <int kA, int kOut>
POSEIDON_AVX2 void TopDiffTransformImpl(const Tiling& g, int64_t first,
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
      // t[h][i][s]: A down column s (kA rows out of m) of tiles 8 h to
      // 8 h + 7.
      __m256 t[2][kA * kOut];
      for (int h = 0; h < 2; ++h) {
        for (int s = 0; s < kOut; ++s) {
          __m256 column[kOut];
          for (int r = 0; r < kOut; ++r) {
            column[r] = _mm256_load_ps(y + (r * kOut + s) * 16 + 8 * h);
          }
          A<kA, kOut>(column, t[h] + s, kOut);
        }
      }
      float* dst = Z + static_cast<size_t>(o - output_begin) * count + t0;
      for (int i = 0; i < kA; ++i) {
        __m256 z[2][kA];
        A<kA, kOut>(t[0] + i * kOut, z[0], 1);
        A<kA, kOut>(t[1] + i * kOut, z[1], 1);
        for (int j = 0; j < kA; ++j) {
          Store16(dst + (i * kA + j) * z_plane, {z[0][j], z[1][j]}, lanes);
        }
      }
    }
  }
}

// Note [F(2, 7) on AVX2]
// F(2, 7)'s float transforms (Note [F(2, 7) transforms] in winograd.cpp)
// with intrinsics: the generic loops, compiled for AVX2, stayed scalar
// (GCC did not vectorise the eight-row sums through the row pointers).
// Each step is 8 tiles of a run, one vector per window element; the last
// step of a run of 8 or more moves back to end at the run's end (the
// elements it repeats get the same values again), and runs of fewer than
// 8 go through zero-padded copies, so nothing is read beyond the run's
// rows. The arithmetic is the generic sums' with FMA.

// out[k][i0 .. i0 + 7] = sum over s of B^T[k][s] d[s][i0 .. i0 + 7];
// out's rows `stride` apart.
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void Bt8Step(const float* const* d,
                                                         int i0, float* out,
                                                         size_t stride) {
  __m256 in[8], v[8];
  for (int s = 0; s < 8; ++s) in[s] = _mm256_loadu_ps(d[s] + i0);
  Bt8(in, v, 1);
  for (int k = 0; k < 8; ++k) _mm256_storeu_ps(out + k * stride + i0, v[k]);
}

// y0, y1 = A^T m for m's 8 rows (`stride` apart) at i0 .. i0 + 7.
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void At8Step(const float* m,
                                                         size_t stride, int i0,
                                                         __m256* y0,
                                                         __m256* y1) {
  const float* p = m + i0;
  const __m256 m0 = _mm256_loadu_ps(p);
  const __m256 m1 = _mm256_loadu_ps(p + stride);
  const __m256 m2 = _mm256_loadu_ps(p + 2 * stride);
  const __m256 m3 = _mm256_loadu_ps(p + 3 * stride);
  const __m256 m4 = _mm256_loadu_ps(p + 4 * stride);
  const __m256 m5 = _mm256_loadu_ps(p + 5 * stride);
  const __m256 m6 = _mm256_loadu_ps(p + 6 * stride);
  const __m256 m7 = _mm256_loadu_ps(p + 7 * stride);
  *y0 = _mm256_add_ps(
      _mm256_add_ps(m0, _mm256_add_ps(m1, m2)),
      _mm256_add_ps(_mm256_add_ps(m3, m4), _mm256_add_ps(m5, m6)));
  const __m256 odd = _mm256_fmadd_ps(
      _mm256_set1_ps(2.0f), _mm256_sub_ps(m3, m4), _mm256_sub_ps(m1, m2));
  *y1 = _mm256_add_ps(
      _mm256_fmadd_ps(_mm256_set1_ps(0.5f), _mm256_sub_ps(m5, m6), odd), m7);
}

// z[k][i0 .. i0 + 7] = A (y0, y1) at i0 .. i0 + 7; z's rows `stride` apart.
POSEIDON_AVX2 POSEIDON_ALWAYS_INLINE inline void A8Step(const float* y0,
                                                        const float* y1, int i0,
                                                        float* z,
                                                        size_t stride) {
  const __m256 a = _mm256_loadu_ps(y0 + i0), b = _mm256_loadu_ps(y1 + i0);
  const __m256 two = _mm256_set1_ps(2.0f), half = _mm256_set1_ps(0.5f);
  float* o = z + i0;
  _mm256_storeu_ps(o, a);
  _mm256_storeu_ps(o + stride, _mm256_add_ps(a, b));
  _mm256_storeu_ps(o + 2 * stride, _mm256_sub_ps(a, b));
  _mm256_storeu_ps(o + 3 * stride, _mm256_fmadd_ps(two, b, a));
  _mm256_storeu_ps(o + 4 * stride, _mm256_fnmadd_ps(two, b, a));
  _mm256_storeu_ps(o + 5 * stride, _mm256_fmadd_ps(half, b, a));
  _mm256_storeu_ps(o + 6 * stride, _mm256_fnmadd_ps(half, b, a));
  _mm256_storeu_ps(o + 7 * stride, b);
}

POSEIDON_AVX2 void InputTransform1DImpl(const Tiling& g, int64_t first,
                                        int count, const float* bottom,
                                        ptrdiff_t bottom_step, float* V) {
  const int C = g.channels;
  const size_t image_plane = static_cast<size_t>(g.height) * g.width;
  const size_t v_plane = static_cast<size_t>(C) * count;
  const int64_t end = first + count;
  // A run shorter than a vector: its rows zero-padded, and the result.
  float short_in[8 * 8], short_out[8 * 8];
  const float* d[8];
  for (int64_t t = first; t < end;) {
    const TileRun run = RunAt(g, t, end);
    const int n = run.n;
    const float* image = bottom + run.image * bottom_step;
    float* out = V + (t - first);
    RunWindows<float> windows(g, run);
    for (int c = 0; c < C; ++c) {
      windows.Point(image + c * image_plane, d);
      float* dst = out + static_cast<size_t>(c) * count;
      if (n >= 8) {
        for (int i = 0; i < n; i += 8) {
          Bt8Step(d, std::min(i, n - 8), dst, v_plane);
        }
        continue;
      }
      const float* padded[8];
      for (int s = 0; s < 8; ++s) {
        for (int j = 0; j < 8; ++j) {
          short_in[s * 8 + j] = j < n ? d[s][j] : 0.0f;
        }
        padded[s] = short_in + s * 8;
      }
      Bt8Step(padded, 0, short_out, 8);
      for (int pos = 0; pos < 8; ++pos) {
        for (int j = 0; j < n; ++j) {
          dst[pos * v_plane + j] = short_out[pos * 8 + j];
        }
      }
    }
    t += n;
  }
}

POSEIDON_AVX2 void OutputTransform1DImpl(const Tiling& g, int64_t first,
                                         int count, const float* M, float* top,
                                         ptrdiff_t top_step, bool accumulate) {
  const int O = g.outputs;
  const size_t top_plane = static_cast<size_t>(g.output_h) * g.output_w;
  const size_t m_plane = static_cast<size_t>(O) * count;
  const int64_t end = first + count;
  // The run's two output rows (down columns) or two outputs per tile
  // (along rows), before they are written or added; a short run's rows of
  // M, zero-padded.
  float y[2 * kRun];
  float short_m[8 * 8];
  for (int64_t t = first; t < end;) {
    const TileRun run = RunAt(g, t, end);
    const int n = run.n;
    for (int o = 0; o < O; ++o) {
      const float* m = M + static_cast<size_t>(o) * count + (t - first);
      if (n >= 8) {
        for (int i = 0; i < n; i += 8) {
          const int at = std::min(i, n - 8);
          __m256 v0, v1;
          At8Step(m, m_plane, at, &v0, &v1);
          _mm256_storeu_ps(y + at, v0);
          _mm256_storeu_ps(y + kRun + at, v1);
        }
      } else {
        for (int k = 0; k < 8; ++k) {
          for (int j = 0; j < 8; ++j) {
            short_m[k * 8 + j] = j < n ? m[k * m_plane + j] : 0.0f;
          }
        }
        __m256 v0, v1;
        At8Step(short_m, 8, 0, &v0, &v1);
        _mm256_storeu_ps(y, v0);
        _mm256_storeu_ps(y + kRun, v1);
      }
      WriteRunOutputs(g, run, y, y + kRun, accumulate,
                      top + run.image * top_step + o * top_plane);
    }
    t += n;
  }
}

POSEIDON_AVX2 void TopDiffTransform1DImpl(const Tiling& g, int64_t first,
                                          int count, const float* top_diff,
                                          ptrdiff_t top_step, int output_begin,
                                          int output_end, float* Z) {
  const size_t top_plane = static_cast<size_t>(g.output_h) * g.output_w;
  const size_t z_plane = static_cast<size_t>(output_end - output_begin) * count;
  const int64_t end = first + count;
  float short_y[2 * 8], short_z[8 * 8];
  const float *y0, *y1;
  for (int64_t t = first; t < end;) {
    const TileRun run = RunAt(g, t, end);
    const int n = run.n;
    RunTopDiffRows<float> rows(g, run);
    for (int o = output_begin; o < output_end; ++o) {
      rows.Point(top_diff + run.image * top_step + o * top_plane, &y0, &y1);
      float* z =
          Z + static_cast<size_t>(o - output_begin) * count + (t - first);
      if (n >= 8) {
        for (int i = 0; i < n; i += 8)
          A8Step(y0, y1, std::min(i, n - 8), z, z_plane);
        continue;
      }
      for (int j = 0; j < 8; ++j) {
        short_y[j] = j < n ? y0[j] : 0.0f;
        short_y[8 + j] = j < n ? y1[j] : 0.0f;
      }
      A8Step(short_y, short_y + 8, 0, short_z, 8);
      for (int pos = 0; pos < 8; ++pos) {
        for (int j = 0; j < n; ++j) z[pos * z_plane + j] = short_z[pos * 8 + j];
      }
    }
    t += n;
  }
}

}  // namespace

// The entry points (winograd_tiles.hpp), without the target attribute:
// with it, a definition would be another version of the function than
// the header declares (GCC's function multiversioning).
template <int kA>
void InputTransformAvx2(const Tiling& g, int64_t first, int count,
                        const float* bottom, ptrdiff_t bottom_step, float* V) {
  InputTransformImpl<kA>(g, first, count, bottom, bottom_step, V);
}

template <int kA, int kOut>
void OutputTransformAvx2(const Tiling& g, int64_t first, int count,
                         const float* M, float* top, ptrdiff_t top_step,
                         bool accumulate) {
  OutputTransformImpl<kA, kOut>(g, first, count, M, top, top_step, accumulate);
}

template <int kA, int kOut>
void TopDiffTransformAvx2(const Tiling& g, int64_t first, int count,
                          const float* top_diff, ptrdiff_t top_step,
                          int output_begin, int output_end, float* Z) {
  TopDiffTransformImpl<kA, kOut>(g, first, count, top_diff, top_step,
                                 output_begin, output_end, Z);
}

void InputTransform1DAvx2(const Tiling& g, int64_t first, int count,
                          const float* bottom, ptrdiff_t bottom_step,
                          float* V) {
  InputTransform1DImpl(g, first, count, bottom, bottom_step, V);
}

void OutputTransform1DAvx2(const Tiling& g, int64_t first, int count,
                           const float* M, float* top, ptrdiff_t top_step,
                           bool accumulate) {
  OutputTransform1DImpl(g, first, count, M, top, top_step, accumulate);
}

void TopDiffTransform1DAvx2(const Tiling& g, int64_t first, int count,
                            const float* top_diff, ptrdiff_t top_step,
                            int output_begin, int output_end, float* Z) {
  TopDiffTransform1DImpl(g, first, count, top_diff, top_step, output_begin,
                         output_end, Z);
}

template void InputTransformAvx2<6>(const Tiling&, int64_t, int, const float*,
                                    ptrdiff_t, float*);
template void InputTransformAvx2<8>(const Tiling&, int64_t, int, const float*,
                                    ptrdiff_t, float*);
template void OutputTransformAvx2<6, 4>(const Tiling&, int64_t, int,
                                        const float*, float*, ptrdiff_t, bool);
template void OutputTransformAvx2<6, 2>(const Tiling&, int64_t, int,
                                        const float*, float*, ptrdiff_t, bool);
template void OutputTransformAvx2<8, 4>(const Tiling&, int64_t, int,
                                        const float*, float*, ptrdiff_t, bool);
template void TopDiffTransformAvx2<6, 4>(const Tiling&, int64_t, int,
                                         const float*, ptrdiff_t, int, int,
                                         float*);
template void TopDiffTransformAvx2<6, 2>(const Tiling&, int64_t, int,
                                         const float*, ptrdiff_t, int, int,
                                         float*);
template void TopDiffTransformAvx2<8, 4>(const Tiling&, int64_t, int,
                                         const float*, ptrdiff_t, int, int,
                                         float*);

}  // namespace winograd
}  // namespace poseidon
