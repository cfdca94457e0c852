// The GPU passes of Convolution and Deconvolution. On the CPU: the
// portable im2col + GEMM path (Algorithm::kPortable, the code the GPU runs
// with the device as an argument) against the per-image reference path,
// forward and every gradient, on the geometries the GPU must take (groups,
// dilation, stride, 1x1, 1-D, 3-D, force_nd_im2col, several bottoms,
// chunks of images), and which GPU engine each geometry gets. With a GPU:
// CPU/GPU agreement for both engines (cuDNN and the GEMM path).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gpu_agreement.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/base_conv_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// A convolution_param with one value per spatial axis for each field.
struct ConvSpec {
  std::string type = "Convolution";
  int num_output = 4;
  vector<int> kernel, pad, stride, dilation;
  int group = 1;
  bool bias = true;
  bool force_nd = false;
  int axis = 1;
  ConvolutionParameter::Engine engine = ConvolutionParameter::DEFAULT;
};

LayerParameter MakeParam(const ConvSpec& s, int bottoms = 1) {
  LayerParameter param;
  param.set_type(s.type);
  param.set_name("conv");
  for (int i = 0; i < bottoms; ++i) {
    param.add_bottom("in" + std::to_string(i));
    param.add_top("out" + std::to_string(i));
  }
  ConvolutionParameter* p = param.mutable_convolution_param();
  p->set_num_output(s.num_output);
  for (int k : s.kernel) p->add_kernel_size(k);
  for (int v : s.pad) p->add_pad(v);
  for (int v : s.stride) p->add_stride(v);
  for (int v : s.dilation) p->add_dilation(v);
  p->set_group(s.group);
  p->set_bias_term(s.bias);
  p->set_force_nd_im2col(s.force_nd);
  p->set_axis(s.axis);
  p->set_engine(s.engine);
  p->mutable_weight_filler()->set_type("gaussian");
  p->mutable_bias_filler()->set_type("gaussian");
  return param;
}

template <typename Dtype>
void ExpectNear(const vector<Dtype>& expected, const vector<Dtype>& actual,
                double tol, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double scale = std::max(1.0, std::fabs(double(expected[i])));
    ASSERT_NEAR(expected[i], actual[i], tol * scale)
        << what << " differs at element " << i;
  }
}

template <typename Dtype>
class ConvPortableTest : public ::testing::Test {
 protected:
  static double Tol() { return sizeof(Dtype) == 4 ? 1e-4 : 1e-10; }

  // Runs the layer with kPerImage, then with kPortable and a scratch budget
  // of `buffer_bytes` (0: exactly `chunk` images), and compares the tops,
  // the bottom diffs and the parameter diffs.
  void Check(const ConvSpec& spec, const vector<int>& shape, int chunk,
             int bottoms = 1) {
    using Algo = typename BaseConvolutionLayer<Dtype>::Algorithm;
    const LayerParameter param = MakeParam(spec, bottoms);
    auto layer = LayerRegistry<Dtype>::CreateLayer(param);
    auto* conv = dynamic_cast<BaseConvolutionLayer<Dtype>*>(layer.get());
    ASSERT_NE(conv, nullptr);
    vector<std::unique_ptr<Blob<Dtype>>> storage;
    vector<Blob<Dtype>*> bottom, top;
    for (int i = 0; i < bottoms; ++i) {
      storage.emplace_back(new Blob<Dtype>(shape));
      test::FillGaussian(storage.back().get());
      bottom.push_back(storage.back().get());
      storage.emplace_back(new Blob<Dtype>());
      top.push_back(storage.back().get());
    }
    layer->SetUp(bottom, top);
    vector<vector<Dtype>> results[2];
    for (int run = 0; run < 2; ++run) {
      conv->set_algorithm(run == 0 ? Algo::kPerImage : Algo::kPortable);
      if (run == 1) {
        // Size the budget for `chunk` images of columns and output.
        const int out_channels = spec.type == "Convolution"
                                     ? spec.num_output
                                     : shape[spec.axis];
        const size_t rows = layer->blobs()[0]->count(1) * spec.group;
        const size_t columns = spec.type == "Convolution"
                                   ? top[0]->count(spec.axis + 1)
                                   : bottom[0]->count(spec.axis + 1);
        conv->set_max_buffer_bytes(sizeof(Dtype) * (rows + out_channels) *
                                   columns * chunk);
      }
      layer->Forward(bottom, top);
      if (run == 1) {
        const int num = bottom[0]->count(0, spec.axis);
        EXPECT_EQ(conv->portable_images_per_chunk(), std::min(chunk, num));
      }
      Poseidon::set_random_seed(7);
      for (Blob<Dtype>* t : top) {
        Blob<Dtype> noise(t->shape());
        test::FillGaussian(&noise);
        cpu_copy(t->count(), noise.cpu_data(), t->mutable_cpu_diff());
      }
      for (auto& b : layer->blobs()) {
        cpu_set(b->count(), Dtype(0), b->mutable_cpu_diff());
      }
      layer->Backward(top, vector<bool>(bottoms, true), bottom);
      for (int i = 0; i < bottoms; ++i) {
        const Dtype* t = top[i]->cpu_data();
        const Dtype* d = bottom[i]->cpu_diff();
        results[run].emplace_back(t, t + top[i]->count());
        results[run].emplace_back(d, d + bottom[i]->count());
      }
      for (auto& b : layer->blobs()) {
        results[run].emplace_back(b->cpu_diff(), b->cpu_diff() + b->count());
      }
    }
    ASSERT_EQ(results[0].size(), results[1].size());
    for (size_t k = 0; k < results[0].size(); ++k) {
      ExpectNear(results[0][k], results[1][k], Tol(),
                 spec.type + " result " + std::to_string(k) +
                     " (tops and bottom diffs per bottom, then params)");
    }
  }
};
TYPED_TEST_SUITE(ConvPortableTest, test::TestDtypes);

ConvSpec Conv2D(vector<int> kernel, vector<int> pad = {0, 0},
                vector<int> stride = {1, 1}, vector<int> dilation = {1, 1}) {
  ConvSpec s;
  s.kernel = kernel;
  s.pad = pad;
  s.stride = stride;
  s.dilation = dilation;
  return s;
}

TYPED_TEST(ConvPortableTest, PadAndChunks) {
  const ConvSpec s = Conv2D({3, 3}, {1, 1});
  // Chunks of one image, of two (the last holds one), all five at once.
  for (int chunk : {1, 2, 5}) this->Check(s, {5, 3, 6, 5}, chunk);
}

TYPED_TEST(ConvPortableTest, GroupsStrideDilation) {
  ConvSpec s = Conv2D({3, 2}, {0, 1}, {2, 1}, {1, 2});
  s.group = 2;
  s.num_output = 6;
  for (int chunk : {1, 3}) this->Check(s, {4, 4, 7, 6}, chunk);
}

TYPED_TEST(ConvPortableTest, Depthwise) {
  ConvSpec s = Conv2D({3, 3}, {1, 1}, {2, 2});
  s.group = 4;
  s.num_output = 8;
  this->Check(s, {3, 4, 7, 7}, 2);
}

TYPED_TEST(ConvPortableTest, OneByOne) {
  ConvSpec s = Conv2D({1, 1});
  // One image per chunk takes the image as its own column matrix.
  for (int chunk : {1, 3}) this->Check(s, {3, 5, 4, 3}, chunk);
  s.stride = {2, 2};
  this->Check(s, {3, 5, 5, 4}, 2);
}

TYPED_TEST(ConvPortableTest, KernelLargerThanImageWithPad) {
  this->Check(Conv2D({5, 5}, {2, 2}), {2, 2, 3, 4}, 2);
}

TYPED_TEST(ConvPortableTest, ForceNdTwoBottomsNoBias) {
  ConvSpec s = Conv2D({3, 3}, {1, 0}, {1, 2});
  s.force_nd = true;
  s.bias = false;
  this->Check(s, {3, 2, 5, 6}, 2, 2);
}

TYPED_TEST(ConvPortableTest, ThreeD) {
  ConvSpec s;
  s.kernel = {3, 2, 2};
  s.pad = {1, 0, 1};
  s.stride = {1, 2, 1};
  s.dilation = {1, 1, 2};
  s.group = 2;
  s.num_output = 4;
  for (int chunk : {1, 2}) this->Check(s, {3, 2, 4, 5, 3}, chunk);
}

TYPED_TEST(ConvPortableTest, OneD) {
  ConvSpec s;
  s.kernel = {3};
  s.pad = {1};
  s.stride = {2};
  s.dilation = {2};
  this->Check(s, {4, 3, 11}, 3);
}

TYPED_TEST(ConvPortableTest, NonDefaultAxis) {
  ConvSpec s = Conv2D({3, 3}, {1, 1});
  s.axis = 2;  // batch axes (2, 3)
  this->Check(s, {2, 3, 2, 5, 4}, 4);
}

ConvSpec Deconv(ConvSpec s) {
  s.type = "Deconvolution";
  return s;
}

TYPED_TEST(ConvPortableTest, DeconvolutionStridePad) {
  for (int chunk : {1, 4}) {
    this->Check(Deconv(Conv2D({4, 4}, {1, 1}, {2, 2})), {4, 3, 4, 3}, chunk);
  }
}

TYPED_TEST(ConvPortableTest, DeconvolutionGroupsDilation) {
  ConvSpec s = Deconv(Conv2D({3, 2}, {1, 0}, {1, 2}, {2, 1}));
  s.group = 2;
  s.num_output = 6;
  this->Check(s, {3, 4, 4, 5}, 2);
}

TYPED_TEST(ConvPortableTest, DeconvolutionOneByOneAndThreeD) {
  this->Check(Deconv(Conv2D({1, 1})), {3, 4, 3, 3}, 1);
  ConvSpec s = Deconv(ConvSpec());
  s.kernel = {2, 3, 2};
  s.stride = {2, 1, 2};
  s.pad = {0, 1, 1};
  this->Check(s, {2, 3, 3, 4, 3}, 2);
}

// Which GPU engine each geometry gets (decided in every build).
TEST(ConvGpuEngineTest, CudnnFor2DAnd3DUnlessToldOtherwise) {
  using Engine = BaseConvolutionLayer<float>::GpuEngine;
#ifdef USE_CUDNN
  const Engine cudnn = Engine::kCudnn;
#else
  const Engine cudnn = Engine::kGemm;
#endif
  struct Case {
    ConvSpec spec;
    vector<int> shape;
    Engine expected;
  };
  ConvSpec caffe = Conv2D({3, 3});
  caffe.engine = ConvolutionParameter::CAFFE;
  ConvSpec explicit_cudnn = Conv2D({3, 3});
  explicit_cudnn.engine = ConvolutionParameter::CUDNN;
  ConvSpec nd = Conv2D({3, 3});
  nd.force_nd = true;
  ConvSpec one_d;
  one_d.kernel = {3};
  ConvSpec three_d;
  three_d.kernel = {2, 2, 2};
  ConvSpec four_d;
  four_d.kernel = {1, 1, 1, 1};
  const Case cases[] = {
      {Conv2D({3, 3}), {2, 3, 5, 5}, cudnn},
      {explicit_cudnn, {2, 3, 5, 5}, cudnn},
      {Deconv(Conv2D({3, 3})), {2, 3, 5, 5}, cudnn},
      {three_d, {2, 3, 3, 3, 3}, cudnn},
      {caffe, {2, 3, 5, 5}, Engine::kGemm},
      {nd, {2, 3, 5, 5}, Engine::kGemm},
      {one_d, {2, 3, 7}, Engine::kGemm},
      {four_d, {1, 2, 2, 2, 2, 2}, Engine::kGemm},
  };
  for (const Case& c : cases) {
    Blob<float> bottom(c.shape), top;
    auto layer = LayerRegistry<float>::CreateLayer(MakeParam(c.spec));
    layer->SetUp({&bottom}, {&top});
    auto* conv = dynamic_cast<BaseConvolutionLayer<float>*>(layer.get());
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->gpu_engine(), c.expected) << bottom.shape_string();
    // kPortable selects the GEMM path on the GPU too.
    conv->set_algorithm(BaseConvolutionLayer<float>::Algorithm::kPortable);
    layer->Reshape({&bottom}, {&top});
    EXPECT_EQ(conv->gpu_engine(), Engine::kGemm);
  }
}

// CPU/GPU agreement, both engines. cuDNN may pick FFT or Winograd
// algorithms, whose float rounding is looser than a GEMM's.
template <typename Dtype>
class ConvolutionLayerGPUTest : public ::testing::Test {
 protected:
  void Agree(ConvSpec spec, const vector<int>& shape, int bottoms = 1) {
    const test::Tolerance tol = sizeof(Dtype) == 4
                                    ? test::Tolerance{1e-3, 1e-3}
                                    : test::Tolerance{1e-9, 1e-10};
    for (auto engine :
         {ConvolutionParameter::CUDNN, ConvolutionParameter::CAFFE}) {
      spec.engine = engine;
      SCOPED_TRACE(engine == ConvolutionParameter::CUDNN ? "engine CUDNN"
                                                         : "engine CAFFE");
      vector<std::unique_ptr<Blob<Dtype>>> storage;
      vector<Blob<Dtype>*> in;
      for (int i = 0; i < bottoms; ++i) {
        storage.emplace_back(new Blob<Dtype>(shape));
        test::FillGaussian(storage.back().get());
        in.push_back(storage.back().get());
      }
      test::ExpectCpuGpuAgree<Dtype>(MakeParam(spec, bottoms), in, {}, tol);
    }
  }
};
TYPED_TEST_SUITE(ConvolutionLayerGPUTest, test::TestDtypes);

TYPED_TEST(ConvolutionLayerGPUTest, Pad) {
  this->Agree(Conv2D({3, 3}, {1, 1}), {3, 3, 8, 7});
}

TYPED_TEST(ConvolutionLayerGPUTest, StrideDilationGroups) {
  ConvSpec s = Conv2D({3, 3}, {2, 1}, {2, 1}, {2, 1});
  s.group = 2;
  s.num_output = 6;
  this->Agree(s, {2, 4, 9, 8});
}

TYPED_TEST(ConvolutionLayerGPUTest, OneByOneTwoBottoms) {
  this->Agree(Conv2D({1, 1}), {2, 5, 4, 4}, 2);
}

TYPED_TEST(ConvolutionLayerGPUTest, AlexNetLikeStride4) {
  ConvSpec s = Conv2D({11, 11}, {0, 0}, {4, 4});
  s.num_output = 8;
  this->Agree(s, {2, 3, 27, 27});
}

TYPED_TEST(ConvolutionLayerGPUTest, ThreeD) {
  ConvSpec s;
  s.kernel = {3, 3, 2};
  s.pad = {1, 1, 0};
  s.stride = {1, 2, 1};
  this->Agree(s, {2, 3, 4, 6, 5});
}

TYPED_TEST(ConvolutionLayerGPUTest, OneDAndForceNd) {
  ConvSpec one_d;
  one_d.kernel = {3};
  one_d.pad = {1};
  this->Agree(one_d, {2, 3, 9});
  ConvSpec nd = Conv2D({3, 3}, {1, 1});
  nd.force_nd = true;
  this->Agree(nd, {2, 3, 5, 6});
}

TYPED_TEST(ConvolutionLayerGPUTest, NoBias) {
  ConvSpec s = Conv2D({3, 3});
  s.bias = false;
  this->Agree(s, {2, 3, 6, 6});
}

TYPED_TEST(ConvolutionLayerGPUTest, Deconvolution) {
  this->Agree(Deconv(Conv2D({4, 4}, {1, 1}, {2, 2})), {2, 3, 5, 4});
  ConvSpec g = Deconv(Conv2D({3, 3}, {1, 1}, {1, 1}, {2, 2}));
  g.group = 3;
  g.num_output = 6;
  this->Agree(g, {2, 3, 5, 5});
  ConvSpec d3 = Deconv(ConvSpec());
  d3.kernel = {2, 2, 2};
  d3.stride = {2, 2, 2};
  this->Agree(d3, {2, 2, 3, 3, 2});
}

}  // namespace
}  // namespace poseidon
