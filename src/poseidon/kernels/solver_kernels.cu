// GPU instantiations of the solvers' update rules
// (kernels/solver_kernels.hpp).
#include "poseidon/kernels/solver_kernels.hpp"
#include "poseidon/util/gpu_for_each.cuh"

using namespace poseidon::kernels;  // NOLINT: names for the list below

POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(SgdUpdate);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(NesterovUpdate);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(AdaGradUpdate);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(RmsPropUpdate);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(AdaDeltaUpdate);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(AdamUpdate);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(L2Regularize);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(L1Regularize);
