// WinogradConv: a 3x3, 5x5, 1x7 or 7x1 convolution with unit stride and
// dilation computed by Winograd's minimal filtering algorithms (Lavin and
// Gray, "Fast Algorithms for Convolutional Neural Networks", 2015):
// F(4x4, 3x3), 36 instead of 144 multiplications per 4x4 output tile and
// channel, F(2x2, 5x5), 36 instead of 100 per 2x2 tile, F(4x4, 5x5), 64
// instead of 400 per 4x4 tile, or, along the kernel's one long axis,
// F(2, 7), 8 instead of 14 per 2 outputs; the channel sums done as one
// GEMM (cpu_gemm) per transform position, 36, 64 or 8. A CPU kernel module for
// the convolution layer; im2col + GEMM stays the reference.
//
// What it computes, for one group of a convolution, each image n and the
// kernel's height and width (kh, kw) = (3, 3), (5, 5), (1, 7) or (7, 1):
//   top[n][o][y][x] = sum over c, i, j of
//       W[o][c][i][j] * bottom[n][c][y - pad_h + i][x - pad_w + j]
// (zero outside the image), 0 <= i < kh, 0 <= j < kw, for y < output_h() =
// height + 2 pad_h - (kh - 1), x < output_w() = width + 2 pad_w - (kw -
// 1). W is (outputs, channels, kh, kw) as in Caffe's convolution layer;
// bottom is (images, channels, height, width), top (images, outputs,
// output_h, output_w), both contiguous.
//
// Use: TransformWeights once per weight update into a buffer of
// weights_size() elements, then Forward on any number of images with a
// caller-owned scratch buffer of scratch_size(images) elements. In float
// the results differ from direct summation by more than the usual
// rounding (see Note [Winograd] in the .cpp for the size). It pays for
// layers with many channels, and loses badly with few (the first layer's
// 3): measurements in the Note.
//
// The input gradient. For a stride-1 kh x kw convolution with pads p_h <=
// kh - 1 and p_w <= kw - 1,
//   bottom_diff = the kh x kw convolution of top_diff with pads kh - 1 -
//                 p_h and kw - 1 - p_w, the kernel rotated by 180 degrees
//                 and channels and outputs swapped,
// so it is a Forward of another WinogradConv with geometry {channels =
// outputs, height = output_h, width = output_w, outputs = channels, pads
// kh - 1 - pad_h and kw - 1 - pad_w}, whose weights come from
// TransformWeights(W, /*flip_and_swap=*/true, ...). (For larger pads the
// gradient would need a negative pad, a crop; this class does not do it.)
//
// The weight gradient. Forward is Y = A^T [(G g G^T) .* (B^T d B)] A per
// tile, linear in g, so by transposition the kernel's gradient is
//   dg = G^T [(A dY A^T) .* (B^T d B)] G
// summed over the tiles, dY the tile's m x m of top diff (zero beyond the
// output); in one dimension dg = G^T [(A dy) .* (B^T d)].
// AccumulateWeightGradient sums the bracket over tiles as one GEMM per
// transform position and tile block, in the transform domain;
// TransformWeightGradient takes the sum back (G^T . G, in double) and adds
// it to the weight diff.
//
// Thread safety: the object is immutable after construction; its const
// methods may run concurrently (each with its own scratch and output).
// Each call runs on the calling thread only: callers parallelise by
// splitting the batch.
#ifndef POSEIDON_UTIL_WINOGRAD_HPP_
#define POSEIDON_UTIL_WINOGRAD_HPP_

#include <cstddef>
#include <cstdint>

namespace poseidon {

template <typename Dtype>
class WinogradConv {
 public:
  struct Geometry {
    int channels = 0, height = 0, width = 0;
    int outputs = 0;
    int pad_h = 0, pad_w = 0;
    // The kernel: 3x3 (F(4x4, 3x3)), 5x5 (F(2x2, 5x5) or F(4x4, 5x5)), 1x7
    // (F(2, 7) along rows) or 7x1 (F(2, 7) down columns).
    int kernel_h = 3, kernel_w = 3;
    // The square kernels' output tile edge m: 4 for 3x3; 2 or 4 for 5x5
    // (F(2x2, 5x5) on the 6x6 transform domain, F(4x4, 5x5) on 8x8); 0
    // takes 4 for 3x3 and 2 for 5x5. Must be 0 for 1x7 and 7x1.
    int tile = 0;
    // Tiles transformed and multiplied at a time (see Note [Winograd]);
    // 0 chooses from the cache budget and the channel counts. Tests set it
    // small to make tile blocks cross image boundaries.
    int tile_block = 0;
  };

  // CHECK-fails unless channels, outputs, height, width >= 1, pads >= 0,
  // the kernel is one of the four with a tile it has, the output is
  // non-empty and tile_block >= 0: the layer validates user shapes before
  // it builds one.
  explicit WinogradConv(const Geometry& g);

  const Geometry& geometry() const { return g_; }
  int output_h() const { return output_h_; }
  int output_w() const { return output_w_; }
  // The output tile, tile_h() x tile_w(): 4 x 4 for 3x3 kernels, 2 x 2 or
  // 4 x 4 for 5x5, 1 x 2 for 1x7 and 2 x 1 for 7x1; tiles per image (edge
  // tiles partial), and per block.
  int tile_h() const { return tile_h_; }
  int tile_w() const { return tile_w_; }
  int tiles_per_image() const { return tiles_h_ * tiles_w_; }
  int tile_block() const { return tile_block_; }
  // The transform domain's edge, alpha() = m + r - 1 along the kernel: 6
  // (F(4x4, 3x3), F(2x2, 5x5)) or 8 (F(4x4, 5x5), F(2, 7)); transform
  // positions: alpha() squared for the square kernels (36 or 64), 8 for
  // F(2, 7).
  int alpha() const { return alpha_; }
  int positions() const { return positions_; }

  // Transformed weights U = G g G^T (G g in one dimension): positions()
  // row-major (outputs x channels) matrices, one per transform position
  // (pos = alpha() row + column in two dimensions),
  //   U[(pos * outputs + o) * channels + c],
  // positions() outputs channels elements in all. `weights` is W as in the
  // class comment; with flip_and_swap it is (channels, outputs, kh, kw) in
  // this object's terms, and each kernel is used rotated by 180 degrees
  // (the input-gradient form, see the class comment). Computed in double.
  size_t weights_size() const;
  void TransformWeights(const Dtype* weights, bool flip_and_swap,
                        Dtype* U) const;
  // The same for outputs [output_begin, output_end) only (their rows of
  // every U matrix): threads may transform disjoint ranges at once.
  void TransformWeights(const Dtype* weights, bool flip_and_swap, Dtype* U,
                        int output_begin, int output_end) const;

  // Elements of scratch Forward needs for `images` images: the transformed
  // input and the products of one tile block, positions() (channels +
  // outputs) min(tile_block(), images tiles_per_image()) elements. Bounded
  // in `images`.
  size_t scratch_size(int images) const;

  // top = the convolution of `images` consecutive images of bottom with
  // the weights U (from TransformWeights), overwriting top, or adding to
  // it if `accumulate`. scratch holds scratch_size(images) elements, and
  // must not overlap bottom, top or U.
  void Forward(int images, const Dtype* U, const Dtype* bottom, Dtype* top,
               Dtype* scratch, bool accumulate = false) const;
  // The same with image n at bottom + n bottom_step and top + n top_step
  // (each image's channels and outputs still contiguous): one group of a
  // grouped convolution, whose images are further apart.
  void Forward(int images, const Dtype* U, const Dtype* bottom,
               ptrdiff_t bottom_step, Dtype* top, ptrdiff_t top_step,
               Dtype* scratch, bool accumulate = false) const;

  // dU[pos] (outputs x channels, laid out as U) += the sum over tiles
  // [tile_begin, tile_end) of the images of (A dY A^T)[pos] times
  // (B^T d B)[pos] transposed, for the rows of outputs [output_begin,
  // output_end) only; tiles numbered as in Forward (image by image, row by
  // row), bottom and top_diff strided as in Forward; with accumulate
  // false, those rows of dU = that sum (zero for no tiles). dU has
  // weights_size() elements; scratch holds scratch_size(images) and
  // overlaps nothing else. Callers split a batch over threads either by
  // tiles, with one dU each summed in TransformWeightGradient, or by
  // outputs, on one dU (each thread then transforms all the tiles' input).
  void AccumulateWeightGradient(int images, const Dtype* bottom,
                                ptrdiff_t bottom_step, const Dtype* top_diff,
                                ptrdiff_t top_step, int64_t tile_begin,
                                int64_t tile_end, int output_begin,
                                int output_end, Dtype* dU, Dtype* scratch,
                                bool accumulate = true) const;
  // weight_diff[o][c] (outputs x channels x kh x kw, as W) += G^T S G (G^T
  // S in one dimension) with S the sum of dU[0] ... dU[parts - 1] at (o,
  // c), for outputs [output_begin, output_end): threads may take disjoint
  // ranges. Summed and transformed in double, parts in order.
  void TransformWeightGradient(const Dtype* const* dU, int parts,
                               Dtype* weight_diff, int output_begin,
                               int output_end) const;

 private:
  // A: the transform domain's edge; R: the kernel's.
  template <int A, int R>
  void TransformWeightsOf(const Dtype* weights, bool flip_and_swap, Dtype* U,
                          int output_begin, int output_end) const;
  template <int A, int R>
  void TransformWeightGradientOf(const Dtype* const* dU, int parts,
                                 Dtype* weight_diff, int output_begin,
                                 int output_end) const;
  // F(2, 7)'s forms of the two.
  void TransformWeights1D(const Dtype* weights, bool flip_and_swap, Dtype* U,
                          int output_begin, int output_end) const;
  void TransformWeightGradient1D(const Dtype* const* dU, int parts,
                                 Dtype* weight_diff, int output_begin,
                                 int output_end) const;

  Geometry g_;
  int tile_h_ = 4, tile_w_ = 4;
  int alpha_ = 6;
  int positions_ = 36;
  int output_h_ = 0, output_w_ = 0;
  int tiles_h_ = 0, tiles_w_ = 0;
  int tile_block_ = 0;
};

}  // namespace poseidon

#endif  // POSEIDON_UTIL_WINOGRAD_HPP_
