// im2col / col2im: against a naive element-by-element definition, the batch
// and N-D variants against the 2-D one, and col2im as the exact adjoint of
// im2col (<im2col(x), y> == <x, col2im(y)>).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "poseidon/util/im2col.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

struct Geo {
  int c, h, w, kh, kw, ph, pw, sh, sw, dh, dw;
  int oh() const { return ConvOutputSize(h, kh, ph, sh, dh); }
  int ow() const { return ConvOutputSize(w, kw, pw, sw, dw); }
  int rows() const { return c * kh * kw; }
  int cols() const { return oh() * ow(); }
};

const Geo kGeometries[] = {
    {3, 6, 5, 3, 3, 0, 0, 1, 1, 1, 1},  // plain
    {2, 7, 8, 3, 2, 1, 2, 2, 3, 1, 1},  // pad, stride
    {2, 8, 9, 3, 3, 1, 0, 1, 1, 2, 3},  // dilation
    {1, 4, 4, 1, 1, 0, 0, 1, 1, 1, 1},  // 1x1
    {2, 3, 4, 5, 5, 2, 2, 1, 1, 1, 1},  // kernel larger than the image
    {3, 5, 6, 2, 3, 1, 1, 3, 2, 2, 1},  // everything at once
    // A stride a step below INT_MAX: the ceil-divisions once computed
    // position + stride in int (found by fuzz_layer_setup; UBSan sees it).
    {2, 2, 15, 2, 3, 0, 2, 2147483646, 2, 1, 1},
};

// col[(c*kh + i)*kw + j][y*ow + x] = im[c][y*sh - ph + i*dh][x*sw - pw + j*dw]
template <typename Dtype>
vector<Dtype> NaiveIm2col(const vector<Dtype>& im, const Geo& g) {
  vector<Dtype> col(static_cast<size_t>(g.rows()) * g.cols(), Dtype(-7));
  for (int c = 0; c < g.c; ++c) {
    for (int i = 0; i < g.kh; ++i) {
      for (int j = 0; j < g.kw; ++j) {
        const int row = (c * g.kh + i) * g.kw + j;
        for (int y = 0; y < g.oh(); ++y) {
          for (int x = 0; x < g.ow(); ++x) {
            const int ih = y * g.sh - g.ph + i * g.dh;
            const int iw = x * g.sw - g.pw + j * g.dw;
            const bool inside = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
            col[static_cast<size_t>(row) * g.cols() + y * g.ow() + x] =
                inside ? im[(c * g.h + ih) * g.w + iw] : Dtype(0);
          }
        }
      }
    }
  }
  return col;
}

template <typename Dtype>
vector<Dtype> RandomVector(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  vector<Dtype> v(n);
  for (auto& x : v) x = static_cast<Dtype>(dist(gen));
  return v;
}

template <typename Dtype>
double Dot(const vector<Dtype>& a, const vector<Dtype>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

template <typename Dtype>
class Im2colTest : public ::testing::Test {};
TYPED_TEST_SUITE(Im2colTest, test::TestDtypes);

TEST(ConvOutputSizeTest, Rule) {
  EXPECT_EQ(ConvOutputSize(32, 5, 2, 1, 1), 32);
  EXPECT_EQ(ConvOutputSize(227, 11, 0, 4, 1), 55);
  EXPECT_EQ(ConvOutputSize(7, 3, 0, 2, 1), 3);
  EXPECT_EQ(ConvOutputSize(8, 3, 0, 2, 1), 3);  // the last row is dropped
  EXPECT_EQ(ConvOutputSize(9, 3, 1, 1, 2), 7);  // extent 5
}

TYPED_TEST(Im2colTest, MatchesNaive2D) {
  using Dtype = TypeParam;
  for (const Geo& g : kGeometries) {
    const auto im = RandomVector<Dtype>(g.c * g.h * g.w, 1);
    vector<Dtype> col(static_cast<size_t>(g.rows()) * g.cols(), Dtype(99));
    im2col_cpu(im.data(), g.c, g.h, g.w, g.kh, g.kw, g.ph, g.pw, g.sh, g.sw,
               g.dh, g.dw, col.data());
    EXPECT_EQ(col, NaiveIm2col(im, g))
        << "geometry c" << g.c << " " << g.h << "x" << g.w << " k" << g.kh
        << "x" << g.kw;
  }
}

TYPED_TEST(Im2colTest, BatchIsSideBySideColumns) {
  using Dtype = TypeParam;
  const int num = 3;
  for (const Geo& g : kGeometries) {
    const size_t im_size = static_cast<size_t>(g.c) * g.h * g.w;
    const auto ims = RandomVector<Dtype>(num * im_size, 2);
    const int wide = num * g.cols();
    vector<Dtype> col(static_cast<size_t>(g.rows()) * wide);
    im2col_batch_cpu(ims.data(), num, g.c, g.h, g.w, g.kh, g.kw, g.ph, g.pw,
                     g.sh, g.sw, g.dh, g.dw, col.data());
    for (int n = 0; n < num; ++n) {
      const vector<Dtype> one(ims.begin() + n * im_size,
                              ims.begin() + (n + 1) * im_size);
      const auto expected = NaiveIm2col(one, g);
      for (int r = 0; r < g.rows(); ++r) {
        for (int s = 0; s < g.cols(); ++s) {
          ASSERT_EQ(col[static_cast<size_t>(r) * wide + n * g.cols() + s],
                    expected[static_cast<size_t>(r) * g.cols() + s])
              << "image " << n << " row " << r << " column " << s;
        }
      }
    }
  }
}

TYPED_TEST(Im2colTest, Col2imIsAdjoint) {
  using Dtype = TypeParam;
  const double tol = sizeof(Dtype) == 4 ? 1e-4 : 1e-11;
  for (const Geo& g : kGeometries) {
    const size_t im_size = static_cast<size_t>(g.c) * g.h * g.w;
    const size_t col_size = static_cast<size_t>(g.rows()) * g.cols();
    const auto x = RandomVector<Dtype>(im_size, 3);
    const auto y = RandomVector<Dtype>(col_size, 4);
    vector<Dtype> col(col_size), im(im_size, Dtype(5));
    im2col_cpu(x.data(), g.c, g.h, g.w, g.kh, g.kw, g.ph, g.pw, g.sh, g.sw,
               g.dh, g.dw, col.data());
    col2im_cpu(y.data(), g.c, g.h, g.w, g.kh, g.kw, g.ph, g.pw, g.sh, g.sw,
               g.dh, g.dw, im.data());
    EXPECT_NEAR(Dot(col, y), Dot(x, im), tol * col_size);

    // The batch version, three images.
    const int num = 3;
    const auto xs = RandomVector<Dtype>(num * im_size, 5);
    const auto ys = RandomVector<Dtype>(num * col_size, 6);
    vector<Dtype> cols(num * col_size), ims(num * im_size, Dtype(5));
    im2col_batch_cpu(xs.data(), num, g.c, g.h, g.w, g.kh, g.kw, g.ph, g.pw,
                     g.sh, g.sw, g.dh, g.dw, cols.data());
    col2im_batch_cpu(ys.data(), num, g.c, g.h, g.w, g.kh, g.kw, g.ph, g.pw,
                     g.sh, g.sw, g.dh, g.dw, ims.data());
    EXPECT_NEAR(Dot(cols, ys), Dot(xs, ims), tol * num * col_size);
  }
}

TYPED_TEST(Im2colTest, Col2imAccumulatesOverlaps) {
  using Dtype = TypeParam;
  // 1 channel 3x3, 2x2 kernel, stride 1: the centre pixel is read by all
  // four windows, corners by one, edges by two.
  vector<Dtype> col(4 * 4, Dtype(1)), im(9, Dtype(-1));
  col2im_cpu(col.data(), 1, 3, 3, 2, 2, 0, 0, 1, 1, 1, 1, im.data());
  EXPECT_EQ(im, (vector<Dtype>{1, 2, 1, 2, 4, 2, 1, 2, 1}));
}

TYPED_TEST(Im2colTest, NdMatches2D) {
  using Dtype = TypeParam;
  for (const Geo& g : kGeometries) {
    const auto im = RandomVector<Dtype>(g.c * g.h * g.w, 7);
    const int im_shape[] = {g.c, g.h, g.w};
    const int col_shape[] = {g.rows(), g.oh(), g.ow()};
    const int kernel[] = {g.kh, g.kw}, pad[] = {g.ph, g.pw};
    const int stride[] = {g.sh, g.sw}, dilation[] = {g.dh, g.dw};
    vector<Dtype> col(static_cast<size_t>(g.rows()) * g.cols());
    im2col_nd_cpu(im.data(), 2, im_shape, col_shape, kernel, pad, stride,
                  dilation, col.data());
    EXPECT_EQ(col, NaiveIm2col(im, g));
    const auto y = RandomVector<Dtype>(col.size(), 8);
    vector<Dtype> back_nd(im.size()), back_2d(im.size());
    col2im_nd_cpu(y.data(), 2, im_shape, col_shape, kernel, pad, stride,
                  dilation, back_nd.data());
    col2im_cpu(y.data(), g.c, g.h, g.w, g.kh, g.kw, g.ph, g.pw, g.sh, g.sw,
               g.dh, g.dw, back_2d.data());
    for (size_t i = 0; i < im.size(); ++i) {
      EXPECT_NEAR(back_nd[i], back_2d[i], 1e-5) << "element " << i;
    }
  }
}

TYPED_TEST(Im2colTest, Nd3DMatchesNaiveAndIsAdjoint) {
  using Dtype = TypeParam;
  // 2 channels of 4 x 5 x 3; kernel 3 x 2 x 2, pad 1 0 1, stride 1 2 1,
  // dilation 1 1 2.
  const int im_shape[] = {2, 4, 5, 3};
  const int kernel[] = {3, 2, 2}, pad[] = {1, 0, 1}, stride[] = {1, 2, 1},
            dilation[] = {1, 1, 2};
  int out[3];
  for (int d = 0; d < 3; ++d) {
    out[d] = ConvOutputSize(im_shape[d + 1], kernel[d], pad[d], stride[d],
                            dilation[d]);
  }
  ASSERT_EQ(out[0], 4);
  ASSERT_EQ(out[1], 2);
  ASSERT_EQ(out[2], 3);
  const int col_shape[] = {2 * 12, out[0], out[1], out[2]};
  const int cols = out[0] * out[1] * out[2];
  const auto im = RandomVector<Dtype>(2 * 4 * 5 * 3, 9);
  vector<Dtype> col(static_cast<size_t>(24) * cols);
  im2col_nd_cpu(im.data(), 3, im_shape, col_shape, kernel, pad, stride,
                dilation, col.data());
  for (int c = 0; c < 2; ++c) {
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 2; ++j) {
        for (int k = 0; k < 2; ++k) {
          const int row = ((c * 3 + i) * 2 + j) * 2 + k;
          for (int z = 0; z < out[0]; ++z) {
            for (int y = 0; y < out[1]; ++y) {
              for (int x = 0; x < out[2]; ++x) {
                const int iz = z - 1 + i, iy = y * 2 + j, ix = x - 1 + 2 * k;
                const bool inside =
                    iz >= 0 && iz < 4 && iy < 5 && ix >= 0 && ix < 3;
                const Dtype expected =
                    inside ? im[((c * 4 + iz) * 5 + iy) * 3 + ix] : Dtype(0);
                ASSERT_EQ(col[row * cols + (z * out[1] + y) * out[2] + x],
                          expected)
                    << "row " << row << " at " << z << "," << y << "," << x;
              }
            }
          }
        }
      }
    }
  }
  const auto y = RandomVector<Dtype>(col.size(), 10);
  vector<Dtype> back(im.size(), Dtype(3));
  col2im_nd_cpu(y.data(), 3, im_shape, col_shape, kernel, pad, stride, dilation,
                back.data());
  EXPECT_NEAR(Dot(col, y), Dot(im, back), 1e-3);
}

}  // namespace
}  // namespace poseidon
