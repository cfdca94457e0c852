// GPU instantiations of MVN's and BatchNorm's bodies
// (kernels/norm_kernels.hpp).
#include "poseidon/kernels/norm_kernels.hpp"
#include "poseidon/util/gpu_for_each.cuh"

POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::RowPartialSums);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(
    poseidon::kernels::RowPartialSquaredDeviations);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(
    poseidon::kernels::RowPartialShiftedMoments);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::MVNStd);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::MVNNormalize);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::MVNBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(
    poseidon::kernels::BatchNormUpdateStatistics);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(
    poseidon::kernels::BatchNormGlobalStatistics);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::BatchNormNormalize);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::BatchNormBackward);
