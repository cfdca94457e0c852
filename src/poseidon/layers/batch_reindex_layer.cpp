// BatchReindexLayer: an item gather forward, a scatter-add backward, on
// either device.
#include "poseidon/layers/batch_reindex_layer.hpp"

#include <cmath>

#include "poseidon/util/block_ops.hpp"

namespace poseidon {

template <typename Dtype>
void BatchReindexLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  const Blob<Dtype>& in = *bottom[0];
  const Blob<Dtype>& index = *bottom[1];
  POSEIDON_REQUIRE(top[0] != bottom[0] && top[0] != bottom[1], ConfigError,
                   "BatchReindex cannot run in place");
  POSEIDON_REQUIRE(index.num_axes() == 1, ShapeError,
                   "BatchReindex: the indices (bottom[1], shape ",
                   index.shape_string(), ") must be a 1-D blob");
  POSEIDON_REQUIRE(in.num_axes() >= 1, ShapeError,
                   "BatchReindex: bottom[0] (shape ", in.shape_string(),
                   ") needs an item axis");
  vector<int> top_shape = in.shape();
  top_shape[0] = index.shape(0);
  top[0]->Reshape(top_shape);
}

template <typename Dtype>
vector<int> BatchReindexLayer<Dtype>::Indices(
    const vector<Blob<Dtype>*>& bottom) const {
  const int num = bottom[0]->shape(0);
  const Dtype* idx = bottom[1]->cpu_data();
  vector<int> out(bottom[1]->count());
  for (size_t j = 0; j < out.size(); ++j) {
    const Dtype v = idx[j];
    POSEIDON_REQUIRE(v >= 0 && v < num && v == std::floor(v), ConfigError,
                     "BatchReindex: index ", v, " at position ", j,
                     " of bottom[1] is not an item of bottom[0] (shape ",
                     bottom[0]->shape_string(),
                     "); indices must be integers in [0, ", num, ")");
    out[j] = static_cast<int>(v);
  }
  return out;
}

template <typename Dtype>
void BatchReindexLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                         const vector<Blob<Dtype>*>& bottom,
                                         const vector<Blob<Dtype>*>& top) {
  const int num = static_cast<int>(Indices(bottom).size());  // checks them
  GatherRows(dev, num, bottom[0]->count(1), bottom[0]->data_on(dev),
             bottom[1]->data_on(dev), top[0]->mutable_data_on(dev));
}

template <typename Dtype>
void BatchReindexLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                          const vector<Blob<Dtype>*>& top,
                                          const vector<bool>& propagate_down,
                                          const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down[1], ConfigError,
                   "BatchReindex cannot backpropagate to its indices "
                   "(bottom[1]); set propagate_down: false for it");
  if (!propagate_down[0]) return;
  const vector<int> idx = Indices(bottom);
  Dtype* dx = bottom[0]->mutable_diff_on(dev);
  math::set<Dtype>(dev, bottom[0]->count(), Dtype(0), dx);
  ScatterAddRows(dev, idx, bottom[0]->count(1), top[0]->diff_on(dev), dx,
                 &segments_);
}

INSTANTIATE_CLASS(BatchReindexLayer);
REGISTER_LAYER_CLASS(BatchReindex);

}  // namespace poseidon
