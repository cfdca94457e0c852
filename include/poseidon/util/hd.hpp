// Code that compiles for both the host and a CUDA device: POSEIDON_HD marks a
// function __host__ __device__ under nvcc and is empty under the host
// compiler, and the math below picks the float or double library function
// that exists on both sides (expf/exp, ...). Element-wise kernels are written
// once as POSEIDON_HD functors (see util/for_each.hpp), so the CPU tests run
// the arithmetic the GPU runs. This header includes nothing CUDA-specific
// and nothing heavy: .cu files include it.
#ifndef POSEIDON_UTIL_HD_HPP_
#define POSEIDON_UTIL_HD_HPP_

#include <cmath>

#ifdef __CUDACC__
#define POSEIDON_HD __host__ __device__
#define POSEIDON_HD_INLINE __host__ __device__ __forceinline__
#else
#define POSEIDON_HD
#define POSEIDON_HD_INLINE inline
#endif

namespace poseidon {
namespace hd {

// One overload per element type, calling the C function both sides have.
POSEIDON_HD_INLINE float exp(float x) { return ::expf(x); }
POSEIDON_HD_INLINE double exp(double x) { return ::exp(x); }
POSEIDON_HD_INLINE float expm1(float x) { return ::expm1f(x); }
POSEIDON_HD_INLINE double expm1(double x) { return ::expm1(x); }
POSEIDON_HD_INLINE float log(float x) { return ::logf(x); }
POSEIDON_HD_INLINE double log(double x) { return ::log(x); }
POSEIDON_HD_INLINE float log1p(float x) { return ::log1pf(x); }
POSEIDON_HD_INLINE double log1p(double x) { return ::log1p(x); }
POSEIDON_HD_INLINE float tanh(float x) { return ::tanhf(x); }
POSEIDON_HD_INLINE double tanh(double x) { return ::tanh(x); }
POSEIDON_HD_INLINE float sqrt(float x) { return ::sqrtf(x); }
POSEIDON_HD_INLINE double sqrt(double x) { return ::sqrt(x); }
POSEIDON_HD_INLINE float pow(float x, float y) { return ::powf(x, y); }
POSEIDON_HD_INLINE double pow(double x, double y) { return ::pow(x, y); }
POSEIDON_HD_INLINE float abs(float x) { return ::fabsf(x); }
POSEIDON_HD_INLINE double abs(double x) { return ::fabs(x); }

// max/min without std:: (not device code) and without NaN special cases:
// a NaN in `a` propagates as in Caffe's loops.
template <typename T>
POSEIDON_HD_INLINE T max(T a, T b) {
  return a < b ? b : a;
}
template <typename T>
POSEIDON_HD_INLINE T min(T a, T b) {
  return b < a ? b : a;
}

// -1, 0 or +1 (0 for NaN), Caffe's caffe_sign.
template <typename T>
POSEIDON_HD_INLINE T sign(T x) {
  return static_cast<T>((T(0) < x) - (x < T(0)));
}

// *address += value, atomically on the device. On the host it is a plain
// add: a functor using it must set kSerialOnHost (util/for_each.hpp).
template <typename T>
POSEIDON_HD_INLINE void AtomicAdd(T* address, T value) {
#ifdef __CUDA_ARCH__
  atomicAdd(address, value);
#else
  *address += value;
#endif
}

}  // namespace hd
}  // namespace poseidon

#endif  // POSEIDON_UTIL_HD_HPP_
