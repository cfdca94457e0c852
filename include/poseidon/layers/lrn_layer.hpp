// LRNLayer: local response normalisation.
//
//   ACROSS_CHANNELS: scale[n][c][h][w] = k + alpha / size *
//                        sum over c' in [c - (size-1)/2, c + (size-1)/2]
//                        (clipped to the channels) of x[n][c'][h][w]^2
//   WITHIN_CHANNEL:  scale[n][c][h][w] = 1 + alpha / size^2 *
//                        sum over the size x size window centred on (h, w)
//                        (zero outside the image) of x[n][c][.][.]^2
//                    (Caffe builds this from pooling with pad (size-1)/2
//                    and a power layer with shift 1, so k is not used here;
//                    we match it.)
//   top = x * scale^-beta
// Backward (exact): with W(i) the window of element i,
//   dx_i = dy_i * scale_i^-beta
//          - 2 * alpha * beta / A * x_i * sum_{j in W(i)} dy_j * y_j / scale_j
// where A = size (ACROSS) or size^2 (WITHIN); windows are symmetric.
//
// Bottom: (N, C, H, W). Top: the same shape.
// Parameters (lrn_param): local_size (default 5, odd, > 0), alpha (1),
//   beta (0.75), k (1), norm_region (ACROSS_CHANNELS | WITHIN_CHANNEL),
//   engine (DEFAULT) the GPU implementation (util/gpu_engine.hpp).
//
// Devices (Note [Layer bodies] in layer.hpp): the portable body is
// Poseidon's kernels (kernels/lrn_kernels.hpp: per-position running window
// sums across channels, per-element windows within a channel), on either
// device. The CPU has a tuned path (running sums over whole planes, a
// separable box sum, images split over the thread pool). On the
// GPU, ACROSS_CHANNELS runs cuDNN's cross-channel LRN where cuDNN computes
// the same thing (it takes Caffe's local_size, alpha, beta and k and divides
// alpha by local_size itself; it needs 1 <= local_size <= 16, k >= 1e-5 and
// beta >= 0.01, see CudnnSupports), else the kernels. WITHIN_CHANNEL always
// runs the kernels on the GPU: Caffe builds it from Split, Square, Pooling,
// Power and Eltwise layers; here it is computed directly, on either device,
// with the same result.
#ifndef POSEIDON_LAYERS_LRN_LAYER_HPP_
#define POSEIDON_LAYERS_LRN_LAYER_HPP_

#include <memory>
#include <string>
#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/util/cudnn.hpp"

namespace poseidon {

template <typename Dtype>
class LRNLayer final : public Layer<Dtype> {
 public:
  explicit LRNLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "LRN"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  // Whether cuDNN's cross-channel LRN computes what `p` asks for; if not,
  // `why_not` (when given) says why.
  static bool CudnnSupports(const LRNParameter& p, std::string* why_not);

  bool has_tuned_cpu() const override { return true; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;
  void TunedForward_cpu(const vector<Blob<Dtype>*>& bottom,
                        const vector<Blob<Dtype>*>& top) override;
  void TunedBackward_cpu(const vector<Blob<Dtype>*>& top,
                         const vector<bool>& propagate_down,
                         const vector<Blob<Dtype>*>& bottom) override;
  void Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  void Backward_gpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override;

 private:
  // out = coeff * (window sum of `in`) + offset over one image's channels
  // (ACROSS) or over each plane (WITHIN); `in` and `out` hold C*H*W values,
  // `scratch` one plane.
  void WindowSum(const Dtype* in, Dtype coeff, Dtype offset, Dtype* out,
                 Dtype* scratch) const;
  // Runs fn(begin, end, scratch) over the images [0, num_), split over
  // ParallelFor when the blob is large; scratch holds 3 images per worker.
  template <typename Fn>
  void ForImages(const Fn& fn);

  int size_ = 5;
  Dtype alpha_ = 1, beta_ = 0.75, k_ = 1;
  bool across_channels_ = true;
  int num_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  Blob<Dtype> scale_;      // saved for backward
  vector<Dtype> scratch_;  // 3 images per worker
  Blob<Dtype> ratio_;      // the kernels' WITHIN_CHANNEL backward scratch
  // Whether the GPU pass uses cuDNN (see the header comment), decided on
  // the first GPU pass.
  bool UseCudnn();
  bool engine_chosen_ = false;
  bool use_cudnn_ = false;
#ifdef USE_CUDNN
  // Made on the first cuDNN pass.
  std::unique_ptr<cudnn::LRNDescriptor> cudnn_lrn_;
  std::unique_ptr<cudnn::TensorDescriptor> cudnn_tensor_;
  // The tensor descriptor set to the current shape.
  cudnnTensorDescriptor_t CudnnTensor(const Blob<Dtype>& blob);
#endif
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_LRN_LAYER_HPP_
