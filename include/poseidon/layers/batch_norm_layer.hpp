// BatchNorm: normalises each channel to zero mean and unit variance, with
// Caffe's semantics (no learned scale or shift; follow it with a Scale layer
// with bias_term: true for those).
//
//   y = (x - mean_c) / sqrt(var_c + eps)
//
// With batch statistics, mean_c and var_c are the mean and (biased) variance
// of channel c over the m = N * spatial elements of the batch, and Forward
// updates the running sums kept in the three parameter blobs:
//   blobs[2] = blobs[2] * maf + 1                          (a 1-element blob)
//   blobs[0] = blobs[0] * maf + mean_c
//   blobs[1] = blobs[1] * maf + m / max(m - 1, 1) * var_c  (unbiased)
// With global statistics, mean_c = blobs[0][c] / blobs[2] and var_c =
// blobs[1][c] / blobs[2] (both 0 while blobs[2] is 0), and nothing is updated.
//
// Backward with batch statistics (mean over the channel's m elements):
//   dE/dx = (dE/dy - mean(dE/dy) - y * mean(dE/dy * y)) / sqrt(var_c + eps)
// and with global statistics dE/dx = dE/dy / sqrt(var_c + eps).
//
//   bottom[0]: (N, C, ...) or (N, C); a 1-axis (N) bottom is one channel.
//   top[0]:    the same shape. In place is supported.
//
// Prototxt: batch_norm_param {
//   use_global_stats: (default true in TEST phase, false in TRAIN)
//   moving_average_fraction: 0.999   (maf above)
//   eps: 1e-5 }
// The three blobs are statistics, not learned parameters: the layer turns
// param_propagate_down off for all of them so no solver updates them.
//
// Devices: one body for the CPU and the GPU (kernels/norm_kernels.hpp).
// Channel statistics are partial sums per (item, channel) plane (one
// contiguous loop per plane on the CPU, many coalesced parts per plane on
// the GPU) added up by two gemv calls against a ones vector; then one
// element-wise pass. Forward reads the bottom twice: once for the sums of
// d and d^2 about a per-channel shift (channel c's first value, d = x -
// shift; var = E[d^2] - E[d]^2, clamped at 0, which does not cancel when
// the mean is large against the spread), once for the output. Backward
// reads the top diff and output twice. The running
// statistics and the factor blobs[2] are read and updated where the pass
// runs, so a GPU pass never waits for the host.
//
// Folded Scale (CPU; Note [BatchNorm + Scale] in net_fold.cpp): when the Net
// folds the in-place Scale layer after this one into it, Forward writes
// y = s_c * x_hat + b_c (x_hat the normalised value, kept for Backward)
// and Backward takes dE/dy of the Scale's output with the per-channel
// sums the Scale's backward left:
//   dE/dx = s_c (dE/dy - mean(dE/dy) - x_hat mean(dE/dy x_hat)) * inv_c
// with inv_c = 1 / sqrt(var_c + eps) (global statistics: s_c dE/dy inv_c).
#ifndef POSEIDON_LAYERS_BATCH_NORM_LAYER_HPP_
#define POSEIDON_LAYERS_BATCH_NORM_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/util/device_reduce.hpp"

namespace poseidon {

template <typename Dtype>
class BatchNormLayer final : public Layer<Dtype> {
 public:
  explicit BatchNormLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "BatchNorm"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  // The two halves of a folded pass, called by the Net in place of Forward
  // and Backward (CPU; Note [BatchNorm + Scale] in net_fold.cpp).
  // ForwardFolded writes y = scale[c] * x_hat + bias[c] (bias may be null)
  // instead of x_hat; with `relu_slope` not null, the in-place ReLU after
  // the Scale is folded in too: y = max(t, 0) + slope * min(t, 0) of that
  // t, as the ReLU writes it (Note [BatchNorm + Scale + ReLU]). BackwardFolded
  // takes `channel_sums`, 3 x channels values: the sums over the batch of dE/dy
  // and of dE/dy * x_hat and the scale s_c, of the Scale layer's output. CPU
  // pointers.
  void ForwardFolded(const vector<Blob<Dtype>*>& bottom,
                     const vector<Blob<Dtype>*>& top, const Dtype* scale,
                     const Dtype* bias, const Dtype* relu_slope = nullptr);
  void BackwardFolded(const vector<Blob<Dtype>*>& top,
                      const vector<Blob<Dtype>*>& bottom,
                      const Dtype* channel_sums);
  // x_hat of the last Forward (what a plain Forward writes to the top).
  const Blob<Dtype>& normalized() const { return x_norm_; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // The bottom as num x channels_ x spatial.
  int Num(const Blob<Dtype>& blob) const;
  int Spatial(const Blob<Dtype>& blob) const;
  // out[c] = alpha * (sum over num and the `parts` partial sums of the
  // planes of channel c): two gemv calls.
  void ChannelSums(Poseidon::Brew dev, int num, int parts, Dtype alpha,
                   const Dtype* partial, Dtype* out);
  // Fills mean_, variance_ and inv_std_ from the batch and updates the
  // running sums.
  void BatchStatistics(Poseidon::Brew dev, const Blob<Dtype>& bottom);
  // ForwardOn's and BackwardOn's bodies, with a folded Scale's values
  // and ReLU's slope (null: none).
  void Normalize(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top, const Dtype* scale,
                 const Dtype* bias, const Dtype* relu_slope = nullptr);
  void BackwardBody(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom,
                    const Dtype* channel_sums);

  bool use_global_stats_ = false;
  Dtype moving_average_fraction_ = Dtype(0.999);
  Dtype eps_ = Dtype(1e-5);
  int channels_ = 0;
  // The statistics of the last Forward, one value per channel.
  Blob<Dtype> mean_;
  Blob<Dtype> variance_;
  Blob<Dtype> inv_std_;  // 1 / sqrt(variance_ + eps)
  // The normalised output of the last Forward, kept for Backward because a
  // later in-place layer may overwrite the top.
  Blob<Dtype> x_norm_;
  Blob<Dtype> partials_;  // 2 x (num * channels * parts) partial sums
  Blob<Dtype> row_sums_;  // num x channels
  Blob<Dtype> mean_dy_;   // per channel, Backward
  Blob<Dtype> mean_dy_y_;
  Blob<Dtype> gain_;  // folded backward: s_c / sqrt(var_c + eps)
  OnesVector<Dtype> ones_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_BATCH_NORM_LAYER_HPP_
