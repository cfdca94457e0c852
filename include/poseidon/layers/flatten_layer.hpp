// FlattenLayer: merges the axes [axis, end_axis] of its bottom into one.
//
//   bottom (d0, ..., d_{a-1}, d_a, ..., d_e, d_{e+1}, ...)
//   top    (d0, ..., d_{a-1}, d_a * ... * d_e, d_{e+1}, ...)
//
// The top aliases the bottom's data and diff (ShareData/ShareDiff): no copy
// in either direction. Not in-place (the top must be a different blob).
// Parameters (flatten_param):
//   axis      (default 1)  first axis to merge; negative counts from the end.
//   end_axis  (default -1) last axis to merge, inclusive.
#ifndef POSEIDON_LAYERS_FLATTEN_LAYER_HPP_
#define POSEIDON_LAYERS_FLATTEN_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class FlattenLayer final : public Layer<Dtype> {
 public:
  explicit FlattenLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Flatten"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  // Both are no-ops on either device: the top aliases the bottom, so GPU
  // mode copies nothing and needs no CPU fallback.
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override {}
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override {}
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_FLATTEN_LAYER_HPP_
