// GPU instantiations of pooling's bodies and SPP's slice copies
// (kernels/pool_kernels.hpp).
#include "poseidon/kernels/pool_kernels.hpp"
#include "poseidon/util/gpu_for_each.cuh"

POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::MaxPoolForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::MaxPoolBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::AvePoolForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::AvePoolBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(
    poseidon::kernels::StochasticPoolTrain);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::StochasticPoolTest);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(
    poseidon::kernels::StochasticPoolTestBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::CopyIntoSlice);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::CopyFromSlice);
