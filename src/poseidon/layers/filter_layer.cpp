// FilterLayer: reads the selector in Reshape (which every Forward runs first),
// then gathers forward and scatters backward, on either device.
#include "poseidon/layers/filter_layer.hpp"

#include "poseidon/util/block_ops.hpp"

namespace poseidon {

template <typename Dtype>
void FilterLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  num_bottoms_ = static_cast<int>(bottom.size());
  POSEIDON_REQUIRE(top.size() + 1 == bottom.size(), ConfigError,
                   "Filter layer needs one top per data bottom (all bottoms "
                   "but the last, the selector): ",
                   bottom.size(), " bottoms need ", bottom.size() - 1,
                   " tops, but ", top.size(), " were given");
  first_reshape_ = true;
}

template <typename Dtype>
void FilterLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  const Blob<Dtype>& selector = *bottom.back();
  POSEIDON_REQUIRE(
      selector.num_axes() >= 1 && selector.count() == selector.shape(0),
      ShapeError, "Filter: the selector (bottom[", bottom.size() - 1,
      "], shape ", selector.shape_string(),
      ") must have shape (N) or (N, 1, ..., 1)");
  const int num = selector.shape(0);
  for (size_t k = 0; k + 1 < bottom.size(); ++k) {
    POSEIDON_REQUIRE(bottom[k]->num_axes() >= 1 && bottom[k]->shape(0) == num,
                     ShapeError, "Filter: bottom[", k, "] (shape ",
                     bottom[k]->shape_string(), ") must have ", num,
                     " items along axis 0, like the selector (shape ",
                     selector.shape_string(), ")");
    for (size_t t = 0; t < top.size(); ++t) {
      POSEIDON_REQUIRE(top[t] != bottom[k], ConfigError,
                       "Filter cannot run in place (top[", t, "] is bottom[", k,
                       "])");
    }
  }
  selected_.clear();
  selected_on_gpu_ = nullptr;
  const Dtype* s = selector.cpu_data();
  for (int n = 0; n < num; ++n) {
    if (s[n] != Dtype(0)) selected_.push_back(n);
  }
  const int kept = first_reshape_ ? num : static_cast<int>(selected_.size());
  first_reshape_ = false;
  for (size_t k = 0; k < top.size(); ++k) {
    vector<int> shape = bottom[k]->shape();
    shape[0] = kept;
    top[k]->Reshape(shape);
  }
}

template <typename Dtype>
const int* FilterLayer<Dtype>::SelectedOn(Poseidon::Brew dev) {
  if (dev == Poseidon::CPU) return selected_.data();
  if (selected_on_gpu_ == nullptr) {
    selected_on_gpu_ = upload_.On(dev, selected_);
  }
  return selected_on_gpu_;
}

template <typename Dtype>
void FilterLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                   const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  if (selected_.empty()) return;
  const int* selected = SelectedOn(dev);
  const int kept = static_cast<int>(selected_.size());
  for (size_t k = 0; k < top.size(); ++k) {
    GatherRows(dev, kept, bottom[k]->count(1), bottom[k]->data_on(dev),
               selected, top[k]->mutable_data_on(dev));
  }
}

template <typename Dtype>
void FilterLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                    const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  POSEIDON_REQUIRE(!propagate_down.back(), ConfigError,
                   "Filter cannot backpropagate to its selector (bottom[",
                   bottom.size() - 1, "]); set propagate_down: false for it");
  const int kept = static_cast<int>(selected_.size());
  for (size_t k = 0; k < top.size(); ++k) {
    if (!propagate_down[k]) continue;
    Dtype* dx = bottom[k]->mutable_diff_on(dev);
    math::set<Dtype>(dev, bottom[k]->count(), Dtype(0), dx);
    if (kept == 0) continue;
    ScatterRows(dev, kept, bottom[k]->count(1), top[k]->diff_on(dev),
                SelectedOn(dev), dx);
  }
}

INSTANTIATE_CLASS(FilterLayer);
REGISTER_LAYER_CLASS(Filter);

}  // namespace poseidon
