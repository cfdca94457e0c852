// The copy, gather and scatter bodies of the utility layers (Concat, Slice,
// Tile, Crop, Filter, BatchReindex, Embed), run by the GPU and, in tests, by
// the CPU (util/for_each.hpp). One index computes one output element, so they
// need no atomics and give the same result on both sides. The CPU passes
// reach them through util/block_ops.hpp, which on the host uses memcpy and
// BLAS loops instead (faster there, and bit-identical: copies are exact and
// the sums below add in the CPU loops' order).
#ifndef POSEIDON_KERNELS_COPY_KERNELS_HPP_
#define POSEIDON_KERNELS_COPY_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// `outer` blocks of `inner` consecutive elements, block o read at
// src + o * src_stride and written at dst + o * dst_stride; index i runs
// over outer * inner. (Concat, Slice.)
template <typename Dtype>
struct BlockCopy {
  const Dtype* src;
  int src_stride;
  Dtype* dst;
  int dst_stride;
  int inner;
  POSEIDON_HD void operator()(int i) const {
    const int o = i / inner;
    const int j = i - o * inner;
    dst[o * dst_stride + j] = src[o * src_stride + j];
  }
};

// y (outer, tiles * inner) = x (outer, inner) repeated `tiles` times in
// each row; i runs over y.
template <typename Dtype>
struct TileForward {
  const Dtype* x;
  Dtype* y;
  int inner;
  int tiles;
  POSEIDON_HD void operator()(int i) const {
    const int o = i / (tiles * inner);
    const int j = i - (i / inner) * inner;
    y[i] = x[o * inner + j];
  }
};

// dx[o, j] = sum over t of dy[o, t * inner + j], t ascending (the CPU's
// copy-then-axpy order); i runs over dx.
template <typename Dtype>
struct TileBackward {
  const Dtype* dy;
  Dtype* dx;
  int inner;
  int tiles;
  static constexpr int kCostPerIndex = 4;
  POSEIDON_HD void operator()(int i) const {
    const int o = i / inner;
    const int j = i - o * inner;
    const Dtype* row = dy + o * tiles * inner + j;
    Dtype sum = row[0];
    for (int t = 1; t < tiles; ++t) sum += row[t * inner];
    dx[i] = sum;
  }
};

// The most axes CropCopy handles (Blob's kMaxBlobAxes).
constexpr int kMaxCopyAxes = 32;

// Crop: the window of the big blob (bottom[0]) at `base` with the small
// blob's (top's) shape. Element i of the small blob, at multi-index
// (i_0, ..., i_{n-1}), is big[base + sum_d i_d * big_stride[d]]; base is
// sum_d offset_d * big_stride[d]. Copies big -> small, or small -> big when
// to_big. i runs over the small blob.
template <typename Dtype>
struct CropCopy {
  const Dtype* src;
  Dtype* dst;
  int num_axes;
  int base;
  bool to_big;
  int small_shape[kMaxCopyAxes];
  int big_stride[kMaxCopyAxes];
  static constexpr int kCostPerIndex = 4;
  POSEIDON_HD void operator()(int i) const {
    int big = base;
    int rest = i;
    for (int d = num_axes - 1; d >= 0; --d) {
      const int q = rest / small_shape[d];
      big += (rest - q * small_shape[d]) * big_stride[d];
      rest = q;
    }
    if (to_big) {
      dst[big] = src[i];
    } else {
      dst[i] = src[big];
    }
  }
};

// dst row r = src row index[r], rows of `item` elements; i runs over dst.
// Index is int (host-made lists) or Dtype (index blobs); the values are
// checked on the host before the call. (Filter, BatchReindex.)
template <typename Dtype, typename Index>
struct GatherRows {
  const Dtype* src;
  const Index* index;
  Dtype* dst;
  int item;
  POSEIDON_HD void operator()(int i) const {
    const int r = i / item;
    const int j = i - r * item;
    dst[i] = src[static_cast<int>(index[r]) * item + j];
  }
};

// dst row index[r] = src row r (distinct index values); i runs over src.
// (Filter's backward.)
template <typename Dtype>
struct ScatterRows {
  const Dtype* src;
  const int* index;
  Dtype* dst;
  int item;
  POSEIDON_HD void operator()(int i) const {
    const int r = i / item;
    const int j = i - r * item;
    dst[index[r] * item + j] = src[i];
  }
};

// Segmented row sums, the scatter-add dst[key[m]] += src[m] for every row m
// written as one output per index: the host sorts the rows of src by key
// (stably) and lists each distinct key once. For segment u:
//   dst row rows[u] += src rows perm[begin[u]], ..., perm[begin[u + 1] - 1]
// added one by one in that (ascending m) order, as the CPU's axpy loop does.
// i runs over (segments x item); no two indices write the same element.
// (BatchReindex's backward, Embed's weight gradient.)
template <typename Dtype>
struct SegmentSum {
  const Dtype* src;
  Dtype* dst;
  const int* rows;   // [segments]
  const int* begin;  // [segments + 1]
  const int* perm;   // [begin[segments]]
  int item;
  static constexpr int kCostPerIndex = 4;
  POSEIDON_HD void operator()(int i) const {
    const int u = i / item;
    const int j = i - u * item;
    Dtype* out = dst + rows[u] * item + j;
    Dtype sum = *out;
    for (int c = begin[u]; c < begin[u + 1]; ++c) {
      sum += src[perm[c] * item + j];
    }
    *out = sum;
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_COPY_KERNELS_HPP_
