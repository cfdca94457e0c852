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
