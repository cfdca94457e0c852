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
// Devices: one body for the CPU and the GPU. Channel means are two gemv
// calls against a ones vector (over spatial, then over num); the rest are
// the per-element and per-channel bodies of kernels/norm_kernels.hpp. The
// running statistics and the factor blobs[2] are read and updated where the
// pass runs, so a GPU pass never waits for the host.
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
  // out[c] = alpha * (sum over num and spatial of channel c of `a`), `a`
  // shaped like the bottom: two gemv calls.
  void ChannelSums(Poseidon::Brew dev, int num, int spatial, Dtype alpha,
                   const Dtype* a, Dtype* out);
  // Fills mean_, variance_ and inv_std_ from the batch and updates the
  // running sums.
  void BatchStatistics(Poseidon::Brew dev, const Blob<Dtype>& bottom);

  bool use_global_stats_ = false;
  Dtype moving_average_fraction_ = Dtype(0.999);
  Dtype eps_ = Dtype(1e-5);
  int channels_ = 0;
  // The statistics of the last Forward, one value per channel.
  Blob<Dtype> mean_;
  Blob<Dtype> variance_;
  Blob<Dtype> inv_std_;  // 1 / sqrt(variance_ + eps)
  // The normalised output of the last Forward, kept for Backward because a
  // later in-place layer may overwrite the top. Forward also uses it for the
  // squared deviations before it holds the output.
  Blob<Dtype> x_norm_;
  Blob<Dtype> temp_;      // dy * y in Backward (the bottom's shape)
  Blob<Dtype> row_sums_;  // num x channels partial sums
  Blob<Dtype> mean_dy_;   // per channel, Backward
  Blob<Dtype> mean_dy_y_;
  OnesVector<Dtype> ones_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_BATCH_NORM_LAYER_HPP_
