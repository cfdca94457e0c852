// GPU instantiations of Accuracy's bodies (kernels/accuracy_kernels.hpp).
#include "poseidon/kernels/accuracy_kernels.hpp"
#include "poseidon/util/gpu_for_each.cuh"

POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(
    poseidon::kernels::AccuracyPerPosition);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(
    poseidon::kernels::AccuracyPerClassCounts);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::AccuracyRatio);
