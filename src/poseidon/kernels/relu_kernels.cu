// GPU instantiations of ReLU's bodies (kernels/relu_kernels.hpp).
#include "poseidon/kernels/relu_kernels.hpp"
#include "poseidon/util/gpu_for_each.cuh"

POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::ReLUForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::ReLUBackward);
