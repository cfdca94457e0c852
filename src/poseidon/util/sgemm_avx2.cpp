// Poseidon's AVX2 float GEMM: Note [Blocked GEMM] in
// util/sgemm_blocked.hpp, with this file's packing and micro-kernels.
//
// As Note [AVX-512 isolation] in util/avx512.hpp: only the functions marked
// POSEIDON_AVX2 contain AVX2 instructions, reached through Avx2Sgemm after
// its check of Avx2KernelsAvailable().
#include "poseidon/util/sgemm_avx2.hpp"

#include <immintrin.h>
#include <unistd.h>

#include <array>
#include <cstddef>

#include "poseidon/common.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/sgemm_blocked.hpp"

#define POSEIDON_AVX2 __attribute__((target("avx2,fma")))

namespace poseidon {
namespace {

using sgemm::kAccumulate;
using sgemm::Kernels;
using sgemm::kOverwrite;
using sgemm::kScale;
using sgemm::MicroKernelFn;
using sgemm::Product;
using sgemm::StoreMode;

// Micro-tile: kMR rows x kNV vectors of 8 columns (util/sgemm_avx2.hpp).
constexpr int kMR = 6;
constexpr int kNV = 2;
constexpr int kNR = 8 * kNV;
constexpr int kKC = sgemm::kInnerBlock;
static_assert(kMR <= 8, "A panels are packed through 8 x 8 transposes");

int Min(int a, int b) { return a < b ? a : b; }

// The first `n` of 8 lanes (none for n <= 0), as a maskload/maskstore mask.
POSEIDON_AVX2 inline __m256i LaneMask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Transposes the 8 x 8 floats in r (row i = r[i]) in place.
POSEIDON_AVX2 inline void Transpose8(__m256* r) {
  __m256 t[8];
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: pairs of rows
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m256 u[8];  // u[4 h + j], lane L: column 4 L + j of rows 4 h .. 4 h + 3
  for (int h = 0; h < 2; ++h) {
    u[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
    u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
  }
}

// Packs op(A)(i0 .. i0 + mc, k0 .. k0 + kc) into panels of kMR rows. Each
// k's kMR floats are written as a whole vector of 8 in ascending order, the
// last 2 lanes overwritten by the next k (or landing in the driver's
// kPackSlack): AMD's masked stores are slow.
POSEIDON_AVX2 void PackA(const Product& g, int i0, int k0, int mc, int kc,
                         float* out) {
  for (int p = 0; p * kMR < mc; ++p, out += static_cast<ptrdiff_t>(kc) * kMR) {
    const int rows = Min(kMR, mc - p * kMR);
    const int row0 = i0 + p * kMR;
    if (g.trans_a) {  // A is K x M: a row of A is a k of the panel
      const __m256i m = LaneMask(rows);
      const float* src = g.A + static_cast<ptrdiff_t>(k0) * g.lda + row0;
      for (int k = 0; k < kc; ++k, src += g.lda) {
        _mm256_storeu_ps(out + k * kMR, _mm256_maskload_ps(src, m));
      }
      continue;
    }
    // A is M x K: transpose 8 k's of the panel's rows at a time.
    for (int kb = 0; kb < kc; kb += 8) {
      const int steps = Min(8, kc - kb);
      const __m256i m = LaneMask(steps);
      __m256 r[8];
      // Plain loads where all 8 k's are the panel's: masked loads are slow
      // on AMD (measured in the Winograd transforms and the pooling rows;
      // here, bench_gemm's products moved within its noise).
      for (int i = 0; i < 8; ++i) {
        const float* src = g.A + (row0 + i) * g.lda + k0 + kb;
        r[i] = i >= rows     ? _mm256_setzero_ps()
               : steps == 8 ? _mm256_loadu_ps(src)
                            : _mm256_maskload_ps(src, m);
      }
      Transpose8(r);
      for (int k = 0; k < steps; ++k) {
        _mm256_storeu_ps(out + (kb + k) * kMR, r[k]);
      }
    }
  }
}

// Packs op(B)(k0 .. k0 + kc, j0 .. j0 + nc) into panels of kNR columns;
// `out` is 64-byte aligned, and so is each row of a panel.
POSEIDON_AVX2 void PackB(const Product& g, int k0, int j0, int kc, int nc,
                         float* out) {
  for (int p = 0; p * kNR < nc; ++p, out += static_cast<ptrdiff_t>(kc) * kNR) {
    const int cols = Min(kNR, nc - p * kNR);
    const int col0 = j0 + p * kNR;
    if (!g.trans_b) {  // B is K x N: rows of B are the panel's rows
      const float* src = g.B + static_cast<ptrdiff_t>(k0) * g.ldb + col0;
      if (cols == kNR) {
        for (int k = 0; k < kc; ++k, src += g.ldb) {
          // The next panel's floats of this row (Note [Blocked GEMM]).
          _mm_prefetch(reinterpret_cast<const char*>(src + kNR), _MM_HINT_T0);
          for (int v = 0; v < kNV; ++v) {
            _mm256_store_ps(out + k * kNR + 8 * v,
                            _mm256_loadu_ps(src + 8 * v));
          }
        }
        continue;
      }
      __m256i m[kNV];
      for (int v = 0; v < kNV; ++v) m[v] = LaneMask(cols - 8 * v);
      for (int k = 0; k < kc; ++k, src += g.ldb) {
        for (int v = 0; v < kNV; ++v) {
          _mm256_store_ps(out + k * kNR + 8 * v,
                          _mm256_maskload_ps(src + 8 * v, m[v]));
        }
      }
      continue;
    }
    // B is N x K: transpose 8 columns x 8 k's at a time.
    for (int v = 0; v < kNV; ++v) {
      const int vcols = cols - 8 * v;
      for (int kb = 0; kb < kc; kb += 8) {
        const int steps = Min(8, kc - kb);
        const __m256i m = LaneMask(steps);
        __m256 r[8];
        for (int j = 0; j < 8; ++j) {
          const float* src = g.B + (col0 + 8 * v + j) * g.ldb + k0 + kb;
          r[j] = j >= vcols    ? _mm256_setzero_ps()
                 : steps == 8 ? _mm256_loadu_ps(src)
                              : _mm256_maskload_ps(src, m);
        }
        Transpose8(r);
        for (int k = 0; k < steps; ++k) {
          _mm256_store_ps(out + (kb + k) * kNR + 8 * v, r[k]);
        }
      }
    }
  }
}

// Note [Implicit im2col]
// The implicit packers make the panels of the im2col matrix straight from
// a zero-padded image (ImplicitColumns), the matrix never written: for the
// forward, B panels (16 output positions x kc rows of channel and tap);
// for the weight gradient, where col is A, A panels (6 rows x kc
// positions). Along an output row the positions of a tap are consecutive
// floats of the padded image, so a run of 8 positions within one row is a
// plain load; a run across rows is a gather of 8 (the lanes past the
// product's edge read position 0 of the run, never outside the image).
// The values are those im2col would write, and the micro-kernels and the
// order of the sums are the GEMM's, so the result has the bits of im2col +
// Avx2Sgemm.

// The 8 position offsets of a run from column j (lanes past `count` repeat
// the first), and whether they are consecutive.
POSEIDON_AVX2 inline __m256i RunOffsets(const int* position_offset, int j,
                                        int count, bool* consecutive) {
  const int* p = position_offset + j;
  if (count >= 8) {
    *consecutive = p[7] - p[0] == 7;  // increasing: steps of exactly 1
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  *consecutive = false;
  alignas(32) int lanes[8];
  for (int l = 0; l < 8; ++l) lanes[l] = p[l < count ? l : 0];
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
}

POSEIDON_AVX2 inline __m256 LoadRun(const float* base, const int* position,
                                    __m256i offsets, bool consecutive) {
  return consecutive ? _mm256_loadu_ps(base + *position)
                     : _mm256_i32gather_ps(base, offsets, 4);
}

// B panels of col rows k0 .. k0 + kc, columns j0 .. j0 + nc (Note
// [Implicit im2col]).
POSEIDON_AVX2 void PackImplicitB(const Product& g, int k0, int j0, int kc,
                                 int nc, float* out) {
  const auto& x = *static_cast<const ImplicitColumns*>(g.implicit);
  for (int p = 0; p * kNR < nc; ++p, out += static_cast<ptrdiff_t>(kc) * kNR) {
    const int cols = Min(kNR, nc - p * kNR);
    const int col0 = j0 + p * kNR;
    bool consecutive[kNV];
    __m256i offsets[kNV];
    for (int v = 0; v < kNV; ++v) {
      const int count = cols - 8 * v;
      if (count <= 0) {  // no column here: read the panel's first
        consecutive[v] = false;
        offsets[v] = _mm256_set1_epi32(x.position_offset[col0]);
      } else {
        offsets[v] =
            RunOffsets(x.position_offset, col0 + 8 * v, count, &consecutive[v]);
      }
    }
    for (int k = 0; k < kc; ++k) {
      const float* base = x.padded + x.row_offset[k0 + k];
      for (int v = 0; v < kNV; ++v) {
        _mm256_store_ps(out + k * kNR + 8 * v,
                        LoadRun(base, x.position_offset + col0 + 8 * v,
                                offsets[v], consecutive[v]));
      }
    }
  }
}

// A panels of col rows i0 .. i0 + mc, positions k0 .. k0 + kc (Note
// [Implicit im2col]); as PackA, each k's kMR floats written as a vector of
// 8 into the next k's place (or the driver's slack).
POSEIDON_AVX2 void PackImplicitA(const Product& g, int i0, int k0, int mc,
                                 int kc, float* out) {
  const auto& x = *static_cast<const ImplicitColumns*>(g.implicit);
  for (int p = 0; p * kMR < mc; ++p, out += static_cast<ptrdiff_t>(kc) * kMR) {
    const int rows = Min(kMR, mc - p * kMR);
    const float* base[kMR];
    for (int i = 0; i < rows; ++i) {
      base[i] = x.padded + x.row_offset[i0 + p * kMR + i];
    }
    for (int kb = 0; kb < kc; kb += 8) {
      const int steps = Min(8, kc - kb);
      bool consecutive;
      const __m256i offsets =
          RunOffsets(x.position_offset, k0 + kb, steps, &consecutive);
      __m256 r[8];
      for (int i = 0; i < 8; ++i) {
        r[i] = i < rows ? LoadRun(base[i], x.position_offset + k0 + kb, offsets,
                                  consecutive)
                        : _mm256_setzero_ps();
      }
      Transpose8(r);
      for (int k = 0; k < steps; ++k) {
        _mm256_storeu_ps(out + (kb + k) * kMR, r[k]);
      }
    }
  }
}

// C(0 .. R, 0 .. n) (row stride ldc) from R rows of the A panel `a` times
// the first V vectors of the B panel `b`, over kc steps (Note [Blocked
// GEMM] for the order); n <= 8 V.
template <int R, int V>
POSEIDON_AVX2 void MicroKernel(int kc, const float* a, const float* b, float* c,
                               ptrdiff_t ldc, int n, float alpha, float beta,
                               StoreMode mode) {
  __m256 acc[R][V];
  // C's tile is needed only at the end; its lines arrive meanwhile.
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    const char* row = reinterpret_cast<const char*>(c + i * ldc);
    _mm_prefetch(row, _MM_HINT_T0);
    _mm_prefetch(row + (8 * V - 1) * sizeof(float), _MM_HINT_T0);
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[i][v] = _mm256_setzero_ps();
  }
#pragma GCC unroll 2
  for (int k = 0; k < kc; ++k, a += kMR, b += kNR) {
    __m256 bv[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) bv[v] = _mm256_load_ps(b + 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) {
        acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
      }
    }
  }
  const __m256 va = _mm256_set1_ps(alpha);
  const __m256 vb = _mm256_set1_ps(beta);
  bool full[V];
  __m256i mask[V];
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v) {
    full[v] = n >= 8 * (v + 1);
    mask[v] = LaneMask(n - 8 * v);
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      float* p = c + i * ldc + 8 * v;
      __m256 r;
      if (mode == kOverwrite) {
        r = _mm256_mul_ps(va, acc[i][v]);
      } else {
        __m256 old =
            full[v] ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask[v]);
        if (mode == kScale) old = _mm256_mul_ps(vb, old);
        r = _mm256_fmadd_ps(va, acc[i][v], old);
      }
      if (full[v]) {
        _mm256_storeu_ps(p, r);
      } else {
        _mm256_maskstore_ps(p, mask[v], r);
      }
    }
  }
}

template <int R, int V>
struct Micro {
  static constexpr MicroKernelFn kFn = &MicroKernel<R, V>;
};
constexpr auto kKernels = sgemm::KernelTable<Micro, kMR, kNV>();

MicroKernelFn PickKernel(int rows, int cols) {
  return kKernels[rows - 1][(cols + 7) / 8 - 1];
}

// A cache size from sysconf in bytes, or `fallback` where the system does
// not say (0 or -1, as in some virtual machines).
long CacheBytes(int name, long fallback) {
  const long bytes = sysconf(name);
  return bytes > 0 ? bytes : fallback;
}

struct Blocking {
  Kernels kernels;
  long l2, l3;
};

// The row and column blocks from the caches (util/sgemm_avx2.hpp).
Blocking ChooseBlocking() {
  const long l2 = CacheBytes(_SC_LEVEL2_CACHE_SIZE, 512L << 10);
  const long l3 = CacheBytes(_SC_LEVEL3_CACHE_SIZE, 4 * l2);
  const long panel_row = static_cast<long>(kKC) * sizeof(float);
  long mc = l2 / 2 / panel_row / kMR * kMR;
  mc = mc < 8 * kMR ? 8 * kMR : (mc > 100 * kMR ? 100 * kMR : mc);
  const long b_block = l3 / 4 < (4L << 20) ? l3 / 4 : (4L << 20);
  long nc = b_block / panel_row / kNR * kNR;
  nc = nc < 16 * kNR ? 16 * kNR : (nc > 256 * kNR ? 256 * kNR : nc);
  return {{kMR, kNR, static_cast<int>(mc), static_cast<int>(nc), &PackA, &PackB,
           &PickKernel},
          l2,
          l3};
}

const Blocking& TheBlocking() {
  static const Blocking blocking = ChooseBlocking();
  return blocking;
}

}  // namespace

void Avx2Sgemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N,
               int K, float alpha, const float* A, int lda, const float* B,
               int ldb, float beta, float* C, int ldc) {
  CHECK(Avx2KernelsAvailable())
      << "Avx2Sgemm needs AVX2 and FMA (and POSEIDON_KERNELS other than blas)";
  sgemm::BlockedSgemm(TheBlocking().kernels, trans_a, trans_b, M, N, K, alpha,
                      A, lda, B, ldb, beta, C, ldc);
}

void Avx2ImplicitForward(int M, int S, int K, const float* A, int lda,
                         const ImplicitColumns& col, float beta, float* C,
                         int ldc) {
  CHECK(Avx2KernelsAvailable()) << "Avx2ImplicitForward needs AVX2 and FMA";
  Kernels kernels = TheBlocking().kernels;
  kernels.pack_b = &PackImplicitB;
  Product g{false, false, M, S, K, 1.f, A, lda, nullptr, 0, beta, C, ldc};
  g.implicit = &col;
  sgemm::BlockedProduct(kernels, g);
}

void Avx2ImplicitColumnsTimesBt(int K, int N, int S, const ImplicitColumns& col,
                                const float* B, int ldb, float beta, float* C,
                                int ldc) {
  CHECK(Avx2KernelsAvailable())
      << "Avx2ImplicitColumnsTimesBt needs AVX2 and FMA";
  Kernels kernels = TheBlocking().kernels;
  kernels.pack_a = &PackImplicitA;
  Product g{false, true, K, N, S, 1.f, nullptr, 0, B, ldb, beta, C, ldc};
  g.implicit = &col;
  sgemm::BlockedProduct(kernels, g);
}

std::string Avx2SgemmBlocking() {
  const Blocking& b = TheBlocking();
  return std::to_string(kMR) + " x " + std::to_string(kNR) + " tile, blocks " +
         std::to_string(b.kernels.mc) + " x " + std::to_string(kKC) + " x " +
         std::to_string(b.kernels.nc) + " (L2 " + std::to_string(b.l2 >> 10) +
         " KiB, L3 " + std::to_string(b.l3 >> 10) + " KiB)";
}

}  // namespace poseidon
