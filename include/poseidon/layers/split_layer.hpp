// SplitLayer: hands one blob to several consumers. The Net inserts it
// automatically wherever a blob feeds more than one layer, so that each
// consumer gets its own diff and the gradients are summed here.
//
//   top[k] = bottom                (all tops alias the bottom's data)
//   d bottom = sum_k d top[k]
//
// Bottom: one blob of any shape. Tops: one or more, each shaped like the
// bottom. No parameters. Not in-place (a top may not be the bottom).
// Backward sums the tops' diffs in one pass over them (Eltwise's SUM body,
// kernels/eltwise_kernels.hpp, up to 16 tops per pass) on the pass's device.
#ifndef POSEIDON_LAYERS_SPLIT_LAYER_HPP_
#define POSEIDON_LAYERS_SPLIT_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class SplitLayer final : public Layer<Dtype> {
 public:
  explicit SplitLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Split"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  // The bottom's diff may be top 0's: the other tops' diffs are added to
  // it in place.
  int BottomDiffSharesTop(int bottom_index) const override {
    return bottom_index == 0 ? 0 : -1;
  }

 protected:
  // Nothing: the tops alias the bottom's data (see Reshape).
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override {}
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_SPLIT_LAYER_HPP_
