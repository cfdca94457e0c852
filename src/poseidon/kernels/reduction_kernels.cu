// GPU instantiations of Reduction's bodies (kernels/reduction_kernels.hpp).
#include "poseidon/kernels/reduction_kernels.hpp"
#include "poseidon/util/gpu_for_each.cuh"

using namespace poseidon::kernels;  // NOLINT: names for the list below

POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(ReducePartial);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(ReduceFinish);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(ReduceBackward);
