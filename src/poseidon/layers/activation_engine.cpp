// The activation layers' engine rule and their cuDNN calls.
#include "poseidon/layers/activation_engine.hpp"

#include "poseidon/common.hpp"
#include "poseidon/util/gpu_engine.hpp"

#ifdef USE_CUDNN
#include "poseidon/util/cudnn.hpp"
#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {
#ifdef USE_CUDNN

template <typename Dtype>
struct ActivationEngine<Dtype>::Cudnn {
  cudnn::ActivationDescriptor activation;
  cudnn::TensorDescriptor tensor;
  int count = -1;  // what `tensor` describes

  // Describes `n` elements (only when n changes: Forward runs every pass).
  void Describe(int n) {
    if (n == count) return;
    tensor.Set(cudnn::PackedLayout({1, 1, 1, n}), cudnn::DataType<Dtype>());
    count = n;
  }
};

#else

template <typename Dtype>
struct ActivationEngine<Dtype>::Cudnn {};

#endif  // USE_CUDNN

template <typename Dtype>
ActivationEngine<Dtype>::ActivationEngine(ActivationKind kind) : kind_(kind) {}

template <typename Dtype>
ActivationEngine<Dtype>::~ActivationEngine() = default;

template <typename Dtype>
bool ActivationEngine<Dtype>::UseCudnn(int engine, const LayerParameter& param,
                                       const std::string& unsupported_reason) {
  if (decision_ == Decision::kUndecided) {
    const GpuEngine choice = ChooseGpuEngine(
        StrCat(param.type(), " layer '", param.name(), "'"), engine,
        unsupported_reason.empty(), unsupported_reason);
    decision_ = choice == GpuEngine::kCudnn ? Decision::kCudnn
                                            : Decision::kCaffe;
  }
  return decision_ == Decision::kCudnn;
}

#ifdef USE_CUDNN

namespace {

cudnnActivationMode_t CudnnMode(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kReLU:
      return CUDNN_ACTIVATION_RELU;
    case ActivationKind::kSigmoid:
      return CUDNN_ACTIVATION_SIGMOID;
    case ActivationKind::kTanH:
      return CUDNN_ACTIVATION_TANH;
  }
  LOG(FATAL) << "unknown activation kind " << static_cast<int>(kind);
  return CUDNN_ACTIVATION_IDENTITY;
}

}  // namespace

// The descriptors for `count` elements, made on first use.
template <typename Dtype>
typename ActivationEngine<Dtype>::Cudnn& ActivationEngine<Dtype>::Prepare(
    int count) {
  CHECK(decision_ == Decision::kCudnn)
      << "ActivationEngine used without choosing cuDNN";
  if (!cudnn_) {
    cudnn_ = std::make_unique<Cudnn>();
    cudnn_->activation.Set(CudnnMode(kind_));
  }
  cudnn_->Describe(count);
  return *cudnn_;
}

template <typename Dtype>
void ActivationEngine<Dtype>::Forward(int count, const Dtype* x, Dtype* y) {
  if (count <= 0) return;  // cuDNN has no empty tensors
  Cudnn& c = Prepare(count);
  POSEIDON_CUDNN_CHECK(cudnnActivationForward(
      gpu::Cudnn(), c.activation.get(), cudnn::Scalars<Dtype>::one(),
      c.tensor.get(), x, cudnn::Scalars<Dtype>::zero(), c.tensor.get(), y));
}

template <typename Dtype>
void ActivationEngine<Dtype>::Backward(int count, const Dtype* y,
                                       const Dtype* dy, const Dtype* x,
                                       Dtype* dx) {
  if (count <= 0) return;
  const cudnnTensorDescriptor_t desc = Prepare(count).tensor.get();
  POSEIDON_CUDNN_CHECK(cudnnActivationBackward(
      gpu::Cudnn(), cudnn_->activation.get(), cudnn::Scalars<Dtype>::one(),
      desc, y, desc, dy, desc, x, cudnn::Scalars<Dtype>::zero(), desc, dx));
}

#else

template <typename Dtype>
void ActivationEngine<Dtype>::Forward(int, const Dtype*, Dtype*) {
  LOG(FATAL) << "ActivationEngine::Forward in a build without cuDNN";
}

template <typename Dtype>
void ActivationEngine<Dtype>::Backward(int, const Dtype*, const Dtype*,
                                       const Dtype*, Dtype*) {
  LOG(FATAL) << "ActivationEngine::Backward in a build without cuDNN";
}

#endif  // USE_CUDNN

template class ActivationEngine<float>;
template class ActivationEngine<double>;

}  // namespace poseidon
