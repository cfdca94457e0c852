// The engine choice and the cuDNN path of the activation layers (ReLU,
// Sigmoid, TanH), used from inside those layers' GPU passes: Caffe's
// `engine` field chooses, in GPU mode, between cuDNN and Poseidon's own
// kernels (the element-wise functors the CPU also runs).
//
// The rule is util/gpu_engine.hpp's (cuDNN has no leaky ReLU). The choice is
// made on the first GPU pass (CPU passes never look at it); type() stays
// Caffe's either way: there are no separate cuDNN layer classes.
#ifndef POSEIDON_LAYERS_ACTIVATION_ENGINE_HPP_
#define POSEIDON_LAYERS_ACTIVATION_ENGINE_HPP_

#include <memory>
#include <string>

#include "poseidon/proto/caffe.pb.h"

namespace poseidon {

enum class ActivationKind { kReLU, kSigmoid, kTanH };

// One layer's engine: the choice, made once, and for cuDNN the descriptors
// (made on first use, so that merely setting up a layer needs no GPU).
// Owned by the layer; not thread-safe, like the layer.
template <typename Dtype>
class ActivationEngine {
 public:
  explicit ActivationEngine(ActivationKind kind);
  ~ActivationEngine();
  ActivationEngine(const ActivationEngine&) = delete;
  ActivationEngine& operator=(const ActivationEngine&) = delete;

  // Whether the GPU pass runs on cuDNN, by ChooseGpuEngine for the layer
  // `param` describes (`engine`: its parameter; `unsupported_reason`: why
  // cuDNN cannot compute it, "" when it can). Resolved on the first call;
  // later calls return the same answer.
  bool UseCudnn(int engine, const LayerParameter& param,
                const std::string& unsupported_reason);

  // cuDNN's y = f(x) and dx = f'(x) * dy over `count` elements on the
  // calling thread's stream, the blob seen as one packed 1 x 1 x 1 x count
  // tensor (element-wise, so the shape does not matter). In place is
  // allowed (x == y, dy == dx). Only after UseCudnn() returned true.
  void Forward(int count, const Dtype* x, Dtype* y);
  void Backward(int count, const Dtype* y, const Dtype* dy, const Dtype* x,
                Dtype* dx);

 private:
  struct Cudnn;               // descriptors; defined only in USE_CUDNN builds
  Cudnn& Prepare(int count);  // USE_CUDNN builds

  enum class Decision { kUndecided, kCaffe, kCudnn };

  ActivationKind kind_;
  Decision decision_ = Decision::kUndecided;
  std::unique_ptr<Cudnn> cudnn_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_ACTIVATION_ENGINE_HPP_
