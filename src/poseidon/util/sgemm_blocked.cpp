// The blocked GEMM driver: Note [Blocked GEMM] in util/sgemm_blocked.hpp.
// Baseline x86-64 code: the vector instructions are in the kernels' files.
#include "poseidon/util/sgemm_blocked.hpp"

#include <cstdlib>

#include "poseidon/common.hpp"

namespace poseidon {
namespace sgemm {
namespace {

int Min(int a, int b) { return a < b ? a : b; }

// The inner-dimension block size for K: K split into ceil(K / kInnerBlock)
// blocks of equal size (the last one up to blocks - 1 steps shorter), so
// that no block is much shorter than the others. A function of K alone.
int InnerBlock(int K) {
  const int blocks = (K + kInnerBlock - 1) / kInnerBlock;
  return (K + blocks - 1) / blocks;
}

size_t RoundUp(int x, int to) {
  return static_cast<size_t>((x + to - 1) / to) * to;
}

// The row block for M rows: M split into ceil(M / mc) blocks of equal size
// rounded up to whole panels, so that no block is much shorter than the
// others (a block of a few rows would run only narrow micro-kernels). Does
// not change the result (Note [Blocked GEMM]).
int RowBlock(const Kernels& kn, int M) {
  const int blocks = (M + kn.mc - 1) / kn.mc;
  return static_cast<int>(RoundUp((M + blocks - 1) / blocks, kn.mr));
}

// The loops over blocks; M, N, K > 0, alpha != 0. pack_a holds mc x
// InnerBlock(K) floats (or what the product needs), pack_b InnerBlock(K) x
// nc, both 64-byte aligned.
void Blocked(const Kernels& kn, const Product& g, float* pack_a,
             float* pack_b) {
  const bool panel_wise = g.M <= kn.mc;
  const int kb = InnerBlock(g.K);
  const int mb = RowBlock(kn, g.M);
  for (int jc = 0; jc < g.N; jc += kn.nc) {
    const int nc = Min(kn.nc, g.N - jc);
    for (int pc = 0; pc < g.K; pc += kb) {
      const int kc = Min(kb, g.K - pc);
      const StoreMode mode = pc > 0        ? kAccumulate
                             : g.beta == 0 ? kOverwrite
                                           : kScale;
      if (!panel_wise) kn.pack_b(g, pc, jc, kc, nc, pack_b);
      for (int ic = 0; ic < g.M; ic += mb) {
        const int mc = Min(mb, g.M - ic);
        kn.pack_a(g, ic, pc, mc, kc, pack_a);
        for (int jr = 0; jr < nc; jr += kn.nr) {
          const int n = Min(kn.nr, nc - jr);
          const float* b = pack_b + static_cast<ptrdiff_t>(jr) * kc;
          if (panel_wise) {
            kn.pack_b(g, pc, jc + jr, kc, n, pack_b);
            b = pack_b;
          }
          const MicroKernelFn full = kn.kernel(kn.mr, n);
          for (int ir = 0; ir < mc; ir += kn.mr) {
            const int m = Min(kn.mr, mc - ir);
            (m == kn.mr ? full : kn.kernel(m, n))(
                kc, pack_a + static_cast<ptrdiff_t>(ir) * kc, b,
                g.C + (ic + ir) * g.ldc + jc + jr, g.ldc, n, g.alpha, g.beta,
                mode);
          }
        }
      }
    }
  }
}

// A thread's pack buffer (Note [Blocked GEMM]: thread_local, grown on
// demand).
class PackBuffer {
 public:
  PackBuffer() = default;
  PackBuffer(const PackBuffer&) = delete;
  PackBuffer& operator=(const PackBuffer&) = delete;
  ~PackBuffer() { std::free(data_); }

  // At least `floats` floats, 64-byte aligned.
  float* Get(size_t floats) {
    if (floats > capacity_) {
      std::free(data_);
      const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
      data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
      CHECK(data_ != nullptr) << "Poseidon's GEMM: cannot allocate " << bytes
                              << " bytes of pack buffer";
      capacity_ = floats;
    }
    return data_;
  }

 private:
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

// C = beta * C over M x N (beta == 0: C unread).
void ScaleC(int M, int N, float beta, float* C, ptrdiff_t ldc) {
  if (beta == 1.f) return;
  for (int i = 0; i < M; ++i) {
    float* row = C + i * ldc;
    for (int j = 0; j < N; ++j) row[j] = beta == 0.f ? 0.f : beta * row[j];
  }
}

}  // namespace

void BlockedSgemm(const Kernels& kernels, CBLAS_TRANSPOSE trans_a,
                  CBLAS_TRANSPOSE trans_b, int M, int N, int K, float alpha,
                  const float* A, int lda, const float* B, int ldb, float beta,
                  float* C, int ldc) {
  Product g{trans_a != CblasNoTrans,
            trans_b != CblasNoTrans,
            M,
            N,
            K,
            alpha,
            A,
            lda,
            B,
            ldb,
            beta,
            C,
            ldc};
  BlockedProduct(kernels, g);
}

void BlockedProduct(const Kernels& kernels, const Product& g) {
  if (g.M <= 0 || g.N <= 0) return;
  if (g.K <= 0 || g.alpha == 0.f) {
    ScaleC(g.M, g.N, g.beta, g.C, g.ldc);
    return;
  }
  thread_local PackBuffer pack_a, pack_b;
  const int kc = InnerBlock(g.K);
  // kPackSlack: a packing routine may write a vector past its last panel.
  float* a =
      pack_a.Get(RoundUp(Min(g.M, kernels.mc), kernels.mr) * kc + kPackSlack);
  float* b = pack_b.Get(
      RoundUp(g.M <= kernels.mc ? 1 : Min(g.N, kernels.nc), kernels.nr) * kc);
  Blocked(kernels, g, a, b);
}

}  // namespace sgemm
}  // namespace poseidon
