// The arguments of the column-major BLAS calls (cuBLAS) that compute
// Poseidon's row-major GEMM and GEMV. Pure arithmetic with no CUDA types,
// so that every build tests it against a column-major reference
// (test_blas_args.cpp); math_functions_gpu.cpp passes it to cuBLAS as is.
#ifndef POSEIDON_UTIL_BLAS_ARGS_HPP_
#define POSEIDON_UTIL_BLAS_ARGS_HPP_

#include <cblas.h>

namespace poseidon {
namespace blas {

// op(X) of a column-major call: X itself or its transpose.
enum class Op { kNoTrans, kTrans };

// One operand of the row-major call.
enum class Operand { kA, kB };

// A column-major GEMM,
//   C = alpha * op(first) * op(second) + beta * C,
// C m x n, op(first) m x k, op(second) k x n; element (i, j) of a matrix
// with leading dimension ld is at i + j * ld. `first` names the row-major
// operand passed first (the other one goes second); C is the row-major C.
struct ColumnMajorGemm {
  Operand first = Operand::kA;
  Op op_first = Op::kNoTrans;
  Op op_second = Op::kNoTrans;
  int m = 0, n = 0, k = 0;
  int ld_first = 0, ld_second = 0, ldc = 0;
};

// The column-major GEMM that computes the row-major (Caffe) GEMM
//   C = alpha * op(A) * op(B) + beta * C,  C M x N, op(A) M x K,
//   op(B) K x N, every matrix packed (leading dimension = its columns).
// A packed row-major R x S buffer is the column-major S x R matrix, its
// transpose, so the call computes C^T = op(B)^T * op(A)^T:
//   first = B, op_first = trans_b, op_second = trans_a,
//   m = N, n = M, k = K,
//   ld_first = (trans_b ? K : N), ld_second = (trans_a ? M : K), ldc = N.
// Any trans other than CblasNoTrans means transposed (the data is real).
ColumnMajorGemm ToColumnMajorGemm(CBLAS_TRANSPOSE trans_a,
                                  CBLAS_TRANSPOSE trans_b, int M, int N, int K);

// A column-major GEMV,
//   y = alpha * op(A) * x + beta * y,
// A m x n with leading dimension lda, x and y contiguous (increment 1):
// x has n elements and y m for Op::kNoTrans, the other way round for
// Op::kTrans.
struct ColumnMajorGemv {
  Op op = Op::kNoTrans;
  int m = 0, n = 0, lda = 0;
};

// The column-major GEMV that computes the row-major
//   y = alpha * op(A) * x + beta * y,  A M x N packed.
// The buffer is the column-major N x M matrix A^T, so the op flips:
//   op = (trans_a ? kNoTrans : kTrans), m = N, n = M, lda = N.
ColumnMajorGemv ToColumnMajorGemv(CBLAS_TRANSPOSE trans_a, int M, int N);

}  // namespace blas
}  // namespace poseidon

#endif  // POSEIDON_UTIL_BLAS_ARGS_HPP_
