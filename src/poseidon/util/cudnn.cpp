// cuDNN layouts (plain C++) and descriptor wrappers (USE_CUDNN builds).
#include "poseidon/util/cudnn.hpp"

#include <sstream>

#include "poseidon/util/status.hpp"

#ifdef USE_CUDNN
#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {
namespace cudnn {

std::string TensorLayout::ToString() const {
  std::ostringstream os;
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? "x" : "") << dims[i];
  os << " / ";
  for (size_t i = 0; i < strides.size(); ++i) {
    os << (i ? "," : "") << strides[i];
  }
  return os.str();
}

TensorLayout PackedLayout(const std::vector<int>& shape) {
  POSEIDON_REQUIRE(static_cast<int>(shape.size()) <= kMaxDims, ShapeError,
                   "cuDNN takes tensors of at most ", kMaxDims,
                   " dimensions, got ", shape.size());
  TensorLayout layout;
  layout.dims = shape;
  while (static_cast<int>(layout.dims.size()) < kMinDims) {
    layout.dims.push_back(1);
  }
  for (size_t i = 0; i < layout.dims.size(); ++i) {
    POSEIDON_REQUIRE(layout.dims[i] >= 1, ShapeError,
                     "cuDNN needs every dimension >= 1, but axis ", i,
                     " is ", layout.dims[i]);
  }
  layout.strides.assign(layout.dims.size(), 1);
  for (int i = static_cast<int>(layout.dims.size()) - 2; i >= 0; --i) {
    layout.strides[i] = layout.strides[i + 1] * layout.dims[i + 1];
  }
  return layout;
}

#ifdef USE_CUDNN

template <>
cudnnDataType_t DataType<float>() {
  return CUDNN_DATA_FLOAT;
}
template <>
cudnnDataType_t DataType<double>() {
  return CUDNN_DATA_DOUBLE;
}

// Destructors ignore errors: they may run at process exit.
TensorDescriptor::TensorDescriptor() {
  POSEIDON_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
}
TensorDescriptor::~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }
void TensorDescriptor::Set(const TensorLayout& layout, cudnnDataType_t type) {
  POSEIDON_CUDNN_CHECK(cudnnSetTensorNdDescriptor(
      desc_, type, static_cast<int>(layout.dims.size()), layout.dims.data(),
      layout.strides.data()));
}

FilterDescriptor::FilterDescriptor() {
  POSEIDON_CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_));
}
FilterDescriptor::~FilterDescriptor() { cudnnDestroyFilterDescriptor(desc_); }
void FilterDescriptor::Set(const std::vector<int>& dims, cudnnDataType_t type) {
  std::vector<int> padded = dims;
  while (static_cast<int>(padded.size()) < kMinDims) padded.push_back(1);
  POSEIDON_CUDNN_CHECK(cudnnSetFilterNdDescriptor(
      desc_, type, CUDNN_TENSOR_NCHW, static_cast<int>(padded.size()),
      padded.data()));
}

ConvolutionDescriptor::ConvolutionDescriptor() {
  POSEIDON_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&desc_));
}
ConvolutionDescriptor::~ConvolutionDescriptor() {
  cudnnDestroyConvolutionDescriptor(desc_);
}
void ConvolutionDescriptor::Set(const std::vector<int>& pad,
                                const std::vector<int>& stride,
                                const std::vector<int>& dilation, int groups,
                                cudnnDataType_t compute_type) {
  CHECK_EQ(pad.size(), stride.size());
  CHECK_EQ(pad.size(), dilation.size());
  // cuDNN's convolutions are at least 2-D: a 1-D one is N x C x L x 1.
  std::vector<int> p = pad, s = stride, d = dilation;
  while (p.size() < 2) {
    p.push_back(0);
    s.push_back(1);
    d.push_back(1);
  }
  POSEIDON_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(
      desc_, static_cast<int>(p.size()), p.data(), s.data(), d.data(),
      CUDNN_CROSS_CORRELATION, compute_type));
  POSEIDON_CUDNN_CHECK(cudnnSetConvolutionGroupCount(desc_, groups));
  POSEIDON_CUDNN_CHECK(cudnnSetConvolutionMathType(
      desc_, gpu::GetSettings().allow_tf32 ? CUDNN_DEFAULT_MATH
                                           : CUDNN_FMA_MATH));
}

PoolingDescriptor::PoolingDescriptor() {
  POSEIDON_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&desc_));
}
PoolingDescriptor::~PoolingDescriptor() { cudnnDestroyPoolingDescriptor(desc_); }
void PoolingDescriptor::Set(cudnnPoolingMode_t mode,
                            const std::vector<int>& window,
                            const std::vector<int>& pad,
                            const std::vector<int>& stride) {
  CHECK_EQ(window.size(), pad.size());
  CHECK_EQ(window.size(), stride.size());
  std::vector<int> w = window, p = pad, s = stride;
  while (w.size() < 2) {
    w.push_back(1);
    p.push_back(0);
    s.push_back(1);
  }
  POSEIDON_CUDNN_CHECK(cudnnSetPoolingNdDescriptor(
      desc_, mode, CUDNN_PROPAGATE_NAN, static_cast<int>(w.size()), w.data(),
      p.data(), s.data()));
}

ActivationDescriptor::ActivationDescriptor() {
  POSEIDON_CUDNN_CHECK(cudnnCreateActivationDescriptor(&desc_));
}
ActivationDescriptor::~ActivationDescriptor() {
  cudnnDestroyActivationDescriptor(desc_);
}
void ActivationDescriptor::Set(cudnnActivationMode_t mode, double coef) {
  POSEIDON_CUDNN_CHECK(
      cudnnSetActivationDescriptor(desc_, mode, CUDNN_PROPAGATE_NAN, coef));
}

LRNDescriptor::LRNDescriptor() {
  POSEIDON_CUDNN_CHECK(cudnnCreateLRNDescriptor(&desc_));
}
LRNDescriptor::~LRNDescriptor() { cudnnDestroyLRNDescriptor(desc_); }
void LRNDescriptor::Set(unsigned local_size, double alpha, double beta,
                        double k) {
  POSEIDON_CUDNN_CHECK(cudnnSetLRNDescriptor(desc_, local_size, alpha, beta, k));
}

#endif  // USE_CUDNN

}  // namespace cudnn
}  // namespace poseidon
