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

// What the tile transforms need of a WinogradConv's geometry.
struct Tiling {
  int channels, outputs, height, width, pad_h, pad_w;
  int output_h, output_w, tiles_w, tiles_per_image;
  // The output tile: m x m (4 or 2) for the square kernels, 1 x 2 or 2 x 1
  // for F(2, 7) along rows or down columns.
  int tile_h, tile_w;
  // The transform domain's edge, m + r - 1: 6 for F(4x4, 3x3) and F(2x2,
  // 5x5), which share it and with it B^T; 8 for F(4x4, 5x5) and F(2, 7)
  // (Note [Winograd]).
  int alpha;
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

// Where element s of the 8-input windows of a run's tiles lies, channel by
// channel (Note [F(2, 7) transforms]): Point sets d[s] to the run's n
// values of element s in a channel's plane. Down columns, tile (row, x)
// reads rows 2 row - pad_h + s of column x - pad_w: in the plane itself
// where the run's windows lie in the image, else copied with zeros
// around. Along rows, tile (row, tx) reads row `row` - pad_h from column
// 2 tx - pad_w, so its element s is the stretch's element 2 tx + s: the
// stretch's even and odd elements from s / 2 on.
template <typename Dtype>
class RunWindows {
 public:
  RunWindows(const Tiling& g, const TileRun& run) : g_(g), run_(run) {
    y0_ = DownColumns(g) ? 2 * run.row - g.pad_h : run.row - g.pad_h;
    x0_ = DownColumns(g) ? run.col - g.pad_w : 2 * run.col - g.pad_w;
    inside_ = DownColumns(g) && y0_ >= 0 && y0_ + 8 <= g.height && x0_ >= 0 &&
              x0_ + run.n <= g.width;
  }

  void Point(const Dtype* plane, const Dtype** d) {
    const int H = g_.height, W = g_.width, n = run_.n;
    auto row = [&](int y) {
      return y >= 0 && y < H ? plane + static_cast<size_t>(y) * W : nullptr;
    };
    if (!DownColumns(g_)) {
      GatherPadded(row(y0_), W, x0_, 2, n + 3, even_);
      GatherPadded(row(y0_), W, x0_ + 1, 2, n + 3, odd_);
      for (int s = 0; s < 8; ++s) d[s] = (s % 2 == 0 ? even_ : odd_) + s / 2;
    } else if (inside_) {
      for (int s = 0; s < 8; ++s) {
        d[s] = plane + static_cast<size_t>(y0_ + s) * W + x0_;
      }
    } else {
      for (int s = 0; s < 8; ++s) {
        GatherPadded(row(y0_ + s), W, x0_, 1, n, rows_ + s * kRun);
        d[s] = rows_ + s * kRun;
      }
    }
  }

 private:
  const Tiling& g_;
  const TileRun& run_;
  int y0_, x0_;  // the first tile's window: its first row and column
  bool inside_;  // down columns, the run's windows all in the image
  Dtype rows_[8 * kRun];
  Dtype even_[kRun + 3], odd_[kRun + 3];
};

// The two rows of top diff a run's tiles read, y0[i] and y1[i] for tile i
// (zero beyond the output): Point sets them for one output's plane. Down
// columns, rows 2 row and 2 row + 1 of the run's columns, in the plane (or
// zeros below the output); along rows, the even and odd elements of row
// `row` from 2 col on, gathered.
template <typename Dtype>
class RunTopDiffRows {
 public:
  RunTopDiffRows(const Tiling& g, const TileRun& run) : g_(g), run_(run) {}

  void Point(const Dtype* plane, const Dtype** y0, const Dtype** y1) {
    const int OW = g_.output_w, n = run_.n;
    if (DownColumns(g_)) {
      *y0 = plane + static_cast<size_t>(2 * run_.row) * OW + run_.col;
      *y1 = 2 * run_.row + 1 < g_.output_h ? *y0 + OW : zeros_;
      return;
    }
    const Dtype* row = plane + static_cast<size_t>(run_.row) * OW;
    GatherPadded(row, OW, 2 * run_.col, 2, n, even_);
    GatherPadded(row, OW, 2 * run_.col + 1, 2, n, odd_);
    *y0 = even_;
    *y1 = odd_;
  }

 private:
  const Tiling& g_;
  const TileRun& run_;
  Dtype zeros_[kRun] = {};
  Dtype even_[kRun], odd_[kRun];
};

// Writes (or adds) the run's outputs y0[i], y1[i] (tile i's two) into the
// output plane `plane`: rows 2 row and 2 row + 1 (the second only inside
// the output) down columns; along rows, outputs 2 tx and 2 tx + 1 of row
// `row`, of which the row's last tile may hold only the first.
template <typename Dtype>
inline void WriteRunOutputs(const Tiling& g, const TileRun& run,
                            const Dtype* y0, const Dtype* y1, bool accumulate,
                            Dtype* plane) {
  const int n = run.n, OW = g.output_w;
  if (DownColumns(g)) {
    for (int j = 0; j < 2 && 2 * run.row + j < g.output_h; ++j) {
      Dtype* dst = plane + static_cast<size_t>(2 * run.row + j) * OW + run.col;
      const Dtype* v = j == 0 ? y0 : y1;
      if (accumulate) {
        for (int i = 0; i < n; ++i) dst[i] += v[i];
      } else {
        for (int i = 0; i < n; ++i) dst[i] = v[i];
      }
    }
    return;
  }
  Dtype* dst = plane + static_cast<size_t>(run.row) * OW + 2 * run.col;
  const int whole = std::min(n, (OW - 2 * run.col) / 2);
  if (accumulate) {
    for (int i = 0; i < whole; ++i) {
      dst[2 * i] += y0[i];
      dst[2 * i + 1] += y1[i];
    }
    if (whole < n) dst[2 * whole] += y0[whole];
  } else {
    for (int i = 0; i < whole; ++i) {
      dst[2 * i] = y0[i];
      dst[2 * i + 1] = y1[i];
    }
    if (whole < n) dst[2 * whole] = y0[whole];
  }
}

// The float transforms with AVX2 intrinsics (winograd_avx2.cpp, Note
// [Input transform on AVX2]); for CPUs where Avx2KernelsAvailable(). They
// compute what the generic InputTransform<kA>, OutputTransform<kA, kOut>
// and TopDiffTransform<kA, kOut> of winograd.cpp do, with the same
// arguments; kA is the transform domain's edge (g.alpha, 6 or 8), kOut the
// output tile's, 4 or 2: (6, 4), (6, 2) and (8, 4) are instantiated.
template <int kA>
void InputTransformAvx2(const Tiling& g, int64_t first, int count,
                        const float* bottom, ptrdiff_t bottom_step, float* V);
template <int kA, int kOut>
void OutputTransformAvx2(const Tiling& g, int64_t first, int count,
                         const float* M, float* top, ptrdiff_t top_step,
                         bool accumulate);
template <int kA, int kOut>
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
