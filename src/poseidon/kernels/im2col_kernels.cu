// GPU instantiations of the im2col / col2im bodies and the layout helpers
// of the convolution's GEMM path (kernels/im2col_kernels.hpp).
#include "poseidon/kernels/im2col_kernels.hpp"
#include "poseidon/util/gpu_for_each.cuh"

POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::Im2col2D);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::Col2im2D);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::Im2colND);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::Col2imND);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(
    poseidon::kernels::ImagesToChannelMajor);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(
    poseidon::kernels::ChannelMajorToImages);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::AddChannelBias);
