// TileLayer: block copies forward, block sums backward.
#include "poseidon/layers/tile_layer.hpp"

#include <climits>

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
void TileLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int o = 0; o < outer_dim_; ++o) {
    for (int t = 0; t < tiles_; ++t) {
      cpu_copy(inner_dim_, x, y);
      y += inner_dim_;
    }
    x += inner_dim_;
  }
}

template <typename Dtype>
void TileLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int o = 0; o < outer_dim_; ++o) {
    cpu_copy(inner_dim_, dy, dx);
    dy += inner_dim_;
    for (int t = 1; t < tiles_; ++t) {
      cpu_axpy(inner_dim_, Dtype(1), dy, dx);
      dy += inner_dim_;
    }
    dx += inner_dim_;
  }
}

INSTANTIATE_CLASS(TileLayer);
REGISTER_LAYER_CLASS(Tile);

}  // namespace poseidon
