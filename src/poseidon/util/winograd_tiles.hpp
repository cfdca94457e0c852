// Internal to util/winograd.cpp and util/winograd_avx2.cpp: the tiling that
// the generic tile transforms and the AVX2 ones walk (Note [Winograd] in
// winograd.cpp), and the AVX2 transforms' entry points.
#ifndef POSEIDON_UTIL_WINOGRAD_TILES_HPP_
#define POSEIDON_UTIL_WINOGRAD_TILES_HPP_

#include <cstddef>
#include <cstdint>

namespace poseidon {
namespace winograd {

// The transformed tile's edge, m + r - 1 for both forms: F(4x4, 3x3) and
// F(2x2, 5x5) share it, and with it B^T (Note [Winograd]).
constexpr int kAlpha = 6;
constexpr int kPos = kAlpha * kAlpha;

// What the tile transforms need of a WinogradConv's geometry.
struct Tiling {
  int channels, outputs, height, width, pad_h, pad_w;
  int output_h, output_w, tiles_w, tiles_per_image;
  int tile;  // the output tile's edge, m: 4 or 2
};

// For tiles first .. first + lanes - 1: the image each is in and the
// top-left corner of its m x m of output.
inline void TileOrigins(const Tiling& g, int64_t first, int lanes,
                        int64_t* image, int* oy, int* ox) {
  for (int l = 0; l < lanes; ++l) {
    const int64_t tile = first + l;
    image[l] = tile / g.tiles_per_image;
    const int rest = static_cast<int>(tile % g.tiles_per_image);
    oy[l] = (rest / g.tiles_w) * g.tile;
    ox[l] = (rest % g.tiles_w) * g.tile;
  }
}

// The float transforms with AVX2 intrinsics (winograd_avx2.cpp, Note
// [Input transform on AVX2]); for CPUs where Avx2KernelsAvailable(). They
// compute what the generic InputTransform, OutputTransform<kOut> and
// TopDiffTransform<kOut> of winograd.cpp do, with the same arguments;
// kOut is the output tile's edge, 4 or 2.
void InputTransformAvx2(const Tiling& g, int64_t first, int count,
                        const float* bottom, ptrdiff_t bottom_step, float* V);
template <int kOut>
void OutputTransformAvx2(const Tiling& g, int64_t first, int count,
                         const float* M, float* top, ptrdiff_t top_step,
                         bool accumulate);
template <int kOut>
void TopDiffTransformAvx2(const Tiling& g, int64_t first, int count,
                          const float* top_diff, ptrdiff_t top_step,
                          int output_begin, int output_end, float* Z);

}  // namespace winograd
}  // namespace poseidon

#endif  // POSEIDON_UTIL_WINOGRAD_TILES_HPP_
