// cuDNN descriptors from Caffe's shapes. Two halves:
//   - layouts (every build): the dims and strides a blob (or a view of it)
//     hands to cuDNN, computed in plain C++ and unit-tested on the CPU
//     (test_cudnn_host.cpp);
//   - RAII descriptor wrappers (USE_CUDNN builds), each made from a layout
//     or from plain parameters, so layers never call cudnnCreate*/Destroy*
//     themselves.
// cuDNN wants tensors of 4 to 8 dimensions; shorter shapes are padded with
// trailing 1s (a 2-D N x C blob is N x C x 1 x 1).
#ifndef POSEIDON_UTIL_CUDNN_HPP_
#define POSEIDON_UTIL_CUDNN_HPP_

#include <string>
#include <vector>

#ifdef USE_CUDNN
#include <cudnn.h>
#endif

namespace poseidon {
namespace cudnn {

constexpr int kMinDims = 4;
constexpr int kMaxDims = 8;

// What a tensor descriptor says: dims[i] elements along axis i, stride[i]
// elements apart.
struct TensorLayout {
  std::vector<int> dims;
  std::vector<int> strides;
  bool operator==(const TensorLayout& o) const {
    return dims == o.dims && strides == o.strides;
  }
  std::string ToString() const;  // "2x3x4x5 / 60,20,5,1"
};

// `shape` as a packed (row-major, contiguous) tensor, padded to kMinDims.
// Throws ShapeError for more than kMaxDims axes or a dimension < 1 where
// cuDNN needs one (an empty blob has no descriptor).
TensorLayout PackedLayout(const std::vector<int>& shape);

// Filter dims (out_channels, in_channels per group, kernel...) as
// cudnnSetFilterNdDescriptor takes them: padded with trailing 1s to
// kMinDims, as tensors are, so a 1-D filter K x C x L is K x C x L x 1.
std::vector<int> PaddedFilterDims(const std::vector<int>& dims);

// Per-spatial-axis convolution parameters as cudnnSetConvolutionNdDescriptor
// takes them. cuDNN's convolutions are at least 2-D: a 1-D one gets a
// trailing axis with pad 0, stride 1, dilation 1 (matching the trailing 1
// of its padded tensors and filter).
struct ConvolutionArrays {
  std::vector<int> pad, stride, dilation;
};
ConvolutionArrays PaddedConvolutionArrays(const std::vector<int>& pad,
                                          const std::vector<int>& stride,
                                          const std::vector<int>& dilation);

// Per-spatial-axis pooling parameters as cudnnSetPoolingNdDescriptor takes
// them, at least 2-D: a missing axis gets window 1, pad 0, stride 1.
struct PoolingArrays {
  std::vector<int> window, pad, stride;
};
PoolingArrays PaddedPoolingArrays(const std::vector<int>& window,
                                  const std::vector<int>& pad,
                                  const std::vector<int>& stride);

// The dims of one grouped convolution's descriptors, in convolution terms
// (x input, w filter, y output; for a Deconvolution x is its top and y its
// bottom), with N images and G groups:
//   x    = (N, C_in, in_spatial...)
//   w    = (C_out, C_in / G, kernel...)   cuDNN slices the channels by G
//   y    = (N, C_out, out_spatial...)
//   bias = (1, bias_channels, 1, ...)     with the rank of x
// Unpadded (PackedLayout and PaddedFilterDims pad them). Throws ShapeError
// when G does not divide C_in and C_out, or the spatial lists differ in
// length.
struct ConvolutionDims {
  std::vector<int> x, w, y, bias;
};
ConvolutionDims ConvolutionTensorDims(int num, int in_channels,
                                      int out_channels, int groups,
                                      const std::vector<int>& in_spatial,
                                      const std::vector<int>& kernel,
                                      const std::vector<int>& out_spatial,
                                      int bias_channels);

#ifdef USE_CUDNN

template <typename Dtype>
cudnnDataType_t DataType();

class TensorDescriptor {
 public:
  TensorDescriptor();
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  void Set(const TensorLayout& layout, cudnnDataType_t type);
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

// Filters in Caffe's layout: out_channels x in_channels (per group) x
// kernel dims, NCHW.
class FilterDescriptor {
 public:
  FilterDescriptor();
  ~FilterDescriptor();
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  void Set(const std::vector<int>& dims, cudnnDataType_t type);
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

// Cross-correlation (what Caffe calls convolution) with per-axis pad,
// stride and dilation. Math type: TF32 tensor ops only when
// gpu::GetSettings().allow_tf32, else FMA (full FP32).
class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor();
  ~ConvolutionDescriptor();
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  void Set(const std::vector<int>& pad, const std::vector<int>& stride,
           const std::vector<int>& dilation, int groups,
           cudnnDataType_t compute_type);
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

class PoolingDescriptor {
 public:
  PoolingDescriptor();
  ~PoolingDescriptor();
  PoolingDescriptor(const PoolingDescriptor&) = delete;
  PoolingDescriptor& operator=(const PoolingDescriptor&) = delete;
  void Set(cudnnPoolingMode_t mode, const std::vector<int>& window,
           const std::vector<int>& pad, const std::vector<int>& stride);
  cudnnPoolingDescriptor_t get() const { return desc_; }

 private:
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

class ActivationDescriptor {
 public:
  ActivationDescriptor();
  ~ActivationDescriptor();
  ActivationDescriptor(const ActivationDescriptor&) = delete;
  ActivationDescriptor& operator=(const ActivationDescriptor&) = delete;
  // `coef`: the clipping threshold or ELU alpha where the mode has one.
  void Set(cudnnActivationMode_t mode, double coef = 0.0);
  cudnnActivationDescriptor_t get() const { return desc_; }

 private:
  cudnnActivationDescriptor_t desc_ = nullptr;
};

class LRNDescriptor {
 public:
  LRNDescriptor();
  ~LRNDescriptor();
  LRNDescriptor(const LRNDescriptor&) = delete;
  LRNDescriptor& operator=(const LRNDescriptor&) = delete;
  // Caffe's local_size, alpha, beta, k (cuDNN divides alpha by local_size
  // itself, as Caffe does).
  void Set(unsigned local_size, double alpha, double beta, double k);
  cudnnLRNDescriptor_t get() const { return desc_; }

 private:
  cudnnLRNDescriptor_t desc_ = nullptr;
};

// The scaling factors cuDNN takes by pointer: float for float and half
// tensors, double for double ones.
template <typename Dtype>
struct Scalars {
  static const Dtype* one() {
    static const Dtype v = 1;
    return &v;
  }
  static const Dtype* zero() {
    static const Dtype v = 0;
    return &v;
  }
};

#endif  // USE_CUDNN

}  // namespace cudnn
}  // namespace poseidon

#endif  // POSEIDON_UTIL_CUDNN_HPP_
