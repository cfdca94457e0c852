// The convolution algorithms behind ConvAlgorithm
// (include/poseidon/layers/conv_algorithm.hpp), one class each, defined in
// the .cpp of the same name in this folder; the table in
// conv_algorithm.cpp is their one user. Each keeps a pointer to the
// ConvShape of its last Reshape (the layer's, which outlives the passes).
#ifndef POSEIDON_LAYERS_CONV_ALGORITHMS_ALGORITHMS_HPP_
#define POSEIDON_LAYERS_CONV_ALGORITHMS_ALGORITHMS_HPP_

#include <memory>
#include <string>
#include <vector>

#include "poseidon/blob.hpp"
#include "poseidon/kernels/im2col_kernels.hpp"
#include "poseidon/layers/conv_algorithm.hpp"
#include "poseidon/util/direct_conv.hpp"
#include "poseidon/util/row_weight_grad.hpp"
#include "poseidon/util/winograd.hpp"

namespace poseidon {

// cpu_conv.cpp: what the CPU algorithms share.

// Makes OpenBLAS single-threaded for its lifetime (a parallel region whose
// threads each call BLAS), then restores the previous thread count. The
// setting is process-wide.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(SingleThreadedBlas);

 private:
  const int previous_;
};

// im2col / col2im of `images` images side by side (2-D), or of one image
// (N-D, force_nd_im2col), in the shape's conv space.
template <typename Dtype>
void ConvIm2col(const ConvShape& s, const Dtype* input, int images, Dtype* col);
template <typename Dtype>
void ConvCol2im(const ConvShape& s, const Dtype* col, int images, Dtype* input);

// What the float fast paths (direct, Winograd, row weight gradient) first
// ask of a shape: kAuto and 2-D (without force_nd_im2col). Null if so, else
// why not.
const char* WhyNotFast2D(const ConvShape& s, const ConvOptions& options);

// One group's 2-D geometry as the fast paths' kernels take it (their
// Geometry structs name the fields alike): channels, height, width,
// outputs and pads; KernelGeometry adds the kernel and dilation.
template <typename Geometry>
Geometry GroupGeometry(const ConvShape& s) {
  Geometry g;
  g.channels = s.in_channels / s.group;
  g.height = s.input_shape[1];
  g.width = s.input_shape[2];
  g.outputs = s.out_channels / s.group;
  g.pad_h = s.pad[0];
  g.pad_w = s.pad[1];
  return g;
}
template <typename Geometry>
Geometry KernelGeometry(const ConvShape& s) {
  Geometry g = GroupGeometry<Geometry>(s);
  g.kernel_h = s.kernel[0];
  g.kernel_w = s.kernel[1];
  g.dilation_h = s.dilation[0];
  g.dilation_w = s.dilation[1];
  return g;
}

// A CPU algorithm: the bias terms on the CPU (images split over the thread
// pool); `dev` is ignored by the passes.
template <typename Dtype>
class CpuConvAlgorithm : public ConvAlgorithm<Dtype> {
 public:
  void AddBias(Poseidon::Brew dev, const Dtype* bias, Dtype* top) override;
  void AccumulateBiasDiff(Poseidon::Brew dev, const Dtype* top_diff,
                          Dtype* bias_diff) override;

 protected:
  const ConvShape* s_ = nullptr;

 private:
  std::vector<Dtype> spatial_ones_;  // top_spatial_dim ones
};

// im2col_conv.cpp: Caffe's per-image im2col + GEMM, the reference.
template <typename Dtype>
class Im2colConv final : public CpuConvAlgorithm<Dtype> {
 public:
  const char* name() const override { return "im2col"; }
  std::string Description() const override { return "im2col + GEMM per image"; }
  const char* Reshape(const ConvShape& shape,
                      const ConvOptions& options) override;
  void Forward(Poseidon::Brew dev, const Dtype* input, const Dtype* weights,
               Dtype* output) override;
  void Backward(Poseidon::Brew dev, const Dtype* input,
                const Dtype* output_diff, const Dtype* weights,
                Dtype* weight_diff, Dtype* input_diff) override;
  size_t workspace_bytes() const override;

 private:
  // The image's columns in the calling thread's scratch; null for 1x1.
  Dtype* Columns() const;
};

// batched_im2col_conv.cpp: chunks of images, chunks on the thread pool
// (Note [Batched im2col], Note [Parallel chunks]).
template <typename Dtype>
class BatchedIm2colConv final : public CpuConvAlgorithm<Dtype> {
 public:
  const char* name() const override { return "batched im2col"; }
  std::string Description() const override;
  // Chooses the chunk size; refuses (the per-image path runs) where
  // batching does not pay or is not asked for.
  const char* Reshape(const ConvShape& shape,
                      const ConvOptions& options) override;
  void Forward(Poseidon::Brew dev, const Dtype* input, const Dtype* weights,
               Dtype* output) override;
  void Backward(Poseidon::Brew dev, const Dtype* input,
                const Dtype* output_diff, const Dtype* weights,
                Dtype* weight_diff, Dtype* input_diff) override;
  size_t workspace_bytes() const override;

  // 1 when Reshape refused.
  int images_per_chunk() const { return images_per_chunk_; }
  // How many of the batch's images each worker convolves under the
  // current thread count (Note [Parallel chunks]).
  std::vector<int> images_per_worker() const;

 private:
  // Worker w's columns (col_size elements), then its output buffer
  // (buf_size); col(workers) is where `extra` elements past them begin.
  struct WorkerScratch {
    Dtype* base = nullptr;
    size_t col_size = 0;
    size_t buf_size = 0;
    Dtype* col(int w) const { return base + w * (col_size + buf_size); }
    Dtype* buf(int w) const { return col(w) + col_size; }
  };
  WorkerScratch Scratch(int workers, size_t extra) const;
  int Workers() const;
  template <typename ChunkFn>
  void ForEachChunk(int worker, int workers, const ChunkFn& fn) const;
  const Dtype* ChunkColumns(const Dtype* input, int n0, int images,
                            Dtype* col) const;
  void ForwardChunk(const Dtype* input, const Dtype* weights, int n0,
                    int images, Dtype* col, Dtype* buf, Dtype* output) const;
  void BackwardChunk(const Dtype* input, const Dtype* output_diff,
                     const Dtype* weights, int n0, int images, Dtype* col,
                     Dtype* buf, Dtype* weight_diff, Dtype* input_diff) const;

  int images_per_chunk_ = 1;
};

// direct_conv_algorithm.cpp: DirectConv kernels, float 2-D unit stride
// (Note [Direct path]).
class DirectConvAlgorithm final : public CpuConvAlgorithm<float> {
 public:
  const char* name() const override { return "direct"; }
  std::string Description() const override;
  const char* Reshape(const ConvShape& shape,
                      const ConvOptions& options) override;
  // The input gradient too? Else Backward takes weight gradients only, and
  // the table gives the input gradient to im2col.
  bool input_grad() const { return input_grad_; }
  // Why not, where not: "strided" or "the output is over 1.25 times smaller
  // than the input".
  const char* no_input_grad_why() const { return no_input_grad_; }
  void Forward(Poseidon::Brew dev, const float* input, const float* weights,
               float* output) override;
  void Backward(Poseidon::Brew dev, const float* input,
                const float* output_diff, const float* weights,
                float* weight_diff, float* input_diff) override;

 private:
  std::unique_ptr<DirectConv> forward_;
  std::unique_ptr<DirectConv> backward_;
  bool input_grad_ = false;
  const char* no_input_grad_ = "";  // why not, for Description
  // Packed weights of all groups, per-worker weight-gradient accumulators.
  std::vector<float> packed_;
  std::vector<float> accumulators_;
};

// winograd_conv.cpp: F(4x4, 3x3), all three passes (Note [Winograd path]).
class WinogradConvAlgorithm final : public CpuConvAlgorithm<float> {
 public:
  const char* name() const override { return "Winograd"; }
  std::string Description() const override;
  const char* Reshape(const ConvShape& shape,
                      const ConvOptions& options) override;
  void Forward(Poseidon::Brew dev, const float* input, const float* weights,
               float* output) override;
  void Backward(Poseidon::Brew dev, const float* input,
                const float* output_diff, const float* weights,
                float* weight_diff, float* input_diff) override;

 private:
  // One of the plans over the batch (the weights transformed, flipped and
  // swapped for the input gradient), each image input_dim and output_dim
  // apart.
  void Run(const WinogradConv<float>& conv, bool flip_and_swap,
           const float* weights, const float* input, size_t input_dim,
           float* output, size_t output_dim) const;
  void BackwardWeights(const float* input, const float* output_diff,
                       float* weight_diff) const;

  std::unique_ptr<WinogradConv<float>> forward_;
  std::unique_ptr<WinogradConv<float>> backward_;
};

// row_weight_grad_conv.cpp: the weight gradient of float first layers
// (Note [Row weight-gradient path]); Forward and the input gradient are
// not its (CHECKed).
class RowWeightGradConv final : public CpuConvAlgorithm<float> {
 public:
  const char* name() const override { return "row weight gradient"; }
  std::string Description() const override;
  const char* Reshape(const ConvShape& shape,
                      const ConvOptions& options) override;
  void Forward(Poseidon::Brew dev, const float* input, const float* weights,
               float* output) override;
  void Backward(Poseidon::Brew dev, const float* input,
                const float* output_diff, const float* weights,
                float* weight_diff, float* input_diff) override;

 private:
  std::unique_ptr<RowWeightGradient> plan_;
};

// gpu_im2col_conv.cpp: the portable im2col + GEMM path, on either device
// (Note [Portable GEMM path]).
template <typename Dtype>
class GpuIm2colConv final : public ConvAlgorithm<Dtype> {
 public:
  const char* name() const override { return "GPU im2col"; }
  std::string Description() const override;
  const char* Reshape(const ConvShape& shape,
                      const ConvOptions& options) override;
  void Forward(Poseidon::Brew dev, const Dtype* input, const Dtype* weights,
               Dtype* output) override;
  void Backward(Poseidon::Brew dev, const Dtype* input,
                const Dtype* output_diff, const Dtype* weights,
                Dtype* weight_diff, Dtype* input_diff) override;
  void AddBias(Poseidon::Brew dev, const Dtype* bias, Dtype* top) override;
  void AccumulateBiasDiff(Poseidon::Brew dev, const Dtype* top_diff,
                          Dtype* bias_diff) override;
  size_t workspace_bytes() const override;

  int images_per_chunk() const { return images_; }

 private:
  // `count` elements of scratch on `dev` (gpu::Workspace on the GPU).
  Dtype* Scratch(Poseidon::Brew dev, size_t count);
  // The im2col shape of a chunk of `images` images, and whether it takes
  // the N-D functors.
  kernels::Im2colShape ChunkShape(int images) const;
  bool Nd() const { return s_->force_nd_im2col || s_->num_spatial_axes != 2; }

  const ConvShape* s_ = nullptr;
  int images_ = 1;
  std::vector<Dtype> host_scratch_;
  // The bias gradient's ones (max(spatial, num) entries, refilled only when
  // its size changes) and per-image sums (num x num_output).
  Blob<Dtype> bias_ones_;
  Blob<Dtype> bias_sums_;
};

// cudnn_conv.cpp: cuDNN (Note [Convolution algorithm choice] in
// util/cudnn_conv_algo.hpp). Refuses where the engine rule
// (util/gpu_engine.hpp) gives the GEMM path; a pass with no qualifying
// cuDNN algorithm runs on `fallback` (the GPU im2col path).
struct CudnnConvState;
template <typename Dtype>
class CudnnConv final : public ConvAlgorithm<Dtype> {
 public:
  explicit CudnnConv(ConvAlgorithm<Dtype>* fallback);
  ~CudnnConv() override;
  const char* name() const override { return "cuDNN"; }
  const char* Reshape(const ConvShape& shape,
                      const ConvOptions& options) override;
  void Forward(Poseidon::Brew dev, const Dtype* input, const Dtype* weights,
               Dtype* output) override;
  void Backward(Poseidon::Brew dev, const Dtype* input,
                const Dtype* output_diff, const Dtype* weights,
                Dtype* weight_diff, Dtype* input_diff) override;
  void AddBias(Poseidon::Brew dev, const Dtype* bias, Dtype* top) override;
  void AccumulateBiasDiff(Poseidon::Brew dev, const Dtype* top_diff,
                          Dtype* bias_diff) override;

 private:
  // The descriptors for the current shape and GPU settings, (re)built when
  // either changed: by Reshape in GPU mode, else at the first pass.
  CudnnConvState& State();
  // State(), built: what the passes use.
  CudnnConvState& Built();

  ConvAlgorithm<Dtype>* const fallback_;
  const ConvShape* s_ = nullptr;
  std::unique_ptr<CudnnConvState> state_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_CONV_ALGORITHMS_ALGORITHMS_HPP_
