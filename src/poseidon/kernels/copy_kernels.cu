// GPU instantiations of the utility layers' copy, gather and scatter bodies
// (kernels/copy_kernels.hpp).
#include "poseidon/kernels/copy_kernels.hpp"
#include "poseidon/util/gpu_for_each.cuh"

using namespace poseidon::kernels;  // NOLINT: names for the list below

POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(BlockCopy);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(TileForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(TileBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(CropCopy);
POSEIDON_INSTANTIATE_GPU_FOR_EACH(GatherRows<float, int>);
POSEIDON_INSTANTIATE_GPU_FOR_EACH(GatherRows<double, int>);
POSEIDON_INSTANTIATE_GPU_FOR_EACH(GatherRows<float, float>);
POSEIDON_INSTANTIATE_GPU_FOR_EACH(GatherRows<double, double>);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(ScatterRows);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(SegmentSum);
