// TileLayer: repeats the bottom `tiles` times along one axis, the whole block
// from `axis` on at a time (numpy.tile, not numpy.repeat).
//
//   bottom viewed as (outer, inner), outer = dims before `axis`,
//   inner = product of the dims from `axis` on;
//   top[o, t * inner + i] = bottom[o, i]          for t in [0, tiles)
//   d bottom[o, i] = sum_t d top[o, t * inner + i]
//
// Bottom: one blob. Top: the bottom's shape with dimension `axis` multiplied
//   by `tiles` (e.g. 2x3 tiled 2 times on axis 1 gives 2x6 holding
//   [a b c a b c] in each row).
// Parameters (tile_param):
//   axis   (default 1) the axis to tile; negative counts from the end.
//   tiles  (required, > 0) the number of copies.
// Both passes are util/block_ops.hpp's TileRows/SumTiles: memcpy and axpy
// loops on the CPU, one kernel each on the GPU (the backward sums the copies
// of each element in the CPU's order).
#ifndef POSEIDON_LAYERS_TILE_LAYER_HPP_
#define POSEIDON_LAYERS_TILE_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class TileLayer final : public Layer<Dtype> {
 public:
  explicit TileLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Tile"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  int tiles_ = 1;
  int outer_dim_ = 0;  // product of the dims before the axis
  int inner_dim_ = 0;  // product of the dims from the axis on
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_TILE_LAYER_HPP_
