// ConvGeometry: the per-spatial-axis kernel, stride, pad and dilation of a
// convolution_param, read the same way by every layer that takes one
// (Convolution, Deconvolution, Im2col); and the size arithmetic of every
// sliding-window layer (those three, Pooling and SPP's levels), done once
// here in 64 bits (see Note [Window sizes in 64 bits] in the .cpp).
//
// Each of kernel_size, stride, pad and dilation is a repeated field holding
// one value for every spatial axis or one value per axis; for 2-D,
// kernel_h/kernel_w, stride_h/stride_w and pad_h/pad_w may be given instead
// (both of a pair, and not together with the repeated field).
// Defaults: kernel none (required), stride 1, pad 0, dilation 1.
#ifndef POSEIDON_LAYERS_CONV_GEOMETRY_HPP_
#define POSEIDON_LAYERS_CONV_GEOMETRY_HPP_

#include <cstddef>
#include <cstdint>
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
// _h/_w forms, _h/_w with other than 2 axes, a value above INT_MAX (quoted
// as written, e.g. 4294967295), or a kernel, stride or dilation of 0.
ConvGeometry ParseConvGeometry(const ConvolutionParameter& p,
                               int num_spatial_axes);

// "3 x 3 x 2": per-axis values for messages.
string JoinAxisValues(const vector<int>& values);
string JoinAxisValues(const vector<int64_t>& values);

// The uint32 field `field` (e.g. "pooling_param.pad") as an int. Throws
// ConfigError quoting the value as written when it is above INT_MAX (what a
// negative number written into the field also becomes).
int UInt32FieldToInt(const string& field, uint32_t value);

// One spatial axis of a sliding window: the bottom's size along it and the
// layer's parameters, as written.
struct WindowAxis {
  int64_t input = 0;
  int64_t kernel = 1;
  int64_t pad = 0;
  int64_t stride = 1;
  int64_t dilation = 1;
};

// What the window's rule depends on besides the sizes, and what its errors
// name.
struct WindowRule {
  const char* param = "";  // "convolution_param", "pooling_param"
  int axis = 0;            // the spatial axis, from 0
  // For messages: the bottom's shape (may be null) and the axis of it.
  const vector<int>* bottom_shape = nullptr;
  int bottom_axis = 0;
  bool ceil = false;  // CEIL rounding (Pooling's default); else FLOOR
  // Return 0 for an empty output, for the caller to report (Pooling names
  // both axes in one message), instead of throwing ShapeError.
  bool empty_ok = false;
  // Drop the last window when it would start at or past input + pad
  // (Caffe's rule for Pooling with a pad on any axis).
  bool clip_last_window = false;
};

// The number of window positions along one axis,
//   (input + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1,
// rounded down (or up with rule.ceil), computed in 64 bits. Throws
// ConfigError, naming the field and quoting the values as written, when the
// kernel extent, the padded input or a window position (up to the padded
// input plus the stride) does not fit in an int, and ShapeError when the
// input is empty or the window does not fit the padded input (the output
// would be empty; 0 with rule.empty_ok). A result from here fits in an int, and so does every
// position the im2col, pooling and convolution kernels compute from it.
int WindowOutputSize(const WindowAxis& a, const WindowRule& rule);

// Checks a blob or buffer of shape `dims` before anything is allocated for
// it: ShapeError when its element count, or the product of its non-zero
// dimensions (the per-image counts of an empty batch), does not fit in an
// int (computed without overflow), OutOfMemoryError (as RequireAllocatable) when its
// count * element_size bytes exceed what one allocation may take. `what`
// names it ("the top (convolution_param.num_output)"); the message quotes
// the shape. Cheap when it fits: layers call it at every Reshape. Returns
// the count.
int64_t RequireBlobFits(const vector<int64_t>& dims, size_t element_size,
                        const char* what);

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_CONV_GEOMETRY_HPP_
