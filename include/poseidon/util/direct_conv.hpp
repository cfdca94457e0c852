// DirectConv: a 2-D convolution computed like im2col + GEMM, but with
// kernels that read each column vector straight from a zero-padded copy of
// the image (an "implicit GEMM"), so the column matrix is never written:
// AVX-512 kernels of its own on CPUs with AVX-512 (unit stride only), and on
// CPUs with AVX2 and FMA only the AVX2 GEMM with its panels packed from the
// image (Note [Implicit im2col] in util/sgemm_avx2.cpp; any stride, Note
// [Strided direct convolution] in the .cpp). For the convolution layer's
// direct path (Note [Direct path] in
// layers/conv_algorithms/direct_conv_algorithm.cpp); im2col + GEMM stays
// the reference and serves double, the strides the kernels do not take and
// CPUs with neither.
//
// A DirectConv may be constructed on any CPU; supported() says whether the
// other methods may be used (KernelsAvailable(), checked at run time; the
// kernels are compiled for their instructions with function-level target
// attributes, so the rest of the binary stays baseline x86-64).
//
// Thread safety: const methods keep no shared mutable state (scratch is
// per thread); concurrent calls writing different outputs are safe.
#ifndef POSEIDON_UTIL_DIRECT_CONV_HPP_
#define POSEIDON_UTIL_DIRECT_CONV_HPP_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "poseidon/util/avx512.hpp"

namespace poseidon {

// One group of a 2-D convolution, computed directly from the image (see
// Note [Direct convolution] in the .cpp):
//   top[o][y][x] = sum over c, i, j of
//       W[o][c][i][j] * bottom[c][y stride_h - pad_h + i dilation_h]
//                                [x stride_w - pad_w + j dilation_w]
// (zero outside the image), for y < output_h() = (height + 2 pad_h -
// dilation_h (kernel_h - 1) - 1) / stride_h + 1, likewise x: Caffe's
// shapes. The weights W are (outputs, channels, kernel_h, kernel_w), as in
// the convolution layer.
class DirectConv {
 public:
  struct Geometry {
    int channels = 0, height = 0, width = 0;
    int outputs = 0;
    int kernel_h = 1, kernel_w = 1;
    int pad_h = 0, pad_w = 0;
    int dilation_h = 1, dilation_w = 1;
    int stride_h = 1, stride_w = 1;  // above 1 only on the AVX2 path
  };

  // Which AVX-512 kernel computes the forward (see Note [Direct
  // convolution] in the .cpp): vectors of 16 output positions, or vectors
  // of 16 output channels (better on small maps, where a vector of
  // positions spans rows). kAuto chooses from the geometry; the others are
  // for tests and measurements. Ignored on AVX2 CPUs.
  enum class Kernel { kAuto, kPositionVectors, kOutputVectors };

  explicit DirectConv(const Geometry& g, Kernel kernel = Kernel::kAuto);

  // Whether this CPU runs either kernel family (AVX-512F + FMA, or AVX2 +
  // FMA) and POSEIDON_KERNELS is not blas.
  static bool KernelsAvailable() {
    return Avx512KernelsAvailable() || Avx2KernelsAvailable();
  }

  // False when the kernels cannot run this shape (neither kernel family, a
  // stride above 1 with the AVX-512 kernels, or an empty output); then
  // PackWeights, Forward and AccumulateWeightGrad must not be called.
  bool supported() const { return supported_; }
  const Geometry& geometry() const { return g_; }
  // Whether the forward runs the output-channel-vector kernel.
  bool output_vectors() const { return output_vectors_; }
  int output_h() const { return output_h_; }
  int output_w() const { return output_w_; }

  // Size of the packed weights, and the packing: `weights` as in the class
  // comment. For the gradient with respect to the input, which is itself a
  // direct convolution (of the top diff, with the kernel flipped and
  // outputs and channels swapped), build a DirectConv with that geometry
  // and pack the original weights with flip_and_swap: weights is then
  // (channels, outputs, kernel_h, kernel_w) in this object's terms.
  size_t packed_size() const;
  void PackWeights(const float* weights, bool flip_and_swap,
                   float* packed) const;

  // top (outputs x output_h x output_w) = the convolution of one image
  // (channels x height x width), overwriting top.
  void Forward(const float* packed, const float* bottom, float* top) const;

  // weight_diff (outputs x channels x kernel_h x kernel_w) += the weight
  // gradient of `images` images: image n's bottom at bottom + n *
  // bottom_step, its top diff at top_diff + n * top_step.
  void AccumulateWeightGrad(int images, const float* bottom,
                            ptrdiff_t bottom_step, const float* top_diff,
                            ptrdiff_t top_step, float* weight_diff) const;

  // Internal: a run of up to 16 consecutive output positions from `first`
  // (lanes: a bit per position), made of `pieces` row pieces; lanes in
  // mask[p] read padded plane element start[p] + lane (+ the tap offset).
  static constexpr int kMaxPieces = 4;
  struct Segment {
    int first;
    uint16_t lanes;
    int pieces;
    int start[kMaxPieces];
    uint16_t mask[kMaxPieces];
  };

 private:
  void OutputVectorForward(const float* packed, const float* padded,
                           float* top) const;
  // Floats of the padded copy (with the slack LoadSegment reads into), and
  // the copy of one image: per channel, stride_w column phases of
  // padded_h_ x phase_w_ (Note [Strided direct convolution]).
  size_t padded_floats() const;
  void Pad(const float* bottom, float* padded) const;

  Geometry g_;
  int output_h_ = 0, output_w_ = 0;
  int padded_h_ = 0, padded_w_ = 0;  // the image with its padding
  int phase_w_ = 0;  // a column phase's width: padded_w_ with unit stride
  int taps_ = 0;                     // kernel_h * kernel_w
  bool supported_ = false;
  bool avx512_ = false;          // else the AVX2 implicit GEMM
  bool output_vectors_ = false;  // the AVX-512 output-vector kernel
  // The AVX2 path's ImplicitColumns (util/sgemm_avx2.hpp), also used by
  // the output-vector kernel: per (channel, tap) row its offset in the
  // padded image, per output position its own.
  std::vector<ptrdiff_t> row_offset_;
  std::vector<int> position_offset_;
  // See Note [Direct convolution] in the .cpp; an even number (an empty
  // one pads an odd count).
  std::vector<Segment> segments_;
  // Per tap (i, j): i dilation_h padded_w + j dilation_w.
  std::vector<int> tap_offset_;
};

}  // namespace poseidon

#endif  // POSEIDON_UTIL_DIRECT_CONV_HPP_
