// Row-major GEMM/GEMV as column-major calls; see util/blas_args.hpp.
#include "poseidon/util/blas_args.hpp"

namespace poseidon {
namespace blas {
namespace {

Op ToOp(CBLAS_TRANSPOSE t) {
  return t == CblasNoTrans ? Op::kNoTrans : Op::kTrans;
}

}  // namespace

ColumnMajorGemm ToColumnMajorGemm(CBLAS_TRANSPOSE trans_a,
                                  CBLAS_TRANSPOSE trans_b, int M, int N,
                                  int K) {
  const bool ta = trans_a != CblasNoTrans;
  const bool tb = trans_b != CblasNoTrans;
  ColumnMajorGemm g;
  g.first = Operand::kB;
  g.op_first = ToOp(trans_b);
  g.op_second = ToOp(trans_a);
  g.m = N;
  g.n = M;
  g.k = K;
  // The row-major leading dimensions: the columns of B and A as stored.
  g.ld_first = tb ? K : N;
  g.ld_second = ta ? M : K;
  g.ldc = N;
  return g;
}

ColumnMajorGemv ToColumnMajorGemv(CBLAS_TRANSPOSE trans_a, int M, int N) {
  ColumnMajorGemv g;
  g.op = trans_a == CblasNoTrans ? Op::kTrans : Op::kNoTrans;
  g.m = N;
  g.n = M;
  g.lda = N;
  return g;
}

}  // namespace blas
}  // namespace poseidon
