// Choosing cuDNN convolution algorithms: the key a choice is cached under,
// the rule that picks one algorithm from cuDNN's measurements, and the
// process-wide cache. The key, the rule and the cache are plain C++ with
// CPU unit tests (test_cudnn_conv_algo.cpp); FindConvAlgo, which measures
// with cudnnFind*AlgorithmEx, exists in cuDNN builds only.
//
// Note [Convolution algorithm choice]
// For every convolution shape, each of the three passes (forward, backward
// data, backward filter) is measured once per process with
// cudnnFind*AlgorithmEx on the layer's own buffers, and the fastest
// algorithm that qualifies is kept:
//   - its status is success (cuDNN reports the algorithms it could not run,
//     for want of workspace or support, with an error status);
//   - it needs at most the workspace limit (gpu::Settings::workspace_limit,
//     lowered to what could be allocated for the search);
//   - with gpu::Settings::deterministic, its determinism is
//     CUDNN_DETERMINISTIC (bitwise-repeatable runs).
// Ties in time go to the smaller workspace, then the lower algorithm id.
// The math type is the convolution descriptor's (FMA, or TF32 tensor ops
// when allow_tf32; util/cudnn.hpp): the measurement runs under it and the
// choice is used under it, never switched to the math type cuDNN reports.
// The key holds everything the choice depends on: the pass, the device,
// the data type, the input, filter and output dims, pad, stride,
// dilation, groups, and the three settings, so changing a setting searches
// again. Every search logs its choice at INFO, so each shape is logged once
// per process. When no algorithm qualifies, the layer computes that pass
// with its own im2col + GEMM path instead (and says so in the log).
//
// Thread safety: ConvAlgoCache is safe to use from any thread (a mutex);
// two threads meeting a new shape at once may both measure it, and the
// first insertion is kept.
#ifndef POSEIDON_UTIL_CUDNN_CONV_ALGO_HPP_
#define POSEIDON_UTIL_CUDNN_CONV_ALGO_HPP_

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#ifdef USE_CUDNN
#include <cudnn.h>
#endif

namespace poseidon {
namespace cudnn {

enum class ConvPass { kForward, kBackwardData, kBackwardFilter };
const char* ConvPassName(ConvPass pass);  // "forward", ...

struct ConvAlgoKey {
  ConvPass pass = ConvPass::kForward;
  int device = 0;
  int data_type = 0;         // cudnnDataType_t
  std::vector<int> input;    // x: (N, C, spatial...)
  std::vector<int> filter;   // (K, C / groups, kernel...)
  std::vector<int> output;   // y: (N, K, spatial...)
  std::vector<int> pad, stride, dilation;
  int groups = 1;
  bool deterministic = false;
  bool allow_tf32 = false;
  size_t workspace_limit = 0;

  bool operator<(const ConvAlgoKey& o) const;
  bool operator==(const ConvAlgoKey& o) const;
  // "forward dtype 0 gpu 0 x 8x3x32x32 w 16x3x5x5 y 8x16x32x32 pad 2,2
  //  stride 1,1 dilation 1,1 groups 1 deterministic 0 tf32 0 limit 1024 MiB"
  std::string ToString() const;
};

// One measurement, as cudnnFind*AlgorithmEx reports it.
struct ConvAlgoPerf {
  int algo = -1;
  bool ok = false;  // status CUDNN_STATUS_SUCCESS
  float time_ms = 0;
  size_t memory = 0;  // workspace bytes
  bool deterministic = false;
  int math_type = 0;
};

// What a pass runs with. algo < 0: no cuDNN algorithm qualified.
struct ConvAlgoChoice {
  int algo = -1;
  size_t workspace = 0;
  float time_ms = 0;
  bool deterministic = false;
  int math_type = 0;
  int candidates = 0;  // measurements that qualified
  bool valid() const { return algo >= 0; }
};

// The rule of Note [Convolution algorithm choice]; returns a choice with
// algo -1 when nothing qualifies.
ConvAlgoChoice SelectConvAlgo(const std::vector<ConvAlgoPerf>& results,
                              bool deterministic, size_t workspace_limit);

class ConvAlgoCache {
 public:
  ConvAlgoCache() = default;
  ConvAlgoCache(const ConvAlgoCache&) = delete;
  ConvAlgoCache& operator=(const ConvAlgoCache&) = delete;

  // The process's cache.
  static ConvAlgoCache& Global();

  bool Lookup(const ConvAlgoKey& key, ConvAlgoChoice* choice) const;
  // Keeps an existing entry (the first measurement wins); returns the
  // entry the cache now holds.
  ConvAlgoChoice Insert(const ConvAlgoKey& key, const ConvAlgoChoice& choice);
  size_t size() const;
  void Clear();

 private:
  mutable std::mutex mutex_;
  std::map<ConvAlgoKey, ConvAlgoChoice> entries_;  // guarded by mutex_
};

#ifdef USE_CUDNN
// The descriptors of one convolution, in convolution terms (x input, w
// filter, y output).
struct ConvDescriptors {
  cudnnTensorDescriptor_t x;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  cudnnTensorDescriptor_t y;
};

// Device buffers a measurement may use; which ones key.pass reads:
//   forward:         x, w in; y overwritten.
//   backward data:   w, dy in; dx overwritten.
//   backward filter: x, dy in; the filter gradient goes to a scratch
//                    buffer (the layer's accumulated one is not touched).
struct ConvSearchBuffers {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* dy = nullptr;
  void* y = nullptr;
  void* dx = nullptr;
};

// The cached choice for `key`, or a fresh measurement (synchronous, with
// scratch from the caching allocator), logged and cached; see Note
// [Convolution algorithm choice].
ConvAlgoChoice FindConvAlgo(const ConvAlgoKey& key, const ConvDescriptors& d,
                            const ConvSearchBuffers& buffers);
#endif  // USE_CUDNN

}  // namespace cudnn
}  // namespace poseidon

#endif  // POSEIDON_UTIL_CUDNN_CONV_ALGO_HPP_
