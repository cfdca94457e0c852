// The per-element im2col / col2im bodies the GPU runs
// (kernels/im2col_kernels.hpp, through im2col_on / col2im_on), run on the
// CPU and compared bitwise with the CPU functions of util/im2col.hpp on
// awkward geometries, in both column layouts, 2-D and N-D; and the layout
// helpers of the convolution's GEMM path.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "poseidon/kernels/im2col_kernels.hpp"
#include "poseidon/util/for_each.hpp"
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
  size_t im_size() const { return static_cast<size_t>(c) * h * w; }
};

const Geo kGeometries[] = {
    {3, 6, 5, 3, 3, 0, 0, 1, 1, 1, 1},  // plain
    {2, 7, 8, 3, 2, 1, 2, 2, 3, 1, 1},  // pad, stride
    {2, 8, 9, 3, 3, 1, 0, 1, 1, 2, 3},  // dilation
    {1, 4, 4, 1, 1, 0, 0, 1, 1, 1, 1},  // 1x1
    {3, 5, 5, 1, 1, 0, 0, 2, 2, 1, 1},  // strided 1x1
    {2, 3, 4, 5, 5, 2, 2, 1, 1, 1, 1},  // kernel larger than the image
    {3, 5, 6, 2, 3, 1, 1, 3, 2, 2, 1},  // everything at once
    {2, 9, 7, 2, 2, 0, 1, 3, 4, 1, 1},  // stride larger than the kernel
    {1, 1, 7, 1, 3, 0, 1, 1, 2, 1, 1},  // one row
    {2, 6, 6, 3, 3, 3, 3, 2, 1, 3, 2},  // large pad and dilation
    {2, 11, 10, 11, 3, 0, 1, 4, 1, 1, 1},  // AlexNet-like tall kernel
};

template <typename Dtype>
vector<Dtype> RandomVector(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  vector<Dtype> v(n);
  for (auto& x : v) x = static_cast<Dtype>(dist(gen));
  return v;
}

kernels::Im2colShape Shape2D(const Geo& g, int num, ColumnLayout layout) {
  const int im_shape[] = {g.c, g.h, g.w};
  const int kernel[] = {g.kh, g.kw}, pad[] = {g.ph, g.pw};
  const int stride[] = {g.sh, g.sw}, dilation[] = {g.dh, g.dw};
  return MakeIm2colShape(2, im_shape, kernel, pad, stride, dilation, num,
                         layout);
}

template <typename Dtype>
class Im2colKernelTest : public ::testing::Test {};
TYPED_TEST_SUITE(Im2colKernelTest, test::TestDtypes);

TEST(Im2colShapeTest, FillsDimsCountsAndStrides) {
  const Geo g{3, 5, 6, 2, 3, 1, 1, 3, 2, 2, 1};
  const kernels::Im2colShape a = Shape2D(g, 4, ColumnLayout::kSideBySide);
  EXPECT_EQ(a.out[0], g.oh());
  EXPECT_EQ(a.out[1], g.ow());
  EXPECT_EQ(a.out_spatial, g.cols());
  EXPECT_EQ(a.im_spatial, g.h * g.w);
  EXPECT_EQ(a.kernel_count, 6);
  EXPECT_EQ(a.rows(), g.rows());
  EXPECT_EQ(a.col_row_stride, 4 * g.cols());
  EXPECT_EQ(a.col_image_stride, g.cols());
  EXPECT_EQ(a.col_count(), g.rows() * 4 * g.cols());
  EXPECT_EQ(a.im_count(), 4 * static_cast<int>(g.im_size()));
  const kernels::Im2colShape b = Shape2D(g, 4, ColumnLayout::kImageAfterImage);
  EXPECT_EQ(b.col_row_stride, g.cols());
  EXPECT_EQ(b.col_image_stride, g.rows() * g.cols());
}

// Side by side: the batched CPU im2col; image after image: the per-image
// one. Bitwise, with the 2-D and the N-D bodies.
TYPED_TEST(Im2colKernelTest, Im2colMatchesCpu2D) {
  using Dtype = TypeParam;
  const int num = 3;
  for (const Geo& g : kGeometries) {
    SCOPED_TRACE(testing::Message() << "c" << g.c << " " << g.h << "x" << g.w
                                    << " k" << g.kh << "x" << g.kw << " p"
                                    << g.ph << "," << g.pw << " s" << g.sh
                                    << "," << g.sw << " d" << g.dh << ","
                                    << g.dw);
    const auto ims = RandomVector<Dtype>(num * g.im_size(), 1);
    const size_t col_size = static_cast<size_t>(g.rows()) * num * g.cols();
    vector<Dtype> expected(col_size);
    im2col_batch_cpu(ims.data(), num, g.c, g.h, g.w, g.kh, g.kw, g.ph, g.pw,
                     g.sh, g.sw, g.dh, g.dw, expected.data());
    vector<Dtype> per_image(col_size);
    for (int n = 0; n < num; ++n) {
      im2col_cpu(ims.data() + n * g.im_size(), g.c, g.h, g.w, g.kh, g.kw,
                 g.ph, g.pw, g.sh, g.sw, g.dh, g.dw,
                 per_image.data() + static_cast<size_t>(n) * g.rows() *
                                        g.cols());
    }
    for (bool nd : {false, true}) {
      vector<Dtype> col(col_size, Dtype(99));
      im2col_on(Poseidon::CPU, Shape2D(g, num, ColumnLayout::kSideBySide), nd,
                ims.data(), col.data());
      EXPECT_EQ(col, expected) << "side by side, nd " << nd;
      vector<Dtype> col2(col_size, Dtype(99));
      im2col_on(Poseidon::CPU,
                Shape2D(g, num, ColumnLayout::kImageAfterImage), nd,
                ims.data(), col2.data());
      EXPECT_EQ(col2, per_image) << "image after image, nd " << nd;
    }
  }
}

// The gather adds each pixel's entries in the CPU's order: bitwise equal.
TYPED_TEST(Im2colKernelTest, Col2imMatchesCpu2D) {
  using Dtype = TypeParam;
  const int num = 3;
  for (const Geo& g : kGeometries) {
    SCOPED_TRACE(testing::Message() << "c" << g.c << " " << g.h << "x" << g.w
                                    << " k" << g.kh << "x" << g.kw << " p"
                                    << g.ph << "," << g.pw << " s" << g.sh
                                    << "," << g.sw << " d" << g.dh << ","
                                    << g.dw);
    const size_t col_size = static_cast<size_t>(g.rows()) * num * g.cols();
    const auto cols = RandomVector<Dtype>(col_size, 2);
    vector<Dtype> expected(num * g.im_size());
    col2im_batch_cpu(cols.data(), num, g.c, g.h, g.w, g.kh, g.kw, g.ph, g.pw,
                     g.sh, g.sw, g.dh, g.dw, expected.data());
    vector<Dtype> per_image(num * g.im_size());
    for (int n = 0; n < num; ++n) {
      col2im_cpu(cols.data() + static_cast<size_t>(n) * g.rows() * g.cols(),
                 g.c, g.h, g.w, g.kh, g.kw, g.ph, g.pw, g.sh, g.sw, g.dh,
                 g.dw, per_image.data() + n * g.im_size());
    }
    for (bool nd : {false, true}) {
      vector<Dtype> im(num * g.im_size(), Dtype(7));
      col2im_on(Poseidon::CPU, Shape2D(g, num, ColumnLayout::kSideBySide), nd,
                cols.data(), im.data());
      EXPECT_EQ(im, expected) << "side by side, nd " << nd;
      vector<Dtype> im2(num * g.im_size(), Dtype(7));
      col2im_on(Poseidon::CPU,
                Shape2D(g, num, ColumnLayout::kImageAfterImage), nd,
                cols.data(), im2.data());
      EXPECT_EQ(im2, per_image) << "image after image, nd " << nd;
    }
  }
}

struct GeoND {
  vector<int> im_shape;  // (channels, d_1, ...)
  vector<int> kernel, pad, stride, dilation;
};

const GeoND kGeometriesND[] = {
    {{2, 4, 5, 3}, {3, 2, 2}, {1, 0, 1}, {1, 2, 1}, {1, 1, 2}},
    {{3, 5, 4, 4}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}},
    {{1, 6, 3, 5}, {4, 3, 1}, {2, 1, 0}, {3, 1, 2}, {1, 2, 1}},
    {{2, 9}, {3}, {1}, {2}, {2}},                         // 1-D
    {{2, 13}, {5}, {4}, {3}, {1}},                        // 1-D, big pad
    {{1, 3, 4, 3, 2}, {2, 2, 2, 1}, {0, 1, 1, 0}, {1, 2, 1, 1},
     {1, 1, 2, 1}},                                       // 4-D
};

TYPED_TEST(Im2colKernelTest, MatchesCpuND) {
  using Dtype = TypeParam;
  const int num = 2;
  for (const GeoND& g : kGeometriesND) {
    const int axes = static_cast<int>(g.kernel.size());
    vector<int> col_shape = {g.im_shape[0]};
    int im_size = g.im_shape[0], cols = 1;
    for (int d = 0; d < axes; ++d) {
      col_shape[0] *= g.kernel[d];
      const int out = ConvOutputSize(g.im_shape[d + 1], g.kernel[d], g.pad[d],
                                     g.stride[d], g.dilation[d]);
      ASSERT_GT(out, 0);
      col_shape.push_back(out);
      im_size *= g.im_shape[d + 1];
      cols *= out;
    }
    SCOPED_TRACE(testing::Message() << axes << "-D, " << im_size << " inputs, "
                                    << col_shape[0] << " x " << cols);
    const size_t per_image_cols = static_cast<size_t>(col_shape[0]) * cols;
    const auto ims = RandomVector<Dtype>(num * im_size, 3);
    const auto ys = RandomVector<Dtype>(num * per_image_cols, 4);
    vector<Dtype> expected_col(num * per_image_cols);
    vector<Dtype> expected_im(num * im_size);
    for (int n = 0; n < num; ++n) {
      im2col_nd_cpu(ims.data() + n * im_size, axes, g.im_shape.data(),
                    col_shape.data(), g.kernel.data(), g.pad.data(),
                    g.stride.data(), g.dilation.data(),
                    expected_col.data() + n * per_image_cols);
      col2im_nd_cpu(ys.data() + n * per_image_cols, axes, g.im_shape.data(),
                    col_shape.data(), g.kernel.data(), g.pad.data(),
                    g.stride.data(), g.dilation.data(),
                    expected_im.data() + n * im_size);
    }
    const kernels::Im2colShape shape = MakeIm2colShape(
        axes, g.im_shape.data(), g.kernel.data(), g.pad.data(),
        g.stride.data(), g.dilation.data(), num,
        ColumnLayout::kImageAfterImage);
    vector<Dtype> col(num * per_image_cols, Dtype(99));
    im2col_on(Poseidon::CPU, shape, true, ims.data(), col.data());
    EXPECT_EQ(col, expected_col);
    vector<Dtype> im(num * im_size, Dtype(7));
    col2im_on(Poseidon::CPU, shape, true, ys.data(), im.data());
    EXPECT_EQ(im, expected_im);
  }
}

TYPED_TEST(Im2colKernelTest, LayoutHelpersAndBias) {
  using Dtype = TypeParam;
  const int num = 3, channels = 4, spatial = 5;
  const int count = num * channels * spatial;
  const auto images = RandomVector<Dtype>(count, 5);
  vector<Dtype> matrix(count), back(count);
  cpu_for_each(count, kernels::ImagesToChannelMajor<Dtype>{
                          images.data(), matrix.data(), num, channels,
                          spatial});
  for (int n = 0; n < num; ++n) {
    for (int c = 0; c < channels; ++c) {
      for (int s = 0; s < spatial; ++s) {
        ASSERT_EQ(matrix[(c * num + n) * spatial + s],
                  images[(n * channels + c) * spatial + s]);
      }
    }
  }
  cpu_for_each(count, kernels::ChannelMajorToImages<Dtype>{
                          matrix.data(), back.data(), num, channels, spatial});
  EXPECT_EQ(back, images);
  const auto bias = RandomVector<Dtype>(channels, 6);
  vector<Dtype> data = images;
  cpu_for_each(count, kernels::AddChannelBias<Dtype>{bias.data(), data.data(),
                                                     channels, spatial});
  for (int i = 0; i < count; ++i) {
    ASSERT_EQ(data[i], images[i] + bias[(i / spatial) % channels]);
  }
}

}  // namespace
}  // namespace poseidon
