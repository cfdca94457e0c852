// GPU instantiations of the neuron layers' bodies
// (kernels/neuron_kernels.hpp).
#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/gpu_for_each.cuh"

POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::AbsValBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::BNLLForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::BNLLBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::ClipForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::ClipBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::ELUForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::ELUBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::ExpForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::ExpBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::LogForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::LogBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::PowerLinearForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::PowerForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(
    poseidon::kernels::PowerSquareBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::PowerBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::PReLUSlopeTerms);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::SigmoidForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::SigmoidBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::TanHForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::TanHBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::ThresholdForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::SwishForward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::SwishBackward);
POSEIDON_INSTANTIATE_GPU_FOR_EACH_DTYPES(poseidon::kernels::DropoutMask);

// PReLU's channel functors, run one element per thread.
#define POSEIDON_INSTANTIATE_CHANNEL(F)                                 \
  POSEIDON_INSTANTIATE_GPU_FOR_EACH(                                    \
      poseidon::kernels::ChannelElements<poseidon::kernels::F<float>>); \
  POSEIDON_INSTANTIATE_GPU_FOR_EACH(                                    \
      poseidon::kernels::ChannelElements<poseidon::kernels::F<double>>)
POSEIDON_INSTANTIATE_CHANNEL(PReLUForward);
POSEIDON_INSTANTIATE_CHANNEL(PReLUBackward);
#undef POSEIDON_INSTANTIATE_CHANNEL
