// ConvAlgorithm: one way of computing a convolution and its gradients, on
// the conv-space geometry that Convolution and Deconvolution share
// (base_conv_layer.hpp). The layer drives every algorithm through the same
// steps:
//
//   const char* why_not = algo->Reshape(shape, options);
//                          // before every Forward (the layer reshapes
//                          // then): set up for `shape` (plans, chunking,
//                          // descriptors; kept while the shape stays);
//                          // nullptr if the algorithm can run it, else why
//                          // not (a static string: no allocation per call).
//                          // This is the "can it run this geometry" query:
//                          // the answer often needs the plan built for the
//                          // shape (DirectConv::supported()). The algorithm
//                          // keeps a pointer to `shape`, which must outlive
//                          // the passes (the layer's member).
//   algo->Forward(dev, input, weights, output);
//                          // output = conv(input, weights); overwrites
//   algo->Backward(dev, input, output_diff, weights, weight_diff, input_diff);
//                          // weight_diff += dL/dW (skipped if null; input
//                          // may then be null); input_diff = dL/dinput,
//                          // overwritten (skipped if null)
//   algo->AddBias(dev, bias, top);             // top[n][o][.] += bias[o]
//   algo->AccumulateBiasDiff(dev, top_diff, bias_diff);  // += sums
//
// In conv space `input` is the im2col side (shape.input_shape per image,
// shape.input_dim apart) and `output` the GEMM side (shape.output_dim
// apart), shape.num images each; Deconvolution runs Backward's input
// gradient as its forward and Forward as its input gradient. A pointer
// argument lies in `dev`'s memory. Asked for one of the two gradients,
// Backward computes only that one; algorithms that compute both in one
// sweep (the batched im2col path turns the top diff channel-major once for
// both) do so when both are asked for. Some algorithms serve only some
// passes for a shape (the row weight gradient only the weight gradient;
// direct the input gradient only where its input_grad() says so): the
// table gives them no other, and they CHECK it.
//
// The algorithms (one class and file each under
// src/poseidon/layers/conv_algorithms/; the table in conv_algorithm.cpp,
// ConvAlgorithms::Choose, picks them per pass and says why):
//   im2col           Caffe's per-image im2col + GEMM; the reference, and
//                    the only CPU path for N-D
//   batched im2col   im2col over chunks of images, one GEMM per chunk and
//                    group, chunks on the thread pool (Note [Batched
//                    im2col], Note [Parallel chunks])
//   direct           float 2-D unit stride, DirectConv kernels, no im2col
//                    (Note [Direct path]); its input gradient only for
//                    "same" convolutions
//   Winograd         float 3x3 F(4x4, 3x3), all three passes (Note
//                    [Winograd path])
//   row weight grad  float first layers' weight gradient only (Note [Row
//                    weight-gradient path])
//   GPU im2col       the portable im2col + GEMM path, functors and
//                    math::gemm on either device (Note [Portable GEMM path])
//   cuDNN            cudnnConvolution* with descriptors per shape and
//                    algorithms measured once per shape (Note [Convolution
//                    algorithm choice] in util/cudnn_conv_algo.hpp); a pass
//                    with no qualifying cuDNN algorithm runs on GPU im2col
//
// One pass may run on one algorithm and another pass on another: a
// ConvPlan names the algorithm of each pass (forward, input gradient,
// weight gradient), and the bias terms run on the forward pass's.
//
// Thread safety: one thread at a time, as for the layer. Inside a call the
// CPU algorithms may run pieces on Poseidon::num_threads() threads
// (util/parallel.hpp); their scratch is the calling thread's
// (util/thread_scratch.hpp).
#ifndef POSEIDON_LAYERS_CONV_ALGORITHM_HPP_
#define POSEIDON_LAYERS_CONV_ALGORITHM_HPP_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/common.hpp"

namespace poseidon {

// The convolution in conv space, as the layer's Reshape computes it.
struct ConvShape {
  int num = 0;  // images
  int num_spatial_axes = 0;
  bool force_nd_im2col = false;
  bool is_1x1 = false;  // all kernels 1, strides 1, pads 0
  std::vector<int> kernel, stride, pad, dilation;  // per spatial axis
  int group = 1;
  int in_channels = 0;           // im2col side (the Convolution's bottom)
  int out_channels = 0;          // GEMM side
  std::vector<int> input_shape;  // (in_channels, im2col-side dims...)
  std::vector<int> col_shape;    // (kernel_dim * group, GEMM-side dims...)
  int kernel_dim = 0;            // rows of one group's column block
  int out_spatial_dim = 0;       // columns per image
  int input_dim = 0;             // input count per image
  int output_dim = 0;            // output count per image
  // The top, where the bias goes (the GEMM side for Convolution, the
  // im2col side for Deconvolution).
  int num_output = 0;
  int top_spatial_dim = 0;
  int top_dim = 0;  // num_output * top_spatial_dim
  bool bias_term = true;
  bool top_is_input = false;  // Deconvolution: the top is the im2col side
};

// What the caller asked for (BaseConvolutionLayer::set_algorithm).
//   kPerImage: Caffe's way, one im2col and one GEMM per image and group;
//              the reference path, and the only one for N-D.
//   kBatched:  im2col over chunks of images into one wide column matrix
//              and one GEMM per chunk and group (2-D only), each chunk as
//              many images as fit in max_buffer_bytes.
//   kAuto:     the table's choice (ConvAlgorithms::Choose).
//   kPortable: the GPU im2col path on the CPU too (what the CPU tests check
//              the GPU path with); on the GPU, that path instead of cuDNN.
enum class ConvMode { kAuto, kPerImage, kBatched, kPortable };

struct ConvOptions {
  ConvMode mode = ConvMode::kAuto;
  // Bound on the column and output scratch of the batched and GPU im2col
  // paths, per worker; a chunk always holds at least one image.
  size_t max_buffer_bytes = size_t{64} << 20;
  // convolution_param.engine, and "Convolution layer 'conv1'" for messages.
  int engine = 0;
  std::string who;
};

template <typename Dtype>
class ConvAlgorithm {
 public:
  virtual ~ConvAlgorithm() = default;
  // "im2col", "batched im2col", "direct", "Winograd", "row weight
  // gradient", "GPU im2col", "cuDNN".
  virtual const char* name() const = 0;
  // What runs, in words, for the log (e.g. "direct (AVX-512 kernels)").
  virtual std::string Description() const { return name(); }
  // See the file comment: nullptr when the algorithm can run `shape` (and is
  // set up for it), else the reason it cannot.
  virtual const char* Reshape(const ConvShape& shape,
                              const ConvOptions& options) = 0;
  virtual void Forward(Poseidon::Brew dev, const Dtype* input,
                       const Dtype* weights, Dtype* output) = 0;
  virtual void Backward(Poseidon::Brew dev, const Dtype* input,
                        const Dtype* output_diff, const Dtype* weights,
                        Dtype* weight_diff, Dtype* input_diff) = 0;
  virtual void AddBias(Poseidon::Brew dev, const Dtype* bias, Dtype* top) = 0;
  virtual void AccumulateBiasDiff(Poseidon::Brew dev, const Dtype* top_diff,
                                  Dtype* bias_diff) = 0;
  // Scratch bytes a pass takes from the calling thread's scratch (or
  // gpu::Workspace) for the shape of the last Reshape, where the algorithm
  // knows it before the pass (the im2col paths); 0 otherwise (direct,
  // Winograd and the row gradient size theirs inside the pass, cuDNN's
  // comes with the algorithm it measures at the first pass).
  virtual size_t workspace_bytes() const { return 0; }
};

// Which algorithm runs each pass (ConvAlgorithms::Choose fills it in).
template <typename Dtype>
struct ConvPlan {
  ConvAlgorithm<Dtype>* forward = nullptr;
  ConvAlgorithm<Dtype>* backward_data = nullptr;
  ConvAlgorithm<Dtype>* backward_weights = nullptr;

  // The passes as the layer calls them; Backward splits the two gradients
  // over their algorithms (one call when one algorithm has both).
  void Forward(Poseidon::Brew dev, const Dtype* input, const Dtype* weights,
               Dtype* output) const {
    forward->Forward(dev, input, weights, output);
  }
  void Backward(Poseidon::Brew dev, const Dtype* input,
                const Dtype* output_diff, const Dtype* weights,
                Dtype* weight_diff, Dtype* input_diff) const;
  void AddBias(Poseidon::Brew dev, const Dtype* bias, Dtype* top) const {
    forward->AddBias(dev, bias, top);
  }
  void AccumulateBiasDiff(Poseidon::Brew dev, const Dtype* top_diff,
                          Dtype* bias_diff) const {
    forward->AccumulateBiasDiff(dev, top_diff, bias_diff);
  }
  // What runs, in words: "direct (AVX-512 kernels); weight gradient by
  // rows (3 input channels)".
  std::string Description() const;
};

template <typename Dtype>
class Im2colConv;
template <typename Dtype>
class BatchedIm2colConv;
template <typename Dtype>
class GpuIm2colConv;
template <typename Dtype>
class CudnnConv;
class DirectConvAlgorithm;
class WinogradConvAlgorithm;
class RowWeightGradConv;

// The algorithm objects of one layer (each keeps its plans for the shape it
// was last set up for) and the table that chooses among them.
template <typename Dtype>
class ConvAlgorithms {
 public:
  ConvAlgorithms();
  ~ConvAlgorithms();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(ConvAlgorithms);

  // The table (conv_algorithm.cpp): sets every candidate up for `shape`
  // and picks, per pass, the first in its ordered list that can run it;
  // cpu() and gpu() are the plans for each device.
  void Choose(const ConvShape& shape, const ConvOptions& options);
  const ConvPlan<Dtype>& cpu() const { return cpu_; }
  const ConvPlan<Dtype>& gpu() const { return gpu_; }
  const ConvPlan<Dtype>& on(Poseidon::Brew dev) const {
    return dev == Poseidon::GPU ? gpu_ : cpu_;
  }

  // What the last Choose found (the layer's accessors): whether each fast
  // path can run the shape (direct can where Winograd runs instead), the
  // im2col arrangement, the GPU engine and chunking.
  bool direct() const { return direct_; }
  bool direct_input_grad() const { return direct_input_grad_; }
  bool winograd() const { return winograd_; }
  bool row_weight_grad() const { return row_weight_grad_; }
  bool batched() const { return batched_; }
  // Why the CPU candidates the table passed over could not run the shape:
  // "Winograd: not a 3x3 or 5x5 kernel; ..." (for the log).
  std::string Refusals() const;
  int images_per_chunk() const;
  std::vector<int> images_per_worker() const;
  bool cudnn() const;
  int portable_images_per_chunk() const;

 private:
  // What each candidate said about the last shape: nullptr (it can run
  // it) or why not; in table order, for the log.
  struct Verdict {
    const char* name;
    const char* why_not;
  };
  static constexpr int kCandidates = 5;

  std::unique_ptr<Im2colConv<Dtype>> im2col_;
  std::unique_ptr<BatchedIm2colConv<Dtype>> batched_im2col_;
  std::unique_ptr<GpuIm2colConv<Dtype>> gpu_im2col_;
  std::unique_ptr<CudnnConv<Dtype>> cudnn_;
  // Float only (null for double).
  std::unique_ptr<DirectConvAlgorithm> direct_conv_;
  std::unique_ptr<WinogradConvAlgorithm> winograd_conv_;
  std::unique_ptr<RowWeightGradConv> row_weight_grad_conv_;
  ConvPlan<Dtype> cpu_, gpu_;
  Verdict verdicts_[kCandidates] = {};
  bool direct_ = false, direct_input_grad_ = false, winograd_ = false,
       row_weight_grad_ = false, batched_ = false;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_CONV_ALGORITHM_HPP_
