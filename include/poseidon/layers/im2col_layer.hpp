// Im2colLayer: rearranges every image's convolution windows into columns,
// the data layout a convolution multiplies by its weights (useful to build
// convolutions out of other layers, or to inspect patches).
//
// For each image (index over the axes before the channel axis) the top holds
// the matrix of util/im2col.hpp: row (c * prod(kernel) + kernel offset),
// column (output position), the window entries at
//   in[c][o_k * stride_k - pad_k + i_k * dilation_k]   (0 in the padding)
// Backward sums the column gradients back onto the pixels they came from.
//
// Bottom: (outer..., C, d_1, ..., d_S) with the channel axis
//   convolution_param.axis and S >= 1 spatial axes after it.
// Top: (outer..., C * prod(kernel), o_1, ..., o_S), per spatial axis
//   o = (d + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1.
// Parameters (convolution_param; the rest, e.g. num_output, is ignored):
//   kernel_size (one value or one per spatial axis) or kernel_h/kernel_w
//               (2-D only); required, > 0.
//   stride (default 1), pad (default 0), dilation (default 1): one value or
//               one per spatial axis; stride_h/_w and pad_h/_w for 2-D.
//   axis        (default 1) the channel axis.
//   force_nd_im2col (default false) use the N-D kernels even for 2-D.
// The padded input must hold one dilated kernel along every axis.
//
// Bodies (Note [Layer bodies] in layer.hpp): the portable body is one pass
// of the per-element functors of kernels/im2col_kernels.hpp over all images
// (col2im as a gather: no atomics), on either device; the tuned CPU path
// runs im2col_cpu / col2im_cpu image by image (row-wise copies). More than
// kernels::kMaxIm2colAxes spatial axes always take the CPU loop (on the
// host in GPU mode).
#ifndef POSEIDON_LAYERS_IM2COL_LAYER_HPP_
#define POSEIDON_LAYERS_IM2COL_LAYER_HPP_

#include <vector>

#include "poseidon/kernels/im2col_kernels.hpp"
#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class Im2colLayer final : public Layer<Dtype> {
 public:
  explicit Im2colLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Im2col"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  bool has_tuned_cpu() const override { return true; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;
  void TunedForward_cpu(const vector<Blob<Dtype>*>& bottom,
                        const vector<Blob<Dtype>*>& top) override;
  void TunedBackward_cpu(const vector<Blob<Dtype>*>& top,
                         const vector<bool>& propagate_down,
                         const vector<Blob<Dtype>*>& bottom) override;

 private:
  bool Use2d() const { return num_spatial_axes_ == 2 && !force_nd_; }
  // Whether the per-element functors take this geometry's axes (warns
  // once when not).
  bool PortableAxes() const;
  kernels::Im2colShape Shape() const;

  int channel_axis_ = 1;
  int num_spatial_axes_ = 0;
  int bottom_num_axes_ = 0;
  bool force_nd_ = false;
  vector<int> kernel_, stride_, pad_, dilation_;
  // (C, d_1, ...) and (C * prod(kernel), o_1, ...) for the N-D kernels.
  vector<int> im_shape_, col_shape_;
  int num_ = 0;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_IM2COL_LAYER_HPP_
