// CudnnConv: the convolution, its two gradients and the bias as cuDNN calls
// on the thread's handle: descriptors built once per shape and GPU
// settings, algorithms measured once per shape and process (Note
// [Convolution algorithm choice] in util/cudnn_conv_algo.hpp), workspace
// from gpu::Workspace. In conv space x is the im2col side (the
// Convolution's bottom, the Deconvolution's top) and y the GEMM side. In
// builds without cuDNN the table never chooses it (the engine rule gives
// the GEMM path) and its passes are empty.
#include <memory>
#include <vector>

#include "algorithms.hpp"
#include "poseidon/util/gpu_engine.hpp"

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
  // Per pass (cudnn::ConvPass): measured yet, and the choice.
  bool known[3] = {false, false, false};
  cudnn::ConvAlgoChoice choice[3];

  cudnn::ConvDescriptors descriptors() const {
    return {x.get(), w.get(), conv.get(), y.get()};
  }
  // The pass's algorithm, measured on `buffers` at its first call for the
  // shape; invalid when none qualified.
  const cudnn::ConvAlgoChoice& Choice(cudnn::ConvPass pass,
                                      const cudnn::ConvSearchBuffers& buffers) {
    const int p = static_cast<int>(pass);
    if (!known[p]) {
      cudnn::ConvAlgoKey k = key;
      k.pass = pass;
      choice[p] = cudnn::FindConvAlgo(k, descriptors(), buffers);
      known[p] = true;
    }
    return choice[p];
  }
  // The top's descriptor (the bias side).
  const cudnn::TensorDescriptor& top(bool top_is_input) const {
    return top_is_input ? x : y;
  }
#endif
};

namespace {

bool BuiltState(const CudnnConvState& st) {
#ifdef USE_CUDNN
  return st.built;
#else
  return true;
#endif
}

#ifdef USE_CUDNN
void* WorkspaceFor(const cudnn::ConvAlgoChoice& c) {
  return c.workspace > 0 ? gpu::Workspace(c.workspace) : nullptr;
}
#endif

}  // namespace

template <typename Dtype>
CudnnConv<Dtype>::CudnnConv(ConvAlgorithm<Dtype>* fallback)
    : fallback_(fallback) {}

template <typename Dtype>
CudnnConv<Dtype>::~CudnnConv() = default;

template <typename Dtype>
const char* CudnnConv<Dtype>::Reshape(const ConvShape& s,
                                      const ConvOptions& options) {
  s_ = &s;
  if (options.mode == ConvMode::kPortable) {
    return "the GPU im2col path asked for";
  }
  // util/gpu_engine.hpp's rule (it warns once where CUDNN was asked for
  // and cannot run).
  const bool supported = (s.num_spatial_axes == 2 || s.num_spatial_axes == 3) &&
                         !s.force_nd_im2col;
  if (ChooseGpuEngine(options.who, options.engine, supported,
                      "cuDNN takes 2-D and 3-D convolutions without "
                      "force_nd_im2col") != GpuEngine::kCudnn) {
    return supported ? "engine CAFFE, or a build without cuDNN"
                     : "cuDNN takes 2-D and 3-D convolutions without "
                       "force_nd_im2col";
  }
  // The descriptors are built here in GPU mode, else at the first pass.
  if (Poseidon::mode() == Poseidon::GPU) State();
  return nullptr;
}

template <typename Dtype>
CudnnConvState& CudnnConv<Dtype>::State() {
  if (state_ == nullptr) state_ = std::make_unique<CudnnConvState>();
  CudnnConvState& st = *state_;
#ifdef USE_CUDNN
  const ConvShape& s = *s_;
  if (s.num == 0) return st;
  // The spatial dims follow the channels in input_shape (im2col side) and
  // the column count in col_shape (GEMM side); the bias is on the top's
  // num_output channels.
  const cudnn::ConvolutionDims dims = cudnn::ConvolutionTensorDims(
      s.num, s.in_channels, s.out_channels, s.group,
      std::vector<int>(s.input_shape.begin() + 1, s.input_shape.end()),
      s.kernel, std::vector<int>(s.col_shape.begin() + 1, s.col_shape.end()),
      s.num_output);
  cudnn::ConvAlgoKey key;
  key.device = Poseidon::device();
  key.data_type = cudnn::DataType<Dtype>();
  key.input = dims.x;
  key.output = dims.y;
  key.filter = dims.w;
  key.pad = s.pad;
  key.stride = s.stride;
  key.dilation = s.dilation;
  key.groups = s.group;
  const gpu::Settings settings = gpu::GetSettings();
  key.deterministic = settings.deterministic;
  key.allow_tf32 = settings.allow_tf32;
  key.workspace_limit = settings.workspace_limit;
  // Reshape runs before every Forward: nothing to do while nothing changed.
  if (st.built && st.key == key) return st;

  const cudnnDataType_t type = cudnn::DataType<Dtype>();
  st.x.Set(cudnn::PackedLayout(dims.x), type);
  st.y.Set(cudnn::PackedLayout(dims.y), type);
  st.w.Set(dims.w, type);
  st.conv.Set(s.pad, s.stride, s.dilation, s.group, type);
  st.bias.Set(cudnn::PackedLayout(dims.bias), type);
  st.key = key;
  st.built = true;
  for (bool& k : st.known) k = false;
#endif
  return st;
}

template <typename Dtype>
CudnnConvState& CudnnConv<Dtype>::Built() {
  // Built by Reshape in GPU mode; a layer last reshaped in CPU mode builds
  // them at its first pass.
  if (state_ == nullptr || !BuiltState(*state_)) State();
  CHECK(BuiltState(*state_)) << "cuDNN convolution: no descriptors";
  return *state_;
}

template <typename Dtype>
void CudnnConv<Dtype>::Forward(Poseidon::Brew dev, const Dtype* input,
                               const Dtype* weights, Dtype* output) {
  if (s_->num == 0) return;
#ifdef USE_CUDNN
  CudnnConvState& st = Built();
  cudnn::ConvSearchBuffers b;
  b.x = input;
  b.w = weights;
  b.y = output;
  const cudnn::ConvAlgoChoice& c = st.Choice(cudnn::ConvPass::kForward, b);
  if (c.valid()) {
    POSEIDON_CUDNN_CHECK(cudnnConvolutionForward(
        gpu::Cudnn(), cudnn::Scalars<Dtype>::one(), st.x.get(), input,
        st.w.get(), weights, st.conv.get(),
        static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), WorkspaceFor(c),
        c.workspace, cudnn::Scalars<Dtype>::zero(), st.y.get(), output));
    return;
  }
#endif
  fallback_->Forward(dev, input, weights, output);
}

template <typename Dtype>
void CudnnConv<Dtype>::Backward(Poseidon::Brew dev, const Dtype* input,
                                const Dtype* output_diff, const Dtype* weights,
                                Dtype* weight_diff, Dtype* input_diff) {
  if (s_->num == 0) return;
#ifdef USE_CUDNN
  CudnnConvState& st = Built();
  if (weight_diff != nullptr) {
    cudnn::ConvSearchBuffers b;
    b.x = input;
    b.dy = output_diff;
    const cudnn::ConvAlgoChoice& c =
        st.Choice(cudnn::ConvPass::kBackwardFilter, b);
    if (c.valid()) {
      // beta 1: parameter gradients accumulate.
      POSEIDON_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
          gpu::Cudnn(), cudnn::Scalars<Dtype>::one(), st.x.get(), input,
          st.y.get(), output_diff, st.conv.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), WorkspaceFor(c),
          c.workspace, cudnn::Scalars<Dtype>::one(), st.w.get(), weight_diff));
      weight_diff = nullptr;
    }
  }
  if (input_diff != nullptr) {
    cudnn::ConvSearchBuffers b;
    b.w = weights;
    b.dy = output_diff;
    b.dx = input_diff;
    const cudnn::ConvAlgoChoice& c =
        st.Choice(cudnn::ConvPass::kBackwardData, b);
    if (c.valid()) {
      // beta 0: the input gradient is overwritten.
      POSEIDON_CUDNN_CHECK(cudnnConvolutionBackwardData(
          gpu::Cudnn(), cudnn::Scalars<Dtype>::one(), st.w.get(), weights,
          st.y.get(), output_diff, st.conv.get(),
          static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), WorkspaceFor(c),
          c.workspace, cudnn::Scalars<Dtype>::zero(), st.x.get(), input_diff));
      input_diff = nullptr;
    }
  }
#endif
  // What no cuDNN algorithm qualified for.
  if (weight_diff == nullptr && input_diff == nullptr) return;
  fallback_->Backward(dev, input, output_diff, weights, weight_diff,
                      input_diff);
}

template <typename Dtype>
void CudnnConv<Dtype>::AddBias(Poseidon::Brew, const Dtype* bias, Dtype* top) {
  if (s_->num == 0) return;
#ifdef USE_CUDNN
  CudnnConvState& st = Built();
  POSEIDON_CUDNN_CHECK(cudnnAddTensor(
      gpu::Cudnn(), cudnn::Scalars<Dtype>::one(), st.bias.get(), bias,
      cudnn::Scalars<Dtype>::one(), st.top(s_->top_is_input).get(), top));
#endif
}

template <typename Dtype>
void CudnnConv<Dtype>::AccumulateBiasDiff(Poseidon::Brew, const Dtype* top_diff,
                                          Dtype* bias_diff) {
  if (s_->num == 0) return;
#ifdef USE_CUDNN
  CudnnConvState& st = Built();
  // beta 1: parameter gradients accumulate.
  POSEIDON_CUDNN_CHECK(cudnnConvolutionBackwardBias(
      gpu::Cudnn(), cudnn::Scalars<Dtype>::one(),
      st.top(s_->top_is_input).get(), top_diff, cudnn::Scalars<Dtype>::one(),
      st.bias.get(), bias_diff));
#endif
}

template class CudnnConv<float>;
template class CudnnConv<double>;

}  // namespace poseidon
