// The element-wise bodies of the math functions (util/math_functions.hpp),
// written once for the CPU and the GPU (util/for_each.hpp): cpu_add and
// gpu_add both run AddKernel, and so on. Each is y[i] = f(inputs[i]).
#ifndef POSEIDON_KERNELS_MATH_KERNELS_HPP_
#define POSEIDON_KERNELS_MATH_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// y = a (op) b
#define POSEIDON_BINARY_KERNEL(Name, expr)                  \
  template <typename Dtype>                                 \
  struct Name {                                             \
    const Dtype* a;                                         \
    const Dtype* b;                                         \
    Dtype* y;                                               \
    POSEIDON_HD void operator()(int i) const { y[i] = (expr); } \
  };
POSEIDON_BINARY_KERNEL(AddKernel, a[i] + b[i])
POSEIDON_BINARY_KERNEL(SubKernel, a[i] - b[i])
POSEIDON_BINARY_KERNEL(MulKernel, a[i] * b[i])
POSEIDON_BINARY_KERNEL(DivKernel, a[i] / b[i])
#undef POSEIDON_BINARY_KERNEL

// y = f(a)
#define POSEIDON_UNARY_KERNEL(Name, expr)                   \
  template <typename Dtype>                                 \
  struct Name {                                             \
    const Dtype* a;                                         \
    Dtype* y;                                               \
    POSEIDON_HD void operator()(int i) const { y[i] = (expr); } \
  };
POSEIDON_UNARY_KERNEL(SqrKernel, a[i] * a[i])
POSEIDON_UNARY_KERNEL(SqrtKernel, hd::sqrt(a[i]))
POSEIDON_UNARY_KERNEL(ExpKernel, hd::exp(a[i]))
POSEIDON_UNARY_KERNEL(LogKernel, hd::log(a[i]))
POSEIDON_UNARY_KERNEL(AbsKernel, hd::abs(a[i]))
POSEIDON_UNARY_KERNEL(SignKernel, hd::sign(a[i]))
#undef POSEIDON_UNARY_KERNEL

// y = a^b
template <typename Dtype>
struct PowxKernel {
  const Dtype* a;
  Dtype b;
  Dtype* y;
  POSEIDON_HD void operator()(int i) const { y[i] = hd::pow(a[i], b); }
};

// y = alpha
template <typename Dtype>
struct SetKernel {
  Dtype alpha;
  Dtype* y;
  POSEIDON_HD void operator()(int i) const { y[i] = alpha; }
};

// y += alpha
template <typename Dtype>
struct AddScalarKernel {
  Dtype alpha;
  Dtype* y;
  POSEIDON_HD void operator()(int i) const { y[i] += alpha; }
};

// y = alpha * x (x may be y)
template <typename Dtype>
struct ScaleKernel {
  Dtype alpha;
  const Dtype* x;
  Dtype* y;
  POSEIDON_HD void operator()(int i) const { y[i] = alpha * x[i]; }
};

// y = alpha * x + beta * y
template <typename Dtype>
struct AxpbyKernel {
  Dtype alpha;
  const Dtype* x;
  Dtype beta;
  Dtype* y;
  POSEIDON_HD void operator()(int i) const { y[i] = alpha * x[i] + beta * y[i]; }
};

// r = 1 with probability p: `bits` holds uniform 32-bit draws (it may be r
// itself), and a draw below p * 2^32 gives 1 (the GPU's rng_bernoulli; the
// CPU draws directly).
template <typename Int>
struct BernoulliBitsKernel {
  const unsigned int* bits;
  double threshold;  // p * 2^32
  Int* r;
  POSEIDON_HD void operator()(int i) const {
    r[i] = static_cast<double>(bits[i]) < threshold ? 1 : 0;
  }
};

// r = a + (b - a) * u, mapping cuRAND's (0, 1] draws onto [a, b].
template <typename Dtype>
struct MapUniformKernel {
  Dtype a;
  Dtype b;
  Dtype* r;
  POSEIDON_HD void operator()(int i) const { r[i] = a + (b - a) * r[i]; }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_MATH_KERNELS_HPP_
