// BaseConvolutionLayer on either device: the passes' dispatch (CPU pass,
// cuDNN, portable GEMM path) and the portable im2col + GEMM path itself,
// written once against math::gemm(dev, ...) and for_each(dev, ...).
#include <algorithm>
#include <cstddef>
#include <string>

#include "poseidon/kernels/im2col_kernels.hpp"
#include "poseidon/layers/base_conv_layer.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/gpu_engine.hpp"
#include "poseidon/util/im2col.hpp"
#include "poseidon/util/math_functions.hpp"

#ifndef CPU_ONLY
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {

// Note [Portable GEMM path]
// The GPU's im2col path is the CPU's batched arrangement (Note [Batched
// im2col] in base_conv_layer.cpp) with the element-wise steps as functors:
// a chunk of B images is unfolded side by side into one K x (B * S) column
// matrix (Im2col2D / Im2colND), each group is one GEMM into a
// channel-major O x (B * S) buffer, and ChannelMajorToImages puts the
// result in (B, O, S) order (a lone image's GEMM writes the top directly,
// and a lone 1x1 image is its own column matrix). Backward turns the top
// diff channel-major once per chunk, accumulates the weight gradient with
// one GEMM per group, and computes the column gradient with one GEMM per
// group and gathers it onto the images (Col2im2D / Col2imND: each image
// element sums the entries that read it, in the CPU's order; no atomics).
// B is as many images as fit in max_buffer_bytes (col and buffer), at
// least one; the scratch is gpu::Workspace on the GPU. Everything is
// deterministic. On the CPU the same code runs with Algorithm::kPortable.
template <typename Dtype>
void BaseConvolutionLayer<Dtype>::ChoosePortable() {
  const ConvolutionParameter& p = this->layer_param_.convolution_param();
  // util/gpu_engine.hpp's rule; the test-only portable algorithm always
  // takes the GEMM path.
  const bool supported =
      (num_spatial_axes_ == 2 || num_spatial_axes_ == 3) && !force_nd_im2col_;
  gpu_engine_ =
      algorithm_ != Algorithm::kPortable &&
              ChooseGpuEngine(
                  StrCat(this->type(), " layer '", this->layer_param_.name(),
                         "'"),
                  p.engine(), supported,
                  "cuDNN takes 2-D and 3-D convolutions without "
                  "force_nd_im2col") == poseidon::GpuEngine::kCudnn
          ? GpuEngine::kCudnn
          : GpuEngine::kGemm;
  // Per image: its columns and its channel-major output.
  const size_t rows = static_cast<size_t>(col_shape_[0]) + conv_out_channels_;
  const size_t per_image =
      sizeof(Dtype) * rows * std::max(conv_out_spatial_dim_, 1);
  const size_t fit = std::max<size_t>(1, max_buffer_bytes_ / per_image);
  portable_images_ = static_cast<int>(
      std::min<size_t>(fit, static_cast<size_t>(std::max(num_, 1))));
  if (bias_term_) {
    const int ones = std::max(std::max(top_spatial_dim_, num_), 1);
    if (bias_ones_.count() != ones) {
      bias_ones_.Reshape({ones});
      cpu_set(ones, Dtype(1), bias_ones_.mutable_cpu_data());
    }
    bias_sums_.Reshape({std::max(num_ * num_output_, 1)});
  }
}

template <typename Dtype>
bool BaseConvolutionLayer<Dtype>::RunsOnGpu() const {
  return num_spatial_axes_ <= kernels::kMaxIm2colAxes;
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::WarnCpuFallback() const {
  LogWarningOnce(StrCat(this->type(), " layer '", this->layer_param_.name(),
                        "' has ", num_spatial_axes_,
                        " spatial axes; the GPU pass takes at most ",
                        kernels::kMaxIm2colAxes, ", so it runs on the CPU"));
}

template <typename Dtype>
Dtype* BaseConvolutionLayer<Dtype>::PortableScratch(Poseidon::Brew dev,
                                                    size_t count) {
  if (dev == Poseidon::GPU) {
#ifndef CPU_ONLY
    return static_cast<Dtype*>(gpu::Workspace(sizeof(Dtype) * count));
#else
    NO_GPU;
#endif
  }
  if (portable_scratch_.size() < count) portable_scratch_.resize(count);
  return portable_scratch_.data();
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::ConvForward(Poseidon::Brew dev,
                                              const Dtype* input,
                                              const Dtype* weights,
                                              Dtype* output) {
  if (dev == Poseidon::CPU && algorithm_ != Algorithm::kPortable) {
    CpuConvForward(input, weights, output);
    return;
  }
  if (num_ == 0) return;
  if (dev == Poseidon::GPU && gpu_engine_ == GpuEngine::kCudnn &&
      CudnnForward(input, weights, output)) {
    return;
  }
  PortableForward(dev, input, weights, output);
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::ConvBackward(Poseidon::Brew dev,
                                               const Dtype* input,
                                               const Dtype* output_diff,
                                               const Dtype* weights,
                                               Dtype* weight_diff,
                                               Dtype* input_diff) {
  if (dev == Poseidon::CPU && algorithm_ != Algorithm::kPortable) {
    CpuConvBackward(input, output_diff, weights, weight_diff, input_diff);
    return;
  }
  if (num_ == 0) return;
  if (dev == Poseidon::GPU && gpu_engine_ == GpuEngine::kCudnn) {
    if (weight_diff != nullptr &&
        CudnnBackwardFilter(input, output_diff, weight_diff)) {
      weight_diff = nullptr;
    }
    if (input_diff != nullptr &&
        CudnnBackwardData(output_diff, weights, input_diff)) {
      input_diff = nullptr;
    }
  }
  if (weight_diff == nullptr && input_diff == nullptr) return;
  PortableBackward(dev, input, output_diff, weights, weight_diff, input_diff);
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::AddBias(Poseidon::Brew dev,
                                          const Dtype* bias, Dtype* top) {
  if (dev == Poseidon::CPU && algorithm_ != Algorithm::kPortable) {
    CpuAddBias(bias, top);
    return;
  }
  if (num_ == 0) return;
  if (dev == Poseidon::GPU && gpu_engine_ == GpuEngine::kCudnn) {
    CudnnAddBias(bias, top);
    return;
  }
  PortableAddBias(dev, bias, top);
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::AccumulateBiasDiff(Poseidon::Brew dev,
                                                     const Dtype* top_diff,
                                                     Dtype* bias_diff) {
  if (dev == Poseidon::CPU && algorithm_ != Algorithm::kPortable) {
    CpuAccumulateBiasDiff(top_diff, bias_diff);
    return;
  }
  if (num_ == 0) return;
  if (dev == Poseidon::GPU && gpu_engine_ == GpuEngine::kCudnn) {
    CudnnBiasDiff(top_diff, bias_diff);
    return;
  }
  PortableBiasDiff(dev, top_diff, bias_diff);
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::PortableForward(Poseidon::Brew dev,
                                                  const Dtype* input,
                                                  const Dtype* weights,
                                                  Dtype* output) {
  const int O = conv_out_channels_;
  const int out_per_group = O / group_;
  const int K = kernel_dim_;
  const int S = conv_out_spatial_dim_;
  const bool nd = force_nd_im2col_ || num_spatial_axes_ != 2;
  const size_t w_step = static_cast<size_t>(out_per_group) * K;
  const size_t col_count =
      static_cast<size_t>(col_shape_[0]) * portable_images_ * S;
  Dtype* scratch = PortableScratch(
      dev, col_count + static_cast<size_t>(O) * portable_images_ * S);
  Dtype* buf = scratch + col_count;
  for (int n0 = 0; n0 < num_; n0 += portable_images_) {
    const int B = std::min(portable_images_, num_ - n0);
    const int columns = B * S;
    const Dtype* in = input + static_cast<size_t>(n0) * conv_input_dim_;
    Dtype* out = output + static_cast<size_t>(n0) * conv_output_dim_;
    const Dtype* col = in;
    if (!(is_1x1_ && B == 1)) {
      const kernels::Im2colShape shape = MakeIm2colShape(
          num_spatial_axes_, conv_input_shape_.data(), kernel_shape_.data(),
          pad_.data(), stride_.data(), dilation_.data(), B,
          ColumnLayout::kSideBySide);
      im2col_on(dev, shape, nd, in, scratch);
      col = scratch;
    }
    Dtype* dst = B == 1 ? out : buf;
    for (int g = 0; g < group_; ++g) {
      math::gemm<Dtype>(dev, CblasNoTrans, CblasNoTrans, out_per_group,
                        columns, K, Dtype(1), weights + g * w_step,
                        col + static_cast<size_t>(g) * K * columns, Dtype(0),
                        dst + static_cast<size_t>(g) * out_per_group * columns);
    }
    if (B > 1) {
      for_each(dev, O * columns,
               kernels::ChannelMajorToImages<Dtype>{buf, out, B, O, S});
    }
  }
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::PortableBackward(
    Poseidon::Brew dev, const Dtype* input, const Dtype* output_diff,
    const Dtype* weights, Dtype* weight_diff, Dtype* input_diff) {
  const int O = conv_out_channels_;
  const int out_per_group = O / group_;
  const int K = kernel_dim_;
  const int S = conv_out_spatial_dim_;
  const bool nd = force_nd_im2col_ || num_spatial_axes_ != 2;
  const size_t w_step = static_cast<size_t>(out_per_group) * K;
  const size_t col_count =
      static_cast<size_t>(col_shape_[0]) * portable_images_ * S;
  Dtype* scratch = PortableScratch(
      dev, col_count + static_cast<size_t>(O) * portable_images_ * S);
  Dtype* buf = scratch + col_count;
  for (int n0 = 0; n0 < num_; n0 += portable_images_) {
    const int B = std::min(portable_images_, num_ - n0);
    const int columns = B * S;
    const bool own_columns = !(is_1x1_ && B == 1);
    const kernels::Im2colShape shape = MakeIm2colShape(
        num_spatial_axes_, conv_input_shape_.data(), kernel_shape_.data(),
        pad_.data(), stride_.data(), dilation_.data(), B,
        ColumnLayout::kSideBySide);
    const Dtype* od =
        output_diff + static_cast<size_t>(n0) * conv_output_dim_;
    if (B > 1) {
      for_each(dev, O * columns,
               kernels::ImagesToChannelMajor<Dtype>{od, buf, B, O, S});
      od = buf;
    }
    if (weight_diff != nullptr) {
      const Dtype* in = input + static_cast<size_t>(n0) * conv_input_dim_;
      const Dtype* col = in;
      if (own_columns) {
        im2col_on(dev, shape, nd, in, scratch);
        col = scratch;
      }
      for (int g = 0; g < group_; ++g) {
        math::gemm<Dtype>(
            dev, CblasNoTrans, CblasTrans, out_per_group, K, columns,
            Dtype(1), od + static_cast<size_t>(g) * out_per_group * columns,
            col + static_cast<size_t>(g) * K * columns, Dtype(1),
            weight_diff + g * w_step);
      }
    }
    if (input_diff != nullptr) {
      Dtype* in_diff = input_diff + static_cast<size_t>(n0) * conv_input_dim_;
      Dtype* col_diff = own_columns ? scratch : in_diff;
      for (int g = 0; g < group_; ++g) {
        math::gemm<Dtype>(
            dev, CblasTrans, CblasNoTrans, K, columns, out_per_group,
            Dtype(1), weights + g * w_step,
            od + static_cast<size_t>(g) * out_per_group * columns, Dtype(0),
            col_diff + static_cast<size_t>(g) * K * columns);
      }
      if (own_columns) col2im_on(dev, shape, nd, col_diff, in_diff);
    }
  }
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::PortableAddBias(Poseidon::Brew dev,
                                                  const Dtype* bias,
                                                  Dtype* top) {
  for_each(dev, num_ * num_output_ * top_spatial_dim_,
           kernels::AddChannelBias<Dtype>{bias, top, num_output_,
                                          top_spatial_dim_});
}

// bias_diff += the per-channel sums of top_diff: the (num * O) x S top diff
// times ones gives per-image sums, whose transpose times ones adds them up
// (two gemv, so no atomics and no per-image calls).
template <typename Dtype>
void BaseConvolutionLayer<Dtype>::PortableBiasDiff(Poseidon::Brew dev,
                                                   const Dtype* top_diff,
                                                   Dtype* bias_diff) {
  const Dtype* ones = bias_ones_.data_on(dev);
  Dtype* sums = bias_sums_.mutable_data_on(dev);
  math::gemv<Dtype>(dev, CblasNoTrans, num_ * num_output_, top_spatial_dim_,
                    Dtype(1), top_diff, ones, Dtype(0), sums);
  math::gemv<Dtype>(dev, CblasTrans, num_, num_output_, Dtype(1), sums, ones,
                    Dtype(1), bias_diff);
}

// The rest of the class is instantiated in base_conv_layer.cpp.
#define POSEIDON_INSTANTIATE_GPU_PASSES(Dtype)                                 \
  template void BaseConvolutionLayer<Dtype>::ChoosePortable();                 \
  template bool BaseConvolutionLayer<Dtype>::RunsOnGpu() const;                \
  template void BaseConvolutionLayer<Dtype>::WarnCpuFallback() const;          \
  template Dtype* BaseConvolutionLayer<Dtype>::PortableScratch(Poseidon::Brew, \
                                                               size_t);        \
  template void BaseConvolutionLayer<Dtype>::ConvForward(                      \
      Poseidon::Brew, const Dtype*, const Dtype*, Dtype*);                     \
  template void BaseConvolutionLayer<Dtype>::ConvBackward(                     \
      Poseidon::Brew, const Dtype*, const Dtype*, const Dtype*, Dtype*,        \
      Dtype*);                                                                 \
  template void BaseConvolutionLayer<Dtype>::AddBias(Poseidon::Brew,           \
                                                     const Dtype*, Dtype*);    \
  template void BaseConvolutionLayer<Dtype>::AccumulateBiasDiff(               \
      Poseidon::Brew, const Dtype*, Dtype*);                                   \
  template void BaseConvolutionLayer<Dtype>::PortableForward(                  \
      Poseidon::Brew, const Dtype*, const Dtype*, Dtype*);                     \
  template void BaseConvolutionLayer<Dtype>::PortableBackward(                 \
      Poseidon::Brew, const Dtype*, const Dtype*, const Dtype*, Dtype*,        \
      Dtype*);                                                                 \
  template void BaseConvolutionLayer<Dtype>::PortableAddBias(                  \
      Poseidon::Brew, const Dtype*, Dtype*);                                   \
  template void BaseConvolutionLayer<Dtype>::PortableBiasDiff(                 \
      Poseidon::Brew, const Dtype*, Dtype*);
POSEIDON_INSTANTIATE_GPU_PASSES(float)
POSEIDON_INSTANTIATE_GPU_PASSES(double)
#undef POSEIDON_INSTANTIATE_GPU_PASSES

}  // namespace poseidon
