// BaseConvolutionLayer's cuDNN path: descriptors built once per shape (in
// Reshape), algorithms measured once per shape and process (Note
// [Convolution algorithm choice] in util/cudnn_conv_algo.hpp), and the
// convolution, its two gradients and the bias as cuDNN calls on the
// thread's handle, with workspace from gpu::Workspace. In conv space, x is
// the im2col side (the Convolution's bottom, the Deconvolution's top) and y
// the GEMM side. In builds without cuDNN the functions are never reached
// (ChoosePortable picks the GEMM path) and are empty.
#include <memory>
#include <vector>

#include "poseidon/layers/base_conv_layer.hpp"

#ifdef USE_CUDNN
#include "poseidon/util/cudnn.hpp"
#include "poseidon/util/cudnn_conv_algo.hpp"
#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {

struct CudnnConvState {
#ifdef USE_CUDNN
  cudnn::TensorDescriptor x, y, bias;
  cudnn::FilterDescriptor w;
  cudnn::ConvolutionDescriptor conv;
  // What the descriptors describe (pass kForward; the other passes differ
  // only in it). Valid when `built`.
  cudnn::ConvAlgoKey key;
  bool built = false;
  // Per pass: measured yet, and the choice.
  bool forward_known = false, data_known = false, filter_known = false;
  cudnn::ConvAlgoChoice forward, data, filter;

  cudnn::ConvDescriptors descriptors() const {
    return {x.get(), w.get(), conv.get(), y.get()};
  }
  cudnn::ConvAlgoKey KeyFor(cudnn::ConvPass pass) const {
    cudnn::ConvAlgoKey k = key;
    k.pass = pass;
    return k;
  }
#endif
};

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::CudnnReshape() {
#ifdef USE_CUDNN
  if (gpu_engine_ != GpuEngine::kCudnn || num_ == 0) return;
  if (cudnn_ == nullptr) cudnn_ = std::make_shared<CudnnConvState>();
  CudnnConvState& st = *cudnn_;
  // The spatial dims follow the channels in conv_input_shape_ (im2col
  // side) and the column count in col_shape_ (GEMM side); the bias is on
  // the top's num_output channels.
  const cudnn::ConvolutionDims dims = cudnn::ConvolutionTensorDims(
      num_, conv_in_channels_, conv_out_channels_, group_,
      std::vector<int>(conv_input_shape_.begin() + 1, conv_input_shape_.end()),
      kernel_shape_, std::vector<int>(col_shape_.begin() + 1, col_shape_.end()),
      num_output_);
  cudnn::ConvAlgoKey key;
  key.device = Poseidon::device();
  key.data_type = cudnn::DataType<Dtype>();
  key.input = dims.x;
  key.output = dims.y;
  key.filter = dims.w;
  key.pad = pad_;
  key.stride = stride_;
  key.dilation = dilation_;
  key.groups = group_;
  const gpu::Settings settings = gpu::GetSettings();
  key.deterministic = settings.deterministic;
  key.allow_tf32 = settings.allow_tf32;
  key.workspace_limit = settings.workspace_limit;
  // Reshape runs before every Forward: nothing to do while nothing changed.
  if (st.built && st.key == key) return;

  const cudnnDataType_t type = cudnn::DataType<Dtype>();
  st.x.Set(cudnn::PackedLayout(dims.x), type);
  st.y.Set(cudnn::PackedLayout(dims.y), type);
  st.w.Set(dims.w, type);
  st.conv.Set(pad_, stride_, dilation_, group_, type);
  st.bias.Set(cudnn::PackedLayout(dims.bias), type);
  st.key = key;
  st.built = true;
  st.forward_known = st.data_known = st.filter_known = false;
#endif
}

template <typename Dtype>
bool BaseConvolutionLayer<Dtype>::CudnnForward(const Dtype* input,
                                               const Dtype* weights,
                                               Dtype* output) {
#ifdef USE_CUDNN
  // Built by Reshape in GPU mode; a layer last reshaped in CPU mode builds
  // them now.
  if (cudnn_ == nullptr || !cudnn_->built) CudnnReshape();
  CHECK(cudnn_ != nullptr && cudnn_->built)
      << this->type() << ": no cuDNN descriptors";
  CudnnConvState& st = *cudnn_;
  if (!st.forward_known) {
    cudnn::ConvSearchBuffers b;
    b.x = input;
    b.w = weights;
    b.y = output;
    st.forward = cudnn::FindConvAlgo(st.KeyFor(cudnn::ConvPass::kForward),
                                     st.descriptors(), b);
    st.forward_known = true;
  }
  if (!st.forward.valid()) return false;
  void* workspace =
      st.forward.workspace > 0 ? gpu::Workspace(st.forward.workspace) : nullptr;
  POSEIDON_CUDNN_CHECK(cudnnConvolutionForward(
      gpu::Cudnn(), cudnn::Scalars<Dtype>::one(), st.x.get(), input,
      st.w.get(), weights, st.conv.get(),
      static_cast<cudnnConvolutionFwdAlgo_t>(st.forward.algo), workspace,
      st.forward.workspace, cudnn::Scalars<Dtype>::zero(), st.y.get(),
      output));
  return true;
#else
  return false;
#endif
}

template <typename Dtype>
bool BaseConvolutionLayer<Dtype>::CudnnBackwardFilter(const Dtype* input,
                                                      const Dtype* output_diff,
                                                      Dtype* weight_diff) {
#ifdef USE_CUDNN
  // Built by Reshape in GPU mode; a layer last reshaped in CPU mode builds
  // them now.
  if (cudnn_ == nullptr || !cudnn_->built) CudnnReshape();
  CHECK(cudnn_ != nullptr && cudnn_->built)
      << this->type() << ": no cuDNN descriptors";
  CudnnConvState& st = *cudnn_;
  if (!st.filter_known) {
    cudnn::ConvSearchBuffers b;
    b.x = input;
    b.dy = output_diff;
    st.filter = cudnn::FindConvAlgo(
        st.KeyFor(cudnn::ConvPass::kBackwardFilter), st.descriptors(), b);
    st.filter_known = true;
  }
  if (!st.filter.valid()) return false;
  void* workspace =
      st.filter.workspace > 0 ? gpu::Workspace(st.filter.workspace) : nullptr;
  // beta 1: parameter gradients accumulate.
  POSEIDON_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      gpu::Cudnn(), cudnn::Scalars<Dtype>::one(), st.x.get(), input,
      st.y.get(), output_diff, st.conv.get(),
      static_cast<cudnnConvolutionBwdFilterAlgo_t>(st.filter.algo), workspace,
      st.filter.workspace, cudnn::Scalars<Dtype>::one(), st.w.get(),
      weight_diff));
  return true;
#else
  return false;
#endif
}

template <typename Dtype>
bool BaseConvolutionLayer<Dtype>::CudnnBackwardData(const Dtype* output_diff,
                                                    const Dtype* weights,
                                                    Dtype* input_diff) {
#ifdef USE_CUDNN
  // Built by Reshape in GPU mode; a layer last reshaped in CPU mode builds
  // them now.
  if (cudnn_ == nullptr || !cudnn_->built) CudnnReshape();
  CHECK(cudnn_ != nullptr && cudnn_->built)
      << this->type() << ": no cuDNN descriptors";
  CudnnConvState& st = *cudnn_;
  if (!st.data_known) {
    cudnn::ConvSearchBuffers b;
    b.w = weights;
    b.dy = output_diff;
    b.dx = input_diff;
    st.data = cudnn::FindConvAlgo(st.KeyFor(cudnn::ConvPass::kBackwardData),
                                  st.descriptors(), b);
    st.data_known = true;
  }
  if (!st.data.valid()) return false;
  void* workspace =
      st.data.workspace > 0 ? gpu::Workspace(st.data.workspace) : nullptr;
  // beta 0: the input gradient is overwritten.
  POSEIDON_CUDNN_CHECK(cudnnConvolutionBackwardData(
      gpu::Cudnn(), cudnn::Scalars<Dtype>::one(), st.w.get(), weights,
      st.y.get(), output_diff, st.conv.get(),
      static_cast<cudnnConvolutionBwdDataAlgo_t>(st.data.algo), workspace,
      st.data.workspace, cudnn::Scalars<Dtype>::zero(), st.x.get(),
      input_diff));
  return true;
#else
  return false;
#endif
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::CudnnAddBias(const Dtype* bias, Dtype* top) {
#ifdef USE_CUDNN
  // Built by Reshape in GPU mode; a layer last reshaped in CPU mode builds
  // them now.
  if (cudnn_ == nullptr || !cudnn_->built) CudnnReshape();
  CHECK(cudnn_ != nullptr && cudnn_->built)
      << this->type() << ": no cuDNN descriptors";
  const CudnnConvState& st = *cudnn_;
  const cudnn::TensorDescriptor& top_desc = reverse_dimensions() ? st.x : st.y;
  POSEIDON_CUDNN_CHECK(cudnnAddTensor(
      gpu::Cudnn(), cudnn::Scalars<Dtype>::one(), st.bias.get(), bias,
      cudnn::Scalars<Dtype>::one(), top_desc.get(), top));
#endif
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::CudnnBiasDiff(const Dtype* top_diff,
                                                Dtype* bias_diff) {
#ifdef USE_CUDNN
  // Built by Reshape in GPU mode; a layer last reshaped in CPU mode builds
  // them now.
  if (cudnn_ == nullptr || !cudnn_->built) CudnnReshape();
  CHECK(cudnn_ != nullptr && cudnn_->built)
      << this->type() << ": no cuDNN descriptors";
  const CudnnConvState& st = *cudnn_;
  const cudnn::TensorDescriptor& top_desc = reverse_dimensions() ? st.x : st.y;
  // beta 1: parameter gradients accumulate.
  POSEIDON_CUDNN_CHECK(cudnnConvolutionBackwardBias(
      gpu::Cudnn(), cudnn::Scalars<Dtype>::one(), top_desc.get(), top_diff,
      cudnn::Scalars<Dtype>::one(), st.bias.get(), bias_diff));
#endif
}

// The rest of the class is instantiated in base_conv_layer.cpp.
#define POSEIDON_INSTANTIATE_CUDNN(Dtype)                                  \
  template void BaseConvolutionLayer<Dtype>::CudnnReshape();               \
  template bool BaseConvolutionLayer<Dtype>::CudnnForward(                 \
      const Dtype*, const Dtype*, Dtype*);                                 \
  template bool BaseConvolutionLayer<Dtype>::CudnnBackwardFilter(          \
      const Dtype*, const Dtype*, Dtype*);                                 \
  template bool BaseConvolutionLayer<Dtype>::CudnnBackwardData(            \
      const Dtype*, const Dtype*, Dtype*);                                 \
  template void BaseConvolutionLayer<Dtype>::CudnnAddBias(const Dtype*,    \
                                                          Dtype*);         \
  template void BaseConvolutionLayer<Dtype>::CudnnBiasDiff(const Dtype*,   \
                                                           Dtype*);
POSEIDON_INSTANTIATE_CUDNN(float)
POSEIDON_INSTANTIATE_CUDNN(double)
#undef POSEIDON_INSTANTIATE_CUDNN

}  // namespace poseidon
