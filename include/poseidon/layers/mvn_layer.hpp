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
// Devices: one body for both (Note [Layer bodies] in layer.hpp), the
// functors of kernels/norm_kernels.hpp: partial sums per group (one
// contiguous part per group on the CPU, many coalesced parts on the GPU)
// added up by a gemv against a ones vector, then one element-wise pass.
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
  // out[g] = (sum of the `parts` partial sums of group g) / dim_.
  void GroupMeans(Poseidon::Brew dev, const Dtype* partial, int parts,
                  Dtype* out);

  int groups_ = 0;  // number of normalised groups
  int dim_ = 0;     // values per group
  // Per group: the mean (then mean(dy)), the variance (then mean(y * dy)),
  // and s from the last Forward.
  Blob<Dtype> mean_;
  Blob<Dtype> second_;
  Blob<Dtype> std_;
  Blob<Dtype> partials_;  // 2 x groups x parts partial sums
  OnesVector<Dtype> ones_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_MVN_LAYER_HPP_
