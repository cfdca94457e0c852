// BaseConvolutionLayer: what Convolution and Deconvolution share. It reads
// convolution_param, owns the weights and bias, checks shapes, and has the
// convolution and its gradients computed by the algorithms it chooses.
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
//                    force_nd_im2col run the GPU im2col + GEMM path.
//
// Blobs: blobs()[0] the weights, shape (conv_out_channels,
// conv_in_channels / group, kernel...), where for Convolution
// conv_out = num_output and conv_in = bottom channels (Deconvolution swaps
// them); blobs()[1] the bias, shape (num_output), if bias_term.
//
// Bottoms/tops: one or more bottoms of identical shape, one top each, all
// using the same weights.
//
// Algorithms. The layer holds the parameters and the conv-space shape;
// the passes run on ConvAlgorithm objects (conv_algorithm.hpp: im2col,
// batched im2col, direct, Winograd, row weight gradient, GPU im2col,
// cuDNN), which ConvAlgorithms' table chooses per pass and device at every
// Reshape (Note [Convolution algorithm table] in conv_algorithm.cpp). In
// CPU mode the layer logs what runs, and why the faster paths do not, once
// per shape. Deconvolution's forward is the convolution's backward data
// and its input gradient the convolution's forward, on every algorithm.
// Geometries with more than kernels::kMaxIm2colAxes (8) spatial axes run
// the CPU plan in GPU mode, with a warning.
//
// Thread safety: as for any layer, one thread at a time. Inside a call the
// CPU algorithms may run chunks of the batch on
// Poseidon::num_threads() threads (util/parallel.hpp); OpenBLAS is then
// single-threaded (Note [One thread pool] in common.cpp).
#ifndef POSEIDON_LAYERS_BASE_CONV_LAYER_HPP_
#define POSEIDON_LAYERS_BASE_CONV_LAYER_HPP_

#include <cstddef>
#include <memory>
#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/layers/conv_algorithm.hpp"

namespace poseidon {

template <typename Dtype>
class BaseConvolutionLayer : public Layer<Dtype> {
 public:
  // What set_algorithm takes (ConvMode in conv_algorithm.hpp): kAuto, the
  // table's choice; kPerImage and kBatched, those im2col arrangements;
  // kPortable, the GPU im2col path on either device.
  using Algorithm = ConvMode;
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
  void set_algorithm(Algorithm algorithm) { options_.mode = algorithm; }
  // Bound on the column and output scratch buffers of the batched and GPU
  // im2col paths (default 64 MiB), per worker thread; a chunk always holds
  // at least one image.
  void set_max_buffer_bytes(size_t bytes) { options_.max_buffer_bytes = bytes; }
  // What the last Reshape found (ConvAlgorithms): whether the direct path
  // can run the shape (it runs unless Winograd does), and its input
  // gradient too (else im2col's).
  bool direct() const { return algorithms_.direct(); }
  bool direct_input_grad() const { return algorithms_.direct_input_grad(); }
  // Whether Winograd's F(4x4, 3x3) runs the passes (Note [Winograd path] in
  // conv_algorithms/winograd_conv.cpp).
  bool winograd() const { return algorithms_.winograd(); }
  // What the CPU pass runs, in words (logged once per layer and shape in
  // CPU mode, e.g. "direct (AVX2 GEMM, columns packed from the image)").
  string CpuPathDescription() const { return algorithms_.cpu().Description(); }
  // Whether the weight gradient runs RowWeightGradient, whatever path the
  // rest takes (Note [Row weight-gradient path] in
  // conv_algorithms/row_weight_grad_conv.cpp).
  bool row_weight_grad() const { return algorithms_.row_weight_grad(); }
  // The im2col arrangement (reported even when a faster path runs): chunks
  // of images_per_chunk() images, or per image.
  bool batched() const { return algorithms_.batched(); }
  int images_per_chunk() const { return algorithms_.images_per_chunk(); }
  // With batched(): how many of the batch's images each worker of the
  // batched path convolves under the current thread count (Note [Parallel
  // chunks] in conv_algorithms/batched_im2col_conv.cpp).
  std::vector<int> images_per_worker() const {
    return algorithms_.images_per_worker();
  }
  // The GPU engine the layer's parameters and geometry give (set at
  // LayerSetUp and Reshape, in every build).
  GpuEngine gpu_engine() const {
    return algorithms_.cudnn() ? GpuEngine::kCudnn : GpuEngine::kGemm;
  }
  // Images per chunk of the GPU im2col path.
  int portable_images_per_chunk() const {
    return algorithms_.portable_images_per_chunk();
  }

 protected:
  // Deconvolution returns true: its bottom is the convolution's output side.
  virtual bool reverse_dimensions() const = 0;
  // Fills output_shape_ (the top's spatial dims) from input_shape_ and the
  // kernel geometry; throws ShapeError, naming the axis, the geometry and
  // the shape of `bottom` (bottom[0]), if that leaves nothing.
  virtual void compute_output_shape(const Blob<Dtype>& bottom) = 0;

  // The algorithms of each pass on `dev` (see conv_algorithm.hpp for the
  // calls and what "conv space" means: for Convolution the bottom is the
  // input and the top the output; Deconvolution swaps them).
  const ConvPlan<Dtype>& plan(Poseidon::Brew dev) const {
    return algorithms_.on(dev);
  }
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

 private:
  void ReadGeometry(const ConvolutionParameter& p);
  // Sets num_, input_shape_ and output_shape_ from `bottom` (bottom[0]) and
  // checks that the top, the weights and the column buffer fit (Note
  // [Window sizes in 64 bits] in conv_geometry.cpp); LayerSetUp calls it
  // before allocating the weights, Reshape before reshaping the tops.
  void ComputeShapes(const Blob<Dtype>& bottom);

  // Conv-space channels (equal to the layer's for Convolution).
  int conv_in_channels_ = 0;
  int conv_out_channels_ = 0;
  // The conv-space shape of the last Reshape; the algorithms keep a pointer
  // to it.
  ConvShape shape_;
  ConvOptions options_;
  ConvAlgorithms<Dtype> algorithms_;
  // The last CpuPathDescription() logged (see Reshape).
  string logged_cpu_path_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_BASE_CONV_LAYER_HPP_
