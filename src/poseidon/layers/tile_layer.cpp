// TileLayer: block copies forward, block sums backward, on either device.
#include "poseidon/layers/tile_layer.hpp"

#include <climits>

#include "poseidon/util/block_ops.hpp"

namespace poseidon {

template <typename Dtype>
void TileLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  const TileParameter& p = this->layer_param_.tile_param();
  POSEIDON_REQUIRE(p.has_tiles(), ConfigError,
                   "Tile layer needs tile_param.tiles");
  POSEIDON_REQUIRE(p.tiles() > 0, ConfigError,
                   "tile_param.tiles must be positive, got ", p.tiles());
  tiles_ = p.tiles();
}

template <typename Dtype>
void TileLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                               const vector<Blob<Dtype>*>& top) {
  const TileParameter& p = this->layer_param_.tile_param();
  const Blob<Dtype>& in = *bottom[0];
  const int num_axes = in.num_axes();
  POSEIDON_REQUIRE(top[0] != bottom[0], ConfigError,
                   "Tile cannot run in place");
  POSEIDON_REQUIRE(p.axis() >= -num_axes && p.axis() < num_axes, ConfigError,
                   "tile_param.axis ", p.axis(),
                   " is out of range for a bottom with num_axes ", num_axes,
                   " (shape ", in.shape_string(), ")");
  const int axis = p.axis() < 0 ? p.axis() + num_axes : p.axis();
  POSEIDON_REQUIRE(static_cast<int64_t>(in.count()) * tiles_ <= INT_MAX,
                   ShapeError, "Tile: ", tiles_,
                   " copies of a bottom of shape ", in.shape_string(),
                   " exceed INT_MAX elements");
  vector<int> top_shape = in.shape();
  top_shape[axis] *= tiles_;
  top[0]->Reshape(top_shape);
  outer_dim_ = in.count(0, axis);
  inner_dim_ = in.count(axis);
}

template <typename Dtype>
void TileLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  TileRows(dev, outer_dim_, inner_dim_, tiles_, bottom[0]->data_on(dev),
           top[0]->mutable_data_on(dev));
}

template <typename Dtype>
void TileLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& top,
                                  const vector<bool>& propagate_down,
                                  const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  SumTiles(dev, outer_dim_, inner_dim_, tiles_, top[0]->diff_on(dev),
           bottom[0]->mutable_diff_on(dev));
}

INSTANTIATE_CLASS(TileLayer);
REGISTER_LAYER_CLASS(Tile);

}  // namespace poseidon
