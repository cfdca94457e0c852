// The engine choice and the cuDNN path of the activation layers (ReLU,
// Sigmoid, TanH), used from inside those layers' GPU passes: Caffe's
// `engine` field chooses, in GPU mode, between cuDNN and Poseidon's own
// kernels (the element-wise functors the CPU also runs).
//
//   DEFAULT  cuDNN in builds with cuDNN (USE_CUDNN) when it computes what the
//            layer's parameters ask (not for a leaky ReLU), else ours
//   CAFFE    ours
//   CUDNN    cuDNN when possible; otherwise ours, with a warning logged once
//            per layer type and reason
//
// The choice is made on the first GPU pass (CPU passes never look at it);
// ResolveEngine is the rule itself, a pure function tested on every build.
// type() stays Caffe's either way: there are no separate cuDNN layer classes.
#ifndef POSEIDON_LAYERS_ACTIVATION_ENGINE_HPP_
#define POSEIDON_LAYERS_ACTIVATION_ENGINE_HPP_

#include <memory>
#include <string>

namespace poseidon {

// What an `engine` value resolves to. Every Caffe *Parameter.Engine enum
// numbers its values alike: DEFAULT = 0, CAFFE = 1, CUDNN = 2.
struct EngineChoice {
  bool cudnn = false;
  // Non-empty when CUDNN was asked for and cannot be given: why.
  std::string warning;
};

// `unsupported_reason` is empty when cuDNN can compute the layer as
// parameterised, else says why not ("cuDNN has no leaky ReLU ...").
EngineChoice ResolveEngine(int engine, bool built_with_cudnn,
                           const std::string& type,
                           const std::string& unsupported_reason);

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

  // Whether the GPU pass runs on cuDNN. Resolved on the first call (logging
  // ResolveEngine's warning, once per message in the process); later calls
  // return the same answer.
  bool UseCudnn(int engine, const char* type,
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
