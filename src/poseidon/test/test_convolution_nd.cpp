// Convolution and Deconvolution with other than two spatial axes (3-D and
// 1-D, through the N-D im2col path), against naive N-D references written
// here, with per-axis stride/pad/dilation and groups; gradient checks; and
// the geometry errors a prototxt can make, checked through the prototxt
// reader and Net construction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layers/conv_layer.hpp"
#include "poseidon/layers/deconv_layer.hpp"
#include "poseidon/net.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

struct NdGeometry {
  vector<int> kernel, stride, pad, dilation;
  int group = 1;
};

LayerParameter NdParam(const char* type, int num_output, const NdGeometry& g,
                       bool bias = true) {
  LayerParameter param;
  param.set_type(type);
  ConvolutionParameter* p = param.mutable_convolution_param();
  p->set_num_output(num_output);
  for (int v : g.kernel) p->add_kernel_size(v);
  for (int v : g.stride) p->add_stride(v);
  for (int v : g.pad) p->add_pad(v);
  for (int v : g.dilation) p->add_dilation(v);
  p->set_group(g.group);
  p->set_bias_term(bias);
  p->mutable_weight_filler()->set_type("gaussian");
  p->mutable_bias_filler()->set_type("gaussian");
  return param;
}

int Product(const vector<int>& v) {
  int p = 1;
  for (int x : v) p *= x;
  return p;
}

// Row-major multi-index of `flat` in a box of extents `dims`.
vector<int> Unravel(int flat, const vector<int>& dims) {
  vector<int> idx(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    idx[d] = flat % dims[d];
    flat /= dims[d];
  }
  return idx;
}

// Flat index of `pos` in `dims`, or -1 if it lies outside.
int Ravel(const vector<int>& pos, const vector<int>& dims) {
  int flat = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (pos[d] < 0 || pos[d] >= dims[d]) return -1;
    flat = flat * dims[d] + pos[d];
  }
  return flat;
}

// The spatial sizes of an (N, C, d...) blob.
vector<int> Spatial(const Blob<double>& b) {
  return vector<int>(b.shape().begin() + 2, b.shape().end());
}

// Convolution by gathering: every output position sums its window.
// Everything in double; `in` is (N, C, d...), `w` (O, C / group, k...).
void NaiveConvNd(const Blob<double>& in, const Blob<double>& w,
                 const double* bias, const NdGeometry& g, Blob<double>* out) {
  const int N = in.shape(0), C = in.shape(1), O = w.shape(0);
  const int cg = C / g.group, og = O / g.group;
  const vector<int> dims = Spatial(in);
  const vector<int> kdims(w.shape().begin() + 2, w.shape().end());
  const int A = static_cast<int>(dims.size());
  vector<int> odims(A);
  for (int a = 0; a < A; ++a) {
    odims[a] = (dims[a] + 2 * g.pad[a] - (g.dilation[a] * (kdims[a] - 1) + 1)) /
                   g.stride[a] +
               1;
  }
  vector<int> shape = {N, O};
  shape.insert(shape.end(), odims.begin(), odims.end());
  out->Reshape(shape);
  const int in_sp = Product(dims), out_sp = Product(odims);
  const int k_sp = Product(kdims);
  vector<int> pos(A);
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < O; ++o) {
      const int first_c = (o / og) * cg;
      for (int p = 0; p < out_sp; ++p) {
        const vector<int> op = Unravel(p, odims);
        double sum = bias ? bias[o] : 0;
        for (int c = 0; c < cg; ++c) {
          for (int q = 0; q < k_sp; ++q) {
            const vector<int> k = Unravel(q, kdims);
            for (int a = 0; a < A; ++a) {
              pos[a] = op[a] * g.stride[a] - g.pad[a] + k[a] * g.dilation[a];
            }
            const int i = Ravel(pos, dims);
            if (i < 0) continue;
            sum += w.cpu_data()[(o * cg + c) * k_sp + q] *
                   in.cpu_data()[(n * C + first_c + c) * in_sp + i];
          }
        }
        out->mutable_cpu_data()[(n * O + o) * out_sp + p] = sum;
      }
    }
  }
}

// Transposed convolution by scattering: every input pixel adds its scaled
// kernel into the output. `w` is (C, O / group, k...).
void NaiveDeconvNd(const Blob<double>& in, const Blob<double>& w,
                   const double* bias, const NdGeometry& g, Blob<double>* out) {
  const int N = in.shape(0), C = in.shape(1);
  const int og = w.shape(1), O = og * g.group, cg = C / g.group;
  const vector<int> dims = Spatial(in);
  const vector<int> kdims(w.shape().begin() + 2, w.shape().end());
  const int A = static_cast<int>(dims.size());
  vector<int> odims(A);
  for (int a = 0; a < A; ++a) {
    odims[a] = g.stride[a] * (dims[a] - 1) + g.dilation[a] * (kdims[a] - 1) +
               1 - 2 * g.pad[a];
  }
  vector<int> shape = {N, O};
  shape.insert(shape.end(), odims.begin(), odims.end());
  out->Reshape(shape);
  const int in_sp = Product(dims), out_sp = Product(odims);
  const int k_sp = Product(kdims);
  double* top = out->mutable_cpu_data();
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < O; ++o) {
      for (int p = 0; p < out_sp; ++p) {
        top[(n * O + o) * out_sp + p] = bias ? bias[o] : 0;
      }
    }
  }
  vector<int> pos(A);
  for (int n = 0; n < N; ++n) {
    for (int c = 0; c < C; ++c) {
      const int first_o = (c / cg) * og;
      for (int p = 0; p < in_sp; ++p) {
        const vector<int> ip = Unravel(p, dims);
        const double v = in.cpu_data()[(n * C + c) * in_sp + p];
        for (int q = 0; q < k_sp; ++q) {
          const vector<int> k = Unravel(q, kdims);
          for (int a = 0; a < A; ++a) {
            pos[a] = ip[a] * g.stride[a] - g.pad[a] + k[a] * g.dilation[a];
          }
          const int t = Ravel(pos, odims);
          if (t < 0) continue;
          for (int o = 0; o < og; ++o) {
            top[(n * O + first_o + o) * out_sp + t] +=
                w.cpu_data()[(c * og + o) * k_sp + q] * v;
          }
        }
      }
    }
  }
}

template <typename Dtype>
void ToDouble(const Blob<Dtype>& from, Blob<double>* to) {
  to->Reshape(from.shape());
  for (int i = 0; i < from.count(); ++i) {
    to->mutable_cpu_data()[i] = from.cpu_data()[i];
  }
}

// Sets Poseidon::num_threads() for a scope and restores it after.
using test::ScopedNumThreads;

using test::ParseNet;

// The message of the Error that building `text` throws, or "" if none.
template <typename Dtype, typename ErrorType>
string NetErrorMessage(const string& text) {
  try {
    Net<Dtype> net(ParseNet(text));
  } catch (const ErrorType& e) {
    return e.what();
  }
  return "";
}

template <typename TypeParam>
class ConvolutionNdTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  using Algo = typename BaseConvolutionLayer<Dtype>::Algorithm;
  static double Tol() { return sizeof(Dtype) == 4 ? 2e-4 : 1e-10; }

  // Runs a Convolution or Deconvolution (LayerT) with every algorithm
  // setting on one and two threads (N-D always runs per image) and compares
  // with the naive reference; the top must have shape `top_shape`.
  template <template <typename> class LayerT>
  void CheckForward(const vector<int>& shape, int num_output,
                    const NdGeometry& g, const vector<int>& top_shape,
                    bool bias = true) {
    const bool deconv =
        std::is_same<LayerT<Dtype>, DeconvolutionLayer<Dtype>>::value;
    Blob<Dtype> bottom(shape), top;
    test::FillGaussian(&bottom);
    LayerT<Dtype> layer(
        NdParam(deconv ? "Deconvolution" : "Convolution", num_output, g, bias));
    layer.SetUp({&bottom}, {&top});
    Blob<double> in, w, bias_d, expected;
    ToDouble(bottom, &in);
    ToDouble(*layer.blobs()[0], &w);
    if (bias) ToDouble(*layer.blobs()[1], &bias_d);
    const double* b = bias ? bias_d.cpu_data() : nullptr;
    if (deconv) {
      NaiveDeconvNd(in, w, b, g, &expected);
    } else {
      NaiveConvNd(in, w, b, g, &expected);
    }
    ASSERT_EQ(expected.shape(), top_shape) << "the reference's shape";
    ASSERT_EQ(top.shape(), top_shape);
    for (int threads : {1, 2}) {
      ScopedNumThreads scoped(threads);
      for (Algo algo : {Algo::kPerImage, Algo::kBatched, Algo::kAuto}) {
        layer.set_algorithm(algo);
        cpu_set(top.count(), Dtype(1e6), top.mutable_cpu_data());
        layer.Forward({&bottom}, {&top});
        EXPECT_FALSE(layer.batched());
        EXPECT_FALSE(layer.direct());
        for (int i = 0; i < top.count(); ++i) {
          const double e = expected.cpu_data()[i];
          ASSERT_NEAR(top.cpu_data()[i], e, Tol() * std::max(1.0, std::fabs(e)))
              << layer.type() << " forward differs at element " << i
              << " (algorithm " << static_cast<int>(algo) << ", " << threads
              << " threads)";
        }
      }
    }
  }
};

TYPED_TEST_SUITE(ConvolutionNdTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(ConvolutionNdTest, Convolution3DForward) {
  NdGeometry g{{3, 2, 3}, {1, 2, 2}, {1, 0, 2}, {1, 2, 1}};
  // d: (5 + 2 - 3) + 1 = 5; h: (6 - 3) / 2 + 1 = 2; w: (4 + 4 - 3) / 2 + 1.
  this->template CheckForward<ConvolutionLayer>({2, 3, 5, 6, 4}, 4, g,
                                                {2, 4, 5, 2, 3});
}

TYPED_TEST(ConvolutionNdTest, Convolution3DForwardGroupsNoBias) {
  NdGeometry g{{2, 3, 2}, {2, 1, 1}, {0, 1, 1}, {2, 1, 2}, 2};
  // d: (5 - 3) / 2 + 1 = 2; h: 6 + 2 - 3 + 1 = 6; w: 4 + 2 - 3 + 1 = 4.
  this->template CheckForward<ConvolutionLayer>({2, 4, 5, 6, 4}, 6, g,
                                                {2, 6, 2, 6, 4},
                                                /*bias=*/false);
}

TYPED_TEST(ConvolutionNdTest, Convolution1DForward) {
  NdGeometry g{{3}, {2}, {1}, {2}};
  // (9 + 2 - 5) / 2 + 1 = 4.
  this->template CheckForward<ConvolutionLayer>({3, 2, 9}, 3, g, {3, 3, 4});
  NdGeometry grouped{{2}, {1}, {0}, {1}, 2};
  this->template CheckForward<ConvolutionLayer>({2, 4, 5}, 2, grouped,
                                                {2, 2, 4});
}

TYPED_TEST(ConvolutionNdTest, Deconvolution3DForward) {
  NdGeometry g{{3, 2, 3}, {2, 1, 3}, {1, 0, 1}, {1, 2, 1}, 2};
  // d: 2 * 2 + 3 - 2 = 5; h: 1 + 3 = 4; w: 3 * 2 + 3 - 2 = 7.
  this->template CheckForward<DeconvolutionLayer>({2, 4, 3, 2, 3}, 6, g,
                                                  {2, 6, 5, 4, 7});
}

TYPED_TEST(ConvolutionNdTest, Deconvolution3DForwardNoBias) {
  NdGeometry g{{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}};
  this->template CheckForward<DeconvolutionLayer>({1, 3, 2, 3, 2}, 2, g,
                                                  {1, 2, 4, 6, 4},
                                                  /*bias=*/false);
}

TYPED_TEST(ConvolutionNdTest, Deconvolution1DForward) {
  NdGeometry g{{4}, {2}, {1}, {1}};
  // 2 * (5 - 1) + 4 - 2 = 10.
  this->template CheckForward<DeconvolutionLayer>({2, 3, 5}, 2, g, {2, 2, 10});
}

// <conv(x), y> = <x, deconv(y)> in 3-D with shared weights.
TYPED_TEST(ConvolutionNdTest, Deconvolution3DIsAdjointOfConvolution) {
  using Dtype = typename TypeParam::Dtype;
  // Every axis round-trips exactly: (5 + 2 - 3) / 2, (7 + 2 - 3) / 3 and
  // (4 - 3) / 1 leave no remainder.
  NdGeometry g{{3, 3, 2}, {2, 3, 1}, {1, 1, 0}, {1, 1, 2}, 2};
  Blob<Dtype> x({1, 4, 5, 7, 4}), y, conv_top, deconv_top;
  test::FillGaussian(&x);
  ConvolutionLayer<Dtype> conv(NdParam("Convolution", 2, g, false));
  conv.SetUp({&x}, {&conv_top});
  EXPECT_EQ(conv_top.shape(), (vector<int>{1, 2, 3, 3, 2}));
  y.Reshape(conv_top.shape());
  test::FillGaussian(&y);
  DeconvolutionLayer<Dtype> deconv(NdParam("Deconvolution", 4, g, false));
  deconv.SetUp({&y}, {&deconv_top});
  ASSERT_EQ(deconv_top.shape(), x.shape());
  deconv.blobs()[0]->CopyFrom(*conv.blobs()[0]);
  conv.Forward({&x}, {&conv_top});
  deconv.Forward({&y}, {&deconv_top});
  double lhs = 0, rhs = 0;
  for (int i = 0; i < y.count(); ++i) {
    lhs += double(conv_top.cpu_data()[i]) * y.cpu_data()[i];
  }
  for (int i = 0; i < x.count(); ++i) {
    rhs += double(x.cpu_data()[i]) * deconv_top.cpu_data()[i];
  }
  EXPECT_NEAR(lhs, rhs, this->Tol() * 10 * (1 + std::fabs(lhs)));
}

// A 2-D Deconvolution through the N-D kernels equals the 2-D path.
TYPED_TEST(ConvolutionNdTest, DeconvolutionForceNdMatches2D) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom({2, 4, 3, 4}), top, top_nd;
  test::FillGaussian(&bottom);
  NdGeometry g{{3, 2}, {2, 3}, {1, 0}, {2, 1}, 2};
  LayerParameter param = NdParam("Deconvolution", 2, g);
  DeconvolutionLayer<Dtype> layer(param);
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  param.mutable_convolution_param()->set_force_nd_im2col(true);
  DeconvolutionLayer<Dtype> nd(param);
  nd.SetUp({&bottom}, {&top_nd});
  nd.blobs()[0]->CopyFrom(*layer.blobs()[0]);
  nd.blobs()[1]->CopyFrom(*layer.blobs()[1]);
  nd.Forward({&bottom}, {&top_nd});
  ASSERT_EQ(top.shape(), top_nd.shape());
  for (int i = 0; i < top.count(); ++i) {
    EXPECT_NEAR(top.cpu_data()[i], top_nd.cpu_data()[i],
                this->Tol() * (1 + std::fabs(top.cpu_data()[i])));
  }
}

TYPED_TEST(ConvolutionNdTest, Convolution3DGradient) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom({2, 2, 3, 4, 3}), top;
  test::FillGaussian(&bottom);
  NdGeometry g{{2, 3, 2}, {1, 2, 1}, {0, 1, 1}, {2, 1, 1}, 2};
  ConvolutionLayer<Dtype> layer(NdParam("Convolution", 2, g));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(ConvolutionNdTest, Deconvolution3DGradient) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom({2, 2, 2, 3, 2}), top;
  test::FillGaussian(&bottom);
  NdGeometry g{{2, 3, 2}, {2, 1, 2}, {1, 1, 0}, {1, 2, 1}, 2};
  DeconvolutionLayer<Dtype> layer(NdParam("Deconvolution", 2, g));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(ConvolutionNdTest, Gradient1D) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom({2, 2, 6}), top;
  test::FillGaussian(&bottom);
  NdGeometry g{{3}, {2}, {1}, {1}};
  ConvolutionLayer<Dtype> conv(NdParam("Convolution", 3, g));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&conv, {&bottom}, {&top});
  DeconvolutionLayer<Dtype> deconv(NdParam("Deconvolution", 3, g));
  checker.CheckGradient(&deconv, {&bottom}, {&top});
}

// Note: the message checks below rely on the Net prefixing "layer 'NAME'
// (TYPE; bottoms BLOB: SHAPE): " to the layer's own message, and on the
// layer naming the bottom shape itself as well.
TYPED_TEST(ConvolutionNdTest, KernelLargerThanPaddedInputFailsNetConstruction) {
  using Dtype = typename TypeParam::Dtype;
  // 2-D: kernel 4 at dilation 2 spans 7 rows; the input has 6.
  const string msg2d = NetErrorMessage<Dtype, ShapeError>(R"(
    layer { name: "data" type: "Input" top: "data"
      input_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 } } }
    layer { name: "conv_big" type: "Convolution" bottom: "data" top: "c"
      convolution_param { num_output: 2 kernel_size: 4 dilation: 2 } })");
  ASSERT_FALSE(msg2d.empty()) << "an empty convolution output was accepted";
  for (const char* part :
       {"layer 'conv_big'", "2 3 6 6 (216)", "spatial axis 0",
        "kernel extent 7", "kernel_size 4", "dilation 2", "pad 0"}) {
    EXPECT_NE(msg2d.find(part), string::npos) << part << " in: " << msg2d;
  }
  // 3-D: only the last axis is too small (dilated extent 5 > 3 + 2 * 0).
  const string msg3d = NetErrorMessage<Dtype, ShapeError>(R"(
    layer { name: "vol" type: "Input" top: "vol"
      input_param { shape { dim: 1 dim: 2 dim: 5 dim: 4 dim: 3 } } }
    layer { name: "conv3d" type: "Convolution" bottom: "vol" top: "c"
      convolution_param { num_output: 2 kernel_size: 3
        pad: 1 pad: 1 pad: 0 dilation: 1 dilation: 1 dilation: 2 } })");
  ASSERT_FALSE(msg3d.empty()) << "an empty 3-D convolution output accepted";
  for (const char* part :
       {"layer 'conv3d'", "1 2 5 4 3 (120)", "spatial axis 2",
        "axis 4 of bottom shape", "kernel extent 5", "dilation 2", "pad 0"}) {
    EXPECT_NE(msg3d.find(part), string::npos) << part << " in: " << msg3d;
  }
  // The same geometry with pad 1 on that axis fits and builds.
  Net<Dtype> ok(ParseNet(R"(
    layer { name: "vol" type: "Input" top: "vol"
      input_param { shape { dim: 1 dim: 2 dim: 5 dim: 4 dim: 3 } } }
    layer { name: "conv3d" type: "Convolution" bottom: "vol" top: "c"
      convolution_param { num_output: 2 kernel_size: 3
        pad: 1 dilation: 1 dilation: 1 dilation: 2 } })"));
  EXPECT_EQ(ok.blob_by_name("c")->shape(), (vector<int>{1, 2, 5, 4, 1}));
}

TEST(ConvolutionGeometryParseTest, NegativePadIsAParseErrorNamingFieldAndLine) {
  // pad is uint32 in the schema, so "-1" cannot even be parsed. Protobuf's
  // own words ("Expected integer, got: -") do not name the field; the
  // reader quotes the offending line.
  auto parse_error = [](const string& text) -> string {
    NetParameter param;
    try {
      ReadProtoFromTextString(text, "net.prototxt", &param);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  const string msg = parse_error(
      "layer { name: \"data\" type: \"Input\" top: \"data\"\n"
      "  input_param { shape { dim: 1 dim: 1 dim: 4 dim: 4 } } }\n"
      "layer { name: \"conv\" type: \"Convolution\"\n"
      "  bottom: \"data\" top: \"c\"\n"
      "  convolution_param { num_output: 1 kernel_size: 3\n"
      "    pad: -1 } }\n");
  ASSERT_FALSE(msg.empty()) << "pad: -1 was parsed";
  EXPECT_NE(msg.find("net.prototxt:6:"), string::npos) << msg;
  EXPECT_NE(msg.find("pad: -1"), string::npos) << msg;
  // On a long one-line net the quote is cut around the error.
  const string one_line = parse_error(
      "layer { name: \"data\" type: \"Input\" top: \"data\" input_param { "
      "shape { dim: 1 dim: 1 dim: 4 dim: 4 } } } layer { name: \"conv\" "
      "type: \"Convolution\" bottom: \"data\" top: \"c\" "
      "convolution_param { num_output: 1 kernel_size: 3 pad_h: -1 pad_w: 0 "
      "} }");
  ASSERT_FALSE(one_line.empty()) << "pad_h: -1 was parsed";
  EXPECT_NE(one_line.find("net.prototxt:1:"), string::npos) << one_line;
  EXPECT_NE(one_line.find("pad_h: -1"), string::npos) << one_line;
  EXPECT_NE(one_line.find("(in '..."), string::npos) << one_line;
}

}  // namespace
}  // namespace poseidon
