// DeconvolutionLayer: the transpose of Convolution ("fractionally strided"
// or "transposed" convolution), used for learned upsampling (FCN, decoders).
// Every bottom pixel scatters a weighted copy of the kernel into the top:
//
//   top[n][o][y * stride - pad + k * dilation] +=
//       W[c][o - first(group(c))][k] * bottom[n][c][y]
//   top[n][o][...] += bias[o]
// for every bottom position y, kernel offset k (multi-indices over the
// spatial axes) and output o in the group of bottom channel c; positions
// that fall into the padding are dropped. This is exactly the input
// gradient of a Convolution with the same parameters, so a Convolution
// and a Deconvolution sharing weights are adjoint operators.
//
// Bottom: (batch..., C, d_1, ..., d_N), N >= 1 spatial axes after `axis`.
// Top:    (batch..., num_output, o_1, ..., o_N) with
//   o_i = stride_i * (d_i - 1) + dilation_i * (kernel_i - 1) + 1 - 2 * pad_i,
// which must be positive. A Convolution with the same parameters maps the
// top shape back to the bottom shape.
// Weights: blobs()[0] of shape (C, num_output / group, kernel...), i.e. the
// channel axes of a Convolution's weights swapped; bias: blobs()[1] of shape
// (num_output) if bias_term. Several bottoms of one shape give as many tops.
// Parameters: convolution_param as for Convolution (base_conv_layer.hpp):
// num_output, bias_term (true), kernel_size or kernel_h/_w, stride (1),
// pad (0), dilation (1), group (1), axis (1), force_nd_im2col (false),
// weight_filler, bias_filler. For bilinear upsampling by a factor f use
// kernel_size 2f - f % 2, stride f, pad ceil((f - 1) / 2),
// group = num_output = C, weight_filler bilinear, bias_term false and
// param { lr_mult: 0 }.
#ifndef POSEIDON_LAYERS_DECONV_LAYER_HPP_
#define POSEIDON_LAYERS_DECONV_LAYER_HPP_

#include <vector>

#include "poseidon/layers/base_conv_layer.hpp"

namespace poseidon {

template <typename Dtype>
class DeconvolutionLayer final : public BaseConvolutionLayer<Dtype> {
 public:
  explicit DeconvolutionLayer(const LayerParameter& param)
      : BaseConvolutionLayer<Dtype>(param) {}

  const char* type() const override { return "Deconvolution"; }

 protected:
  bool reverse_dimensions() const override { return true; }
  void compute_output_shape(const Blob<Dtype>& bottom) override;

  // One body for both devices; see base_conv_layer.hpp for what runs.
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_DECONV_LAYER_HPP_
