// Checks on CUDA library calls: a failure throws poseidon::Error with the
// library's error string, the call site (file:line and the call) and, in a
// distributed job, the rank. Only
// included by code built with USE_CUDA (cuDNN checks also need USE_CUDNN).
#ifndef POSEIDON_UTIL_DEVICE_CHECK_HPP_
#define POSEIDON_UTIL_DEVICE_CHECK_HPP_

#ifndef CPU_ONLY
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>
#ifdef USE_CUDNN
#include <cudnn.h>
#endif

#include "poseidon/common.hpp"
#include "poseidon/util/status.hpp"

namespace poseidon {
namespace gpu {

const char* CurandErrorString(curandStatus_t status);

// " on rank R" in a job of several ranks, "" otherwise.
inline std::string RankSuffix() {
  return Poseidon::node_count() > 1
             ? StrCat(" on rank ", Poseidon::node_rank())
             : std::string();
}

}  // namespace gpu
}  // namespace poseidon

#define POSEIDON_DEVICE_CHECK_IMPL_(call, type, ok, to_string)              \
  do {                                                                      \
    const type poseidon_status_ = (call);                                   \
    if (poseidon_status_ != (ok)) {                                         \
      POSEIDON_THROW(::poseidon::Error, __FILE__, ":", __LINE__, ": ",      \
                     #call, " failed", ::poseidon::gpu::RankSuffix(), ": ", \
                     to_string(poseidon_status_));                          \
    }                                                                       \
  } while (0)

#define POSEIDON_CUDA_CHECK(call) \
  POSEIDON_DEVICE_CHECK_IMPL_(call, cudaError_t, cudaSuccess, cudaGetErrorString)

#define POSEIDON_CUBLAS_CHECK(call)                                \
  POSEIDON_DEVICE_CHECK_IMPL_(call, cublasStatus_t, CUBLAS_STATUS_SUCCESS, \
                              cublasGetStatusString)

#define POSEIDON_CURAND_CHECK(call)                                \
  POSEIDON_DEVICE_CHECK_IMPL_(call, curandStatus_t, CURAND_STATUS_SUCCESS, \
                              ::poseidon::gpu::CurandErrorString)

#ifdef USE_CUDNN
#define POSEIDON_CUDNN_CHECK(call)                                 \
  POSEIDON_DEVICE_CHECK_IMPL_(call, cudnnStatus_t, CUDNN_STATUS_SUCCESS, \
                              cudnnGetErrorString)
#endif

// After a kernel launch: a bad configuration shows up here, at the launch,
// rather than at the next synchronising call.
#define POSEIDON_CUDA_POST_LAUNCH_CHECK() POSEIDON_CUDA_CHECK(cudaPeekAtLastError())

#endif  // CPU_ONLY

#endif  // POSEIDON_UTIL_DEVICE_CHECK_HPP_
