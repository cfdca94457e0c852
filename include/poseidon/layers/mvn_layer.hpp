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
#ifndef POSEIDON_LAYERS_MVN_LAYER_HPP_
#define POSEIDON_LAYERS_MVN_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

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
  void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  void Backward_cpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override;

 private:
  int groups_ = 0;     // number of normalised groups
  int dim_ = 0;        // values per group
  vector<Dtype> std_;  // s per group, from the last Forward
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_MVN_LAYER_HPP_
