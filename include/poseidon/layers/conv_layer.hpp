// ConvolutionLayer: learned filters slid over the spatial axes.
//
//   top[n][o][y] = bias[o] + sum_{c in group(o)} sum_k
//                  W[o][c - first(group(o))][k] *
//                  bottom[n][c][y * stride - pad + k * dilation]
// with zero padding, for every output position y and kernel offset k (both
// multi-indices over the spatial axes).
//
// Bottom: (batch..., C, d_1, ..., d_N), N >= 1 spatial axes after `axis`.
// Top:    (batch..., num_output, o_1, ..., o_N) with
//   o_i = (d_i + 2 * pad_i - (dilation_i * (kernel_i - 1) + 1)) / stride_i + 1
// (integer division); the padded input must hold one dilated kernel.
// Several bottoms of one shape give as many tops, with shared weights.
// Parameters: see base_conv_layer.hpp (convolution_param).
#ifndef POSEIDON_LAYERS_CONV_LAYER_HPP_
#define POSEIDON_LAYERS_CONV_LAYER_HPP_

#include <vector>

#include "poseidon/layers/base_conv_layer.hpp"

namespace poseidon {

template <typename Dtype>
class ConvolutionLayer final : public BaseConvolutionLayer<Dtype> {
 public:
  explicit ConvolutionLayer(const LayerParameter& param)
      : BaseConvolutionLayer<Dtype>(param) {}

  const char* type() const override { return "Convolution"; }

 protected:
  bool reverse_dimensions() const override { return false; }
  void compute_output_shape(const Blob<Dtype>& bottom) override;

  // One body for both devices; see base_conv_layer.hpp for what runs.
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_CONV_LAYER_HPP_
