// Which implementation a layer with Caffe's `engine` field runs in GPU mode
// (softmax_param, lrn_param, ... all carry the same enum: DEFAULT = 0,
// CAFFE = 1, CUDNN = 2). The layer keeps its Caffe type() and decides inside
// its Forward_gpu/Backward_gpu:
//   DEFAULT: cuDNN when the build has it (USE_CUDNN) and cuDNN computes what
//            the layer's parameters ask for, else Poseidon's kernels;
//   CAFFE:   Poseidon's kernels;
//   CUDNN:   cuDNN; in a build without cuDNN, or where cuDNN cannot compute
//            the layer's parameters, Poseidon's kernels, with a warning once
//            per layer type and reason.
// The CPU pass never depends on the engine. Plain C++, tested on the CPU.
#ifndef POSEIDON_UTIL_GPU_ENGINE_HPP_
#define POSEIDON_UTIL_GPU_ENGINE_HPP_

#include <string>

namespace poseidon {

enum class GpuEngine { kKernels, kCudnn };

// The rule itself, for a build with or without cuDNN: the engine, and the
// warning to give ("" when none is due: only CUDNN asked for and refused
// warns).
struct GpuEngineDecision {
  GpuEngine engine = GpuEngine::kKernels;
  std::string warning;
};
GpuEngineDecision DecideGpuEngine(const std::string& who, int engine,
                                  bool built_with_cudnn, bool cudnn_can,
                                  const std::string& why_not);

// `who` names the layer in the warning ("Pooling layer 'pool1'");
// `engine`: the parameter's value; `cudnn_can`: whether cuDNN computes the
// layer's parameters; `why_not`: the reason when it cannot, for the warning.
// The warning is logged once per message, and only in GPU mode (a CPU run
// never uses the engine).
GpuEngine ChooseGpuEngine(const std::string& who, int engine, bool cudnn_can,
                          const std::string& why_not = "");

// Whether this build has cuDNN (USE_CUDNN).
constexpr bool BuiltWithCudnn() {
#ifdef USE_CUDNN
  return true;
#else
  return false;
#endif
}

}  // namespace poseidon

#endif  // POSEIDON_UTIL_GPU_ENGINE_HPP_
