// im2col / col2im as per-element bodies shared by the CPU and the GPU
// (util/for_each.hpp): one index computes one output element, so the GPU
// needs no atomics and its results do not depend on the launch.
//
//   Im2col*: one index per column-matrix entry; writes it (0 in padding).
//   Col2im*: one index per image element; gathers every column entry that
//            was read from it, in increasing row order (kernel offsets
//            ascending), which is the order in which the CPU's col2im
//            (util/im2col.hpp) adds them, so the sums are bitwise equal.
//
// Layouts, for `num` images of (channels, d_1, ..., d_N) stored back to
// back: column-matrix row r = c * prod(kernel) + kernel offset (last kernel
// axis fastest), column s = output position (row-major). Entry (r, n, s)
// of image n lives at col[r * col_row_stride + n * col_image_stride + s]:
//   - side by side (the batched convolution, util/im2col.hpp's
//     im2col_batch_cpu): col_row_stride = num * S, col_image_stride = S;
//   - image after image (the Im2col layer's top): col_row_stride = S,
//     col_image_stride = rows * S;
// where S = prod(output dims). The 2-D bodies read axes 0 and 1 of the
// shape; the N-D ones any number up to kMaxIm2colAxes.
//
// Index range: the counts of one call (col entries, image elements) must
// fit an int, as every Blob count does.
#ifndef POSEIDON_KERNELS_IM2COL_KERNELS_HPP_
#define POSEIDON_KERNELS_IM2COL_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// The most spatial axes the N-D bodies take (their shape arrays are fixed
// so the functors stay trivially copyable).
constexpr int kMaxIm2colAxes = 8;

// The geometry of one im2col over `num` images; filled on the host by
// MakeIm2colShape (util/im2col.hpp).
struct Im2colShape {
  int num_axes;  // spatial axes
  int channels;
  int num;       // images
  int im[kMaxIm2colAxes];   // input spatial dims
  int out[kMaxIm2colAxes];  // output (column) spatial dims
  int kernel[kMaxIm2colAxes];
  int pad[kMaxIm2colAxes];
  int stride[kMaxIm2colAxes];
  int dilation[kMaxIm2colAxes];
  int im_spatial;    // prod(im)
  int out_spatial;   // prod(out), S
  int kernel_count;  // prod(kernel)
  int col_row_stride;
  int col_image_stride;

  POSEIDON_HD int rows() const { return channels * kernel_count; }
  POSEIDON_HD int col_count() const { return rows() * num * out_spatial; }
  POSEIDON_HD int im_count() const { return num * channels * im_spatial; }
};

// Decomposes a column-matrix index i (rows x num x S, S fastest) into row,
// image and output position.
POSEIDON_HD_INLINE void SplitColumnIndex(const Im2colShape& s, int i, int* row,
                                         int* n, int* pos) {
  const int columns = s.num * s.out_spatial;
  *row = i / columns;
  const int column = i - *row * columns;
  *n = column / s.out_spatial;
  *pos = column - *n * s.out_spatial;
}

template <typename Dtype>
struct Im2col2D {
  const Dtype* im;
  Dtype* col;
  Im2colShape s;
  POSEIDON_HD void operator()(int i) const {
    int row, n, pos;
    SplitColumnIndex(s, i, &row, &n, &pos);
    const int x = pos % s.out[1];
    const int y = pos / s.out[1];
    const int j = row % s.kernel[1];
    const int rest = row / s.kernel[1];
    const int k = rest % s.kernel[0];
    const int c = rest / s.kernel[0];
    const int h = y * s.stride[0] - s.pad[0] + k * s.dilation[0];
    const int w = x * s.stride[1] - s.pad[1] + j * s.dilation[1];
    const bool inside = h >= 0 && h < s.im[0] && w >= 0 && w < s.im[1];
    col[row * s.col_row_stride + n * s.col_image_stride + pos] =
        inside ? im[((n * s.channels + c) * s.im[0] + h) * s.im[1] + w]
               : Dtype(0);
  }
};

// The output positions o along one axis whose window reads input position
// p (o * stride - pad + k * dilation == p for some kernel offset k):
// [*lo, *hi), not every one of them aligned with a kernel offset when the
// dilation exceeds 1 (the caller checks divisibility).
POSEIDON_HD_INLINE void ReadingOutputs(int p, int pad, int stride, int kernel,
                                       int dilation, int out, int* lo,
                                       int* hi) {
  const int padded = p + pad;
  const int extent = dilation * (kernel - 1) + 1;
  *lo = padded < extent ? 0 : (padded - extent) / stride + 1;
  const int last = padded / stride + 1;
  *hi = last < out ? last : out;
}

template <typename Dtype>
struct Col2im2D {
  const Dtype* col;
  Dtype* im;
  Im2colShape s;
  POSEIDON_HD void operator()(int i) const {
    const int w = i % s.im[1];
    int rest = i / s.im[1];
    const int h = rest % s.im[0];
    rest /= s.im[0];
    const int c = rest % s.channels;
    const int n = rest / s.channels;
    int y_lo, y_hi, x_lo, x_hi;
    ReadingOutputs(h, s.pad[0], s.stride[0], s.kernel[0], s.dilation[0],
                   s.out[0], &y_lo, &y_hi);
    ReadingOutputs(w, s.pad[1], s.stride[1], s.kernel[1], s.dilation[1],
                   s.out[1], &x_lo, &x_hi);
    const Dtype* base = col + n * s.col_image_stride;
    Dtype sum = 0;
    // Descending output positions are ascending kernel offsets: the CPU's
    // row order.
    for (int y = y_hi - 1; y >= y_lo; --y) {
      const int dy = h + s.pad[0] - y * s.stride[0];
      if (dy % s.dilation[0] != 0) continue;
      const int k = dy / s.dilation[0];
      for (int x = x_hi - 1; x >= x_lo; --x) {
        const int dx = w + s.pad[1] - x * s.stride[1];
        if (dx % s.dilation[1] != 0) continue;
        const int j = dx / s.dilation[1];
        const int row = (c * s.kernel[0] + k) * s.kernel[1] + j;
        sum += base[row * s.col_row_stride + y * s.out[1] + x];
      }
    }
    im[i] = sum;
  }
};

template <typename Dtype>
struct Im2colND {
  const Dtype* im;
  Dtype* col;
  Im2colShape s;
  POSEIDON_HD void operator()(int i) const {
    int row, n, pos;
    SplitColumnIndex(s, i, &row, &n, &pos);
    // Input index, built from the first axis on; the kernel and output
    // offsets are peeled off from the last axis, so collect them first.
    int k[kMaxIm2colAxes], o[kMaxIm2colAxes];
    int krest = row, orest = pos;
    for (int d = s.num_axes - 1; d >= 0; --d) {
      k[d] = krest % s.kernel[d];
      krest /= s.kernel[d];
      o[d] = orest % s.out[d];
      orest /= s.out[d];
    }
    const int c = krest;
    int index = n * s.channels + c;
    bool inside = true;
    for (int d = 0; d < s.num_axes; ++d) {
      const int p = o[d] * s.stride[d] - s.pad[d] + k[d] * s.dilation[d];
      inside = inside && p >= 0 && p < s.im[d];
      index = index * s.im[d] + p;
    }
    col[row * s.col_row_stride + n * s.col_image_stride + pos] =
        inside ? im[index] : Dtype(0);
  }
};

template <typename Dtype>
struct Col2imND {
  const Dtype* col;
  Dtype* im;
  Im2colShape s;
  POSEIDON_HD void operator()(int i) const {
    int p[kMaxIm2colAxes], k[kMaxIm2colAxes];
    int rest = i;
    for (int d = s.num_axes - 1; d >= 0; --d) {
      p[d] = rest % s.im[d];
      rest /= s.im[d];
      k[d] = 0;
    }
    const int c = rest % s.channels;
    const int n = rest / s.channels;
    const Dtype* base =
        col + n * s.col_image_stride + c * s.kernel_count * s.col_row_stride;
    Dtype sum = 0;
    // Kernel offsets in row order (last axis fastest), as the CPU adds them.
    for (int r = 0; r < s.kernel_count; ++r) {
      int pos = 0;
      bool reads = true;
      for (int d = 0; d < s.num_axes && reads; ++d) {
        const int q = p[d] + s.pad[d] - k[d] * s.dilation[d];
        const int o = q / s.stride[d];
        reads = q >= 0 && q % s.stride[d] == 0 && o < s.out[d];
        pos = pos * s.out[d] + o;
      }
      if (reads) sum += base[r * s.col_row_stride + pos];
      for (int d = s.num_axes - 1; d >= 0; --d) {
        if (++k[d] < s.kernel[d]) break;
        k[d] = 0;
      }
    }
    im[i] = sum;
  }
};

// (num, channels, S) images <-> a (channels, num * S) matrix: the
// arrangement of the batched GEMMs (Note [Batched im2col] in
// layers/conv_algorithms/batched_im2col_conv.cpp). One index per element of
// the destination.
template <typename Dtype>
struct ImagesToChannelMajor {
  const Dtype* images;
  Dtype* matrix;
  int num, channels, spatial;
  POSEIDON_HD void operator()(int i) const {
    const int s = i % spatial;
    const int rest = i / spatial;
    const int n = rest % num;
    const int c = rest / num;
    matrix[i] = images[(n * channels + c) * spatial + s];
  }
};

template <typename Dtype>
struct ChannelMajorToImages {
  const Dtype* matrix;
  Dtype* images;
  int num, channels, spatial;
  POSEIDON_HD void operator()(int i) const {
    const int s = i % spatial;
    const int rest = i / spatial;
    const int c = rest % channels;
    const int n = rest / channels;
    images[i] = matrix[(c * num + n) * spatial + s];
  }
};

// data[n][c][s] += bias[c] for `channels` channels of `spatial` positions.
template <typename Dtype>
struct AddChannelBias {
  const Dtype* bias;
  Dtype* data;
  int channels, spatial;
  POSEIDON_HD void operator()(int i) const {
    data[i] += bias[(i / spatial) % channels];
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_IM2COL_KERNELS_HPP_
