// The cache-blocked driver shared by Poseidon's own float GEMM kernels
// (util/sgemm_avx512.hpp, util/sgemm_avx2.hpp): the loops over blocks, the
// pack buffers and the edge cases; each kernel file supplies its packing
// routines and register-blocked micro-kernels.
//
// Note [Blocked GEMM]
// The classic Goto/BLIS structure. For each block of at most nc columns of
// C and each block of at most kc steps of the inner dimension, op(B) is
// packed into panels of nr columns (zero-padded to nr; the packing does
// the transposing), and for each block of at most mc rows, op(A) into
// panels of mr rows; a micro-kernel then multiplies an A panel by a B
// panel into mr x nr accumulators (vector registers, A broadcast, B loaded
// as vectors) and adds the result into C: rows past M are not computed (a
// kernel per row count), columns past N are masked. A B panel (kc x nr
// floats) is read from L1, the packed A block (mc x kc) from L2. When M
// fits one block of rows (most convolutions), each B panel is packed just
// before its kernels run; otherwise a block of nc columns ahead, for all
// row blocks. K is split into blocks of equal size (at most kc), so no
// block is much shorter than the others.
//
// Deterministic by construction: element C(i, j) is, for each block of
// the inner dimension in turn, one sequence of fused multiply-adds over
// its steps (k ascending) starting from zero, then added to C as
// alpha * sum + C (the first block: alpha * sum + beta * C, or alpha * sum
// when beta is 0, C unread). That order depends on K and kc only: not on
// M, N, mc, nc, the element's position in its tile, the tile's edges, the
// alignment of the operands, the thread or what ran before. So a product
// split by columns or rows over threads (cpu_gemm_parallel) gives the same
// bits as the whole product, and the same call gives the same bits in any
// process. Both kernels use kc = 256 and the same order of operations, so
// they should give the same bits as each other (SgemmTest.
// TheTwoKernelsGiveTheSameBits checks it on CPUs that have both); mc and nc
// (which the AVX2 kernel takes from the caches the CPU reports) do not
// change the result.
//
// Thread safety: any number of threads may call at once; each call runs on
// the calling thread, and the only state is that thread's pack buffers
// (thread_local, 64-byte aligned, grown on demand and kept).
#ifndef POSEIDON_UTIL_SGEMM_BLOCKED_HPP_
#define POSEIDON_UTIL_SGEMM_BLOCKED_HPP_

#include <cblas.h>

#include <array>
#include <cstddef>
#include <utility>

namespace poseidon {
namespace sgemm {

// A row-major product C = alpha * op(A) * op(B) + beta * C.
struct Product {
  bool trans_a, trans_b;
  int M, N, K;
  float alpha;
  const float* A;
  ptrdiff_t lda;
  const float* B;
  ptrdiff_t ldb;
  float beta;
  float* C;
  ptrdiff_t ldc;
  // For packing routines that make an operand instead of reading A or B
  // (util/sgemm_avx2.hpp's implicit im2col); null otherwise.
  const void* implicit = nullptr;
};

// What a micro-kernel does with C: overwrite with alpha * sum (first inner
// block, beta == 0: C unread), alpha * sum + beta * C (first block) or
// alpha * sum + C (later blocks).
enum StoreMode { kOverwrite, kScale, kAccumulate };

// The largest inner block (Note [Blocked GEMM]); part of the summation
// order, so the same for every kernel.
constexpr int kInnerBlock = 256;

// Floats of scratch after the packed A block (Kernels::pack_a).
constexpr int kPackSlack = 16;

// C(0 .. rows, 0 .. n) (row stride ldc) from an A panel `a` times a B
// panel `b` over kc steps; rows <= mr and n <= nr are given at selection.
using MicroKernelFn = void (*)(int kc, const float* a, const float* b, float* c,
                               ptrdiff_t ldc, int n, float alpha, float beta,
                               StoreMode mode);

// A kernel family's micro-kernels by tile size: KernelTable<Micro, MR,
// NV>()[R - 1][V - 1] is Micro<R, V>::kFn, the kernel for R rows and V
// vectors of columns (Micro wraps a function template, which cannot be a
// template argument itself).
namespace detail {
template <template <int, int> class Micro, int NV, int R, int... V>
constexpr std::array<MicroKernelFn, NV> KernelRow(
    std::integer_sequence<int, V...>) {
  return {{Micro<R, V + 1>::kFn...}};
}
template <template <int, int> class Micro, int MR, int NV, int... R>
constexpr std::array<std::array<MicroKernelFn, NV>, MR> KernelRows(
    std::integer_sequence<int, R...>) {
  return {
      {KernelRow<Micro, NV, R + 1>(std::make_integer_sequence<int, NV>())...}};
}
}  // namespace detail

template <template <int, int> class Micro, int MR, int NV>
constexpr std::array<std::array<MicroKernelFn, NV>, MR> KernelTable() {
  return detail::KernelRows<Micro, MR, NV>(
      std::make_integer_sequence<int, MR>());
}

// One kernel family: its tile, its row and column blocks, and its parts.
struct Kernels {
  int mr, nr;  // micro-tile
  int mc, nc;  // row block (multiple of mr), column block (multiple of nr)
  // op(A)(i0 .. i0 + mc, k0 .. k0 + kc) into panels of mr rows, each k's
  // mr values together (zeros past mc). It may write up to kPackSlack
  // floats past the last panel (scratch, there for the purpose).
  void (*pack_a)(const Product& g, int i0, int k0, int mc, int kc, float* out);
  // op(B)(k0 .. k0 + kc, j0 .. j0 + nc) into panels of nr columns, each
  // k's nr values together (zeros past nc); `out` is 64-byte aligned.
  void (*pack_b)(const Product& g, int k0, int j0, int kc, int nc, float* out);
  // The micro-kernel for `rows` (1 .. mr) rows and `cols` (1 .. nr)
  // columns of C.
  MicroKernelFn (*kernel)(int rows, int cols);
};

// C = alpha * op(A) * op(B) + beta * C through `kernels`, as cblas_sgemm
// with CblasRowMajor. With beta == 0, C is not read; with alpha == 0 or
// K == 0, C = beta * C (A and B unread).
void BlockedSgemm(const Kernels& kernels, CBLAS_TRANSPOSE trans_a,
                  CBLAS_TRANSPOSE trans_b, int M, int N, int K, float alpha,
                  const float* A, int lda, const float* B, int ldb, float beta,
                  float* C, int ldc);

// The same for a product given whole (its `implicit` operand included).
void BlockedProduct(const Kernels& kernels, const Product& g);

}  // namespace sgemm
}  // namespace poseidon

#endif  // POSEIDON_UTIL_SGEMM_BLOCKED_HPP_
