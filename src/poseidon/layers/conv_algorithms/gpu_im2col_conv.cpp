// GpuIm2colConv: the GPU's im2col + GEMM path, written once against
// math::gemm(dev, ...) and for_each(dev, ...), so it runs on either device.
#include <algorithm>
#include <cstddef>
#include <string>

#include "algorithms.hpp"
#include "poseidon/kernels/im2col_kernels.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/im2col.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/status.hpp"

#ifndef CPU_ONLY
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {

// Note [Portable GEMM path]
// The GPU's im2col path is the CPU's batched arrangement (Note [Batched
// im2col] in batched_im2col_conv.cpp) with the element-wise steps as functors:
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
// deterministic. On the CPU the same code runs with ConvMode::kPortable.

// Named, not anonymous: the passes' lambdas capture a ChunkPlan, and a
// member function's lambda may not hold a type of internal linkage (GCC's
// -Wsubobject-linkage).
namespace gpu_im2col_detail {

// What both passes share: each group's GEMM sizes and offsets, and the
// scratch split into the column matrix and the channel-major buffer.
template <typename Dtype>
struct ChunkPlan {
  ChunkPlan(const ConvShape& s, int images, Dtype* scratch)
      : O(s.out_channels),
        rows(O / s.group),
        K(s.kernel_dim),
        S(s.out_spatial_dim),
        col(scratch),
        buf(scratch + static_cast<size_t>(s.col_shape[0]) * images * S) {}
  // Group g's weights; its rows of a channel-major matrix (rows x columns
  // per group) and of a column matrix (K x columns per group).
  size_t weights(int g) const { return static_cast<size_t>(g) * rows * K; }
  size_t out_rows(int g, int columns) const {
    return static_cast<size_t>(g) * rows * columns;
  }
  size_t col_rows(int g, int columns) const {
    return static_cast<size_t>(g) * K * columns;
  }

  const int O, rows, K, S;
  Dtype* const col;
  Dtype* const buf;
};

// fn(first image, images) for each chunk of at most `images` of `num`.
template <typename Fn>
void ForEachChunk(int num, int images, Fn&& fn) {
  for (int n0 = 0; n0 < num; n0 += images) fn(n0, std::min(images, num - n0));
}

}  // namespace gpu_im2col_detail

using gpu_im2col_detail::ChunkPlan;
using gpu_im2col_detail::ForEachChunk;

template <typename Dtype>
const char* GpuIm2colConv<Dtype>::Reshape(const ConvShape& s,
                                          const ConvOptions& options) {
  s_ = &s;
  // Per image: its columns and its channel-major output.
  const size_t rows = static_cast<size_t>(s.col_shape[0]) + s.out_channels;
  const size_t per_image =
      sizeof(Dtype) * rows * std::max(s.out_spatial_dim, 1);
  const size_t fit = std::max<size_t>(1, options.max_buffer_bytes / per_image);
  images_ = static_cast<int>(
      std::min<size_t>(fit, static_cast<size_t>(std::max(s.num, 1))));
  if (s.bias_term) {
    const int ones = std::max(std::max(s.top_spatial_dim, s.num), 1);
    if (bias_ones_.count() != ones) {
      bias_ones_.Reshape({ones});
      cpu_set(ones, Dtype(1), bias_ones_.mutable_cpu_data());
    }
    bias_sums_.Reshape({std::max(s.num * s.num_output, 1)});
  }
  return nullptr;  // runs every geometry (the layer keeps geometries with
                   // more than kernels::kMaxIm2colAxes axes on the CPU)
}

template <typename Dtype>
std::string GpuIm2colConv<Dtype>::Description() const {
  return StrCat("GPU im2col + GEMM, ", images_, " images per product");
}

template <typename Dtype>
size_t GpuIm2colConv<Dtype>::workspace_bytes() const {
  return sizeof(Dtype) *
         (static_cast<size_t>(s_->col_shape[0]) + s_->out_channels) * images_ *
         s_->out_spatial_dim;
}

template <typename Dtype>
kernels::Im2colShape GpuIm2colConv<Dtype>::ChunkShape(int images) const {
  const ConvShape& s = *s_;
  return MakeIm2colShape(s.num_spatial_axes, s.input_shape.data(),
                         s.kernel.data(), s.pad.data(), s.stride.data(),
                         s.dilation.data(), images, ColumnLayout::kSideBySide);
}

template <typename Dtype>
Dtype* GpuIm2colConv<Dtype>::Scratch(Poseidon::Brew dev, size_t count) {
  if (dev == Poseidon::GPU) {
#ifndef CPU_ONLY
    return static_cast<Dtype*>(gpu::Workspace(sizeof(Dtype) * count));
#else
    NO_GPU;
#endif
  }
  if (host_scratch_.size() < count) host_scratch_.resize(count);
  return host_scratch_.data();
}

template <typename Dtype>
void GpuIm2colConv<Dtype>::Forward(Poseidon::Brew dev, const Dtype* input,
                                   const Dtype* weights, Dtype* output) {
  const ConvShape& s = *s_;
  if (s.num == 0) return;
  const ChunkPlan<Dtype> p(s, images_,
                           Scratch(dev, workspace_bytes() / sizeof(Dtype)));
  ForEachChunk(s.num, images_, [&](int n0, int B) {
    const int columns = B * p.S;
    const Dtype* in = input + static_cast<size_t>(n0) * s.input_dim;
    Dtype* out = output + static_cast<size_t>(n0) * s.output_dim;
    const Dtype* col = in;
    if (!(s.is_1x1 && B == 1)) {
      im2col_on(dev, ChunkShape(B), Nd(), in, p.col);
      col = p.col;
    }
    Dtype* dst = B == 1 ? out : p.buf;
    for (int g = 0; g < s.group; ++g) {
      math::gemm<Dtype>(dev, CblasNoTrans, CblasNoTrans, p.rows, columns, p.K,
                        Dtype(1), weights + p.weights(g),
                        col + p.col_rows(g, columns), Dtype(0),
                        dst + p.out_rows(g, columns));
    }
    if (B > 1) {
      for_each(dev, p.O * columns,
               kernels::ChannelMajorToImages<Dtype>{p.buf, out, B, p.O, p.S});
    }
  });
}

template <typename Dtype>
void GpuIm2colConv<Dtype>::Backward(Poseidon::Brew dev, const Dtype* input,
                                    const Dtype* output_diff,
                                    const Dtype* weights, Dtype* weight_diff,
                                    Dtype* input_diff) {
  const ConvShape& s = *s_;
  if (s.num == 0 || (weight_diff == nullptr && input_diff == nullptr)) return;
  const ChunkPlan<Dtype> p(s, images_,
                           Scratch(dev, workspace_bytes() / sizeof(Dtype)));
  ForEachChunk(s.num, images_, [&](int n0, int B) {
    const int columns = B * p.S;
    const bool own_columns = !(s.is_1x1 && B == 1);
    const kernels::Im2colShape shape = ChunkShape(B);
    const Dtype* od = output_diff + static_cast<size_t>(n0) * s.output_dim;
    if (B > 1) {
      for_each(dev, p.O * columns,
               kernels::ImagesToChannelMajor<Dtype>{od, p.buf, B, p.O, p.S});
      od = p.buf;
    }
    if (weight_diff != nullptr) {
      const Dtype* in = input + static_cast<size_t>(n0) * s.input_dim;
      const Dtype* col = in;
      if (own_columns) {
        im2col_on(dev, shape, Nd(), in, p.col);
        col = p.col;
      }
      for (int g = 0; g < s.group; ++g) {
        math::gemm<Dtype>(dev, CblasNoTrans, CblasTrans, p.rows, p.K, columns,
                          Dtype(1), od + p.out_rows(g, columns),
                          col + p.col_rows(g, columns), Dtype(1),
                          weight_diff + p.weights(g));
      }
    }
    if (input_diff != nullptr) {
      Dtype* in_diff = input_diff + static_cast<size_t>(n0) * s.input_dim;
      Dtype* col_diff = own_columns ? p.col : in_diff;
      for (int g = 0; g < s.group; ++g) {
        math::gemm<Dtype>(dev, CblasTrans, CblasNoTrans, p.K, columns, p.rows,
                          Dtype(1), weights + p.weights(g),
                          od + p.out_rows(g, columns), Dtype(0),
                          col_diff + p.col_rows(g, columns));
      }
      if (own_columns) col2im_on(dev, shape, Nd(), col_diff, in_diff);
    }
  });
}

template <typename Dtype>
void GpuIm2colConv<Dtype>::AddBias(Poseidon::Brew dev, const Dtype* bias,
                                   Dtype* top) {
  const ConvShape& s = *s_;
  if (s.num == 0) return;
  for_each(dev, s.num * s.num_output * s.top_spatial_dim,
           kernels::AddChannelBias<Dtype>{bias, top, s.num_output,
                                          s.top_spatial_dim});
}

// bias_diff += the per-channel sums of top_diff: the (num * O) x S top diff
// times ones gives per-image sums, whose transpose times ones adds them up
// (two gemv, so no atomics and no per-image calls).
template <typename Dtype>
void GpuIm2colConv<Dtype>::AccumulateBiasDiff(Poseidon::Brew dev,
                                              const Dtype* top_diff,
                                              Dtype* bias_diff) {
  const ConvShape& s = *s_;
  if (s.num == 0) return;
  const Dtype* ones = bias_ones_.data_on(dev);
  Dtype* sums = bias_sums_.mutable_data_on(dev);
  math::gemv<Dtype>(dev, CblasNoTrans, s.num * s.num_output, s.top_spatial_dim,
                    Dtype(1), top_diff, ones, Dtype(0), sums);
  math::gemv<Dtype>(dev, CblasTrans, s.num, s.num_output, Dtype(1), sums, ones,
                    Dtype(1), bias_diff);
}

template class GpuIm2colConv<float>;
template class GpuIm2colConv<double>;

}  // namespace poseidon
