// RowWeightGradient: the weight gradient of one group of a 2-D convolution
// (any stride, pad and dilation) with AVX-512 or AVX2 vectors that run along
// the output rows, for convolutions with few input channels: the first layer of
// an image net (3 channels), where K = channels x kernel taps is 27 to 363
// and the positions number hundreds of thousands. Note [Row weight
// gradient] in the .cpp says why the other paths are slow there.
//
//   weight_diff[o][c][i][j] += sum over images n, output (y, x) of
//       top_diff[n][o][y][x] *
//       bottom[n][c][y stride_h - pad_h + i dilation_h]
//                   [x stride_w - pad_w + j dilation_w]
// (zero outside the image), output_h() = (height + 2 pad_h - dilation_h
// (kernel_h - 1) - 1) / stride_h + 1, likewise output_w(): Caffe's shapes.
//
// May be constructed on any CPU; supported() says whether Accumulate may
// be called (AVX-512F and FMA, or AVX2 and FMA, present and not turned off
// by POSEIDON_KERNELS; a non-empty output).
//
// Thread safety: const methods keep no state; concurrent calls with their
// own scratch, writing different weight rows (or different weight_diff
// buffers), are safe.
#ifndef POSEIDON_UTIL_ROW_WEIGHT_GRAD_HPP_
#define POSEIDON_UTIL_ROW_WEIGHT_GRAD_HPP_

#include <cstddef>
#include <vector>

namespace poseidon {

class RowWeightGradient {
 public:
  struct Geometry {
    int channels = 0, height = 0, width = 0;
    int outputs = 0;
    int kernel_h = 1, kernel_w = 1;
    int pad_h = 0, pad_w = 0;
    int stride_h = 1, stride_w = 1;
    int dilation_h = 1, dilation_w = 1;
  };

  // The kernel Accumulate runs: AVX-512's, AVX2's (Note [Row weight
  // gradient on AVX2]) or none (unsupported).
  enum class Isa { kNone, kAvx512, kAvx2 };

  explicit RowWeightGradient(const Geometry& g);

  bool supported() const { return supported_; }
  Isa isa() const { return isa_; }
  const Geometry& geometry() const { return g_; }
  int output_h() const { return output_h_; }
  int output_w() const { return output_w_; }

  // Floats of scratch Accumulate needs for `outputs` output channels.
  size_t scratch_size(int outputs) const;

  // weight_diff rows [output_begin, output_end) (weight_diff points at row
  // 0, the layout (outputs, channels, kernel_h, kernel_w)) += the gradient
  // of `images` images: image n's bottom (channels x height x width) at
  // bottom + n * bottom_step, its top diff (outputs x output_h x output_w)
  // at top_diff + n * top_step. `scratch`: scratch_size(output_end -
  // output_begin) floats, 64-byte aligned. The sums' order depends on the
  // geometry and the output range only, so results repeat bit for bit.
  void Accumulate(int images, const float* bottom, ptrdiff_t bottom_step,
                  const float* top_diff, ptrdiff_t top_step, int output_begin,
                  int output_end, float* weight_diff, float* scratch) const;

 private:
  Geometry g_;
  bool supported_ = false;
  Isa isa_ = Isa::kNone;
  int output_h_ = 0, output_w_ = 0;
  int padded_h_ = 0;
  int phase_w_ = 0;  // width of one column phase of a padded row
  int taps_ = 0;
  // Per (channel, tap) pair: where its rows start in the column phases.
  std::vector<ptrdiff_t> pair_start_;
};

}  // namespace poseidon

#endif  // POSEIDON_UTIL_ROW_WEIGHT_GRAD_HPP_
