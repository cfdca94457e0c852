// WinogradConv against naive convolution loops accumulated in double, for
// 3x3 kernels (F(4x4, 3x3)), 5x5 (F(2x2, 5x5) and F(4x4, 5x5)) and 1x7 and
// 7x1 (F(2, 7) along rows and down columns): forward on awkward shapes (pads 0
// to r - 1, outputs that are not multiples of the tile, tile blocks that cross
// images), the input gradient through flipped weights, the weight gradient, and
// results that do not depend on how a batch is split into calls. Errors are
// measured against a magnitude bound of each output's neighbourhood
// (MagnitudeBound; see Note [Winograd] in winograd.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "poseidon/util/winograd.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// One convolution's shape; kernel last, so that the 3x3 shapes keep their
// short initialisers and the others are written With5x5({...}) and so on.
struct Shape {
  int channels, height, width, outputs, pad_h, pad_w;
  int tile_block = 0;
  int kernel_h = 3, kernel_w = 3;
  int tile = 0;  // the square kernels' output tile; 0: the class's default
};

Shape WithKernel(Shape s, int kh, int kw) {
  s.kernel_h = kh;
  s.kernel_w = kw;
  return s;
}
Shape With5x5(Shape s) { return WithKernel(s, 5, 5); }
Shape With1x7(Shape s) { return WithKernel(s, 1, 7); }
Shape With7x1(Shape s) { return WithKernel(s, 7, 1); }
// A 5x5 shape by F(4x4, 5x5) (4x4 tiles, the 8x8 transform domain).
Shape Tile4(Shape s) {
  s.tile = 4;
  return s;
}

// The output tile, m x m for the square kernels: F(4x4, 3x3) and F(2x2,
// 5x5) both transform 6x6 windows (m + r - 1 = 6), F(4x4, 5x5) 8x8 ones;
// F(2, 7) 2 outputs along the kernel from 8 inputs. Written here rather
// than read from the class, so that a wrong tile_h() or tile_w() shows as
// a wrong bound, not a moved one.
int SquareTile(const Shape& s) { return s.tile != 0 ? s.tile : 7 - s.kernel_h; }
int TileH(const Shape& s) {
  return s.kernel_h == s.kernel_w ? SquareTile(s) : (s.kernel_h == 1 ? 1 : 2);
}
int TileW(const Shape& s) {
  return s.kernel_h == s.kernel_w ? SquareTile(s) : (s.kernel_w == 1 ? 1 : 2);
}

std::string Describe(const Shape& s, int images) {
  std::ostringstream out;
  out << images << " image(s) of " << s.channels << " x " << s.height << " x "
      << s.width << ", " << s.kernel_h << "x" << s.kernel_w << " kernel, "
      << s.outputs << " outputs, pad " << s.pad_h << "," << s.pad_w
      << ", tile block " << s.tile_block
      << (s.tile == 4 && s.kernel_h == 5 ? ", F(4x4, 5x5)" : "");
  return out.str();
}

template <typename Dtype>
typename WinogradConv<Dtype>::Geometry ToGeometry(const Shape& s) {
  typename WinogradConv<Dtype>::Geometry g;
  g.channels = s.channels;
  g.height = s.height;
  g.width = s.width;
  g.outputs = s.outputs;
  g.pad_h = s.pad_h;
  g.pad_w = s.pad_w;
  g.kernel_h = s.kernel_h;
  g.kernel_w = s.kernel_w;
  g.tile_block = s.tile_block;
  g.tile = s.tile;
  return g;
}

template <typename Dtype>
std::vector<Dtype> Random(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<Dtype> v(n);
  for (Dtype& x : v) x = static_cast<Dtype>(dist(gen));
  return v;
}

int OutputH(const Shape& s) {
  return s.height + 2 * s.pad_h - (s.kernel_h - 1);
}
int OutputW(const Shape& s) { return s.width + 2 * s.pad_w - (s.kernel_w - 1); }
// Elements of the weights, (outputs, channels, kh, kw).
size_t WeightsCount(const Shape& s) {
  return static_cast<size_t>(s.outputs) * s.channels * s.kernel_h * s.kernel_w;
}

// top = the convolution of x with w (outputs, channels, kh, kw), in
// double.
template <typename Dtype>
std::vector<double> NaiveForward(const Shape& s, int images,
                                 const std::vector<Dtype>& w,
                                 const std::vector<Dtype>& x) {
  const int C = s.channels, H = s.height, W = s.width, O = s.outputs;
  const int OH = OutputH(s), OW = OutputW(s);
  const int KH = s.kernel_h, KW = s.kernel_w;
  std::vector<double> top(static_cast<size_t>(images) * O * OH * OW, 0.0);
  for (int n = 0; n < images; ++n) {
    for (int o = 0; o < O; ++o) {
      for (int y = 0; y < OH; ++y) {
        for (int v = 0; v < OW; ++v) {
          double sum = 0;
          for (int c = 0; c < C; ++c) {
            for (int i = 0; i < KH; ++i) {
              for (int j = 0; j < KW; ++j) {
                const int h = y - s.pad_h + i, u = v - s.pad_w + j;
                if (h < 0 || h >= H || u < 0 || u >= W) continue;
                sum += static_cast<double>(w[((o * C + c) * KH + i) * KW + j]) *
                       x[((n * C + c) * H + h) * W + u];
              }
            }
          }
          top[((static_cast<size_t>(n) * O + o) * OH + y) * OW + v] = sum;
        }
      }
    }
  }
  return top;
}

// The gradient with respect to the input of the convolution of
// NaiveForward, given top_diff: each top element spreads over its
// receptive field (written from the definition, not as a convolution).
template <typename Dtype>
std::vector<double> NaiveInputGradient(const Shape& s, int images,
                                       const std::vector<Dtype>& w,
                                       const std::vector<Dtype>& top_diff) {
  const int C = s.channels, H = s.height, W = s.width, O = s.outputs;
  const int OH = OutputH(s), OW = OutputW(s);
  const int KH = s.kernel_h, KW = s.kernel_w;
  std::vector<double> bottom_diff(static_cast<size_t>(images) * C * H * W, 0.0);
  for (int n = 0; n < images; ++n) {
    for (int o = 0; o < O; ++o) {
      for (int y = 0; y < OH; ++y) {
        for (int v = 0; v < OW; ++v) {
          const double d = top_diff[((n * O + o) * OH + y) * OW + v];
          for (int c = 0; c < C; ++c) {
            for (int i = 0; i < KH; ++i) {
              for (int j = 0; j < KW; ++j) {
                const int h = y - s.pad_h + i, u = v - s.pad_w + j;
                if (h < 0 || h >= H || u < 0 || u >= W) continue;
                bottom_diff[((static_cast<size_t>(n) * C + c) * H + h) * W +
                            u] += w[((o * C + c) * KH + i) * KW + j] * d;
              }
            }
          }
        }
      }
    }
  }
  return bottom_diff;
}

// The size an output's rounding error is measured against. Winograd's
// error at an output comes from the whole input window of its tile (6x6,
// or 8 inputs for F(2, 7)), not only from its kh x kw receptive field
// (with pad r - 1 a corner output sees one pixel, its tile's window m^2 or
// more), so a bound from the receptive field alone, sum |W| |x|, would
// make the allowed error depend on how small a few pixels happen to be.
// Instead, for output (n, o, y, v) of the convolution s of x (images x
// channels x height x width):
//   sum over c of |kernel(o, c)|_1 max |x[n][c][h][u]|,
// the maximum over the rectangle of kh + 2 (th - 1) rows and kw + 2 (tw -
// 1) columns from (y - pad_h - (th - 1), v - pad_w - (tw - 1)), th x tw
// the tile (TileH, TileW): the receptive field and a tile less one more
// on each side, which holds the window of the output's tile wherever in
// its tile the output lies (9x9 for 3x3 kernels, 7x7 for 5x5 by F(2x2,
// 5x5), 11x11 by F(4x4, 5x5), 1 x 9 for 1x7). l1 is (outputs x
// channels): |kernel(o, c)|_1.
template <typename Dtype>
std::vector<double> MagnitudeBound(const Shape& s, int images,
                                   const std::vector<double>& l1,
                                   const std::vector<Dtype>& x) {
  const int in = s.channels, H = s.height, W = s.width, out = s.outputs;
  const int OH = OutputH(s), OW = OutputW(s), th = TileH(s), tw = TileW(s);
  const int side_h = s.kernel_h + 2 * (th - 1);
  const int side_w = s.kernel_w + 2 * (tw - 1);
  const int first_h = -s.pad_h - (th - 1), first_w = -s.pad_w - (tw - 1);
  std::vector<double> square_max(static_cast<size_t>(images) * in * OH * OW);
  for (int nk = 0; nk < images * in; ++nk) {
    const Dtype* plane = x.data() + static_cast<size_t>(nk) * H * W;
    for (int y = 0; y < OH; ++y) {
      for (int v = 0; v < OW; ++v) {
        double mag = 0;
        for (int h = std::max(0, y + first_h);
             h < std::min(H, y + first_h + side_h); ++h) {
          for (int u = std::max(0, v + first_w);
               u < std::min(W, v + first_w + side_w); ++u) {
            mag =
                std::max(mag, std::fabs(static_cast<double>(plane[h * W + u])));
          }
        }
        square_max[(static_cast<size_t>(nk) * OH + y) * OW + v] = mag;
      }
    }
  }
  const size_t plane = static_cast<size_t>(OH) * OW;
  std::vector<double> bound(static_cast<size_t>(images) * out * plane, 0.0);
  for (int n = 0; n < images; ++n) {
    for (int o = 0; o < out; ++o) {
      double* b = bound.data() + (static_cast<size_t>(n) * out + o) * plane;
      for (int k = 0; k < in; ++k) {
        const double* mag =
            square_max.data() + (static_cast<size_t>(n) * in + k) * plane;
        for (size_t p = 0; p < plane; ++p) b[p] += l1[o * in + k] * mag[p];
      }
    }
  }
  return bound;
}

// |W[o][c]|_1 as (outputs x channels), or transposed.
template <typename Dtype>
std::vector<double> KernelNorms(const Shape& s, const std::vector<Dtype>& w,
                                bool transpose) {
  const int taps = s.kernel_h * s.kernel_w;
  std::vector<double> l1(static_cast<size_t>(s.outputs) * s.channels, 0.0);
  for (int o = 0; o < s.outputs; ++o) {
    for (int c = 0; c < s.channels; ++c) {
      double sum = 0;
      for (int t = 0; t < taps; ++t) {
        sum +=
            std::fabs(static_cast<double>(w[(o * s.channels + c) * taps + t]));
      }
      l1[transpose ? c * s.outputs + o : o * s.channels + c] = sum;
    }
  }
  return l1;
}

// Allowed |got - want| per unit of MagnitudeBound (see Note [Winograd] in
// winograd.cpp). Measured over 31 seeds of these tests' inputs: up to 23
// epsilon in float and 35 in double with 3x3 kernels; with 5x5, 11 in
// float and 11 in double in the forward and input gradient, 12 and 14 in
// the weight gradient; with 1x7 and 7x1 (F(2, 7)) 4.5 in float and 3.5 in
// double (one seed); with F(4x4, 5x5) 12.5 and 11.7 forward, 28 and 21 in
// the weight gradient (one seed). A transform entry off by 1e-4 of itself fails
// this in float.
template <typename Dtype>
double Tolerance() {
  return 100 * std::numeric_limits<Dtype>::epsilon();
}

// Asserts |got[i] - want[i]| <= tol bound[i] for each element, naming
// `what` and the first that differs (and stopping there); returns the
// largest |got - want| / bound seen.
template <typename Dtype>
double ExpectWithinBound(const std::vector<double>& want,
                         const std::vector<double>& bound, const Dtype* got,
                         double tol, const std::string& what) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    EXPECT_LE(err, tol * bound[i])
        << what << ": element " << i << " of " << want.size() << " is "
        << got[i] << ", want " << want[i] << " (magnitude " << bound[i] << ")";
    if (!(err <= tol * bound[i])) return err / bound[i];  // NaN too
    if (bound[i] > 0) worst = std::max(worst, err / bound[i]);
  }
  return worst;
}

template <typename Dtype>
class WinogradConvTest : public ::testing::Test {
 protected:
  // Runs Forward on `images` images of shape s, `split` images per call
  // (all of them if 0), against NaiveForward; returns top.
  std::vector<Dtype> CheckForward(const Shape& s, int images, int split = 0) {
    SCOPED_TRACE(Describe(s, images));
    const WinogradConv<Dtype> conv(ToGeometry<Dtype>(s));
    const size_t in_size = static_cast<size_t>(s.channels) * s.height * s.width;
    const size_t out_size =
        static_cast<size_t>(s.outputs) * conv.output_h() * conv.output_w();
    const std::vector<Dtype> w = Random<Dtype>(WeightsCount(s), 1);
    const std::vector<Dtype> x = Random<Dtype>(in_size * images, 2);
    std::vector<Dtype> U(conv.weights_size());
    conv.TransformWeights(w.data(), false, U.data());
    if (split == 0) split = images;
    std::vector<Dtype> scratch(conv.scratch_size(split));
    // NaN where nothing is written: a missed output shows.
    std::vector<Dtype> top(out_size * images, std::nan(""));
    for (int n = 0; n < images; n += split) {
      conv.Forward(std::min(split, images - n), U.data(),
                   x.data() + n * in_size, top.data() + n * out_size,
                   scratch.data());
    }
    const std::vector<double> want = NaiveForward(s, images, w, x);
    const std::vector<double> bound =
        MagnitudeBound(s, images, KernelNorms(s, w, false), x);
    Record(s, ExpectWithinBound(want, bound, top.data(), Tolerance<Dtype>(),
                                "forward"));
    return top;
  }

  // Per form: the three round differently, and one figure for all would
  // hide the others under the largest.
  void Record(const Shape& s, double error) {
    double& worst = s.kernel_h != s.kernel_w ? max_error_1d_
                    : s.kernel_h == 3        ? max_error_3x3_
                    : s.tile == 4            ? max_error_5x5_4x4_
                                             : max_error_5x5_;
    worst = std::max(worst, error);
  }

  void TearDown() override {
    std::ostringstream out3, out5, out54, out7;
    out3 << max_error_3x3_;
    out5 << max_error_5x5_;
    out54 << max_error_5x5_4x4_;
    out7 << max_error_1d_;
    RecordProperty("max_scaled_error_3x3", out3.str());
    RecordProperty("max_scaled_error_5x5", out5.str());
    RecordProperty("max_scaled_error_5x5_4x4", out54.str());
    RecordProperty("max_scaled_error_2_7", out7.str());
  }

  double max_error_3x3_ = 0, max_error_5x5_ = 0, max_error_5x5_4x4_ = 0;
  double max_error_1d_ = 0;
};

TYPED_TEST_SUITE(WinogradConvTest, test::TestDtypes);

TYPED_TEST(WinogradConvTest, WinogradSizes) {
  using Conv = WinogradConv<TypeParam>;
  const Conv conv(ToGeometry<TypeParam>({3, 13, 9, 5, 1, 0}));
  EXPECT_EQ(conv.tile_h(), 4);
  EXPECT_EQ(conv.tile_w(), 4);
  EXPECT_EQ(conv.positions(), 36);
  EXPECT_EQ(conv.output_h(), 13);
  EXPECT_EQ(conv.output_w(), 7);
  EXPECT_EQ(conv.tiles_per_image(), 4 * 2);
  EXPECT_EQ(conv.weights_size(), 36u * 5 * 3);
  EXPECT_EQ(conv.tile_block() % 16, 0);
  EXPECT_GE(conv.tile_block(), 64);
  EXPECT_LE(conv.tile_block(), 256);
  // One image's tiles, then one block's worth whatever the batch.
  EXPECT_EQ(conv.scratch_size(1), 36u * (3 + 5) * 8);
  EXPECT_EQ(conv.scratch_size(100000), 36u * (3 + 5) * conv.tile_block());
  const Conv small(ToGeometry<TypeParam>({1, 1, 1, 1, 2, 2, 5}));
  EXPECT_EQ(small.output_h(), 3);
  EXPECT_EQ(small.tile_block(), 5);
  // Wide layers get narrower blocks, never under 64 tiles.
  const Conv wide(ToGeometry<TypeParam>({512, 14, 14, 512, 1, 1}));
  EXPECT_EQ(wide.tile_block(), 64);
  // 5x5: output_h = height + 2 pad_h - 4 in 2x2 tiles; the transform
  // domain is 6x6 as for 3x3, so the transformed weights, the scratch per
  // tile and the block keep their sizes.
  const Conv five(ToGeometry<TypeParam>(With5x5({3, 13, 9, 5, 1, 0})));
  EXPECT_EQ(five.tile_h(), 2);
  EXPECT_EQ(five.tile_w(), 2);
  EXPECT_EQ(five.output_h(), 11);
  EXPECT_EQ(five.output_w(), 5);
  EXPECT_EQ(five.tiles_per_image(), 6 * 3);
  EXPECT_EQ(five.weights_size(), 36u * 5 * 3);
  EXPECT_EQ(five.tile_block(), conv.tile_block());
  EXPECT_EQ(five.scratch_size(1), 36u * (3 + 5) * 18);
  EXPECT_EQ(five.scratch_size(100000), 36u * (3 + 5) * five.tile_block());
  // One pixel padded by 4: a 5x5 output, 3x3 tiles (the last partial),
  // more than the block of 5 in one image.
  const Conv small5(ToGeometry<TypeParam>(With5x5({1, 1, 1, 1, 4, 4, 5})));
  EXPECT_EQ(small5.output_h(), 5);
  EXPECT_EQ(small5.output_w(), 5);
  EXPECT_EQ(small5.tiles_per_image(), 3 * 3);
  EXPECT_EQ(small5.scratch_size(1), 36u * (1 + 1) * 5);
  // F(4x4, 5x5): 4x4 tiles on the 8x8 domain, 64 positions; the block
  // keeps about the same bytes, so fewer tiles.
  const Conv five4(ToGeometry<TypeParam>(Tile4(With5x5({3, 13, 9, 5, 1, 0}))));
  EXPECT_EQ(five4.tile_h(), 4);
  EXPECT_EQ(five4.tile_w(), 4);
  EXPECT_EQ(five4.alpha(), 8);
  EXPECT_EQ(five4.positions(), 64);
  EXPECT_EQ(five4.output_h(), 11);
  EXPECT_EQ(five4.output_w(), 5);
  EXPECT_EQ(five4.tiles_per_image(), 3 * 2);
  EXPECT_EQ(five4.weights_size(), 64u * 5 * 3);
  EXPECT_EQ(five4.scratch_size(1), 64u * (3 + 5) * 6);
  EXPECT_EQ(five4.tile_block() % 16, 0);
  EXPECT_LE(five4.tile_block(), five.tile_block());
  EXPECT_EQ(five.alpha(), 6);
  EXPECT_EQ(conv.alpha(), 6);
  // 1x7: F(2, 7) along rows, 1 x 2 tiles and 8 transform positions; 7x1
  // the same down columns.
  const Conv row(ToGeometry<TypeParam>(With1x7({3, 13, 9, 5, 0, 3})));
  EXPECT_EQ(row.tile_h(), 1);
  EXPECT_EQ(row.tile_w(), 2);
  EXPECT_EQ(row.positions(), 8);
  EXPECT_EQ(row.alpha(), 8);
  EXPECT_EQ(row.output_h(), 13);
  EXPECT_EQ(row.output_w(), 9);
  EXPECT_EQ(row.tiles_per_image(), 13 * 5);
  EXPECT_EQ(row.weights_size(), 8u * 5 * 3);
  EXPECT_EQ(row.scratch_size(1), 8u * (3 + 5) * 65);
  const Conv column(ToGeometry<TypeParam>(With7x1({3, 13, 9, 5, 2, 0})));
  EXPECT_EQ(column.tile_h(), 2);
  EXPECT_EQ(column.tile_w(), 1);
  EXPECT_EQ(column.output_h(), 11);
  EXPECT_EQ(column.output_w(), 9);
  EXPECT_EQ(column.tiles_per_image(), 6 * 9);
  // Fewer positions, so more tiles to a block of the same bytes.
  const Conv wide_row(ToGeometry<TypeParam>(With1x7({192, 17, 17, 192, 0, 3})));
  EXPECT_EQ(wide_row.tile_block() % 16, 0);
  EXPECT_GT(wide_row.tile_block(), 64);
}

TYPED_TEST(WinogradConvTest, WinogradForwardMatchesNaiveConvolution) {
  // Pads 0 to r - 1, inputs smaller than the kernel, outputs that are not
  // multiples of the tile, channel and output counts around the 16-lane
  // steps.
  const Shape shapes[] = {{1, 1, 1, 1, 1, 1},
                          {1, 1, 1, 3, 2, 2},
                          {3, 2, 3, 2, 1, 1},
                          {3, 3, 3, 17, 0, 0},
                          {17, 5, 7, 3, 0, 1},
                          {3, 5, 7, 17, 2, 0},
                          {17, 13, 9, 17, 1, 1},
                          {64, 14, 14, 3, 1, 1},
                          {3, 14, 14, 64, 0, 0},
                          {1, 17, 17, 1, 2, 2},
                          {64, 17, 17, 64, 1, 1},
                          {5, 6, 6, 4, 0, 0},
                          With5x5({1, 1, 1, 1, 2, 2}),
                          Tile4(With5x5({1, 1, 1, 1, 2, 2})),
                          With5x5({1, 1, 1, 3, 4, 4}),
                          Tile4(With5x5({1, 1, 1, 3, 4, 4})),
                          With5x5({3, 2, 3, 2, 3, 3}),
                          Tile4(With5x5({3, 2, 3, 2, 3, 3})),
                          With5x5({3, 5, 5, 17, 0, 0}),
                          Tile4(With5x5({3, 5, 5, 17, 0, 0})),
                          With5x5({17, 5, 7, 3, 0, 1}),
                          Tile4(With5x5({17, 5, 7, 3, 0, 1})),
                          With5x5({3, 6, 7, 17, 4, 0}),
                          Tile4(With5x5({3, 6, 7, 17, 4, 0})),
                          With5x5({17, 13, 9, 17, 2, 2}),
                          Tile4(With5x5({17, 13, 9, 17, 2, 2})),
                          With5x5({64, 14, 14, 3, 2, 2}),
                          Tile4(With5x5({64, 14, 14, 3, 2, 2})),
                          With5x5({3, 14, 14, 64, 0, 0}),
                          Tile4(With5x5({3, 14, 14, 64, 0, 0})),
                          With5x5({1, 17, 17, 1, 4, 4}),
                          Tile4(With5x5({1, 17, 17, 1, 4, 4})),
                          With5x5({64, 17, 17, 64, 2, 2}),
                          Tile4(With5x5({64, 17, 17, 64, 2, 2})),
                          With5x5({5, 6, 6, 4, 1, 3}),
                          Tile4(With5x5({5, 6, 6, 4, 1, 3})),
                          // Pads 0 to 6 along the kernel; a pad across it
                          // adds output rows (columns) that see only zeros.
                          With1x7({1, 1, 1, 1, 0, 3}),
                          With1x7({3, 2, 3, 2, 1, 6}),
                          With1x7({17, 5, 7, 3, 0, 0}),
                          With1x7({3, 17, 17, 17, 0, 3}),
                          With1x7({64, 17, 17, 64, 0, 3}),
                          With1x7({5, 6, 9, 4, 0, 2}),
                          With7x1({1, 1, 1, 1, 3, 0}),
                          With7x1({3, 3, 2, 2, 6, 1}),
                          With7x1({17, 7, 5, 3, 0, 0}),
                          With7x1({3, 17, 17, 17, 3, 0}),
                          With7x1({64, 17, 17, 64, 3, 0}),
                          With7x1({5, 9, 6, 4, 2, 0})};
  for (const Shape& s : shapes) {
    for (int images : {1, 3}) {
      this->CheckForward(s, images);
      if (this->HasFailure()) return;
    }
  }
}

TYPED_TEST(WinogradConvTest, WinogradForwardAcrossTileBlocks) {
  // 12 tiles per image (3x3 kernel: 4x4 tiles of 13 x 7; 5x5: 2x2 tiles of
  // 7 x 5; 1x7: 1 x 2 tiles of 4 x 6; 7x1: 2 x 1 of 6 x 4): blocks of 1, 5,
  // 7, 16 and 17 tiles end inside images and span image boundaries; 100
  // holds the whole batch.
  for (const Shape& base :
       {Shape{3, 13, 9, 5, 1, 1}, With5x5({3, 9, 7, 5, 1, 1}),
        Tile4(With5x5({3, 9, 7, 5, 1, 1})), With1x7({3, 4, 6, 5, 0, 3}),
        With7x1({3, 6, 4, 5, 3, 0})}) {
    for (int block : {1, 5, 7, 16, 17, 100}) {
      Shape s = base;
      s.tile_block = block;
      this->CheckForward(s, 3);
      if (this->HasFailure()) return;
    }
  }
  // The automatic block on a wider layer: 49 tiles per image, 147 in all,
  // more than one block (112 tiles in float, 64 in double; for F(2, 7)
  // 128 and 64).
  for (const Shape& s :
       {Shape{64, 26, 26, 64, 1, 1}, With5x5({64, 14, 14, 64, 2, 2}),
        Tile4(With5x5({64, 26, 26, 64, 2, 2})),
        With1x7({256, 7, 13, 256, 0, 3})}) {
    const WinogradConv<TypeParam> conv(ToGeometry<TypeParam>(s));
    ASSERT_EQ(conv.tiles_per_image(), 49) << Describe(s, 1);
    ASSERT_GT(3 * conv.tiles_per_image(), conv.tile_block());
    this->CheckForward(s, 3);
    if (this->HasFailure()) return;
  }
}

TYPED_TEST(WinogradConvTest, WinogradInputGradientThroughFlippedWeights) {
  using Dtype = TypeParam;
  const Shape shapes[] = {{3, 5, 7, 4, 0, 0},
                          {17, 13, 9, 3, 1, 1},
                          {2, 3, 3, 17, 2, 2},
                          {5, 14, 14, 6, 1, 2},
                          {4, 6, 11, 5, 2, 0},
                          {1, 3, 4, 1, 0, 1},
                          With5x5({3, 5, 7, 4, 0, 0}),
                          Tile4(With5x5({3, 5, 7, 4, 0, 0})),
                          With5x5({17, 13, 9, 3, 2, 2}),
                          Tile4(With5x5({17, 13, 9, 3, 2, 2})),
                          With5x5({2, 3, 3, 17, 4, 4}),
                          Tile4(With5x5({2, 3, 3, 17, 4, 4})),
                          With5x5({5, 14, 14, 6, 1, 3}),
                          Tile4(With5x5({5, 14, 14, 6, 1, 3})),
                          With5x5({4, 6, 11, 5, 3, 0}),
                          Tile4(With5x5({4, 6, 11, 5, 3, 0})),
                          With5x5({1, 3, 4, 1, 1, 2}),
                          Tile4(With5x5({1, 3, 4, 1, 1, 2})),
                          With1x7({3, 5, 7, 4, 0, 0}),
                          With1x7({17, 13, 9, 3, 0, 3}),
                          With1x7({5, 6, 11, 6, 0, 6}),
                          With7x1({3, 7, 5, 4, 0, 0}),
                          With7x1({17, 9, 13, 3, 3, 0}),
                          With7x1({5, 11, 6, 6, 6, 0})};
  for (const Shape& s : shapes) {
    const int images = 2;
    SCOPED_TRACE(Describe(s, images));
    const int OH = OutputH(s), OW = OutputW(s);
    // The input gradient as a forward convolution of the top diff: pads
    // kh - 1 - pad_h and kw - 1 - pad_w, channels and outputs swapped,
    // weights flipped. Its output dx[h][u] reads dy rows h + pad_h - (kh -
    // 1) to h + pad_h, so MagnitudeBound of this shape measures it.
    Shape back = WithKernel({s.outputs, OH, OW, s.channels, 0, 0}, s.kernel_h,
                            s.kernel_w);
    back.pad_h = s.kernel_h - 1 - s.pad_h;
    back.pad_w = s.kernel_w - 1 - s.pad_w;
    back.tile = s.tile;
    const WinogradConv<Dtype> conv(ToGeometry<Dtype>(back));
    ASSERT_EQ(conv.output_h(), s.height);
    ASSERT_EQ(conv.output_w(), s.width);
    const size_t top_size = static_cast<size_t>(s.outputs) * OH * OW;
    const size_t bottom_size =
        static_cast<size_t>(s.channels) * s.height * s.width;
    const std::vector<Dtype> w = Random<Dtype>(WeightsCount(s), 3);
    const std::vector<Dtype> dy = Random<Dtype>(top_size * images, 4);
    std::vector<Dtype> U(conv.weights_size());
    conv.TransformWeights(w.data(), true, U.data());
    std::vector<Dtype> scratch(conv.scratch_size(images));
    std::vector<Dtype> dx(bottom_size * images, std::nan(""));
    conv.Forward(images, U.data(), dy.data(), dx.data(), scratch.data());
    const std::vector<double> want = NaiveInputGradient(s, images, w, dy);
    const std::vector<double> bound =
        MagnitudeBound(back, images, KernelNorms(s, w, true), dy);
    this->Record(s, ExpectWithinBound(want, bound, dx.data(),
                                      Tolerance<Dtype>(), "input gradient"));
    if (this->HasFailure()) return;
  }
}

TYPED_TEST(WinogradConvTest, WinogradResultsIndependentOfImagesPerCall) {
  // As the layer splits a batch over threads: 5 images in one call, one
  // per call, and 2 per call (the last call 1), with blocks that cross
  // images (7 tiles of 12 per image, for each kernel) and the automatic
  // block.
  for (const Shape& base :
       {Shape{5, 13, 9, 6, 1, 1}, With5x5({5, 9, 7, 6, 1, 1}),
        Tile4(With5x5({5, 9, 7, 6, 1, 1})), With7x1({5, 6, 4, 6, 3, 0})}) {
    for (int block : {7, 0}) {
      Shape s = base;
      s.tile_block = block;
      const std::vector<TypeParam> whole = this->CheckForward(s, 5);
      for (int split : {1, 2}) {
        const std::vector<TypeParam> parts = this->CheckForward(s, 5, split);
        // Per tile the same transforms and GEMM columns, but a GEMM backend
        // may sum a narrower product in another order: allow a few
        // roundings of the largest output.
        double largest = 0;
        for (TypeParam v : whole) {
          largest = std::max(largest, std::fabs(1.0 * v));
        }
        const double eps = std::numeric_limits<TypeParam>::epsilon();
        for (size_t i = 0; i < whole.size(); ++i) {
          ASSERT_NEAR(whole[i], parts[i], 64 * eps * largest)
              << "element " << i << " with " << split << " image(s) per call, "
              << Describe(s, 5);
        }
      }
    }
  }
}

TYPED_TEST(WinogradConvTest, WinogradForwardStridedImages) {
  // Two groups of a grouped convolution: each group's images are whole
  // images apart, its channels and outputs a slice of each.
  using Dtype = TypeParam;
  for (const Shape& s :
       {Shape{3, 9, 6, 4, 1, 0, 7}, With5x5({3, 9, 6, 4, 2, 1, 7}),
        Tile4(With5x5({3, 9, 6, 4, 2, 1, 7})),
        With1x7({3, 9, 6, 4, 0, 2, 7})}) {
    const int images = 3, groups = 2;
    SCOPED_TRACE(Describe(s, images));
    const WinogradConv<Dtype> conv(ToGeometry<Dtype>(s));
    const size_t in_size = static_cast<size_t>(s.channels) * s.height * s.width;
    const size_t out_size =
        static_cast<size_t>(s.outputs) * conv.output_h() * conv.output_w();
    const std::vector<Dtype> x = Random<Dtype>(groups * in_size * images, 8);
    std::vector<Dtype> top(groups * out_size * images, std::nan(""));
    std::vector<Dtype> U(conv.weights_size()),
        scratch(conv.scratch_size(images));
    std::vector<std::vector<Dtype>> w;
    for (int g = 0; g < groups; ++g) {
      w.push_back(Random<Dtype>(WeightsCount(s), 9 + g));
      conv.TransformWeights(w[g].data(), false, U.data());
      conv.Forward(images, U.data(), x.data() + g * in_size, groups * in_size,
                   top.data() + g * out_size, groups * out_size,
                   scratch.data());
    }
    for (int g = 0; g < groups; ++g) {
      std::vector<Dtype> x_g, top_g;
      for (int n = 0; n < images; ++n) {
        const auto x_n = x.begin() + (n * groups + g) * in_size;
        x_g.insert(x_g.end(), x_n, x_n + in_size);
        const auto top_n = top.begin() + (n * groups + g) * out_size;
        top_g.insert(top_g.end(), top_n, top_n + out_size);
      }
      const std::vector<double> want = NaiveForward(s, images, w[g], x_g);
      const std::vector<double> bound =
          MagnitudeBound(s, images, KernelNorms(s, w[g], false), x_g);
      this->Record(
          s, ExpectWithinBound(want, bound, top_g.data(), Tolerance<Dtype>(),
                               "group " + std::to_string(g)));
    }
    if (this->HasFailure()) return;
  }
}

TYPED_TEST(WinogradConvTest, WinogradForwardAccumulates) {
  using Dtype = TypeParam;
  for (const Shape& s :
       {Shape{4, 7, 10, 3, 1, 0, 5}, With5x5({4, 7, 10, 3, 2, 1, 5}),
        Tile4(With5x5({4, 7, 10, 3, 2, 1, 5})),
        With7x1({4, 7, 10, 3, 3, 0, 5})}) {
    const int images = 2;
    SCOPED_TRACE(Describe(s, images));
    const WinogradConv<Dtype> conv(ToGeometry<Dtype>(s));
    const size_t out_size = static_cast<size_t>(images) * s.outputs *
                            conv.output_h() * conv.output_w();
    const std::vector<Dtype> w = Random<Dtype>(WeightsCount(s), 5);
    const std::vector<Dtype> x = Random<Dtype>(
        static_cast<size_t>(images) * s.channels * s.height * s.width, 6);
    const std::vector<Dtype> start = Random<Dtype>(out_size, 7);
    std::vector<Dtype> U(conv.weights_size()),
        scratch(conv.scratch_size(images));
    conv.TransformWeights(w.data(), false, U.data());
    std::vector<Dtype> top = start;
    conv.Forward(images, U.data(), x.data(), top.data(), scratch.data(), true);
    std::vector<double> want = NaiveForward(s, images, w, x);
    std::vector<double> bound =
        MagnitudeBound(s, images, KernelNorms(s, w, false), x);
    for (size_t i = 0; i < out_size; ++i) {
      want[i] += start[i];
      bound[i] += std::fabs(start[i]);
    }
    this->Record(s,
                 ExpectWithinBound(want, bound, top.data(), Tolerance<Dtype>(),
                                   "accumulated forward"));
    if (this->HasFailure()) return;
  }
}

// The gradient with respect to the weights (outputs, channels, kh, kw) of
// the convolution of NaiveForward given top_diff, from the definition, and
// the size its error is measured against: for kernel element (o, c, i, j),
// the sum over images and outputs of |top_diff| times the largest |x| of
// the image's channel c (a transform-domain sum mixes each tile's whole
// window, so the pixel a term multiplies is no bound).
template <typename Dtype>
void NaiveWeightGradient(const Shape& s, int images,
                         const std::vector<Dtype>& x,
                         const std::vector<Dtype>& top_diff,
                         std::vector<double>* grad,
                         std::vector<double>* bound) {
  const int C = s.channels, H = s.height, W = s.width, O = s.outputs;
  const int OH = OutputH(s), OW = OutputW(s);
  const int KH = s.kernel_h, KW = s.kernel_w;
  grad->assign(WeightsCount(s), 0.0);
  bound->assign(grad->size(), 0.0);
  for (int n = 0; n < images; ++n) {
    for (int c = 0; c < C; ++c) {
      const Dtype* plane = x.data() + (static_cast<size_t>(n) * C + c) * H * W;
      double largest = 0;
      for (int p = 0; p < H * W; ++p) {
        largest = std::max(largest, std::fabs(static_cast<double>(plane[p])));
      }
      for (int o = 0; o < O; ++o) {
        const Dtype* dy =
            top_diff.data() + (static_cast<size_t>(n) * O + o) * OH * OW;
        double dy_l1 = 0;
        for (int p = 0; p < OH * OW; ++p) dy_l1 += std::fabs(1.0 * dy[p]);
        for (int t = 0; t < KH * KW; ++t) {
          const int i = t / KW, j = t % KW;
          double sum = 0;
          for (int y = 0; y < OH; ++y) {
            const int h = y - s.pad_h + i;
            if (h < 0 || h >= H) continue;
            for (int v = 0; v < OW; ++v) {
              const int u = v - s.pad_w + j;
              if (u < 0 || u >= W) continue;
              sum += static_cast<double>(dy[y * OW + v]) * plane[h * W + u];
            }
          }
          const size_t k = (static_cast<size_t>(o) * C + c) * KH * KW + t;
          (*grad)[k] += sum;
          (*bound)[k] += dy_l1 * largest;
        }
      }
    }
  }
}

TYPED_TEST(WinogradConvTest, WinogradWeightGradientMatchesNaive) {
  using Dtype = TypeParam;
  // Pads 0 to r - 1, outputs not multiples of the tile, a single pixel,
  // channel counts around the 16-lane steps, blocks that end inside
  // images.
  const Shape shapes[] = {{3, 5, 7, 4, 0, 0},
                          {17, 13, 9, 3, 1, 1},
                          {2, 3, 3, 17, 2, 2},
                          {5, 14, 14, 6, 1, 2},
                          {4, 6, 11, 5, 2, 0, 5},
                          {1, 1, 1, 1, 1, 1},
                          {33, 9, 10, 18, 1, 1, 7},
                          With5x5({3, 5, 7, 4, 0, 0}),
                          Tile4(With5x5({3, 5, 7, 4, 0, 0})),
                          With5x5({17, 13, 9, 3, 2, 2}),
                          Tile4(With5x5({17, 13, 9, 3, 2, 2})),
                          With5x5({2, 3, 3, 17, 4, 4}),
                          Tile4(With5x5({2, 3, 3, 17, 4, 4})),
                          With5x5({5, 14, 14, 6, 1, 3}),
                          Tile4(With5x5({5, 14, 14, 6, 1, 3})),
                          With5x5({4, 6, 11, 5, 3, 0, 5}),
                          Tile4(With5x5({4, 6, 11, 5, 3, 0, 5})),
                          With5x5({1, 1, 1, 1, 2, 2}),
                          Tile4(With5x5({1, 1, 1, 1, 2, 2})),
                          With5x5({33, 9, 10, 18, 2, 2, 7}),
                          Tile4(With5x5({33, 9, 10, 18, 2, 2, 7})),
                          With1x7({3, 5, 7, 4, 0, 0}),
                          With1x7({17, 13, 9, 3, 0, 3}),
                          With1x7({1, 1, 1, 1, 0, 6}),
                          With1x7({33, 9, 10, 18, 0, 3, 7}),
                          With7x1({2, 9, 3, 17, 5, 0}),
                          With7x1({33, 10, 9, 18, 3, 0, 7})};
  for (const Shape& s : shapes) {
    for (int images : {1, 3}) {
      SCOPED_TRACE(Describe(s, images));
      const WinogradConv<Dtype> conv(ToGeometry<Dtype>(s));
      const std::vector<Dtype> x = Random<Dtype>(
          static_cast<size_t>(images) * s.channels * s.height * s.width, 11);
      const std::vector<Dtype> dy =
          Random<Dtype>(static_cast<size_t>(images) * s.outputs *
                            conv.output_h() * conv.output_w(),
                        12);
      std::vector<double> want, bound;
      NaiveWeightGradient(s, images, x, dy, &want, &bound);
      const std::vector<Dtype> start = Random<Dtype>(want.size(), 13);
      for (size_t i = 0; i < want.size(); ++i) {
        want[i] += start[i];
        bound[i] += std::fabs(1.0 * start[i]);
      }
      const int64_t tiles =
          static_cast<int64_t>(images) * conv.tiles_per_image();
      const ptrdiff_t x_step = static_cast<ptrdiff_t>(x.size() / images);
      const ptrdiff_t dy_step = static_cast<ptrdiff_t>(dy.size() / images);
      const int half = s.outputs / 2;
      std::vector<Dtype> scratch(conv.scratch_size(images));
      // By tiles: three uneven parts (the first may be empty), each
      // overwriting its own transform-domain sum; then the outputs taken
      // back in two ranges, added to a start value.
      const int64_t cut[] = {0, tiles / 4, tiles / 4 + tiles / 2, tiles};
      std::vector<std::vector<Dtype>> dU(3);
      std::vector<const Dtype*> parts;
      for (int p = 0; p < 3; ++p) {
        dU[p].assign(conv.weights_size(), std::nan(""));
        conv.AccumulateWeightGradient(images, x.data(), x_step, dy.data(),
                                      dy_step, cut[p], cut[p + 1], 0, s.outputs,
                                      dU[p].data(), scratch.data(),
                                      /*accumulate=*/false);
        parts.push_back(dU[p].data());
      }
      std::vector<Dtype> grad = start;
      conv.TransformWeightGradient(parts.data(), 3, grad.data(), 0, half);
      conv.TransformWeightGradient(parts.data(), 3, grad.data(), half,
                                   s.outputs);
      this->Record(
          s, ExpectWithinBound(want, bound, grad.data(), Tolerance<Dtype>(),
                               "weight gradient by tiles"));
      if (this->HasFailure()) return;
      // By outputs: two ranges of rows of one sum, all tiles each.
      std::vector<Dtype> one(conv.weights_size(), std::nan(""));
      conv.AccumulateWeightGradient(images, x.data(), x_step, dy.data(),
                                    dy_step, 0, tiles, 0, half, one.data(),
                                    scratch.data(), false);
      conv.AccumulateWeightGradient(images, x.data(), x_step, dy.data(),
                                    dy_step, 0, tiles, half, s.outputs,
                                    one.data(), scratch.data(), false);
      const Dtype* whole = one.data();
      grad = start;
      conv.TransformWeightGradient(&whole, 1, grad.data(), 0, s.outputs);
      this->Record(
          s, ExpectWithinBound(want, bound, grad.data(), Tolerance<Dtype>(),
                               "weight gradient by outputs"));
      if (this->HasFailure()) return;
    }
  }
}

TYPED_TEST(WinogradConvTest, WinogradWeightGradientAccumulatesInTheTransform) {
  // accumulate = true adds to dU: two parts into one buffer (cut inside a
  // block of 4 tiles) give what one call over all tiles gives.
  using Dtype = TypeParam;
  for (const Shape& s :
       {Shape{6, 9, 9, 5, 1, 1, 4}, With5x5({6, 9, 9, 5, 2, 2, 4}),
        Tile4(With5x5({6, 9, 9, 5, 2, 2, 4})),
        With1x7({6, 9, 9, 5, 0, 3, 4})}) {
    const int images = 2;
    SCOPED_TRACE(Describe(s, images));
    const WinogradConv<Dtype> conv(ToGeometry<Dtype>(s));
    const std::vector<Dtype> x = Random<Dtype>(
        static_cast<size_t>(images) * s.channels * s.height * s.width, 14);
    const std::vector<Dtype> dy =
        Random<Dtype>(static_cast<size_t>(images) * s.outputs *
                          conv.output_h() * conv.output_w(),
                      15);
    const int64_t tiles = static_cast<int64_t>(images) * conv.tiles_per_image();
    const ptrdiff_t x_step = static_cast<ptrdiff_t>(x.size() / images);
    const ptrdiff_t dy_step = static_cast<ptrdiff_t>(dy.size() / images);
    std::vector<Dtype> scratch(conv.scratch_size(images));
    std::vector<Dtype> whole(conv.weights_size()), halves(conv.weights_size());
    const int O = s.outputs;
    conv.AccumulateWeightGradient(images, x.data(), x_step, dy.data(), dy_step,
                                  0, tiles, 0, O, whole.data(), scratch.data(),
                                  false);
    conv.AccumulateWeightGradient(images, x.data(), x_step, dy.data(), dy_step,
                                  0, 7, 0, O, halves.data(), scratch.data(),
                                  false);
    conv.AccumulateWeightGradient(images, x.data(), x_step, dy.data(), dy_step,
                                  7, tiles, 0, O, halves.data(), scratch.data(),
                                  true);
    double largest = 0;
    for (Dtype v : whole) largest = std::max(largest, std::fabs(1.0 * v));
    ASSERT_GT(largest, 0);
    const double eps = std::numeric_limits<Dtype>::epsilon();
    for (size_t i = 0; i < whole.size(); ++i) {
      ASSERT_NEAR(whole[i], halves[i], 64 * eps * largest) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace poseidon
