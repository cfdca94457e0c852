// SliceLayer: cuts its bottom along one axis into consecutive pieces, one per
// top (the inverse of Concat).
//
//   top[k] = bottom[..., p_k : p_{k+1}, ...]   along `axis`,
//            with p_0 = 0, p_1..p_{K-1} the slice points, p_K = dim
//   d bottom = [d top[0], ..., d top[K-1]] along `axis`
//
// Bottom: one blob. Tops: K >= 1 blobs, the bottom's shape with dimension
//   `axis` replaced by the piece's length. With a single top the top aliases
//   the bottom (no copy).
// Parameters (slice_param):
//   axis         (default 1) the axis to cut; negative counts from the end.
//   slice_dim    (deprecated, non-negative) the same; give one or the other.
//   slice_point  (none) K-1 cut positions, strictly increasing, each in
//                (0, dim). Without them the axis is split into K equal
//                pieces, and K must divide dim.
// Both passes are block copies (util/block_ops.hpp): memcpy per block on the
// CPU, one kernel per top on the GPU.
#ifndef POSEIDON_LAYERS_SLICE_LAYER_HPP_
#define POSEIDON_LAYERS_SLICE_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class SliceLayer final : public Layer<Dtype> {
 public:
  explicit SliceLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Slice"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  int slice_axis_ = 1;
  int num_slices_ = 0;  // product of the dims before the axis
  int slice_size_ = 0;  // product of the dims after the axis
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_SLICE_LAYER_HPP_
