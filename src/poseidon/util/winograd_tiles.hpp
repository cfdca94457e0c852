// Internal to util/winograd.cpp and util/winograd_avx2.cpp: the tiling that
// the generic tile transforms and the AVX2 ones walk (Note [Winograd] in
// winograd.cpp), and the AVX2 transforms' entry points.
#ifndef POSEIDON_UTIL_WINOGRAD_TILES_HPP_
#define POSEIDON_UTIL_WINOGRAD_TILES_HPP_

#include <algorithm>
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
  // The output tile: m x m (4 or 2) for the square kernels, 1 x 2 or 2 x 1
  // for F(2, 7) along rows or down columns.
  int tile_h, tile_w;
};

// For tiles first .. first + lanes - 1: the image each is in and the
// top-left corner of its output tile.
inline void TileOrigins(const Tiling& g, int64_t first, int lanes,
                        int64_t* image, int* oy, int* ox) {
  for (int l = 0; l < lanes; ++l) {
    const int64_t tile = first + l;
    image[l] = tile / g.tiles_per_image;
    const int rest = static_cast<int>(tile % g.tiles_per_image);
    oy[l] = (rest / g.tiles_w) * g.tile_h;
    ox[l] = (rest % g.tiles_w) * g.tile_w;
  }
}

// F(2, 7)'s transforms (Note [F(2, 7) transforms] in winograd.cpp) go
// over runs of at most kRun tiles of one tile row.
constexpr int kRun = 64;

// Whether the tiling is F(2, 7)'s, and which way: its tiles are 1 x 2
// along rows or 2 x 1 down columns.
inline bool OneDimensional(const Tiling& g) { return g.tile_h != g.tile_w; }
inline bool DownColumns(const Tiling& g) { return g.tile_h > g.tile_w; }

// A run of tiles within one tile row: tile columns [col, col + n) of tile
// row `row` of `image`.
struct TileRun {
  int64_t image;
  int row, col, n;
};

// The run that starts at tile t and ends at most at `end`, kRun tiles long
// at most.
inline TileRun RunAt(const Tiling& g, int64_t t, int64_t end) {
  const int rest = static_cast<int>(t % g.tiles_per_image);
  const int col = rest % g.tiles_w;
  const int n = static_cast<int>(
      std::min<int64_t>({g.tiles_w - col, end - t, int64_t{kRun}}));
  return {t / g.tiles_per_image, rest / g.tiles_w, col, n};
}

// out[j] = row[begin + step j] for j < n, zero where begin + step j is
// outside [0, size) or row is null (a row outside the image); step 1 or 2.
// Loops, not memcpy (Note [F(2, 7) transforms]).
template <typename Dtype>
inline void GatherPadded(const Dtype* row, int size, int begin, int step, int n,
                         Dtype* out) {
  // [lead, stop): the j whose element lies in the row.
  int lead = n, stop = n;
  if (row != nullptr) {
    lead = std::clamp(begin < 0 ? (-begin + step - 1) / step : 0, 0, n);
    stop = std::clamp(begin < size ? (size - begin + step - 1) / step : 0, lead,
                      n);
  }
  for (int j = 0; j < lead; ++j) out[j] = Dtype(0);
  if (step == 1) {
    for (int j = lead; j < stop; ++j) out[j] = row[begin + j];
  } else {
    for (int j = lead; j < stop; ++j) out[j] = row[begin + 2 * j];
  }
  for (int j = stop; j < n; ++j) out[j] = Dtype(0);
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
// F(2, 7)'s, the same for InputTransform1D, OutputTransform1D and
// TopDiffTransform1D.
void InputTransform1DAvx2(const Tiling& g, int64_t first, int count,
                          const float* bottom, ptrdiff_t bottom_step, float* V);
void OutputTransform1DAvx2(const Tiling& g, int64_t first, int count,
                           const float* M, float* top, ptrdiff_t top_step,
                           bool accumulate);
void TopDiffTransform1DAvx2(const Tiling& g, int64_t first, int count,
                            const float* top_diff, ptrdiff_t top_step,
                            int output_begin, int output_end, float* Z);

}  // namespace winograd
}  // namespace poseidon

#endif  // POSEIDON_UTIL_WINOGRAD_TILES_HPP_
