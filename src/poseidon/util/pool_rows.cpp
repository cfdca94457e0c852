// AVX-512 and AVX2 pooling rows: vectors of 16 (8) outputs; stride 2 loads
// two vectors of the plane and keeps the even elements. See Note [AVX-512
// isolation] in util/avx512.hpp: only the POSEIDON_AVX512 and POSEIDON_AVX2
// functions use those instructions.
#include "poseidon/util/pool_rows.hpp"

#include <immintrin.h>

#define POSEIDON_AVX512 __attribute__((target("avx512f")))
#define POSEIDON_AVX2 __attribute__((target("avx2")))

namespace poseidon {
namespace {

// The first `n` of 16 lanes (n may be <= 0 or > 16).
__mmask16 Lanes(int n) {
  if (n >= 16) return static_cast<__mmask16>(0xFFFF);
  return static_cast<__mmask16>(n <= 0 ? 0 : (1u << n) - 1u);
}

// Elements p[0], p[s], ..., p[15 s] in the first `lanes` lanes (s = 1 or
// 2; lanes past 16 are ignored); the other lanes are 0 and read nothing.
POSEIDON_AVX512 __m512 LoadStrided(const float* p, int stride, int lanes) {
  if (lanes > 16) lanes = 16;
  if (stride == 1) return _mm512_maskz_loadu_ps(Lanes(lanes), p);
  // Lane q needs p[2q]: the 2 lanes - 1 floats from p, over two vectors.
  const int span = 2 * lanes - 1;
  const __m512 lo = _mm512_maskz_loadu_ps(Lanes(span), p);
  const __m512 hi = _mm512_maskz_loadu_ps(Lanes(span - 16), p + 16);
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12,
                                        10, 8, 6, 4, 2, 0);
  return _mm512_permutex2var_ps(lo, even, hi);
}

POSEIDON_AVX512 __m512i Iota(int start, int stride) {
  return _mm512_add_epi32(
      _mm512_set1_epi32(start),
      _mm512_mullo_epi32(_mm512_set1_epi32(stride),
                         _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5,
                                          4, 3, 2, 1, 0)));
}

POSEIDON_AVX512 void MaxRow(const PoolRow& r, float* top, int* index) {
  for (int q0 = 0; q0 < r.n; q0 += 16) {
    const __mmask16 m = Lanes(r.n - q0);
    const int column = r.first + q0 * r.stride;
    const int lanes = r.n - q0;
    int at = r.h0 * r.width + column;
    __m512 best = LoadStrided(r.plane + at, r.stride, lanes);
    __m512i arg = Iota(at, r.stride);
    for (int h = r.h0; h < r.h1; ++h) {
      for (int j = h == r.h0 ? 1 : 0; j < r.kernel_w; ++j) {
        at = h * r.width + column + j;
        const __m512 v = LoadStrided(r.plane + at, r.stride, lanes);
        const __mmask16 greater =
            _mm512_mask_cmp_ps_mask(m, v, best, _CMP_GT_OQ);
        best = _mm512_mask_mov_ps(best, greater, v);
        arg = _mm512_mask_mov_epi32(arg, greater, Iota(at, r.stride));
      }
    }
    _mm512_mask_storeu_ps(top + q0, m, best);
    _mm512_mask_storeu_epi32(index + q0, m, arg);
  }
}

POSEIDON_AVX512 void SumRow(const PoolRow& r, float* sums) {
  for (int q0 = 0; q0 < r.n; q0 += 16) {
    const __mmask16 m = Lanes(r.n - q0);
    const int column = r.first + q0 * r.stride;
    __m512 sum = _mm512_setzero_ps();
    for (int h = r.h0; h < r.h1; ++h) {
      for (int j = 0; j < r.kernel_w; ++j) {
        const float* p = r.plane + h * r.width + column + j;
        sum = _mm512_add_ps(sum, LoadStrided(p, r.stride, r.n - q0));
      }
    }
    _mm512_mask_storeu_ps(sums + q0, m, sum);
  }
}

// For each plane row of the windows, the span of columns they cover is
// loaded a vector at a time, gets every window's share added in registers
// (kernel columns backwards, so that an element shared by windows q < q'
// gets q's share first, as in the reference), and is stored once: a store
// per column step would make the next step's overlapping load wait for it.
POSEIDON_AVX512 void SpreadRow(const PoolRow& r, const float* share,
                               float* diff) {
  const __m512i iota = Iota(0, 1);
  const __m512i one = _mm512_set1_epi32(1);
  for (int q0 = 0; q0 < r.n; q0 += 16) {
    const int lanes = r.n - q0 < 16 ? r.n - q0 : 16;
    const __m512 s = _mm512_maskz_loadu_ps(Lanes(lanes), share + q0);
    const int column = r.first + q0 * r.stride;
    const int span = (lanes - 1) * r.stride + r.kernel_w;
    const __m512i limit = _mm512_set1_epi32(lanes);
    for (int h = r.h0; h < r.h1; ++h) {
      float* row = diff + h * r.width + column;
      for (int at = 0; at < span; at += 16) {
        const __mmask16 inside = Lanes(span - at);
        __m512 d = _mm512_maskz_loadu_ps(inside, row + at);
        for (int j = r.kernel_w - 1; j >= 0; --j) {
          // Lane l holds column at + l of the span: window k = (at + l -
          // j) / stride if that divides and lies in [0, lanes).
          const __m512i rel =
              _mm512_sub_epi32(_mm512_add_epi32(iota, _mm512_set1_epi32(at)),
                               _mm512_set1_epi32(j));
          __m512i k = rel;
          __mmask16 valid =
              _mm512_cmpge_epi32_mask(rel, _mm512_setzero_si512());
          if (r.stride == 2) {
            valid &= _mm512_testn_epi32_mask(rel, one);
            k = _mm512_maskz_srai_epi32(0xFFFF, rel, 1);
          }
          valid &= _mm512_cmplt_epi32_mask(k, limit) & inside;
          d = _mm512_mask_add_ps(d, valid, d,
                                 _mm512_maskz_permutexvar_ps(0xFFFF, k, s));
        }
        _mm512_mask_storeu_ps(row + at, inside, d);
      }
    }
  }
}

// The first `n` of 8 lanes (n may be <= 0 or > 8), as an AVX2 mask.
POSEIDON_AVX2 __m256i Lanes8(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Elements p[0], p[s], ..., p[7 s] in the first `lanes` lanes (s = 1 or 2;
// lanes past 8 are ignored); the other lanes are 0 and read nothing.
POSEIDON_AVX2 __m256 LoadStrided8(const float* p, int stride, int lanes) {
  if (lanes > 8) lanes = 8;
  if (stride == 1) {
    return lanes == 8 ? _mm256_loadu_ps(p)
                      : _mm256_maskload_ps(p, Lanes8(lanes));
  }
  if (lanes == 8) {
    // p[0 .. 14] lie in the row: p[0] .. p[7] and p[7] .. p[14] by plain
    // loads, the even ones at lo's even places and hi's odd ones. Masked
    // loads are slow on some CPUs: on an AVX2 EPYC, CIFAR-10 quick's pool1
    // (3x3, stride 2, 32 x 32) forward took 8.3 ms with them and 4.9 ms so
    // (compare_builds.py, one thread, medians of 5 interleaved runs).
    const __m256 lo = _mm256_loadu_ps(p);
    const __m256 hi = _mm256_loadu_ps(p + 7);
    const __m256 even = _mm256_shuffle_ps(lo, hi, 0xD8);
    return _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8));
  }
  const int span = 2 * lanes - 1;
  const __m256 lo = _mm256_maskload_ps(p, Lanes8(span));
  const __m256 hi = _mm256_maskload_ps(p + 8, Lanes8(span - 8));
  // Per 128-bit half: lo[0] lo[2] hi[0] hi[2] | lo[4] lo[6] hi[4] hi[6],
  // then the 64-bit pairs reordered 0, 2, 1, 3.
  const __m256 even = _mm256_shuffle_ps(lo, hi, 0x88);
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8));
}

// Stores the first `lanes` of v (all 8 with an unmasked store).
POSEIDON_AVX2 void Store8(float* p, __m256 v, int lanes) {
  if (lanes >= 8) {
    _mm256_storeu_ps(p, v);
  } else {
    _mm256_maskstore_ps(p, Lanes8(lanes), v);
  }
}

POSEIDON_AVX2 void MaxRow8(const PoolRow& r, float* top, int* index) {
  const __m256i step = _mm256_mullo_epi32(
      _mm256_set1_epi32(r.stride), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int q0 = 0; q0 < r.n; q0 += 8) {
    const int lanes = r.n - q0;
    const int column = r.first + q0 * r.stride;
    int at = r.h0 * r.width + column;
    __m256 best = LoadStrided8(r.plane + at, r.stride, lanes);
    __m256 arg =
        _mm256_castsi256_ps(_mm256_add_epi32(_mm256_set1_epi32(at), step));
    for (int h = r.h0; h < r.h1; ++h) {
      for (int j = h == r.h0 ? 1 : 0; j < r.kernel_w; ++j) {
        at = h * r.width + column + j;
        const __m256 v = LoadStrided8(r.plane + at, r.stride, lanes);
        const __m256 greater = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
        best = _mm256_blendv_ps(best, v, greater);
        arg = _mm256_blendv_ps(
            arg,
            _mm256_castsi256_ps(_mm256_add_epi32(_mm256_set1_epi32(at), step)),
            greater);
      }
    }
    Store8(top + q0, best, lanes);
    Store8(reinterpret_cast<float*>(index + q0), arg, lanes);
  }
}

POSEIDON_AVX2 void SumRow8(const PoolRow& r, float* sums) {
  for (int q0 = 0; q0 < r.n; q0 += 8) {
    const int column = r.first + q0 * r.stride;
    __m256 sum = _mm256_setzero_ps();
    for (int h = r.h0; h < r.h1; ++h) {
      for (int j = 0; j < r.kernel_w; ++j) {
        const float* p = r.plane + h * r.width + column + j;
        sum = _mm256_add_ps(sum, LoadStrided8(p, r.stride, r.n - q0));
      }
    }
    Store8(sums + q0, sum, r.n - q0);
  }
}

// SpreadRow with 8 lanes: a window's share is added only where it
// applies (a blend, so an element no window covers keeps its bits, -0
// included).
POSEIDON_AVX2 void SpreadRow8(const PoolRow& r, const float* share,
                              float* diff) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i minus_one = _mm256_set1_epi32(-1);
  for (int q0 = 0; q0 < r.n; q0 += 8) {
    const int lanes = r.n - q0 < 8 ? r.n - q0 : 8;
    const __m256 s = _mm256_maskload_ps(share + q0, Lanes8(lanes));
    const int column = r.first + q0 * r.stride;
    const int span = (lanes - 1) * r.stride + r.kernel_w;
    const __m256i limit = _mm256_set1_epi32(lanes);
    for (int h = r.h0; h < r.h1; ++h) {
      float* row = diff + h * r.width + column;
      for (int at = 0; at < span; at += 8) {
        const __m256i inside = Lanes8(span - at);
        __m256 d = _mm256_maskload_ps(row + at, inside);
        for (int j = r.kernel_w - 1; j >= 0; --j) {
          // Lane l holds column at + l of the span: window k = (at + l -
          // j) / stride if that divides and lies in [0, lanes).
          const __m256i rel = _mm256_add_epi32(iota, _mm256_set1_epi32(at - j));
          __m256i k = rel;
          __m256i valid = _mm256_cmpgt_epi32(rel, minus_one);
          if (r.stride == 2) {
            valid = _mm256_and_si256(
                valid, _mm256_cmpeq_epi32(_mm256_and_si256(rel, one),
                                          _mm256_setzero_si256()));
            k = _mm256_srai_epi32(rel, 1);
          }
          valid = _mm256_and_si256(
              _mm256_and_si256(valid, _mm256_cmpgt_epi32(limit, k)), inside);
          const __m256 add = _mm256_add_ps(d, _mm256_permutevar8x32_ps(s, k));
          d = _mm256_blendv_ps(d, add, _mm256_castsi256_ps(valid));
        }
        if (span - at >= 8) {
          _mm256_storeu_ps(row + at, d);
        } else {
          _mm256_maskstore_ps(row + at, inside, d);
        }
      }
    }
  }
}

}  // namespace

bool PoolRowKernelsAvailable() {
  return Avx512KernelsAvailable() || Avx2KernelsAvailable();
}

int PoolRowMinWindows() { return Avx512KernelsAvailable() ? 1 : 8; }

void MaxPoolRow(const PoolRow& row, float* top, int* index) {
  if (Avx512KernelsAvailable()) {
    MaxRow(row, top, index);
  } else {
    MaxRow8(row, top, index);
  }
}

void SumPoolRow(const PoolRow& row, float* sums) {
  if (Avx512KernelsAvailable()) {
    SumRow(row, sums);
  } else {
    SumRow8(row, sums);
  }
}

void SpreadPoolRow(const PoolRow& row, const float* share, float* diff) {
  if (Avx512KernelsAvailable()) {
    SpreadRow(row, share, diff);
  } else {
    SpreadRow8(row, share, diff);
  }
}

}  // namespace poseidon
