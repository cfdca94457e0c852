// ConvGeometry: the per-spatial-axis kernel, stride, pad and dilation of a
// convolution_param, read the same way by every layer that takes one
// (Convolution, Deconvolution, Im2col).
//
// Each of kernel_size, stride, pad and dilation is a repeated field holding
// one value for every spatial axis or one value per axis; for 2-D,
// kernel_h/kernel_w, stride_h/stride_w and pad_h/pad_w may be given instead
// (both of a pair, and not together with the repeated field).
// Defaults: kernel none (required), stride 1, pad 0, dilation 1.
#ifndef POSEIDON_LAYERS_CONV_GEOMETRY_HPP_
#define POSEIDON_LAYERS_CONV_GEOMETRY_HPP_

#include <string>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/proto/caffe.pb.h"

namespace poseidon {

struct ConvGeometry {
  vector<int> kernel;    // > 0
  vector<int> stride;    // > 0
  vector<int> pad;       // >= 0
  vector<int> dilation;  // > 0

  // True when every kernel is 1, every stride 1 and every pad 0 (the image
  // is its own im2col matrix).
  bool is_1x1() const;
};

// Reads `p` for `num_spatial_axes` axes. Throws ConfigError naming the
// field for a missing kernel, a wrong number of values, mixed or half-given
// _h/_w forms, _h/_w with other than 2 axes, a value that is negative (a
// negative number stored into the uint32 field), or a kernel, stride or
// dilation of 0.
ConvGeometry ParseConvGeometry(const ConvolutionParameter& p,
                               int num_spatial_axes);

// "3 x 3 x 2": per-axis values for messages.
string JoinAxisValues(const vector<int>& values);

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_CONV_GEOMETRY_HPP_
