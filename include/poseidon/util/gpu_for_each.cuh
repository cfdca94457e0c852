// The GPU half of util/for_each.hpp: the grid-stride kernel that runs a
// POSEIDON_HD functor, and the macro that instantiates gpu_for_each for a
// functor in a .cu file (src/poseidon/kernels/). Included only by .cu files.
#ifndef POSEIDON_UTIL_GPU_FOR_EACH_CUH_
#define POSEIDON_UTIL_GPU_FOR_EACH_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "poseidon/util/device_check.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/gpu_context.hpp"

namespace poseidon {

// Threads per block; blocks are capped so that huge counts loop in the
// kernel (grid stride) instead of asking for an enormous grid.
constexpr int kForEachThreads = 256;
constexpr int64_t kForEachMaxBlocks = int64_t(1) << 20;

template <typename F>
__global__ void ForEachKernel(int n, F f) {
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    f(static_cast<int>(i));
  }
}

template <typename F>
void gpu_for_each(int n, const F& f) {
  if (n <= 0) return;
  int64_t blocks = (int64_t(n) + kForEachThreads - 1) / kForEachThreads;
  if (blocks > kForEachMaxBlocks) blocks = kForEachMaxBlocks;
  ForEachKernel<F><<<static_cast<unsigned>(blocks), kForEachThreads, 0,
                     gpu::Stream()>>>(n, f);
  POSEIDON_CUDA_POST_LAUNCH_CHECK();
}

}  // namespace poseidon

// Instantiates gpu_for_each for one functor type (write it at namespace
// scope, outside any namespace).
#define POSEIDON_INSTANTIATE_GPU_FOR_EACH(...) \
  template void poseidon::gpu_for_each<__VA_ARGS__>(int, const __VA_ARGS__&)

// ... for Functor<float> and Functor<double>.
#define POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(Functor)  \
  POSEIDON_INSTANTIATE_GPU_FOR_EACH(Functor<float>);      \
  POSEIDON_INSTANTIATE_GPU_FOR_EACH(Functor<double>)

#endif  // POSEIDON_UTIL_GPU_FOR_EACH_CUH_
