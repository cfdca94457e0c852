// im2col / col2im: the patch rearrangements that turn a convolution into a
// matrix product (im2col) and scatter its gradient back onto the image
// (col2im).
//
// Layout (2-D). The image is (channels, height, width), row-major. The column
// matrix has channels * kernel_h * kernel_w rows and output_h * output_w
// columns; row (c * kernel_h + i) * kernel_w + j, column y * output_w + x holds
//   image[c][y * stride_h - pad_h + i * dilation_h]
//           [x * stride_w - pad_w + j * dilation_w],
// or 0 where that position falls in the padding. The output size per axis is
// ConvOutputSize() below.
//
// The *_batch_* variants treat `num` images stored back to back as one wide
// column matrix of num * output_h * output_w columns, image n owning columns
// [n * output_h * output_w, (n + 1) * output_h * output_w). One GEMM over that
// matrix convolves the whole batch (see Note [Batched im2col] in
// layers/conv_algorithms/batched_im2col_conv.cpp).
//
// Layout (N-D). im_shape is (channels, d_1, ..., d_N); col_shape is
// (channels * prod(kernel), o_1, ..., o_N). Rows enumerate (channel, kernel
// offsets) with the last kernel axis fastest, columns enumerate output
// positions row-major, exactly as in the 2-D case.
//
// col2im is the adjoint of im2col: it overwrites the image with the sum of
// every column entry that was read from each pixel (padding entries are
// dropped). Thread safety: pure functions of their arguments.
//
// The device versions at the end (im2col_on, col2im_on) run the
// per-element bodies of kernels/im2col_kernels.hpp on either device, over
// any number of images and either column layout; the GPU passes of
// Convolution, Deconvolution and Im2col use them, and the CPU tests check
// them against the functions above.
#ifndef POSEIDON_UTIL_IM2COL_HPP_
#define POSEIDON_UTIL_IM2COL_HPP_

#include <cstdint>

#include "poseidon/common.hpp"
#include "poseidon/kernels/im2col_kernels.hpp"

namespace poseidon {

// Number of window positions along one axis:
//   (in + 2 * pad - (dilation * (kernel - 1) + 1)) / stride + 1.
// Callers check the geometry first (the layers through WindowOutputSize,
// layers/conv_geometry.hpp: the padded input holds one dilated kernel and
// every position fits in an int); computed in 64 bits all the same.
inline int ConvOutputSize(int in, int kernel, int pad, int stride,
                          int dilation) {
  const int64_t extent = int64_t{dilation} * (kernel - 1) + 1;
  return static_cast<int>((int64_t{in} + 2 * int64_t{pad} - extent) / stride +
                          1);
}

template <typename Dtype>
void im2col_cpu(const Dtype* data_im, int channels, int height, int width,
                int kernel_h, int kernel_w, int pad_h, int pad_w, int stride_h,
                int stride_w, int dilation_h, int dilation_w, Dtype* data_col);

template <typename Dtype>
void col2im_cpu(const Dtype* data_col, int channels, int height, int width,
                int kernel_h, int kernel_w, int pad_h, int pad_w, int stride_h,
                int stride_w, int dilation_h, int dilation_w, Dtype* data_im);

// `num` images in, one (channels * kernel_h * kernel_w) x
// (num * output_h * output_w) column matrix out.
template <typename Dtype>
void im2col_batch_cpu(const Dtype* data_im, int num, int channels, int height,
                      int width, int kernel_h, int kernel_w, int pad_h,
                      int pad_w, int stride_h, int stride_w, int dilation_h,
                      int dilation_w, Dtype* data_col);

// The adjoint of im2col_batch_cpu; overwrites all `num` images.
template <typename Dtype>
void col2im_batch_cpu(const Dtype* data_col, int num, int channels, int height,
                      int width, int kernel_h, int kernel_w, int pad_h,
                      int pad_w, int stride_h, int stride_w, int dilation_h,
                      int dilation_w, Dtype* data_im);

// N-D versions; every shape array but im_shape and col_shape has
// num_spatial_axes entries, those two have num_spatial_axes + 1.
template <typename Dtype>
void im2col_nd_cpu(const Dtype* data_im, int num_spatial_axes,
                   const int* im_shape, const int* col_shape,
                   const int* kernel_shape, const int* pad, const int* stride,
                   const int* dilation, Dtype* data_col);

template <typename Dtype>
void col2im_nd_cpu(const Dtype* data_col, int num_spatial_axes,
                   const int* im_shape, const int* col_shape,
                   const int* kernel_shape, const int* pad, const int* stride,
                   const int* dilation, Dtype* data_im);

// How a column matrix over several images is laid out (see
// kernels/im2col_kernels.hpp): kSideBySide is im2col_batch_cpu's (one
// (rows, num * S) matrix), kImageAfterImage the per-image matrices one
// after another (the Im2col layer's top).
enum class ColumnLayout { kSideBySide, kImageAfterImage };

// The functors' geometry for `num` images of im_shape = (channels, d_1,
// ..., d_N) and the per-axis kernel, pad, stride and dilation (N values
// each). CHECKs N <= kernels::kMaxIm2colAxes and a non-empty output.
kernels::Im2colShape MakeIm2colShape(int num_axes, const int* im_shape,
                                     const int* kernel, const int* pad,
                                     const int* stride, const int* dilation,
                                     int num, ColumnLayout layout);

// im2col and col2im of every image in `shape`, on `dev` (asynchronous on
// the GPU). `nd` picks the N-D bodies even for 2 axes (force_nd_im2col);
// results are the same. col2im overwrites the images.
template <typename Dtype>
void im2col_on(Poseidon::Brew dev, const kernels::Im2colShape& shape, bool nd,
               const Dtype* data_im, Dtype* data_col);
template <typename Dtype>
void col2im_on(Poseidon::Brew dev, const kernels::Im2colShape& shape, bool nd,
               const Dtype* data_col, Dtype* data_im);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_IM2COL_HPP_
