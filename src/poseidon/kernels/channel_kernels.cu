// GPU instantiations of Bias's and Scale's channel functors
// (kernels/channel_kernels.hpp), run one element per thread.
#include "poseidon/kernels/channel_kernels.hpp"
#include "poseidon/util/gpu_for_each.cuh"

#define POSEIDON_INSTANTIATE_CHANNEL(F)                                 \
  POSEIDON_INSTANTIATE_GPU_FOR_EACH(                                    \
      poseidon::kernels::ChannelElements<poseidon::kernels::F<float>>); \
  POSEIDON_INSTANTIATE_GPU_FOR_EACH(                                    \
      poseidon::kernels::ChannelElements<poseidon::kernels::F<double>>)
POSEIDON_INSTANTIATE_CHANNEL(BiasForward);
POSEIDON_INSTANTIATE_CHANNEL(ScaleForward);
POSEIDON_INSTANTIATE_CHANNEL(ScaleBiasForward);
#undef POSEIDON_INSTANTIATE_CHANNEL
