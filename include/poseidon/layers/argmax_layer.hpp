// ArgMaxLayer: the indices (and optionally the values) of the top_k largest
// entries, per item or along one axis.
//
// Without `axis`: each item n (axis 0) is flattened to D = count(1) values and
//   top shape is (N, 1, top_k), or (N, 2, top_k) with out_max_val, where
//   top[n][0] holds the indices (0..D-1) and top[n][1] the values. The top
//   has as many axes as the bottom, at least 3, padded with trailing 1s
//   (N x 5 gives N x 1 x top_k; N x C x H x W gives N x 1 x top_k x 1).
// With `axis`: the bottom's shape with dimension `axis` replaced by top_k;
//   it holds the indices along that axis, or the values with out_max_val.
// Ranks are in decreasing value; equal values rank the higher index first
// (Caffe's order). Indices are stored as Dtype.
//
// Bottom: one blob. Top: one blob as above. No gradient: Backward throws if
// asked for one, and force_backward does not reach the bottom.
// Forward runs on the CPU only (Caffe has no GPU ArgMax either): in GPU mode
// it reads the bottom on the host (the usual CPU-fallback warning says so).
// Backward has nothing to compute on either device, so it never falls back.
// Parameters (argmax_param):
//   top_k        (default 1) how many entries; 1 <= top_k <= D (or <= the
//                axis dimension).
//   out_max_val  (default false) output values as described above.
//   axis         (unset) the axis to search; negative counts from the end.
#ifndef POSEIDON_LAYERS_ARGMAX_LAYER_HPP_
#define POSEIDON_LAYERS_ARGMAX_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class ArgMaxLayer final : public Layer<Dtype> {
 public:
  explicit ArgMaxLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "ArgMax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

 protected:
  void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  // Throws if a gradient is requested; nothing else, on either device.
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  int top_k_ = 1;
  bool out_max_val_ = false;
  bool has_axis_ = false;
  int axis_ = 0;  // canonical, when has_axis_
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_ARGMAX_LAYER_HPP_
