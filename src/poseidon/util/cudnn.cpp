// cuDNN layouts (plain C++) and descriptor wrappers (USE_CUDNN builds).
#include "poseidon/util/cudnn.hpp"

#include <glog/logging.h>

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

std::vector<int> PaddedFilterDims(const std::vector<int>& dims) {
  std::vector<int> padded = dims;
  while (static_cast<int>(padded.size()) < kMinDims) padded.push_back(1);
  return padded;
}

ConvolutionArrays PaddedConvolutionArrays(const std::vector<int>& pad,
                                          const std::vector<int>& stride,
                                          const std::vector<int>& dilation) {
  CHECK_EQ(pad.size(), stride.size());
  CHECK_EQ(pad.size(), dilation.size());
  ConvolutionArrays a{pad, stride, dilation};
  while (a.pad.size() < 2) {
    a.pad.push_back(0);
    a.stride.push_back(1);
    a.dilation.push_back(1);
  }
  return a;
}

PoolingArrays PaddedPoolingArrays(const std::vector<int>& window,
                                  const std::vector<int>& pad,
                                  const std::vector<int>& stride) {
  CHECK_EQ(window.size(), pad.size());
  CHECK_EQ(window.size(), stride.size());
  PoolingArrays a{window, pad, stride};
  while (a.window.size() < 2) {
    a.window.push_back(1);
    a.pad.push_back(0);
    a.stride.push_back(1);
  }
  return a;
}

ConvolutionDims ConvolutionTensorDims(int num, int in_channels,
                                      int out_channels, int groups,
                                      const std::vector<int>& in_spatial,
                                      const std::vector<int>& kernel,
                                      const std::vector<int>& out_spatial,
                                      int bias_channels) {
  POSEIDON_REQUIRE(
      groups >= 1 && in_channels % groups == 0 && out_channels % groups == 0,
      ShapeError, "cuDNN convolution: ", groups, " groups do not divide ",
      in_channels, " input and ", out_channels, " output channels");
  POSEIDON_REQUIRE(
      in_spatial.size() == kernel.size() && out_spatial.size() == kernel.size(),
      ShapeError, "cuDNN convolution: ", in_spatial.size(), " input, ",
      kernel.size(), " kernel and ", out_spatial.size(),
      " output spatial axes");
  ConvolutionDims d;
  d.x = {num, in_channels};
  d.x.insert(d.x.end(), in_spatial.begin(), in_spatial.end());
  d.w = {out_channels, in_channels / groups};
  d.w.insert(d.w.end(), kernel.begin(), kernel.end());
  d.y = {num, out_channels};
  d.y.insert(d.y.end(), out_spatial.begin(), out_spatial.end());
  d.bias.assign(d.x.size(), 1);
  d.bias[1] = bias_channels;
  return d;
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
  const std::vector<int> padded = PaddedFilterDims(dims);
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
  const ConvolutionArrays a = PaddedConvolutionArrays(pad, stride, dilation);
  POSEIDON_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(
      desc_, static_cast<int>(a.pad.size()), a.pad.data(), a.stride.data(),
      a.dilation.data(), CUDNN_CROSS_CORRELATION, compute_type));
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
  const PoolingArrays a = PaddedPoolingArrays(window, pad, stride);
  POSEIDON_CUDNN_CHECK(cudnnSetPoolingNdDescriptor(
      desc_, mode, CUDNN_PROPAGATE_NAN, static_cast<int>(a.window.size()),
      a.window.data(), a.pad.data(), a.stride.data()));
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
