// The data movement of the utility layers written once against a device:
// block copies (Concat, Slice), tiling (Tile), N-D windows (Crop), row
// gathers and scatters (Filter, BatchReindex), Embed's lookup, and the
// scatter-add of rows by key (BatchReindex's and Embed's gradients).
//
// Each primitive runs on `dev`. On the GPU it runs the body of
// kernels/copy_kernels.hpp (one thread per output element). On the CPU it
// runs memcpy/axpy loops by default (HostPath::kCpuLoops: what the CPU
// passes have always done, fastest there), or, with HostPath::kGpuKernel,
// the GPU's body set up exactly as for the GPU: tests use that to check the
// GPU's arithmetic on a machine without one. Both host paths give the same
// bits: copies are exact, and the sums add in the same order.
//
// Pointers are on `dev`; index lists given as std::vector are on the host
// and already checked by the caller.
#ifndef POSEIDON_UTIL_BLOCK_OPS_HPP_
#define POSEIDON_UTIL_BLOCK_OPS_HPP_

#include <algorithm>
#include <utility>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/kernels/copy_kernels.hpp"
#include "poseidon/kernels/embed_kernels.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/index_upload.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {

// How a primitive runs on the host; see the header comment.
enum class HostPath { kCpuLoops, kGpuKernel };

namespace block_ops_detail {

inline bool UseLoops(Poseidon::Brew dev, HostPath path) {
  return dev == Poseidon::CPU && path == HostPath::kCpuLoops;
}

}  // namespace block_ops_detail

// dst[o * dst_stride + j] = src[o * src_stride + j], o < outer, j < inner.
template <typename Dtype>
void CopyBlocks(Poseidon::Brew dev, int outer, int inner, const Dtype* src,
                int src_stride, Dtype* dst, int dst_stride,
                HostPath path = HostPath::kCpuLoops) {
  if (outer <= 0 || inner <= 0) return;
  if (block_ops_detail::UseLoops(dev, path)) {
    for (int o = 0; o < outer; ++o) {
      cpu_copy(inner, src + o * src_stride, dst + o * dst_stride);
    }
    return;
  }
  for_each(dev, outer * inner,
           kernels::BlockCopy<Dtype>{src, src_stride, dst, dst_stride, inner});
}

// y (outer, tiles * inner): each row of x (outer, inner) `tiles` times.
template <typename Dtype>
void TileRows(Poseidon::Brew dev, int outer, int inner, int tiles,
              const Dtype* x, Dtype* y, HostPath path = HostPath::kCpuLoops) {
  if (block_ops_detail::UseLoops(dev, path)) {
    for (int o = 0; o < outer; ++o, x += inner) {
      for (int t = 0; t < tiles; ++t, y += inner) cpu_copy(inner, x, y);
    }
    return;
  }
  for_each(dev, outer * tiles * inner,
           kernels::TileForward<Dtype>{x, y, inner, tiles});
}

// dx (outer, inner) = the sum of the `tiles` blocks of each row of dy.
template <typename Dtype>
void SumTiles(Poseidon::Brew dev, int outer, int inner, int tiles,
              const Dtype* dy, Dtype* dx, HostPath path = HostPath::kCpuLoops) {
  if (block_ops_detail::UseLoops(dev, path)) {
    for (int o = 0; o < outer; ++o, dx += inner) {
      cpu_copy(inner, dy, dx);
      dy += inner;
      for (int t = 1; t < tiles; ++t, dy += inner) {
        cpu_axpy(inner, Dtype(1), dy, dx);
      }
    }
    return;
  }
  for_each(dev, outer * inner,
           kernels::TileBackward<Dtype>{dy, dx, inner, tiles});
}

// Copies the window of `big` (shape big_shape) at `offsets` (one per axis)
// with shape small_shape from big to small, or from small to big when
// to_big (the rest of big is left alone).
template <typename Dtype>
void CopyWindow(Poseidon::Brew dev, const vector<int>& big_shape,
                const vector<int>& small_shape, const vector<int>& offsets,
                const Dtype* src, Dtype* dst, bool to_big,
                HostPath path = HostPath::kCpuLoops) {
  const int num_axes = static_cast<int>(small_shape.size());
  CHECK_EQ(big_shape.size(), small_shape.size());
  CHECK_EQ(offsets.size(), small_shape.size());
  CHECK_LE(num_axes, kernels::kMaxCopyAxes);
  int small_count = 1;
  for (int d : small_shape) small_count *= d;
  if (small_count == 0) return;
  if (block_ops_detail::UseLoops(dev, path)) {
    // Row by row along the last axis; idx runs over the other axes.
    const int row = num_axes == 0 ? 1 : small_shape[num_axes - 1];
    const int rows = small_count / row;
    vector<int> idx(num_axes, 0);
    for (int r = 0; r < rows; ++r) {
      int big_offset = 0;
      for (int d = 0; d < num_axes; ++d) {
        big_offset = big_offset * big_shape[d] + idx[d] + offsets[d];
      }
      const int small_offset = r * row;
      if (to_big) {
        cpu_copy(row, src + small_offset, dst + big_offset);
      } else {
        cpu_copy(row, src + big_offset, dst + small_offset);
      }
      for (int d = num_axes - 2; d >= 0; --d) {
        if (++idx[d] < small_shape[d]) break;
        idx[d] = 0;
      }
    }
    return;
  }
  kernels::CropCopy<Dtype> f{};
  f.src = src;
  f.dst = dst;
  f.num_axes = num_axes;
  f.to_big = to_big;
  f.base = 0;
  int stride = 1;
  for (int d = num_axes - 1; d >= 0; --d) {
    f.small_shape[d] = small_shape[d];
    f.big_stride[d] = stride;
    f.base += offsets[d] * stride;
    stride *= big_shape[d];
  }
  for_each(dev, small_count, f);
}

// dst row r = src row index[r] for r < rows, rows of `item` elements;
// `index` (int or Dtype values) is on `dev`.
template <typename Dtype, typename Index>
void GatherRows(Poseidon::Brew dev, int rows, int item, const Dtype* src,
                const Index* index, Dtype* dst,
                HostPath path = HostPath::kCpuLoops) {
  if (rows <= 0 || item <= 0) return;
  if (block_ops_detail::UseLoops(dev, path)) {
    for (int r = 0; r < rows; ++r) {
      cpu_copy(item, src + static_cast<int>(index[r]) * item, dst + r * item);
    }
    return;
  }
  for_each(dev, rows * item,
           kernels::GatherRows<Dtype, Index>{src, index, dst, item});
}

// y row m = W row index[m] (+ b when `bias` is not null) for m < num, rows
// of n elements; `index` holds integers in [0, rows of W), on `dev`.
template <typename Dtype>
void EmbedLookup(Poseidon::Brew dev, int num, int n, const Dtype* index,
                 const Dtype* weight, const Dtype* bias, Dtype* y,
                 HostPath path = HostPath::kCpuLoops) {
  if (num <= 0 || n <= 0) return;
  if (block_ops_detail::UseLoops(dev, path)) {
    for (int m = 0; m < num; ++m) {
      cpu_copy(n, weight + static_cast<int>(index[m]) * n, y + m * n);
    }
    if (bias != nullptr) {
      for (int m = 0; m < num; ++m) cpu_axpy(n, Dtype(1), bias, y + m * n);
    }
    return;
  }
  for_each(dev, num * n,
           kernels::EmbedForward<Dtype>{index, weight, bias, y, n});
}

// dst row index[r] = src row r for r < rows (distinct index values, on
// `dev`); the other rows of dst are left alone.
template <typename Dtype>
void ScatterRows(Poseidon::Brew dev, int rows, int item, const Dtype* src,
                 const int* index, Dtype* dst,
                 HostPath path = HostPath::kCpuLoops) {
  if (rows <= 0 || item <= 0) return;
  if (block_ops_detail::UseLoops(dev, path)) {
    for (int r = 0; r < rows; ++r) {
      cpu_copy(item, src + r * item, dst + index[r] * item);
    }
    return;
  }
  for_each(dev, rows * item,
           kernels::ScatterRows<Dtype>{src, index, dst, item});
}

// The segments of kernels::SegmentSum for keys[m] (host): one int array
// holding rows[U], begin[U + 1] and perm[M] back to back, U the number of
// distinct keys. perm lists m by ascending key, ascending m within a key.
inline vector<int> KeySegments(const vector<int>& keys, int* num_segments) {
  const int m_count = static_cast<int>(keys.size());
  vector<std::pair<int, int>> order(m_count);
  for (int m = 0; m < m_count; ++m) order[m] = {keys[m], m};
  std::sort(order.begin(), order.end());
  vector<int> rows, begin, perm(m_count);
  for (int c = 0; c < m_count; ++c) {
    if (c == 0 || order[c].first != order[c - 1].first) {
      rows.push_back(order[c].first);
      begin.push_back(c);
    }
    perm[c] = order[c].second;
  }
  begin.push_back(m_count);
  *num_segments = static_cast<int>(rows.size());
  vector<int> packed;
  packed.reserve(rows.size() + begin.size() + perm.size());
  packed.insert(packed.end(), rows.begin(), rows.end());
  packed.insert(packed.end(), begin.begin(), begin.end());
  packed.insert(packed.end(), perm.begin(), perm.end());
  return packed;
}

// dst row keys[m] += src row m for every m < keys.size(), in ascending m for
// each row of dst (so repeated keys accumulate deterministically). `upload`
// carries the segments to the GPU (see util/index_upload.hpp).
template <typename Dtype>
void ScatterAddRows(Poseidon::Brew dev, const vector<int>& keys, int item,
                    const Dtype* src, Dtype* dst, IndexUpload* upload,
                    HostPath path = HostPath::kCpuLoops) {
  if (keys.empty() || item <= 0) return;
  if (block_ops_detail::UseLoops(dev, path)) {
    for (size_t m = 0; m < keys.size(); ++m) {
      cpu_axpy(item, Dtype(1), src + m * item, dst + keys[m] * item);
    }
    return;
  }
  int segments = 0;
  const vector<int> packed = KeySegments(keys, &segments);
  const int* on_dev = upload->On(dev, packed);
  for_each(dev, segments * item,
           kernels::SegmentSum<Dtype>{src, dst, on_dev, on_dev + segments,
                                      on_dev + 2 * segments + 1, item});
}

}  // namespace poseidon

#endif  // POSEIDON_UTIL_BLOCK_OPS_HPP_
