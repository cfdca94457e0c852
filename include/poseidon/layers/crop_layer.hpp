// CropLayer: cuts a window out of bottom[0], the size of bottom[1], on every
// axis from `axis` on (e.g. aligning an upsampled score map with the input
// image in FCNs).
//
//   top[i_0, ..., i_{n-1}] = bottom[0][i_0 + o_0, ..., i_{n-1} + o_{n-1}]
//   with o_d = 0 for d < axis and o_d the offset for d >= axis;
//   d bottom[0] = d top inside the window, 0 outside. bottom[1] only supplies
//   a shape and gets no gradient (its diff is zeroed if one is requested).
//
// Bottoms: bottom[0] the data; bottom[1] the reference, same number of axes,
//   with shape(d) + o_d <= bottom[0].shape(d) for d >= axis.
// Top: bottom[0]'s dims before `axis`, then bottom[1]'s dims.
// Parameters (crop_param):
//   axis    (default 2) the first cropped axis; negative counts from the end.
//   offset  (default all 0) none; one value for every cropped axis; or one
//           value per cropped axis (num_axes - axis values).
// The window is copied by util/block_ops.hpp's CopyWindow: row by row on the
// CPU, one kernel over the top's elements on the GPU.
#ifndef POSEIDON_LAYERS_CROP_LAYER_HPP_
#define POSEIDON_LAYERS_CROP_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class CropLayer final : public Layer<Dtype> {
 public:
  explicit CropLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Crop"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override {
    return bottom_index == 0;
  }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  vector<int> offsets_;  // per axis of bottom[0]
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_CROP_LAYER_HPP_
