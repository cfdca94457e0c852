// Checks on CUDA library calls: a failure throws with the library's error
// string and the call site. Only included by code built with USE_CUDA.
#ifndef POSEIDON_UTIL_DEVICE_CHECK_HPP_
#define POSEIDON_UTIL_DEVICE_CHECK_HPP_

#ifndef CPU_ONLY
#include <cuda_runtime.h>

#include "poseidon/util/status.hpp"

#define POSEIDON_CUDA_CHECK(call)                                          \
  do {                                                                     \
    cudaError_t poseidon_err_ = (call);                                    \
    if (poseidon_err_ != cudaSuccess) {                                    \
      POSEIDON_THROW(::poseidon::Error, __FILE__, ":", __LINE__, ": ",     \
                     #call, " failed: ", cudaGetErrorString(poseidon_err_)); \
    }                                                                      \
  } while (0)
#endif  // CPU_ONLY

#endif  // POSEIDON_UTIL_DEVICE_CHECK_HPP_
