// Im2colLayer and SPPLayer: outputs against hand-computed values and naive
// references written from the definitions, finite-difference gradients,
// reshaping, and the error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layers/im2col_layer.hpp"
#include "poseidon/layers/spp_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class Im2colLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  Im2colLayerTest() { test::FillGaussian(&bottom_); }

  static LayerParameter Param(int kernel, int stride = 1, int pad = 0,
                              int dilation = 1) {
    LayerParameter p;
    p.set_type("Im2col");
    auto* c = p.mutable_convolution_param();
    c->add_kernel_size(kernel);
    c->add_stride(stride);
    c->add_pad(pad);
    c->add_dilation(dilation);
    return p;
  }

  // Checks top against the window formula for a (N, C, H, W) bottom.
  void ExpectMatchesWindows(const Blob<Dtype>& in, const Blob<Dtype>& out,
                            int kh, int kw, int sh, int sw, int ph, int pw,
                            int dh, int dw) {
    const int num = in.shape(0), channels = in.shape(1);
    const int height = in.shape(2), width = in.shape(3);
    const int oh = out.shape(2), ow = out.shape(3);
    ASSERT_EQ(out.shape(1), channels * kh * kw);
    for (int n = 0; n < num; ++n) {
      for (int c = 0; c < channels; ++c) {
        for (int i = 0; i < kh; ++i) {
          for (int j = 0; j < kw; ++j) {
            const int row = (c * kh + i) * kw + j;
            for (int y = 0; y < oh; ++y) {
              for (int x = 0; x < ow; ++x) {
                const int h = y * sh - ph + i * dh;
                const int w = x * sw - pw + j * dw;
                const bool inside = h >= 0 && h < height && w >= 0 && w < width;
                const Dtype expected = inside ? in.data_at(n, c, h, w) : 0;
                ASSERT_EQ(out.data_at(n, row, y, x), expected)
                    << n << " " << row << " " << y << " " << x;
              }
            }
          }
        }
      }
    }
  }

  Blob<Dtype> bottom_{2, 3, 6, 5};
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> bottom_vec_{&bottom_};
  vector<Blob<Dtype>*> top_vec_{&top_};
};

TYPED_TEST_SUITE(Im2colLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(Im2colLayerTest, HandComputedSmall) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> in({1, 1, 3, 3});
  for (int i = 0; i < 9; ++i) in.mutable_cpu_data()[i] = i + 1;
  vector<Blob<Dtype>*> bottom = {&in};
  Im2colLayer<Dtype> layer(this->Param(2));
  layer.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{1, 4, 2, 2}));
  layer.Forward(bottom, this->top_vec_);
  // Rows: kernel offsets (0,0), (0,1), (1,0), (1,1); columns: the 4 windows.
  const Dtype expected[] = {1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9};
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(this->top_.cpu_data()[i], expected[i]) << i;
  }
  // Backward counts how many windows read each pixel.
  cpu_set(16, Dtype(1), this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true}, bottom);
  const Dtype uses[] = {1, 2, 1, 2, 4, 2, 1, 2, 1};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(in.cpu_diff()[i], uses[i]) << i;
}

TYPED_TEST(Im2colLayerTest, MatchesWindowFormula) {
  using Dtype = typename TypeParam::Dtype;
  const struct {
    int k, s, p, d;
  } cases[] = {{3, 1, 0, 1}, {3, 2, 1, 1}, {2, 1, 2, 2}, {3, 3, 1, 1}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.k) + " " + std::to_string(c.s) + " " +
                 std::to_string(c.p) + " " + std::to_string(c.d));
    Im2colLayer<Dtype> layer(this->Param(c.k, c.s, c.p, c.d));
    layer.SetUp(this->bottom_vec_, this->top_vec_);
    const int ext = c.d * (c.k - 1) + 1;
    EXPECT_EQ(this->top_.shape(),
              (vector<int>{2, 3 * c.k * c.k, (6 + 2 * c.p - ext) / c.s + 1,
                           (5 + 2 * c.p - ext) / c.s + 1}));
    layer.Forward(this->bottom_vec_, this->top_vec_);
    this->ExpectMatchesWindows(this->bottom_, this->top_, c.k, c.k, c.s, c.s,
                               c.p, c.p, c.d, c.d);
  }
}

TYPED_TEST(Im2colLayerTest, RectangularParams) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p;
  p.set_type("Im2col");
  auto* c = p.mutable_convolution_param();
  c->set_kernel_h(3);
  c->set_kernel_w(2);
  c->set_stride_h(2);
  c->set_stride_w(1);
  c->set_pad_h(1);
  c->set_pad_w(0);
  Im2colLayer<Dtype> layer(p);
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 18, 3, 4}));
  layer.Forward(this->bottom_vec_, this->top_vec_);
  this->ExpectMatchesWindows(this->bottom_, this->top_, 3, 2, 2, 1, 1, 0, 1, 1);
}

TYPED_TEST(Im2colLayerTest, NdKernelsAgreeWith2d) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p = this->Param(3, 2, 1, 1);
  Im2colLayer<Dtype> plain(p);
  plain.SetUp(this->bottom_vec_, this->top_vec_);
  plain.Forward(this->bottom_vec_, this->top_vec_);
  vector<Dtype> expected(this->top_.cpu_data(),
                         this->top_.cpu_data() + this->top_.count());
  p.mutable_convolution_param()->set_force_nd_im2col(true);
  Im2colLayer<Dtype> nd(p);
  nd.SetUp(this->bottom_vec_, this->top_vec_);
  nd.Forward(this->bottom_vec_, this->top_vec_);
  ASSERT_EQ(this->top_.count(), static_cast<int>(expected.size()));
  for (int i = 0; i < this->top_.count(); ++i) {
    ASSERT_EQ(this->top_.cpu_data()[i], expected[i]) << i;
  }
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&nd, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(Im2colLayerTest, ThreeSpatialAxes) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> in({1, 2, 3, 4, 3});
  test::FillGaussian(&in);
  vector<Blob<Dtype>*> bottom = {&in};
  LayerParameter p;
  p.set_type("Im2col");
  auto* c = p.mutable_convolution_param();
  c->add_kernel_size(2);
  c->add_kernel_size(3);
  c->add_kernel_size(2);
  c->add_pad(1);
  Im2colLayer<Dtype> layer(p);
  layer.SetUp(bottom, this->top_vec_);
  // Per axis: (3 + 2 - 2) + 1 = 4, (4 + 2 - 3) + 1 = 4, (3 + 2 - 2) + 1 = 4.
  EXPECT_EQ(this->top_.shape(), (vector<int>{1, 24, 4, 4, 4}));
  layer.Forward(bottom, this->top_vec_);
  for (int ch = 0; ch < 2; ++ch) {
    for (int a = 0; a < 2; ++a) {
      for (int b = 0; b < 3; ++b) {
        for (int e = 0; e < 2; ++e) {
          const int row = ((ch * 2 + a) * 3 + b) * 2 + e;
          for (int x = 0; x < 4; ++x) {
            for (int y = 0; y < 4; ++y) {
              for (int z = 0; z < 4; ++z) {
                const int d0 = x - 1 + a, d1 = y - 1 + b, d2 = z - 1 + e;
                const bool inside =
                    d0 >= 0 && d0 < 3 && d1 >= 0 && d1 < 4 && d2 >= 0 && d2 < 3;
                const Dtype expected =
                    inside ? in.data_at({0, ch, d0, d1, d2}) : 0;
                ASSERT_EQ(this->top_.data_at({0, row, x, y, z}), expected);
              }
            }
          }
        }
      }
    }
  }
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, bottom, this->top_vec_);
}

TYPED_TEST(Im2colLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  Im2colLayer<Dtype> layer(this->Param(3, 2, 1, 1));
  test::GradientChecker<Dtype> checker(1e-2, 1e-2);
  checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
  Im2colLayer<Dtype> dilated(this->Param(2, 1, 1, 2));
  checker.CheckGradient(&dilated, this->bottom_vec_, this->top_vec_);
}

TYPED_TEST(Im2colLayerTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  Im2colLayer<Dtype> big(this->Param(6, 1, 0, 1));  // width 5 < 6
  try {
    big.SetUp(this->bottom_vec_, this->top_vec_);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("2 3 6 5"), std::string::npos)
        << e.what();
  }
  LayerParameter no_kernel;
  no_kernel.set_type("Im2col");
  Im2colLayer<Dtype> l1(no_kernel);
  EXPECT_THROW(l1.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
  LayerParameter zero = this->Param(3);
  zero.mutable_convolution_param()->set_stride(0, 0);
  Im2colLayer<Dtype> l2(zero);
  EXPECT_THROW(l2.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
  LayerParameter three = this->Param(3);
  three.mutable_convolution_param()->add_kernel_size(3);
  three.mutable_convolution_param()->add_kernel_size(3);
  Im2colLayer<Dtype> l3(three);
  EXPECT_THROW(l3.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
  LayerParameter hw;
  hw.set_type("Im2col");
  hw.mutable_convolution_param()->set_kernel_h(2);
  Im2colLayer<Dtype> l4(hw);
  EXPECT_THROW(l4.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
  LayerParameter axis = this->Param(1);
  axis.mutable_convolution_param()->set_axis(3);
  Im2colLayer<Dtype> l5(axis);
  EXPECT_THROW(l5.SetUp(this->bottom_vec_, this->top_vec_), ShapeError);
}

// ---------------------------------------------------------------------------
// SPP

// Pooling of one (H, W) plane from the definition: windows of `kernel` at
// `stride`, offset by -pad, averaged over the window clipped to the padded
// image and maxed over the window clipped to the image.
vector<double> NaivePool(const double* in, int height, int width, int k_h,
                         int k_w, int pad_h, int pad_w, int bins, bool max) {
  vector<double> out;
  for (int ph = 0; ph < bins; ++ph) {
    for (int pw = 0; pw < bins; ++pw) {
      int h0 = ph * k_h - pad_h, w0 = pw * k_w - pad_w;
      int h1 = std::min(h0 + k_h, height + pad_h);
      int w1 = std::min(w0 + k_w, width + pad_w);
      const int area = (h1 - h0) * (w1 - w0);
      h0 = std::max(h0, 0);
      w0 = std::max(w0, 0);
      h1 = std::min(h1, height);
      w1 = std::min(w1, width);
      double acc = max ? -INFINITY : 0;
      for (int h = h0; h < h1; ++h) {
        for (int w = w0; w < w1; ++w) {
          acc =
              max ? std::max(acc, in[h * width + w]) : acc + in[h * width + w];
        }
      }
      out.push_back(max ? acc : acc / area);
    }
  }
  return out;
}

template <typename TypeParam>
class SPPLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  SPPLayerTest() { test::FillGaussian(&bottom_); }

  static LayerParameter Param(int height, SPPParameter::PoolMethod pool) {
    LayerParameter p;
    p.set_type("SPP");
    p.mutable_spp_param()->set_pyramid_height(height);
    p.mutable_spp_param()->set_pool(pool);
    return p;
  }

  // Expected top for pyramid_height > 1, using Caffe's level geometry.
  vector<double> Reference(const Blob<Dtype>& in, int levels, bool max) {
    const int num = in.shape(0), channels = in.shape(1);
    const int height = in.shape(2), width = in.shape(3);
    vector<double> out;
    for (int n = 0; n < num; ++n) {
      for (int l = 0; l < levels; ++l) {
        const int bins = 1 << l;
        const int kh = (height + bins - 1) / bins;
        const int kw = (width + bins - 1) / bins;
        for (int c = 0; c < channels; ++c) {
          vector<double> plane(
              in.cpu_data() + in.offset(n, c),
              in.cpu_data() + in.offset(n, c) + height * width);
          const vector<double> pooled = NaivePool(
              plane.data(), height, width, kh, kw, (kh * bins - height + 1) / 2,
              (kw * bins - width + 1) / 2, bins, max);
          out.insert(out.end(), pooled.begin(), pooled.end());
        }
      }
    }
    return out;
  }

  Blob<Dtype> bottom_{2, 3, 6, 7};
  Blob<Dtype> top_;
  vector<Blob<Dtype>*> bottom_vec_{&bottom_};
  vector<Blob<Dtype>*> top_vec_{&top_};
};

TYPED_TEST_SUITE(SPPLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(SPPLayerTest, HandComputed) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> in({1, 1, 4, 4});
  for (int i = 0; i < 16; ++i) in.mutable_cpu_data()[i] = i;
  vector<Blob<Dtype>*> bottom = {&in};
  SPPLayer<Dtype> max(this->Param(2, SPPParameter::MAX));
  max.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{1, 5}));
  max.Forward(bottom, this->top_vec_);
  const Dtype expected_max[] = {15, 5, 7, 13, 15};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(this->top_.cpu_data()[i], expected_max[i]) << i;
  }
  SPPLayer<Dtype> ave(this->Param(2, SPPParameter::AVE));
  ave.SetUp(bottom, this->top_vec_);
  ave.Forward(bottom, this->top_vec_);
  const Dtype expected_ave[] = {7.5, 2.5, 4.5, 10.5, 12.5};
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(this->top_.cpu_data()[i], expected_ave[i], 1e-6) << i;
  }
  // Backward of MAX: each pixel gets the diffs of the bins it won.
  cpu_set(5, Dtype(1), this->top_.mutable_cpu_diff());
  max.Forward(bottom, this->top_vec_);
  max.Backward(this->top_vec_, {true}, bottom);
  for (int i = 0; i < 16; ++i) {
    const Dtype expected = i == 15 ? 2 : (i == 5 || i == 7 || i == 13) ? 1 : 0;
    EXPECT_EQ(in.cpu_diff()[i], expected) << i;
  }
}

TYPED_TEST(SPPLayerTest, MatchesReference) {
  using Dtype = typename TypeParam::Dtype;
  for (auto pool : {SPPParameter::MAX, SPPParameter::AVE}) {
    SCOPED_TRACE(SPPParameter::PoolMethod_Name(pool));
    SPPLayer<Dtype> layer(this->Param(3, pool));
    layer.SetUp(this->bottom_vec_, this->top_vec_);
    // 3 channels x (1 + 4 + 16) bins.
    EXPECT_EQ(this->top_.shape(), (vector<int>{2, 63}));
    layer.Forward(this->bottom_vec_, this->top_vec_);
    const vector<double> expected =
        this->Reference(this->bottom_, 3, pool == SPPParameter::MAX);
    ASSERT_EQ(static_cast<int>(expected.size()), this->top_.count());
    for (int i = 0; i < this->top_.count(); ++i) {
      ASSERT_NEAR(this->top_.cpu_data()[i], expected[i], 1e-5) << i;
    }
  }
}

TYPED_TEST(SPPLayerTest, PyramidHeightOneKeepsPoolingShape) {
  using Dtype = typename TypeParam::Dtype;
  SPPLayer<Dtype> layer(this->Param(1, SPPParameter::MAX));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 3, 1, 1}));
  layer.Forward(this->bottom_vec_, this->top_vec_);
  const vector<double> expected = this->Reference(this->bottom_, 1, true);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(this->top_.cpu_data()[i], Dtype(expected[i])) << i;
  }
}

TYPED_TEST(SPPLayerTest, ReshapeToAnotherSize) {
  using Dtype = typename TypeParam::Dtype;
  SPPLayer<Dtype> layer(this->Param(2, SPPParameter::AVE));
  layer.SetUp(this->bottom_vec_, this->top_vec_);
  this->bottom_.Reshape({1, 3, 9, 5});
  test::FillGaussian(&this->bottom_);
  layer.Reshape(this->bottom_vec_, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{1, 15}));
  layer.Forward(this->bottom_vec_, this->top_vec_);
  const vector<double> expected = this->Reference(this->bottom_, 2, false);
  for (int i = 0; i < this->top_.count(); ++i) {
    ASSERT_NEAR(this->top_.cpu_data()[i], expected[i], 1e-5) << i;
  }
}

TYPED_TEST(SPPLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  this->bottom_.Reshape({1, 2, 6, 7});
  test::FillGaussian(&this->bottom_);
  for (auto pool : {SPPParameter::MAX, SPPParameter::AVE}) {
    SCOPED_TRACE(SPPParameter::PoolMethod_Name(pool));
    SPPLayer<Dtype> layer(this->Param(3, pool));
    test::GradientChecker<Dtype> checker(1e-3, 1e-2);
    checker.CheckGradient(&layer, this->bottom_vec_, this->top_vec_);
  }
}

TYPED_TEST(SPPLayerTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter none;
  none.set_type("SPP");
  SPPLayer<Dtype> l1(none);
  EXPECT_THROW(l1.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
  SPPLayer<Dtype> l2(this->Param(0, SPPParameter::MAX));
  EXPECT_THROW(l2.SetUp(this->bottom_vec_, this->top_vec_), ConfigError);
  // 5 rows cannot be split into 4 bins (kernel 2 would need pad 2).
  Blob<Dtype> small({1, 1, 5, 8});
  vector<Blob<Dtype>*> bottom = {&small};
  SPPLayer<Dtype> l3(this->Param(3, SPPParameter::MAX));
  try {
    l3.SetUp(bottom, this->top_vec_);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("1 1 5 8"), std::string::npos)
        << e.what();
  }
  Blob<Dtype> flat({2, 3, 6});
  bottom = {&flat};
  SPPLayer<Dtype> l4(this->Param(2, SPPParameter::MAX));
  EXPECT_THROW(l4.SetUp(bottom, this->top_vec_), ShapeError);
}

}  // namespace
}  // namespace poseidon
