// Poseidon's AVX-512 float GEMM: Note [Blocked GEMM] in
// util/sgemm_blocked.hpp, with this file's packing and micro-kernels.
//
// See Note [AVX-512 isolation] in util/avx512.hpp: only the functions
// marked POSEIDON_AVX512 contain AVX-512 instructions, reached through
// Avx512Sgemm after its check of Avx512KernelsAvailable().
#include "poseidon/util/sgemm_avx512.hpp"

#include <immintrin.h>

#include <array>
#include <cstddef>
#include <cstdlib>

#include "poseidon/common.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/sgemm_blocked.hpp"

#define POSEIDON_AVX512 __attribute__((target("avx512f,fma")))

namespace poseidon {
namespace {

using sgemm::kAccumulate;
using sgemm::Kernels;
using sgemm::kOverwrite;
using sgemm::kScale;
using sgemm::MicroKernelFn;
using sgemm::Product;
using sgemm::StoreMode;

// Micro-tile: kMR rows x kNV vectors of 16 columns, kMR * kNV = 24
// accumulators of the 32 zmm registers (kNV more hold B, one the broadcast
// A). Cache blocks (Note [Blocked GEMM]): a B panel of kKC x kNR floats is
// 48 KiB, an A panel 8 KiB, the A block kMC x kKC 480 KiB (of a 2 MiB L2),
// the B block kKC x kNC 3 MiB. Chosen by measurement on the development
// machine (Xeon, 48 KiB L1d, 2 MiB L2 per core) over 11 convolution-shaped
// products: 8 x 48 with kKC = 256 ran 5-10% faster than 12 x 32 or
// 14 x 32 with kKC = 192 or 256.
constexpr int kMR = 8;
constexpr int kNV = 3;
constexpr int kNR = 16 * kNV;
constexpr int kKC = sgemm::kInnerBlock;
constexpr int kMC = 60 * kMR;
constexpr int kNC = 64 * kNR;
static_assert(kMR <= 16, "A panels are packed through 16 x 16 transposes");

int Min(int a, int b) { return a < b ? a : b; }

// The first `n` of 16 lanes (none for n <= 0).
POSEIDON_AVX512 __mmask16 LaneMask(int n) {
  return n >= 16 ? __mmask16(0xFFFF)
                 : static_cast<__mmask16>((1u << (n > 0 ? n : 0)) - 1u);
}

// Transposes the 16 x 16 floats in r (row i = r[i]) in place. (The
// zero-masked forms of the shuffles with all lanes selected are the plain
// instructions; the unmasked intrinsics make GCC 12 warn about their
// undefined pass-through operand.)
POSEIDON_AVX512 inline void Transpose16(__m512* r) {
  constexpr __mmask16 kAll = 0xFFFF;
  constexpr __mmask8 kAll8 = 0xFF;
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: pairs of rows
    t[2 * i] = _mm512_maskz_unpacklo_ps(kAll, r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_maskz_unpackhi_ps(kAll, r[2 * i], r[2 * i + 1]);
  }
  __m512 u[16];  // u[4 g + j], lane L: column 4 L + j of rows 4 g .. 4 g + 3
  for (int g = 0; g < 4; ++g) {
    const __m512d t0 = _mm512_castps_pd(t[4 * g]);
    const __m512d t1 = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * g + 2]);
    const __m512d t3 = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, t0, t2));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, t0, t2));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_maskz_unpacklo_pd(kAll8, t1, t3));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_maskz_unpackhi_pd(kAll8, t1, t3));
  }
  for (int j = 0; j < 4; ++j) {  // gather lane L of the four groups
    const __m512 g0 = u[j], g1 = u[4 + j], g2 = u[8 + j], g3 = u[12 + j];
    const __m512 s0 = _mm512_maskz_shuffle_f32x4(kAll, g0, g1, 0x44);
    const __m512 s1 = _mm512_maskz_shuffle_f32x4(kAll, g0, g1, 0xEE);
    const __m512 s2 = _mm512_maskz_shuffle_f32x4(kAll, g2, g3, 0x44);
    const __m512 s3 = _mm512_maskz_shuffle_f32x4(kAll, g2, g3, 0xEE);
    r[j] = _mm512_maskz_shuffle_f32x4(kAll, s0, s2, 0x88);
    r[4 + j] = _mm512_maskz_shuffle_f32x4(kAll, s0, s2, 0xDD);
    r[8 + j] = _mm512_maskz_shuffle_f32x4(kAll, s1, s3, 0x88);
    r[12 + j] = _mm512_maskz_shuffle_f32x4(kAll, s1, s3, 0xDD);
  }
}

// Packs op(A)(i0 .. i0 + mc, k0 .. k0 + kc) into panels of kMR rows: panel
// p holds, for each k, rows p kMR .. p kMR + kMR - 1 (zeros past mc).
POSEIDON_AVX512 void PackA(const Product& g, int i0, int k0, int mc, int kc,
                           float* out) {
  const __mmask16 panel_mask = LaneMask(kMR);
  for (int p = 0; p * kMR < mc; ++p, out += static_cast<ptrdiff_t>(kc) * kMR) {
    const int rows = Min(kMR, mc - p * kMR);
    const int row0 = i0 + p * kMR;
    if (g.trans_a) {  // A is K x M: a row of A is a k of the panel
      const __mmask16 m = LaneMask(rows);
      const float* src = g.A + static_cast<ptrdiff_t>(k0) * g.lda + row0;
      for (int k = 0; k < kc; ++k, src += g.lda) {
        _mm512_mask_storeu_ps(out + k * kMR, panel_mask,
                              _mm512_maskz_loadu_ps(m, src));
      }
      continue;
    }
    // A is M x K: transpose 16 k's of the panel's rows at a time.
    for (int kb = 0; kb < kc; kb += 16) {
      const int steps = Min(16, kc - kb);
      const __mmask16 m = LaneMask(steps);
      __m512 r[16];
      for (int i = 0; i < 16; ++i) {
        r[i] = i < rows ? _mm512_maskz_loadu_ps(
                              m, g.A + (row0 + i) * g.lda + k0 + kb)
                        : _mm512_setzero_ps();
      }
      Transpose16(r);
      for (int k = 0; k < steps; ++k) {
        _mm512_mask_storeu_ps(out + (kb + k) * kMR, panel_mask, r[k]);
      }
    }
  }
}

// Packs op(B)(k0 .. k0 + kc, j0 .. j0 + nc) into panels of kNR columns:
// panel p holds, for each k, columns p kNR .. p kNR + kNR - 1 (zeros past
// nc). `out` is 64-byte aligned, and so is each row of a panel.
POSEIDON_AVX512 void PackB(const Product& g, int k0, int j0, int kc, int nc,
                           float* out) {
  for (int p = 0; p * kNR < nc; ++p, out += static_cast<ptrdiff_t>(kc) * kNR) {
    const int cols = Min(kNR, nc - p * kNR);
    const int col0 = j0 + p * kNR;
    if (!g.trans_b) {  // B is K x N: rows of B are the panel's rows
      const float* src = g.B + static_cast<ptrdiff_t>(k0) * g.ldb + col0;
      for (int k = 0; k < kc; ++k, src += g.ldb) {
        // The next panel's floats of this row: the rows of a wide B are far
        // apart, too many streams for the hardware prefetchers.
        for (int v = 0; v < kNV; ++v) {
          _mm_prefetch(reinterpret_cast<const char*>(src + kNR + 16 * v),
                       _MM_HINT_T0);
        }
        for (int v = 0; v < kNV; ++v) {
          _mm512_store_ps(
              out + k * kNR + 16 * v,
              _mm512_maskz_loadu_ps(LaneMask(cols - 16 * v), src + 16 * v));
        }
      }
      continue;
    }
    // B is N x K: transpose 16 columns x 16 k's at a time.
    for (int v = 0; v < kNV; ++v) {
      const int vcols = cols - 16 * v;
      for (int kb = 0; kb < kc; kb += 16) {
        const int steps = Min(16, kc - kb);
        const __mmask16 m = LaneMask(steps);
        __m512 r[16];
        for (int j = 0; j < 16; ++j) {
          r[j] = j < vcols ? _mm512_maskz_loadu_ps(
                                 m, g.B + (col0 + 16 * v + j) * g.ldb + k0 + kb)
                           : _mm512_setzero_ps();
        }
        Transpose16(r);
        for (int k = 0; k < steps; ++k) {
          _mm512_store_ps(out + (kb + k) * kNR + 16 * v, r[k]);
        }
      }
    }
  }
}

// C(0 .. R, 0 .. n) (row stride ldc) from R rows of the A panel `a` times
// the first V vectors of the B panel `b`, over kc steps (Note [AVX-512
// GEMM] for the order); n <= 16 V.
template <int R, int V>
POSEIDON_AVX512 void MicroKernel(int kc, const float* a, const float* b,
                                 float* c, ptrdiff_t ldc, int n, float alpha,
                                 float beta, StoreMode mode) {
  __m512 acc[R][V];
  // C's tile is needed only at the end; its lines arrive meanwhile.
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    const char* row = reinterpret_cast<const char*>(c + i * ldc);
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm_prefetch(row + 64 * v, _MM_HINT_T0);
    _mm_prefetch(row + (16 * V - 1) * sizeof(float), _MM_HINT_T0);
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  for (int k = 0; k < kc; ++k, a += kMR, b += kNR) {
    __m512 bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) bv[v] = _mm512_load_ps(b + 16 * v);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
      }
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
  const __m512 vb = _mm512_set1_ps(beta);
  __mmask16 mask[V];
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) mask[v] = LaneMask(n - 16 * v);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      float* p = c + i * ldc + 16 * v;
      __m512 r;
      if (mode == kOverwrite) {
        r = _mm512_mul_ps(va, acc[i][v]);
      } else {
        __m512 old = _mm512_maskz_loadu_ps(mask[v], p);
        if (mode == kScale) old = _mm512_mul_ps(vb, old);
        r = _mm512_fmadd_ps(va, acc[i][v], old);
      }
      _mm512_mask_storeu_ps(p, mask[v], r);
    }
  }
}

template <int R, int V>
struct Micro {
  static constexpr MicroKernelFn kFn = &MicroKernel<R, V>;
};
constexpr auto kKernels = sgemm::KernelTable<Micro, kMR, kNV>();

MicroKernelFn PickKernel(int rows, int cols) {
  return kKernels[rows - 1][(cols + 15) / 16 - 1];
}

const Kernels kAvx512Kernels{kMR, kNR, kMC, kNC, &PackA, &PackB, &PickKernel};

}  // namespace

void Avx512Sgemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N,
                 int K, float alpha, const float* A, int lda, const float* B,
                 int ldb, float beta, float* C, int ldc) {
  CHECK(Avx512KernelsAvailable())
      << "Avx512Sgemm needs AVX-512 (and POSEIDON_KERNELS other than blas)";
  BlockedSgemm(kAvx512Kernels, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
               beta, C, ldc);
}

}  // namespace poseidon
