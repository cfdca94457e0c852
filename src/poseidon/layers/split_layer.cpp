// SplitLayer: tops alias the bottom's data; backward sums the top diffs.
#include "poseidon/layers/split_layer.hpp"

#include <algorithm>

#include "poseidon/kernels/eltwise_kernels.hpp"
#include "poseidon/util/for_each.hpp"

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
  if (top.size() == 2) {
    // math::add (vectorized, split over the pool) beat the general body
    // below for two tops, the common case (ResNet's shortcuts): 20 against
    // 27 ms per ResNet-50 iteration at batch 8 on 2 threads.
    math::add<Dtype>(dev, count, top[0]->diff_on(dev), top[1]->diff_on(dev),
                     bottom_diff);
    return;
  }
  // One pass over up to kEltwiseMaxInputs tops, summed in their order;
  // more continue from the partial sum.
  const int num_tops = static_cast<int>(top.size());
  for (int first = 0; first < num_tops; first += kernels::kEltwiseMaxInputs) {
    kernels::EltwiseSum<Dtype> f{};
    f.num = std::min(kernels::kEltwiseMaxInputs, num_tops - first);
    for (int k = 0; k < f.num; ++k) {
      f.x[k] = top[first + k]->diff_on(dev);
      f.coeff[k] = Dtype(1);
    }
    f.resume = first > 0;
    f.y = bottom_diff;
    for_each(dev, count, f);
  }
}

INSTANTIATE_CLASS(SplitLayer);
REGISTER_LAYER_CLASS(Split);

}  // namespace poseidon
