// The engine rule of util/gpu_engine.hpp.
#include "poseidon/util/gpu_engine.hpp"

#include <mutex>
#include <set>

#include "poseidon/common.hpp"
#include "poseidon/util/status.hpp"

namespace poseidon {
namespace {

constexpr int kEngineCaffe = 1;
constexpr int kEngineCudnn = 2;

// Logs `message` the first time it is seen.
void WarnOnce(const std::string& message) {
  static std::mutex mutex;
  static auto* seen = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  if (seen->insert(message).second) LOG(WARNING) << message;
}

}  // namespace

GpuEngine ChooseGpuEngine(const char* layer_type, int engine, bool cudnn_can,
                          const std::string& why_not) {
  if (engine == kEngineCaffe) return GpuEngine::kKernels;
  const bool available = BuiltWithCudnn() && cudnn_can;
  if (engine == kEngineCudnn && !available) {
    WarnOnce(StrCat(layer_type, " layer asks for engine: CUDNN, but ",
                    BuiltWithCudnn() ? why_not
                                     : std::string("Poseidon was built "
                                                   "without cuDNN"),
                    "; it runs Poseidon's own GPU kernels"));
  }
  return available ? GpuEngine::kCudnn : GpuEngine::kKernels;
}

}  // namespace poseidon
