// MVNLayer: mean-variance normalisation of each item (and channel).
//
// The bottom is split into groups of `dim` consecutive values: one group per
// item (axis 0) with across_channels, else one per item and channel (axes 0
// and 1). Within a group, with biased statistics
//   m = mean(x),  s = sqrt(mean((x - m)^2)) + eps,
//   y = x - m                        (normalize_variance false)
//   y = (x - m) / s                  (normalize_variance true)
// and the backward, per group,
//   dx = dy - mean(dy)                                (without variance)
//   dx = (dy - mean(dy) - y * mean(y * dy)) / s       (with variance)
// The second is Caffe's: the exact gradient when eps = 0, treating eps as
// part of s otherwise (negligible at the default eps).
//
// Bottom: one blob of any shape; missing axes 0/1 count as 1. Top: the same
//   shape. Can run in place.
// Parameters (mvn_param):
//   normalize_variance  (default true) divide by s.
//   across_channels     (default false) one group per item instead of per
//                       item and channel.
//   eps                 (default 1e-9) added to the standard deviation.
//
// Devices: one body for the CPU and the GPU: the group means are gemv
// calls against a ones vector, the rest the bodies of
// kernels/norm_kernels.hpp.
#ifndef POSEIDON_LAYERS_MVN_LAYER_HPP_
#define POSEIDON_LAYERS_MVN_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/util/device_reduce.hpp"

namespace poseidon {

template <typename Dtype>
class MVNLayer final : public Layer<Dtype> {
 public:
  explicit MVNLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "MVN"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // out[g] = mean of the g-th group of `a` (one gemv).
  void GroupMeans(Poseidon::Brew dev, const Dtype* a, Dtype* out);

  int groups_ = 0;  // number of normalised groups
  int dim_ = 0;     // values per group
  // Per group: the mean (then mean(dy)), the variance (then mean(y * dy)),
  // and s from the last Forward.
  Blob<Dtype> mean_;
  Blob<Dtype> second_;
  Blob<Dtype> std_;
  Blob<Dtype> temp_;  // squares, then y * dy (the bottom's shape)
  OnesVector<Dtype> ones_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_MVN_LAYER_HPP_
