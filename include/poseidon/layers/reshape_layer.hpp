// ReshapeLayer: gives the bottom's data a new shape without copying.
//
// The axes [axis, axis + num_axes) of the bottom are replaced by
// reshape_param.shape; the axes before and after are kept:
//   top shape = bottom[0:axis] ++ shape ++ bottom[axis + num_axes:]
// In `shape`, 0 copies the bottom's dimension at the same position (relative
// to `axis`) and -1 (at most once) is inferred so that the counts match. The
// top aliases the bottom's data and diff (ShareData/ShareDiff). Not in-place.
// Parameters (reshape_param):
//   shape     (required) the new dimensions, with 0 and -1 as above.
//   axis      (default 0) first replaced axis; negative counts from the end,
//             -1 meaning "after the last axis".
//   num_axes  (default -1) how many axes are replaced; -1 means all from
//             `axis` on.
#ifndef POSEIDON_LAYERS_RESHAPE_LAYER_HPP_
#define POSEIDON_LAYERS_RESHAPE_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class ReshapeLayer final : public Layer<Dtype> {
 public:
  explicit ReshapeLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Reshape"; }
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

 private:
  vector<int> copy_axes_;       // positions in `shape` holding 0
  int inferred_axis_ = -1;      // position in `shape` holding -1, or -1
  int64_t constant_count_ = 1;  // product of the positive entries of `shape`
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_RESHAPE_LAYER_HPP_
