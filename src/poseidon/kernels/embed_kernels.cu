// GPU instantiations of Embed's lookup (kernels/embed_kernels.hpp).
#include "poseidon/kernels/embed_kernels.hpp"
#include "poseidon/util/gpu_for_each.cuh"

POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::EmbedForward);
