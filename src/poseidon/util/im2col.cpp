// CPU im2col / col2im. The 2-D versions work a whole output row at a time:
// for a fixed kernel offset the output columns whose input falls inside the
// image form one contiguous range, so each row is a zero fill, a copy (a
// memcpy when stride_w is 1) and a zero fill, with no per-element bounds test.
#include "poseidon/util/im2col.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "poseidon/util/for_each.hpp"

namespace poseidon {
namespace {

// The geometry of one axis is one the layers accept (Note [Window sizes in
// 64 bits] in layers/conv_geometry.cpp): every position the bodies below
// compute, up to the padded input plus the stride, fits in an int, and the
// output is not empty. Returns the output size.
int CheckedOutputSize(int in, int kernel, int pad, int stride, int dilation,
                      const char* axis) {
  const int64_t extent = int64_t{dilation} * (kernel - 1) + 1;
  const int64_t padded = int64_t{in} + 2 * int64_t{pad};
  CHECK(in >= 0 && kernel > 0 && pad >= 0 && stride > 0 && dilation > 0 &&
        extent <= INT_MAX && padded + stride - 1 <= INT_MAX && padded >= extent)
      << "im2col: unchecked geometry along " << axis << ": input " << in
      << ", kernel " << kernel << ", pad " << pad << ", stride " << stride
      << ", dilation " << dilation;
  return ConvOutputSize(in, kernel, pad, stride, dilation);
}

struct Geometry2D {
  int channels, height, width;
  int kernel_h, kernel_w;
  int pad_h, pad_w;
  int stride_h, stride_w;
  int dilation_h, dilation_w;
  int output_h, output_w;
};

Geometry2D MakeGeometry(int channels, int height, int width, int kernel_h,
                        int kernel_w, int pad_h, int pad_w, int stride_h,
                        int stride_w, int dilation_h, int dilation_w) {
  Geometry2D g;
  g.channels = channels;
  g.height = height;
  g.width = width;
  g.kernel_h = kernel_h;
  g.kernel_w = kernel_w;
  g.pad_h = pad_h;
  g.pad_w = pad_w;
  g.stride_h = stride_h;
  g.stride_w = stride_w;
  g.dilation_h = dilation_h;
  g.dilation_w = dilation_w;
  g.output_h = CheckedOutputSize(height, kernel_h, pad_h, stride_h, dilation_h,
                                 "the height");
  g.output_w = CheckedOutputSize(width, kernel_w, pad_w, stride_w, dilation_w,
                                 "the width");
  return g;
}

// The output positions x in [0, size) whose input x * stride + offset lies
// in [0, limit) form the range [*lo, *hi). The ceil-divisions are written
// as (n - 1) / stride + 1: n + stride - 1 may pass INT_MAX even where the
// geometry's every position fits (Note [Window sizes in 64 bits]).
void InsideRange(int offset, int stride, int limit, int size, int* lo,
                 int* hi) {
  const int first = offset >= 0 ? 0 : (-offset - 1) / stride + 1;
  const int rest = limit - offset;
  const int end = rest <= 0 ? 0 : (rest - 1) / stride + 1;
  *lo = std::min(first, size);
  *hi = std::max(*lo, std::min(end, size));
}

// Moves one image between image and column layout. kToColumns: im2col
// (column entries overwritten, padding written as 0); otherwise col2im
// (image entries accumulated, the caller zeroes the image first). Column row
// r starts at col + r * col_ld.
template <bool kToColumns, typename Dtype>
void Transfer2D(const Geometry2D& g,
                std::conditional_t<kToColumns, const Dtype*, Dtype*> im,
                std::conditional_t<kToColumns, Dtype*, const Dtype*> col,
                std::ptrdiff_t col_ld) {
  const int oh = g.output_h;
  const int ow = g.output_w;
  // With unit strides and as many output as input columns, column entry
  // (y, x) of a kernel offset reads image element (y, x) plus a fixed
  // offset, so a whole block of valid rows is a single contiguous copy (the
  // "same"-padded convolutions of most nets).
  const bool contiguous = g.stride_h == 1 && g.stride_w == 1 && ow == g.width;
  const std::ptrdiff_t plane = static_cast<std::ptrdiff_t>(g.height) * g.width;
  for (int c = 0; c < g.channels; ++c) {
    auto im_c = im + c * plane;
    for (int i = 0; i < g.kernel_h; ++i) {
      const int h_off = i * g.dilation_h - g.pad_h;
      int y_lo, y_hi;
      InsideRange(h_off, g.stride_h, g.height, oh, &y_lo, &y_hi);
      for (int j = 0; j < g.kernel_w; ++j, col += col_ld) {
        const int w_off = j * g.dilation_w - g.pad_w;
        int x_lo, x_hi;
        InsideRange(w_off, g.stride_w, g.width, ow, &x_lo, &x_hi);
        if constexpr (kToColumns) {
          std::fill(col, col + static_cast<std::ptrdiff_t>(y_lo) * ow,
                    Dtype(0));
          std::fill(col + static_cast<std::ptrdiff_t>(y_hi) * ow,
                    col + static_cast<std::ptrdiff_t>(oh) * ow, Dtype(0));
          if (contiguous && y_lo < y_hi && x_lo < x_hi) {
            // One copy for all valid rows, then re-zero the columns that
            // wrapped in from the neighbouring rows.
            const std::ptrdiff_t first =
                static_cast<std::ptrdiff_t>(y_lo) * ow + x_lo;
            const std::ptrdiff_t last =
                static_cast<std::ptrdiff_t>(y_hi - 1) * ow + x_hi;
            const std::ptrdiff_t shift =
                static_cast<std::ptrdiff_t>(h_off) * g.width + w_off;
            std::memcpy(col + first, im_c + (first + shift),
                        sizeof(Dtype) * (last - first));
            for (int y = y_lo; y < y_hi; ++y) {
              auto row = col + static_cast<std::ptrdiff_t>(y) * ow;
              for (int x = 0; x < x_lo; ++x) row[x] = Dtype(0);
              for (int x = x_hi; x < ow; ++x) row[x] = Dtype(0);
            }
            continue;
          }
        }
        for (int y = y_lo; y < y_hi; ++y) {
          auto row = col + static_cast<std::ptrdiff_t>(y) * ow;
          auto src =
              im_c +
              static_cast<std::ptrdiff_t>(y * g.stride_h + h_off) * g.width;
          if constexpr (kToColumns) {
            for (int x = 0; x < x_lo; ++x) row[x] = Dtype(0);
            if (g.stride_w == 1) {
              for (int x = x_lo; x < x_hi; ++x) row[x] = src[x + w_off];
            } else {
              for (int x = x_lo; x < x_hi; ++x) {
                row[x] = src[x * g.stride_w + w_off];
              }
            }
            for (int x = x_hi; x < ow; ++x) row[x] = Dtype(0);
          } else {
            if (g.stride_w == 1) {
              for (int x = x_lo; x < x_hi; ++x) src[x + w_off] += row[x];
            } else {
              for (int x = x_lo; x < x_hi; ++x) {
                src[x * g.stride_w + w_off] += row[x];
              }
            }
          }
        }
      }
    }
  }
}

template <bool kToColumns, typename Dtype>
void TransferND(int num_axes, const int* im_shape, const int* col_shape,
                const int* kernel_shape, const int* pad, const int* stride,
                const int* dilation,
                std::conditional_t<kToColumns, const Dtype*, Dtype*> im,
                std::conditional_t<kToColumns, Dtype*, const Dtype*> col) {
  CHECK_GT(num_axes, 0) << "im2col_nd: no spatial axes";
  std::ptrdiff_t kernel_count = 1, out_count = 1, im_plane = 1;
  for (int d = 0; d < num_axes; ++d) {
    kernel_count *= kernel_shape[d];
    out_count *= col_shape[d + 1];
    im_plane *= im_shape[d + 1];
  }
  CHECK_EQ(col_shape[0], im_shape[0] * kernel_count)
      << "im2col_nd: column rows must be channels * kernel size";
  std::vector<int> k_idx(num_axes), o_idx(num_axes);
  for (int r = 0; r < col_shape[0]; ++r, col += out_count) {
    int rest = r;
    for (int d = num_axes - 1; d >= 0; --d) {
      k_idx[d] = rest % kernel_shape[d];
      rest /= kernel_shape[d];
    }
    auto im_c = im + rest * im_plane;
    std::fill(o_idx.begin(), o_idx.end(), 0);
    for (std::ptrdiff_t p = 0; p < out_count; ++p) {
      std::ptrdiff_t index = 0;
      bool inside = true;
      for (int d = 0; d < num_axes; ++d) {
        const int pos = o_idx[d] * stride[d] - pad[d] + k_idx[d] * dilation[d];
        if (pos < 0 || pos >= im_shape[d + 1]) {
          inside = false;
          break;
        }
        index = index * im_shape[d + 1] + pos;
      }
      if constexpr (kToColumns) {
        col[p] = inside ? im_c[index] : Dtype(0);
      } else {
        if (inside) im_c[index] += col[p];
      }
      for (int d = num_axes - 1; d >= 0; --d) {
        if (++o_idx[d] < col_shape[d + 1]) break;
        o_idx[d] = 0;
      }
    }
  }
}

}  // namespace

template <typename Dtype>
void im2col_cpu(const Dtype* data_im, int channels, int height, int width,
                int kernel_h, int kernel_w, int pad_h, int pad_w, int stride_h,
                int stride_w, int dilation_h, int dilation_w, Dtype* data_col) {
  const Geometry2D g =
      MakeGeometry(channels, height, width, kernel_h, kernel_w, pad_h, pad_w,
                   stride_h, stride_w, dilation_h, dilation_w);
  Transfer2D<true, Dtype>(g, data_im, data_col,
                          static_cast<std::ptrdiff_t>(g.output_h) * g.output_w);
}

template <typename Dtype>
void col2im_cpu(const Dtype* data_col, int channels, int height, int width,
                int kernel_h, int kernel_w, int pad_h, int pad_w, int stride_h,
                int stride_w, int dilation_h, int dilation_w, Dtype* data_im) {
  col2im_batch_cpu(data_col, 1, channels, height, width, kernel_h, kernel_w,
                   pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w,
                   data_im);
}

template <typename Dtype>
void im2col_batch_cpu(const Dtype* data_im, int num, int channels, int height,
                      int width, int kernel_h, int kernel_w, int pad_h,
                      int pad_w, int stride_h, int stride_w, int dilation_h,
                      int dilation_w, Dtype* data_col) {
  const Geometry2D g =
      MakeGeometry(channels, height, width, kernel_h, kernel_w, pad_h, pad_w,
                   stride_h, stride_w, dilation_h, dilation_w);
  const std::ptrdiff_t out_plane =
      static_cast<std::ptrdiff_t>(g.output_h) * g.output_w;
  const std::ptrdiff_t im_size =
      static_cast<std::ptrdiff_t>(channels) * height * width;
  for (int n = 0; n < num; ++n) {
    Transfer2D<true, Dtype>(g, data_im + n * im_size, data_col + n * out_plane,
                            num * out_plane);
  }
}

template <typename Dtype>
void col2im_batch_cpu(const Dtype* data_col, int num, int channels, int height,
                      int width, int kernel_h, int kernel_w, int pad_h,
                      int pad_w, int stride_h, int stride_w, int dilation_h,
                      int dilation_w, Dtype* data_im) {
  const Geometry2D g =
      MakeGeometry(channels, height, width, kernel_h, kernel_w, pad_h, pad_w,
                   stride_h, stride_w, dilation_h, dilation_w);
  const std::ptrdiff_t out_plane =
      static_cast<std::ptrdiff_t>(g.output_h) * g.output_w;
  const std::ptrdiff_t im_size =
      static_cast<std::ptrdiff_t>(channels) * height * width;
  std::memset(data_im, 0, sizeof(Dtype) * im_size * num);
  for (int n = 0; n < num; ++n) {
    Transfer2D<false, Dtype>(g, data_im + n * im_size, data_col + n * out_plane,
                             num * out_plane);
  }
}

template <typename Dtype>
void im2col_nd_cpu(const Dtype* data_im, int num_spatial_axes,
                   const int* im_shape, const int* col_shape,
                   const int* kernel_shape, const int* pad, const int* stride,
                   const int* dilation, Dtype* data_col) {
  TransferND<true, Dtype>(num_spatial_axes, im_shape, col_shape, kernel_shape,
                          pad, stride, dilation, data_im, data_col);
}

template <typename Dtype>
void col2im_nd_cpu(const Dtype* data_col, int num_spatial_axes,
                   const int* im_shape, const int* col_shape,
                   const int* kernel_shape, const int* pad, const int* stride,
                   const int* dilation, Dtype* data_im) {
  std::ptrdiff_t im_count = im_shape[0];
  for (int d = 0; d < num_spatial_axes; ++d) im_count *= im_shape[d + 1];
  std::memset(data_im, 0, sizeof(Dtype) * im_count);
  TransferND<false, Dtype>(num_spatial_axes, im_shape, col_shape, kernel_shape,
                           pad, stride, dilation, data_im, data_col);
}

kernels::Im2colShape MakeIm2colShape(int num_axes, const int* im_shape,
                                     const int* kernel, const int* pad,
                                     const int* stride, const int* dilation,
                                     int num, ColumnLayout layout) {
  CHECK_GE(num_axes, 1) << "im2col: no spatial axes";
  CHECK_LE(num_axes, kernels::kMaxIm2colAxes)
      << "im2col: the device bodies take at most " << kernels::kMaxIm2colAxes
      << " spatial axes";
  kernels::Im2colShape s{};
  s.num_axes = num_axes;
  s.channels = im_shape[0];
  s.num = num;
  s.im_spatial = s.out_spatial = s.kernel_count = 1;
  for (int d = 0; d < num_axes; ++d) {
    s.im[d] = im_shape[d + 1];
    s.kernel[d] = kernel[d];
    s.pad[d] = pad[d];
    s.stride[d] = stride[d];
    s.dilation[d] = dilation[d];
    s.out[d] = CheckedOutputSize(s.im[d], kernel[d], pad[d], stride[d],
                                 dilation[d], "a spatial axis");
    s.im_spatial *= s.im[d];
    s.out_spatial *= s.out[d];
    s.kernel_count *= kernel[d];
  }
  if (layout == ColumnLayout::kSideBySide) {
    s.col_row_stride = num * s.out_spatial;
    s.col_image_stride = s.out_spatial;
  } else {
    s.col_row_stride = s.out_spatial;
    s.col_image_stride = s.rows() * s.out_spatial;
  }
  return s;
}

template <typename Dtype>
void im2col_on(Poseidon::Brew dev, const kernels::Im2colShape& shape, bool nd,
               const Dtype* data_im, Dtype* data_col) {
  if (shape.num_axes == 2 && !nd) {
    for_each(dev, shape.col_count(),
             kernels::Im2col2D<Dtype>{data_im, data_col, shape});
  } else {
    for_each(dev, shape.col_count(),
             kernels::Im2colND<Dtype>{data_im, data_col, shape});
  }
}

template <typename Dtype>
void col2im_on(Poseidon::Brew dev, const kernels::Im2colShape& shape, bool nd,
               const Dtype* data_col, Dtype* data_im) {
  if (shape.num_axes == 2 && !nd) {
    for_each(dev, shape.im_count(),
             kernels::Col2im2D<Dtype>{data_col, data_im, shape});
  } else {
    for_each(dev, shape.im_count(),
             kernels::Col2imND<Dtype>{data_col, data_im, shape});
  }
}

#define POSEIDON_INSTANTIATE_IM2COL(Dtype)                                     \
  template void im2col_cpu<Dtype>(const Dtype*, int, int, int, int, int, int,  \
                                  int, int, int, int, int, Dtype*);            \
  template void col2im_cpu<Dtype>(const Dtype*, int, int, int, int, int, int,  \
                                  int, int, int, int, int, Dtype*);            \
  template void im2col_batch_cpu<Dtype>(const Dtype*, int, int, int, int, int, \
                                        int, int, int, int, int, int, int,     \
                                        Dtype*);                               \
  template void col2im_batch_cpu<Dtype>(const Dtype*, int, int, int, int, int, \
                                        int, int, int, int, int, int, int,     \
                                        Dtype*);                               \
  template void im2col_nd_cpu<Dtype>(const Dtype*, int, const int*,            \
                                     const int*, const int*, const int*,       \
                                     const int*, const int*, Dtype*);          \
  template void col2im_nd_cpu<Dtype>(const Dtype*, int, const int*,            \
                                     const int*, const int*, const int*,       \
                                     const int*, const int*, Dtype*);          \
  template void im2col_on<Dtype>(Poseidon::Brew, const kernels::Im2colShape&, \
                                 bool, const Dtype*, Dtype*);                 \
  template void col2im_on<Dtype>(Poseidon::Brew, const kernels::Im2colShape&, \
                                 bool, const Dtype*, Dtype*);
POSEIDON_INSTANTIATE_IM2COL(float)
POSEIDON_INSTANTIATE_IM2COL(double)
#undef POSEIDON_INSTANTIATE_IM2COL

}  // namespace poseidon
