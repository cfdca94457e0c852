// cuDNN convolution algorithm choice: key, selection rule and cache (plain
// C++), and the measurement with cudnnFind*AlgorithmEx (cuDNN builds). See
// Note [Convolution algorithm choice] in util/cudnn_conv_algo.hpp.
#include "poseidon/util/cudnn_conv_algo.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <sstream>
#include <tuple>

#ifdef USE_CUDNN
#include "poseidon/common.hpp"
#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#include "poseidon/util/status.hpp"
#endif

namespace poseidon {
namespace cudnn {
namespace {

auto Tie(const ConvAlgoKey& k) {
  return std::tie(k.pass, k.device, k.data_type, k.input, k.filter, k.output,
                  k.pad, k.stride, k.dilation, k.groups, k.deterministic,
                  k.allow_tf32, k.workspace_limit);
}

std::string Join(const std::vector<int>& v, const char* sep) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? sep : "") << v[i];
  return os.str();
}

// Whether a is the better of two qualifying measurements.
bool Better(const ConvAlgoPerf& a, const ConvAlgoPerf& b) {
  if (a.time_ms != b.time_ms) return a.time_ms < b.time_ms;
  if (a.memory != b.memory) return a.memory < b.memory;
  return a.algo < b.algo;
}

}  // namespace

const char* ConvPassName(ConvPass pass) {
  switch (pass) {
    case ConvPass::kForward:
      return "forward";
    case ConvPass::kBackwardData:
      return "backward data";
    case ConvPass::kBackwardFilter:
      return "backward filter";
  }
  return "?";
}

bool ConvAlgoKey::operator<(const ConvAlgoKey& o) const {
  return Tie(*this) < Tie(o);
}

bool ConvAlgoKey::operator==(const ConvAlgoKey& o) const {
  return Tie(*this) == Tie(o);
}

std::string ConvAlgoKey::ToString() const {
  std::ostringstream os;
  os << ConvPassName(pass) << " dtype " << data_type << " gpu " << device
     << " x " << Join(input, "x") << " w " << Join(filter, "x") << " y "
     << Join(output, "x") << " pad " << Join(pad, ",") << " stride "
     << Join(stride, ",") << " dilation " << Join(dilation, ",") << " groups "
     << groups << " deterministic " << deterministic << " tf32 " << allow_tf32
     << " limit " << (workspace_limit >> 20) << " MiB";
  return os.str();
}

ConvAlgoChoice SelectConvAlgo(const std::vector<ConvAlgoPerf>& results,
                              bool deterministic, size_t workspace_limit) {
  const ConvAlgoPerf* best = nullptr;
  int candidates = 0;
  for (const ConvAlgoPerf& r : results) {
    if (!r.ok || r.algo < 0 || r.memory > workspace_limit) continue;
    if (deterministic && !r.deterministic) continue;
    ++candidates;
    if (best == nullptr || Better(r, *best)) best = &r;
  }
  ConvAlgoChoice choice;
  choice.candidates = candidates;
  if (best == nullptr) return choice;
  choice.algo = best->algo;
  choice.workspace = best->memory;
  choice.time_ms = best->time_ms;
  choice.deterministic = best->deterministic;
  choice.math_type = best->math_type;
  return choice;
}

ConvAlgoCache& ConvAlgoCache::Global() {
  // Never destroyed: layers may still look up during static destruction.
  static ConvAlgoCache* cache = new ConvAlgoCache();
  return *cache;
}

bool ConvAlgoCache::Lookup(const ConvAlgoKey& key,
                           ConvAlgoChoice* choice) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  *choice = it->second;
  return true;
}

ConvAlgoChoice ConvAlgoCache::Insert(const ConvAlgoKey& key,
                                     const ConvAlgoChoice& choice) {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.emplace(key, choice).first->second;
}

size_t ConvAlgoCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

void ConvAlgoCache::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

#ifdef USE_CUDNN
namespace {

size_t DataTypeSize(int data_type) {
  return data_type == CUDNN_DATA_DOUBLE ? sizeof(double) : sizeof(float);
}

size_t Count(const std::vector<int>& dims) {
  size_t n = 1;
  for (int d : dims) n *= static_cast<size_t>(d);
  return n;
}

// Device scratch from the caching allocator, released on scope exit.
class Scratch {
 public:
  Scratch() = default;
  ~Scratch() {
    if (ptr_ != nullptr) gpu::DeviceFree(ptr_, Poseidon::device());
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void Allocate(size_t bytes) { ptr_ = gpu::DeviceAlloc(bytes); }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// The largest workspace any algorithm of `pass` asks for (algorithms
// cuDNN cannot run for these descriptors are skipped).
size_t LargestWorkspace(ConvPass pass, const ConvDescriptors& d) {
  cudnnHandle_t handle = gpu::Cudnn();
  size_t largest = 0;
  switch (pass) {
    case ConvPass::kForward:
      for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
        size_t bytes = 0;
        if (cudnnGetConvolutionForwardWorkspaceSize(
                handle, d.x, d.w, d.conv, d.y,
                static_cast<cudnnConvolutionFwdAlgo_t>(a),
                &bytes) == CUDNN_STATUS_SUCCESS) {
          largest = std::max(largest, bytes);
        }
      }
      break;
    case ConvPass::kBackwardData:
      for (int a = 0; a < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT; ++a) {
        size_t bytes = 0;
        if (cudnnGetConvolutionBackwardDataWorkspaceSize(
                handle, d.w, d.y, d.conv, d.x,
                static_cast<cudnnConvolutionBwdDataAlgo_t>(a),
                &bytes) == CUDNN_STATUS_SUCCESS) {
          largest = std::max(largest, bytes);
        }
      }
      break;
    case ConvPass::kBackwardFilter:
      for (int a = 0; a < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT; ++a) {
        size_t bytes = 0;
        if (cudnnGetConvolutionBackwardFilterWorkspaceSize(
                handle, d.x, d.y, d.conv, d.w,
                static_cast<cudnnConvolutionBwdFilterAlgo_t>(a),
                &bytes) == CUDNN_STATUS_SUCCESS) {
          largest = std::max(largest, bytes);
        }
      }
      break;
  }
  return largest;
}

template <typename Perf>
ConvAlgoPerf ToPerf(const Perf& p) {
  ConvAlgoPerf r;
  r.algo = static_cast<int>(p.algo);
  r.ok = p.status == CUDNN_STATUS_SUCCESS;
  r.time_ms = p.time;
  r.memory = p.memory;
  r.deterministic = p.determinism == CUDNN_DETERMINISTIC;
  r.math_type = static_cast<int>(p.mathType);
  return r;
}

// Runs the measurement of key.pass with `workspace` bytes of scratch. A
// call cuDNN refuses (e.g. a data type or geometry it has no algorithm
// for) gives no results, and the layer falls back to its GEMM path.
std::vector<ConvAlgoPerf> Measure(const ConvAlgoKey& key,
                                  const ConvDescriptors& d,
                                  const ConvSearchBuffers& b, void* workspace,
                                  size_t workspace_bytes) {
  cudnnHandle_t handle = gpu::Cudnn();
  std::vector<ConvAlgoPerf> results;
  int requested = 0, returned = 0;
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  switch (key.pass) {
    case ConvPass::kForward: {
      POSEIDON_CUDNN_CHECK(
          cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &requested));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(requested);
      status = cudnnFindConvolutionForwardAlgorithmEx(
          handle, d.x, b.x, d.w, b.w, d.conv, d.y, b.y, requested, &returned,
          perf.data(), workspace, workspace_bytes);
      if (status != CUDNN_STATUS_SUCCESS) returned = 0;
      for (int i = 0; i < returned; ++i) results.push_back(ToPerf(perf[i]));
      break;
    }
    case ConvPass::kBackwardData: {
      POSEIDON_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(
          handle, &requested));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(requested);
      status = cudnnFindConvolutionBackwardDataAlgorithmEx(
          handle, d.w, b.w, d.y, b.dy, d.conv, d.x, b.dx, requested, &returned,
          perf.data(), workspace, workspace_bytes);
      if (status != CUDNN_STATUS_SUCCESS) returned = 0;
      for (int i = 0; i < returned; ++i) results.push_back(ToPerf(perf[i]));
      break;
    }
    case ConvPass::kBackwardFilter: {
      POSEIDON_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(
          handle, &requested));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(requested);
      Scratch filter_grad;
      filter_grad.Allocate(Count(key.filter) * DataTypeSize(key.data_type));
      status = cudnnFindConvolutionBackwardFilterAlgorithmEx(
          handle, d.x, b.x, d.y, b.dy, d.conv, d.w, filter_grad.get(),
          requested, &returned, perf.data(), workspace, workspace_bytes);
      if (status != CUDNN_STATUS_SUCCESS) returned = 0;
      for (int i = 0; i < returned; ++i) results.push_back(ToPerf(perf[i]));
      break;
    }
  }
  if (status != CUDNN_STATUS_SUCCESS) {
    LOG(WARNING) << "cuDNN convolution " << key.ToString()
                 << ": the algorithm search failed: "
                 << cudnnGetErrorString(status);
  }
  return results;
}

}  // namespace

ConvAlgoChoice FindConvAlgo(const ConvAlgoKey& key, const ConvDescriptors& d,
                            const ConvSearchBuffers& buffers) {
  ConvAlgoChoice choice;
  if (ConvAlgoCache::Global().Lookup(key, &choice)) return choice;

  // As much workspace as the hungriest algorithm wants, within the limit
  // and within what the allocator can give (halving down to none).
  size_t bytes = std::min(LargestWorkspace(key.pass, d), key.workspace_limit);
  Scratch workspace;
  while (bytes > 0) {
    try {
      workspace.Allocate(bytes);
      break;
    } catch (const OutOfMemoryError&) {
      bytes = bytes < (size_t(1) << 20) ? 0 : bytes / 2;
    }
  }
  const std::vector<ConvAlgoPerf> results =
      Measure(key, d, buffers, workspace.get(), bytes);
  choice = SelectConvAlgo(results, key.deterministic, bytes);
  if (choice.valid()) {
    LOG(INFO) << "cuDNN convolution " << key.ToString() << ": algorithm "
              << choice.algo << " (" << choice.time_ms << " ms, workspace "
              << (choice.workspace >> 10) << " KiB, "
              << (choice.deterministic ? "deterministic" : "non-deterministic")
              << ", math type " << choice.math_type << "; "
              << choice.candidates << " of " << results.size()
              << " measured algorithms qualified)";
  } else {
    LOG(WARNING) << "cuDNN convolution " << key.ToString() << ": none of "
                 << results.size() << " measured algorithms qualified"
                 << (key.deterministic ? " (deterministic required)" : "")
                 << " within " << (bytes >> 20)
                 << " MiB of workspace; this pass runs as im2col + GEMM";
  }
  return ConvAlgoCache::Global().Insert(key, choice);
}
#endif  // USE_CUDNN

}  // namespace cudnn
}  // namespace poseidon
