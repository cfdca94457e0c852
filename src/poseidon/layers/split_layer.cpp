// SplitLayer: tops alias the bottom's data; backward sums the top diffs.
#include "poseidon/layers/split_layer.hpp"

namespace poseidon {

template <typename Dtype>
void SplitLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  for (size_t i = 0; i < top.size(); ++i) {
    POSEIDON_REQUIRE(top[i] != bottom[0], ConfigError,
                     "Split layer cannot run in place (top ", i,
                     " is the bottom)");
    top[i]->ReshapeLike(*bottom[0]);
    // Re-shared on every Reshape (which Forward runs first), so the tops
    // follow the bottom if its memory was reallocated.
    top[i]->ShareData(*bottom[0]);
  }
}

template <typename Dtype>
void SplitLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                   const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  Dtype* bottom_diff = bottom[0]->mutable_diff_on(dev);
  if (top.size() == 1) {
    math::copy<Dtype>(dev, count, top[0]->diff_on(dev), bottom_diff);
    return;
  }
  math::add<Dtype>(dev, count, top[0]->diff_on(dev), top[1]->diff_on(dev),
                   bottom_diff);
  for (size_t i = 2; i < top.size(); ++i) {
    math::axpy<Dtype>(dev, count, Dtype(1), top[i]->diff_on(dev), bottom_diff);
  }
}

INSTANTIATE_CLASS(SplitLayer);
REGISTER_LAYER_CLASS(Split);

}  // namespace poseidon
