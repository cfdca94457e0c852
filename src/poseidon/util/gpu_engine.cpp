// The engine rule of util/gpu_engine.hpp.
#include "poseidon/util/gpu_engine.hpp"

#include "poseidon/common.hpp"
#include "poseidon/util/status.hpp"

namespace poseidon {
namespace {

constexpr int kEngineCaffe = 1;
constexpr int kEngineCudnn = 2;

}  // namespace

GpuEngineDecision DecideGpuEngine(const std::string& who, int engine,
                                  bool built_with_cudnn, bool cudnn_can,
                                  const std::string& why_not) {
  GpuEngineDecision d;
  if (engine == kEngineCaffe) return d;
  const bool available = built_with_cudnn && cudnn_can;
  if (available) d.engine = GpuEngine::kCudnn;
  if (engine == kEngineCudnn && !available) {
    d.warning = StrCat(who, " asks for engine: CUDNN, but ",
                       built_with_cudnn ? why_not
                                        : std::string("Poseidon was built "
                                                      "without cuDNN"),
                       "; it runs Poseidon's own GPU kernels");
  }
  return d;
}

GpuEngine ChooseGpuEngine(const std::string& who, int engine, bool cudnn_can,
                          const std::string& why_not) {
  const GpuEngineDecision d =
      DecideGpuEngine(who, engine, BuiltWithCudnn(), cudnn_can, why_not);
  if (!d.warning.empty() && Poseidon::mode() == Poseidon::GPU) {
    LogWarningOnce(d.warning);
  }
  return d.engine;
}

}  // namespace poseidon
