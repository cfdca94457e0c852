// FilterLayer: keeps the items (indices along axis 0) whose selector value is
// non-zero, in order, in each of the K data bottoms.
//
//   S = { n : selector[n] != 0 } = {s_0 < s_1 < ...}
//   top[k][j, ...] = bottom[k][s_j, ...]
//   d bottom[k][n, ...] = d top[k][j, ...] if n = s_j, else 0
//
// Bottoms: K >= 1 data blobs, then the selector (last), shape (N) or
//   (N, 1, ..., 1); every data bottom has N items. Tops: K blobs, each
//   bottom[k]'s shape with |S| items. When nothing is selected the tops have
//   0 items (and the bottom diffs are all zero). During SetUp, before the
//   selector holds data, the tops are sized to all N items; every Forward
//   resizes them to |S|.
// No gradient to the selector: Backward throws if asked for one, and
// force_backward does not reach it. No parameters.
// On either device (util/block_ops.hpp): row gathers forward, zero then row
// scatters backward. The kept rows are found on the host in Reshape (the
// top's shape depends on them, as in Caffe); in GPU mode they go to the
// device once per Forward without waiting for the stream (IndexUpload).
#ifndef POSEIDON_LAYERS_FILTER_LAYER_HPP_
#define POSEIDON_LAYERS_FILTER_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/util/index_upload.hpp"

namespace poseidon {

template <typename Dtype>
class FilterLayer final : public Layer<Dtype> {
 public:
  explicit FilterLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Filter"; }
  int MinBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  // Every bottom but the selector (known once SetUp has run).
  bool AllowForceBackward(int bottom_index) const override {
    return bottom_index + 1 < num_bottoms_;
  }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // selected_ on `dev`, uploaded at most once per Reshape.
  const int* SelectedOn(Poseidon::Brew dev);

  vector<int> selected_;  // the item indices kept, increasing
  IndexUpload upload_;
  const int* selected_on_gpu_ = nullptr;  // from upload_, null when stale
  bool first_reshape_ = true;
  int num_bottoms_ = 0;  // including the selector
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_FILTER_LAYER_HPP_
