// BaseConvolutionLayer: what Convolution and Deconvolution share. It reads
// convolution_param, owns the weights and bias, checks shapes, and computes
// the convolution and its gradients as matrix products over im2col columns.
//
// Parameters (convolution_param; the per-axis geometry is read by
// ParseConvGeometry, conv_geometry.hpp):
//   num_output       (required, > 0) output channels.
//   bias_term        (default true) learn a per-output-channel bias.
//   kernel_size / kernel_h, kernel_w   (required, > 0) one value for every
//                    spatial axis or one per axis; _h/_w only for 2-D.
//   pad / pad_h, pad_w                 (default 0, >= 0) zero padding.
//   stride / stride_h, stride_w        (default 1, > 0).
//   dilation         (default 1, > 0) spacing of the kernel taps.
//   group            (default 1) input and output channels are split into
//                    `group` groups; group g of the outputs sees only
//                    group g of the inputs.
//   axis             (default 1) the channel axis; axes before it are batch
//                    axes, axes after it are spatial.
//   force_nd_im2col  (default false) use the generic N-D path for 2-D too.
//   weight_filler, bias_filler (default constant 0).
//   engine           (default DEFAULT) GPU mode only: DEFAULT and CUDNN run
//                    2-D and 3-D convolutions with cuDNN (CUDNN in a build
//                    without cuDNN, or on other geometries, warns once and
//                    falls back); CAFFE, 1-D, N-D with N > 3 and
//                    force_nd_im2col run the im2col + GEMM path below.
//
// Blobs: blobs()[0] the weights, shape (conv_out_channels,
// conv_in_channels / group, kernel...), where for Convolution
// conv_out = num_output and conv_in = bottom channels (Deconvolution swaps
// them); blobs()[1] the bias, shape (num_output), if bias_term.
//
// Bottoms/tops: one or more bottoms of identical shape, one top each, all
// using the same weights.
//
// Devices. The CPU pass is the im2col + OpenBLAS arrangements and the
// AVX-512 direct path described at Algorithm. The GPU pass is either
//   - cuDNN (base_conv_layer_cudnn.cpp): cudnnConvolutionForward /
//     BackwardData / BackwardFilter with one descriptor set per shape (made
//     in Reshape), group count on the descriptor, algorithms measured once
//     per shape (Note [Convolution algorithm choice] in
//     util/cudnn_conv_algo.hpp), workspace from gpu::Workspace, the bias by
//     cudnnAddTensor / cudnnConvolutionBackwardBias; or
//   - the portable GEMM path (base_conv_layer_gpu.cpp): im2col of chunks of
//     images by the functors of kernels/im2col_kernels.hpp (col2im as a
//     gather, no atomics), one math::gemm per chunk and group, scratch from
//     gpu::Workspace, the bias by a functor and two gemv. The same code runs
//     on the CPU with Algorithm::kPortable, which is how the CPU tests check
//     it.
// Deconvolution's forward is the convolution's backward data and its input
// gradient the convolution's forward, on every path. Geometries with more
// than kernels::kMaxIm2colAxes (8) spatial axes run the CPU pass in GPU
// mode, with a warning.
//
// Thread safety: as for any layer, one thread at a time. Inside a call the
// batched and direct paths may run chunks of the batch on
// Poseidon::num_threads() threads (util/parallel.hpp); OpenBLAS is then
// single-threaded (Note [One thread pool] in common.cpp).
#ifndef POSEIDON_LAYERS_BASE_CONV_LAYER_HPP_
#define POSEIDON_LAYERS_BASE_CONV_LAYER_HPP_

#include <cstddef>
#include <memory>
#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/util/direct_conv.hpp"
#include "poseidon/util/row_weight_grad.hpp"
#include "poseidon/util/winograd.hpp"

namespace poseidon {

// The cuDNN descriptors and algorithm choices of one layer
// (base_conv_layer_cudnn.cpp); opaque here so this header needs no cuDNN.
struct CudnnConvState;

template <typename Dtype>
class BaseConvolutionLayer : public Layer<Dtype> {
 public:
  // How the products are arranged; see Note [Batched im2col] in the .cpp.
  //   kPerImage: Caffe's way, one im2col and one GEMM per image and group;
  //              the reference path, and the only one for N-D.
  //   kBatched:  im2col over chunks of images into one wide column matrix
  //              and one GEMM per chunk and group (2-D only), each chunk as
  //              many images as fit in max_buffer_bytes.
  //   kAuto:     batched chunks of about 512 GEMM columns (within
  //              max_buffer_bytes) when one image has fewer output
  //              positions than that, per image otherwise. With
  //              Poseidon::num_threads() > 1: always batched (2-D), at
  //              most ceil(N / threads) images a chunk, chunks run in
  //              parallel; see Note [Parallel chunks] in the .cpp.
  //              For float 2-D convolutions with unit stride and at most
  //              128 outputs per group, on a CPU with AVX-512 or AVX2,
  //              kAuto runs the direct path instead: no im2col, DirectConv
  //              kernels image by image, except for the input gradient of a
  //              convolution whose output is smaller than its input (see
  //              Note [Direct path] in base_conv_layer_direct.cpp).
  //              Float 3x3 unit-stride convolutions with many channels
  //              run their forward pass and both gradients by Winograd's
  //              F(4x4, 3x3) instead (Note [Winograd path] in
  //              base_conv_layer_winograd.cpp). Float 2-D convolutions
  //              with at most 4 input channels per group (first layers)
  //              take their weight gradient from RowWeightGradient,
  //              whatever runs the rest (Note [Row weight-gradient path]
  //              in base_conv_layer_row_wgrad.cpp).
  //   kPortable: the GPU's im2col + GEMM path (chunks of images bounded by
  //              max_buffer_bytes, functor im2col/col2im, math::gemm) run
  //              on the CPU: what the CPU tests check the GPU path with.
  //              On the GPU it also selects that path instead of cuDNN.
  enum class Algorithm { kAuto, kPerImage, kBatched, kPortable };
  // What the GPU pass runs (see the file comment).
  enum class GpuEngine { kCudnn, kGemm };

  explicit BaseConvolutionLayer(const LayerParameter& param)
      : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool EqualNumBottomTopBlobs() const override { return true; }

  // Selects the algorithm (tests and benchmarks); takes effect at the next
  // Reshape (every Forward reshapes).
  void set_algorithm(Algorithm algorithm) { algorithm_ = algorithm; }
  // Bound on the column and output scratch buffers of the batched path
  // (default 64 MiB), per worker thread; a chunk always holds at least one
  // image.
  void set_max_buffer_bytes(size_t bytes) { max_buffer_bytes_ = bytes; }
  // What the last Reshape chose: the direct path, or else the im2col
  // arrangement that batched() and images_per_chunk() describe (reported
  // even when the direct path runs instead).
  bool direct() const { return direct_; }
  // With direct(): whether the input gradient runs direct too (else im2col).
  bool direct_input_grad() const { return direct_input_grad_; }
  // Whether the forward pass and input gradient run Winograd's F(4x4, 3x3)
  // (Note [Winograd path] in base_conv_layer_winograd.cpp).
  bool winograd() const { return winograd_; }
  // What the CPU pass runs, in words (logged once per layer and shape in
  // CPU mode, e.g. "direct (AVX2 GEMM, columns packed from the image)").
  string CpuPathDescription() const;
  // Whether the weight gradient runs RowWeightGradient, whatever path the
  // rest takes (Note [Row weight-gradient path] in
  // base_conv_layer_row_wgrad.cpp).
  bool row_weight_grad() const { return row_weight_grad_; }
  bool batched() const { return batched_; }
  int images_per_chunk() const { return images_per_chunk_; }
  // With batched(): how many of the batch's images each worker of the
  // batched path convolves under the current thread count (Note [Parallel
  // chunks]).
  std::vector<int> images_per_worker() const;
  // The GPU engine the layer's parameters and geometry give (set at
  // LayerSetUp and Reshape, in every build).
  GpuEngine gpu_engine() const { return gpu_engine_; }
  // Images per chunk of the portable GEMM path.
  int portable_images_per_chunk() const { return portable_images_; }

 protected:
  // Deconvolution returns true: its bottom is the convolution's output side.
  virtual bool reverse_dimensions() const = 0;
  // Fills output_shape_ (the top's spatial dims) from input_shape_ and the
  // kernel geometry; throws ShapeError, naming the axis, the geometry and
  // the shape of `bottom` (bottom[0]), if that leaves nothing.
  virtual void compute_output_shape(const Blob<Dtype>& bottom) = 0;

  // The convolution in "conv space", on `dev` (pointers in its memory):
  // `input` is the im2col side (conv_in_channels x conv input dims per
  // image), `output` the GEMM side (conv_out_channels x column dims per
  // image), num_ images each.
  //
  // output = W * im2col(input); overwrites output.
  void ConvForward(Poseidon::Brew dev, const Dtype* input, const Dtype* weights,
                   Dtype* output);
  // weight_diff += output_diff * im2col(input)^T (skipped if null; input may
  // then be null); input_diff = col2im(W^T * output_diff) (skipped if null).
  void ConvBackward(Poseidon::Brew dev, const Dtype* input,
                    const Dtype* output_diff, const Dtype* weights,
                    Dtype* weight_diff, Dtype* input_diff);
  // top[n][o][...] += bias[o] over the top's spatial positions.
  void AddBias(Poseidon::Brew dev, const Dtype* bias, Dtype* top);
  // bias_diff[o] += sum over images and positions of top_diff[n][o][...].
  void AccumulateBiasDiff(Poseidon::Brew dev, const Dtype* top_diff,
                          Dtype* bias_diff);
  // False when the GPU pass cannot take this geometry (more spatial axes
  // than kernels::kMaxIm2colAxes); the layer then computes on the CPU in GPU
  // mode, after WarnCpuFallback().
  bool RunsOnGpu() const;
  void WarnCpuFallback() const;

  vector<int> kernel_shape_;  // per spatial axis
  vector<int> stride_;
  vector<int> pad_;
  vector<int> dilation_;
  vector<int> input_shape_;   // the bottom's spatial dims
  vector<int> output_shape_;  // the top's spatial dims
  int num_spatial_axes_ = 0;
  int channel_axis_ = 1;
  int num_ = 0;       // images: product of the dims before the channel axis
  int channels_ = 0;  // bottom channels
  int num_output_ = 0;
  int group_ = 1;
  bool bias_term_ = true;
  bool is_1x1_ = false;  // all kernels 1, strides 1, pads 0
  bool force_nd_im2col_ = false;
  int bottom_dim_ = 0;  // per-image counts
  int top_dim_ = 0;

 private:
  void ReadGeometry(const ConvolutionParameter& p);
  // Sets num_, input_shape_ and output_shape_ from `bottom` (bottom[0]) and
  // checks that the top, the weights and the column buffer fit (Note
  // [Window sizes in 64 bits] in conv_geometry.cpp); LayerSetUp calls it
  // before allocating the weights, Reshape before reshaping the tops.
  void ComputeShapes(const Blob<Dtype>& bottom);
  void ChooseAlgorithm();
  // The CPU pass (the ConvForward ... of the CPU above).
  void CpuConvForward(const Dtype* input, const Dtype* weights, Dtype* output);
  void CpuConvBackward(const Dtype* input, const Dtype* output_diff,
                       const Dtype* weights, Dtype* weight_diff,
                       Dtype* input_diff);
  void CpuAddBias(const Dtype* bias, Dtype* top);
  void CpuAccumulateBiasDiff(const Dtype* top_diff, Dtype* bias_diff);
  // The portable GEMM path (base_conv_layer_gpu.cpp): ChoosePortable sets
  // gpu_engine_ and the chunking in Reshape; the others are ConvForward ...
  // on `dev`.
  void ChoosePortable();
  void PortableForward(Poseidon::Brew dev, const Dtype* input,
                       const Dtype* weights, Dtype* output);
  void PortableBackward(Poseidon::Brew dev, const Dtype* input,
                        const Dtype* output_diff, const Dtype* weights,
                        Dtype* weight_diff, Dtype* input_diff);
  void PortableAddBias(Poseidon::Brew dev, const Dtype* bias, Dtype* top);
  void PortableBiasDiff(Poseidon::Brew dev, const Dtype* top_diff,
                        Dtype* bias_diff);
  // `count` elements of scratch on `dev` (gpu::Workspace on the GPU).
  Dtype* PortableScratch(Poseidon::Brew dev, size_t count);
  // The cuDNN path (base_conv_layer_cudnn.cpp). CudnnReshape (re)builds
  // the descriptors when the shape or the GPU settings changed; the others
  // return false when they did not run (no cuDNN algorithm qualified), and
  // the portable path then does the pass.
  void CudnnReshape();
  bool CudnnForward(const Dtype* input, const Dtype* weights, Dtype* output);
  bool CudnnBackwardFilter(const Dtype* input, const Dtype* output_diff,
                           Dtype* weight_diff);
  bool CudnnBackwardData(const Dtype* output_diff, const Dtype* weights,
                         Dtype* input_diff);
  void CudnnAddBias(const Dtype* bias, Dtype* top);
  void CudnnBiasDiff(const Dtype* top_diff, Dtype* bias_diff);
  void Im2col(const Dtype* input, int images, Dtype* col) const;
  void Col2im(const Dtype* col, int images, Dtype* input) const;
  void ForwardPerImage(const Dtype* input, const Dtype* weights, Dtype* output);
  void ForwardBatched(const Dtype* input, const Dtype* weights, Dtype* output);
  void BackwardPerImage(const Dtype* input, const Dtype* output_diff,
                        const Dtype* weights, Dtype* weight_diff,
                        Dtype* input_diff);
  void BackwardBatched(const Dtype* input, const Dtype* output_diff,
                       const Dtype* weights, Dtype* weight_diff,
                       Dtype* input_diff);
  // The batched path's worker count: one per thread, as long as there are
  // chunks for them (Note [Parallel chunks]).
  int BatchedWorkers() const;
  // Calls fn(n0, images) for each chunk of worker `worker`'s range of the
  // batch when `workers` share it (Note [Parallel chunks]).
  template <typename ChunkFn>
  void ForEachChunk(int worker, int workers, const ChunkFn& fn) const;
  // One chunk of the batched path, `images` images from n0 on, with the
  // worker's column and output scratch (col, buf); weight_diff and
  // input_diff as in ConvBackward.
  void ForwardChunk(const Dtype* input, const Dtype* weights, int n0,
                    int images, Dtype* col, Dtype* buf, Dtype* output) const;
  void BackwardChunk(const Dtype* input, const Dtype* output_diff,
                     const Dtype* weights, int n0, int images, Dtype* col,
                     Dtype* buf, Dtype* weight_diff, Dtype* input_diff) const;
  // The images' im2col columns for the per-image path, in the calling
  // thread's scratch (util/thread_scratch.hpp); null for 1x1 (the image is
  // its own column matrix).
  Dtype* PerImageColumns() const;
  // The column matrix of the chunk of `images` images from n0: the image
  // itself for one image of a 1x1 convolution, else im2col'd into col.
  const Dtype* ChunkColumns(const Dtype* input, int n0, int images,
                            Dtype* col) const;
  // The batched path's per-worker slices in the calling thread's scratch:
  // worker w's columns (col_size elements), then its output buffer
  // (buf_size); col(workers) is where `extra` elements past the slices
  // begin.
  struct WorkerScratch {
    Dtype* base = nullptr;
    size_t col_size = 0;
    size_t buf_size = 0;
    Dtype* col(int w) const { return base + w * (col_size + buf_size); }
    Dtype* buf(int w) const { return col(w) + col_size; }
  };
  WorkerScratch BatchedScratch(int workers, size_t extra) const;
  // The direct path (float only; base_conv_layer_direct.cpp):
  // ChooseDirect sets direct_ and the plans, the others are ConvForward
  // and ConvBackward.
  void ChooseDirect();
  void ForwardDirect(const float* input, const float* weights, float* output);
  void BackwardDirect(const float* input, const float* output_diff,
                      const float* weights, float* weight_diff,
                      float* input_diff);
  // The Winograd path (float only; base_conv_layer_winograd.cpp):
  // ChooseWinograd sets winograd_ and the two plans; RunWinograd runs one
  // of them over the batch (the weights transformed, flipped and swapped
  // for the input gradient), each image input_dim and output_dim apart;
  // BackwardWeightsWinograd adds the weight gradient.
  void ChooseWinograd();
  // The row weight gradient (float only; base_conv_layer_row_wgrad.cpp):
  // ChooseRowWeightGrad sets row_weight_grad_ and the plan;
  // BackwardWeightsRows adds the weight gradient.
  void ChooseRowWeightGrad();
  void BackwardWeightsRows(const float* input, const float* output_diff,
                           float* weight_diff);
  void RunWinograd(const WinogradConv3x3<float>& conv, bool flip_and_swap,
                   const float* weights, const float* input, size_t input_dim,
                   float* output, size_t output_dim);
  void ForwardWinograd(const float* input, const float* weights, float* output);
  void BackwardDataWinograd(const float* output_diff, const float* weights,
                            float* input_diff);
  void BackwardWeightsWinograd(const float* input, const float* output_diff,
                               float* weight_diff);

  // Conv-space geometry (equal to the layer's for Convolution).
  int conv_in_channels_ = 0;
  int conv_out_channels_ = 0;
  vector<int> conv_input_shape_;  // (conv_in_channels, im2col-side dims...)
  vector<int> col_shape_;         // (kernel_dim * group, GEMM-side dims...)
  int kernel_dim_ = 0;            // rows of one group's column block
  int conv_out_spatial_dim_ = 0;  // columns per image
  int conv_input_dim_ = 0;        // input count per image
  int conv_output_dim_ = 0;       // output count per image
  int top_spatial_dim_ = 0;

  Algorithm algorithm_ = Algorithm::kAuto;
  size_t max_buffer_bytes_ = size_t{64} << 20;
  bool batched_ = false;
  int images_per_chunk_ = 1;
  Blob<Dtype> spatial_ones_;
  // Direct path: the plan of one group's convolution and of its input
  // gradient (itself a direct convolution), packed weights of all groups,
  // per-worker weight-gradient accumulators.
  bool direct_ = false;
  // Whether the direct path also computes the input gradient; if not, the
  // im2col path (batched_ / per image) does. See Note [Direct path].
  bool direct_input_grad_ = false;
  std::unique_ptr<DirectConv> direct_forward_;
  std::unique_ptr<DirectConv> direct_backward_;
  std::vector<float> direct_packed_;
  std::vector<float> direct_accumulators_;
  // Winograd path: the plans of one group's forward pass and input
  // gradient; their buffers are the calling thread's scratch.
  bool winograd_ = false;
  // The last CpuPathDescription() logged (see Reshape).
  string logged_cpu_path_;
  // Row weight gradient: the plan of one group's weight gradient.
  bool row_weight_grad_ = false;
  std::unique_ptr<RowWeightGradient> row_weight_grad_plan_;
  std::unique_ptr<WinogradConv3x3<float>> winograd_forward_;
  std::unique_ptr<WinogradConv3x3<float>> winograd_backward_;

  // GPU pass: the engine (see the file comment), the portable path's
  // images per chunk, its host scratch (kPortable on the CPU), and the bias
  // gradient's ones vector (max(spatial, num) entries, refilled only when
  // its size changes) and per-image sums (num x num_output).
  GpuEngine gpu_engine_ = GpuEngine::kGemm;
  int portable_images_ = 1;
  std::vector<Dtype> portable_scratch_;
  Blob<Dtype> bias_ones_;
  Blob<Dtype> bias_sums_;
  // cuDNN descriptors and choices (null until the first GPU Reshape).
  std::shared_ptr<CudnnConvState> cudnn_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_BASE_CONV_LAYER_HPP_
