// ConvolutionLayer: shapes, forward against a naive direct convolution
// written here, the batched GEMM path against the per-image reference path
// (forward and every gradient), gradient checks, and the error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/layers/conv_layer.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

struct Geometry {
  int kernel_h, kernel_w;
  int pad_h = 0, pad_w = 0;
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
  int group = 1;
};

LayerParameter ConvParam(int num_output, const Geometry& g, bool bias = true) {
  LayerParameter param;
  param.set_type("Convolution");
  ConvolutionParameter* p = param.mutable_convolution_param();
  p->set_num_output(num_output);
  p->set_kernel_h(g.kernel_h);
  p->set_kernel_w(g.kernel_w);
  p->set_pad_h(g.pad_h);
  p->set_pad_w(g.pad_w);
  p->set_stride_h(g.stride_h);
  p->set_stride_w(g.stride_w);
  if (g.dilation_h != 1 || g.dilation_w != 1) {
    p->add_dilation(g.dilation_h);
    p->add_dilation(g.dilation_w);
  }
  p->set_group(g.group);
  p->set_bias_term(bias);
  p->mutable_weight_filler()->set_type("gaussian");
  p->mutable_bias_filler()->set_type("gaussian");
  return param;
}

// Direct convolution, seven nested loops, no im2col.
template <typename Dtype>
void NaiveConv(const Blob<Dtype>& in, const Blob<Dtype>& w,
               const Blob<Dtype>* bias, const Geometry& g, Blob<Dtype>* out) {
  const int N = in.num(), C = in.channels(), H = in.height(), W = in.width();
  const int O = w.shape(0), KH = w.shape(2), KW = w.shape(3);
  const int cg = C / g.group, og = O / g.group;
  const int OH =
      (H + 2 * g.pad_h - (g.dilation_h * (KH - 1) + 1)) / g.stride_h + 1;
  const int OW =
      (W + 2 * g.pad_w - (g.dilation_w * (KW - 1) + 1)) / g.stride_w + 1;
  out->Reshape(N, O, OH, OW);
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < O; ++o) {
      const int first_c = (o / og) * cg;
      for (int y = 0; y < OH; ++y) {
        for (int x = 0; x < OW; ++x) {
          double sum = bias ? bias->cpu_data()[o] : 0;
          for (int c = 0; c < cg; ++c) {
            for (int i = 0; i < KH; ++i) {
              for (int j = 0; j < KW; ++j) {
                const int ih = y * g.stride_h - g.pad_h + i * g.dilation_h;
                const int iw = x * g.stride_w - g.pad_w + j * g.dilation_w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                sum +=
                    w.data_at(o, c, i, j) * in.data_at(n, first_c + c, ih, iw);
              }
            }
          }
          out->mutable_cpu_data()[out->offset(n, o, y, x)] =
              static_cast<Dtype>(sum);
        }
      }
    }
  }
}

template <typename Dtype>
void ExpectBlobsNear(const Dtype* expected, const Dtype* actual, int count,
                     double tol, const char* what) {
  for (int i = 0; i < count; ++i) {
    const double scale = std::max(1.0, std::fabs(double(expected[i])));
    ASSERT_NEAR(expected[i], actual[i], tol * scale)
        << what << " differs at element " << i;
  }
}

// Sets Poseidon::num_threads() for a scope and restores it after.
using test::ScopedNumThreads;

template <typename TypeParam>
class ConvolutionLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  static double Tol() { return sizeof(Dtype) == 4 ? 2e-4 : 1e-10; }

  // Runs the layer with every algorithm on a random bottom and compares the
  // forward against NaiveConv.
  void CheckForward(const vector<int>& shape, int num_output,
                    const Geometry& g) {
    Blob<Dtype> bottom(shape), top, expected;
    test::FillGaussian(&bottom);
    ConvolutionLayer<Dtype> layer(ConvParam(num_output, g));
    vector<Blob<Dtype>*> bottoms{&bottom}, tops{&top};
    layer.SetUp(bottoms, tops);
    NaiveConv(bottom, *layer.blobs()[0], layer.blobs()[1].get(), g, &expected);
    ASSERT_EQ(top.shape(), expected.shape());
    using Algo = typename BaseConvolutionLayer<Dtype>::Algorithm;
    for (Algo algo : {Algo::kPerImage, Algo::kBatched, Algo::kAuto}) {
      layer.set_algorithm(algo);
      // A tiny budget forces chunks of one image for kBatched.
      layer.set_max_buffer_bytes(algo == Algo::kBatched ? 1 : 64 << 20);
      layer.Forward(bottoms, tops);
      ExpectBlobsNear(expected.cpu_data(), top.cpu_data(), top.count(), Tol(),
                      "forward");
    }
  }

  // Compares forward, weight/bias/bottom gradients of the batched path
  // (with chunks of `chunk` images, on `threads` threads) against the
  // per-image path on one thread. With threads > 1 it also runs the batched
  // path a second time and expects bit-identical results.
  void CheckBatchedMatchesPerImage(const vector<int>& shape, int num_output,
                                   const Geometry& g, int chunk,
                                   int threads = 1, double tol = Tol()) {
    using Algo = typename BaseConvolutionLayer<Dtype>::Algorithm;
    Blob<Dtype> bottom(shape), top;
    test::FillGaussian(&bottom);
    ConvolutionLayer<Dtype> layer(ConvParam(num_output, g));
    vector<Blob<Dtype>*> bottoms{&bottom}, tops{&top};
    layer.SetUp(bottoms, tops);
    const int runs = threads > 1 ? 3 : 2;
    vector<vector<Dtype>> results[3];
    for (int run = 0; run < runs; ++run) {
      ScopedNumThreads num_threads(run == 0 ? 1 : threads);
      layer.set_algorithm(run == 0 ? Algo::kPerImage : Algo::kBatched);
      if (run >= 1) {
        // Size the budget for exactly `chunk` images per GEMM.
        const size_t per_image =
            sizeof(Dtype) * top.count(2) *
            (layer.blobs()[0]->count(1) * g.group + num_output);
        layer.set_max_buffer_bytes(per_image * chunk);
      }
      layer.Forward(bottoms, tops);
      EXPECT_EQ(layer.batched(), run >= 1);
      if (run >= 1) EXPECT_EQ(layer.images_per_chunk(), chunk);
      Poseidon::set_random_seed(7);
      test::FillGaussian(&top);  // writes data; copy it to the diff
      cpu_copy(top.count(), top.cpu_data(), top.mutable_cpu_diff());
      for (auto& b : layer.blobs()) {
        cpu_set(b->count(), Dtype(0), b->mutable_cpu_diff());
      }
      layer.Backward(tops, {true}, bottoms);
      auto grab = [](const Dtype* p, int n) { return vector<Dtype>(p, p + n); };
      layer.Forward(bottoms, tops);
      results[run] = {
          grab(top.cpu_data(), top.count()),
          grab(bottom.cpu_diff(), bottom.count()),
          grab(layer.blobs()[0]->cpu_diff(), layer.blobs()[0]->count()),
          grab(layer.blobs()[1]->cpu_diff(), layer.blobs()[1]->count())};
    }
    const char* names[] = {"top data", "bottom diff", "weight diff",
                           "bias diff"};
    for (int k = 0; k < 4; ++k) {
      ASSERT_EQ(results[0][k].size(), results[1][k].size());
      ExpectBlobsNear(results[0][k].data(), results[1][k].data(),
                      static_cast<int>(results[0][k].size()), tol, names[k]);
      // The threads matter on the CPU only; on the GPU cuDNN may pick a
      // non-deterministic algorithm unless gpu::SetDeterministic is on.
      if (runs == 3 && TypeParam::device == Poseidon::CPU) {
        EXPECT_EQ(results[1][k], results[2][k])
            << names[k] << " differs between two parallel runs";
      }
    }
  }
};

TYPED_TEST_SUITE(ConvolutionLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(ConvolutionLayerTest, SetupShapes) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> b0(2, 3, 6, 4), b1(2, 3, 6, 4), t0, t1;
  Geometry g{3, 3};
  g.stride_h = g.stride_w = 2;
  ConvolutionLayer<Dtype> layer(ConvParam(4, g));
  layer.SetUp({&b0, &b1}, {&t0, &t1});
  EXPECT_EQ(t0.shape(), (vector<int>{2, 4, 2, 1}));
  EXPECT_EQ(t1.shape(), (vector<int>{2, 4, 2, 1}));
  EXPECT_EQ(layer.blobs()[0]->shape(), (vector<int>{4, 3, 3, 3}));
  EXPECT_EQ(layer.blobs()[1]->shape(), (vector<int>{4}));
  EXPECT_STREQ(layer.type(), "Convolution");

  // Groups, padding and dilation in the shape rule.
  Geometry g2{3, 2};
  g2.pad_h = 2;
  g2.dilation_h = 2;
  g2.group = 3;
  ConvolutionLayer<Dtype> grouped(ConvParam(6, g2, /*bias=*/false));
  Blob<Dtype> b2(1, 3, 5, 5), t2;
  grouped.SetUp({&b2}, {&t2});
  // (5 + 4 - 5) / 1 + 1 = 5 rows, (5 - 2) / 1 + 1 = 4 columns.
  EXPECT_EQ(t2.shape(), (vector<int>{1, 6, 5, 4}));
  EXPECT_EQ(grouped.blobs().size(), 1u);
  EXPECT_EQ(grouped.blobs()[0]->shape(), (vector<int>{6, 1, 3, 2}));
}

TYPED_TEST(ConvolutionLayerTest, RegisteredInFactory) {
  using Dtype = typename TypeParam::Dtype;
  auto layer = LayerRegistry<Dtype>::CreateLayer(ConvParam(2, Geometry{3, 3}));
  EXPECT_STREQ(layer->type(), "Convolution");
}

TYPED_TEST(ConvolutionLayerTest, HandComputed) {
  using Dtype = typename TypeParam::Dtype;
  // 1 x 1 x 3 x 3 input 1..9, a 2x2 kernel [[1, 0], [0, -1]], bias 0.5,
  // pad 0: top[y][x] = in[y][x] - in[y+1][x+1] + 0.5 = -4 + 0.5 everywhere.
  // With pad 1 and stride 2 the corners see one tap each.
  Blob<Dtype> bottom(1, 1, 3, 3), top;
  for (int i = 0; i < 9; ++i) bottom.mutable_cpu_data()[i] = i + 1;
  LayerParameter param = ConvParam(1, Geometry{2, 2});
  param.mutable_convolution_param()->mutable_bias_filler()->set_type(
      "constant");
  param.mutable_convolution_param()->mutable_bias_filler()->set_value(0.5);
  ConvolutionLayer<Dtype> layer(param);
  layer.SetUp({&bottom}, {&top});
  Dtype* w = layer.blobs()[0]->mutable_cpu_data();
  w[0] = 1;
  w[1] = 0;
  w[2] = 0;
  w[3] = -1;
  layer.Forward({&bottom}, {&top});
  ASSERT_EQ(top.shape(), (vector<int>{1, 1, 2, 2}));
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(top.cpu_data()[i], -3.5, 1e-6);

  Geometry g{2, 2};
  g.pad_h = g.pad_w = 1;
  g.stride_h = g.stride_w = 2;
  LayerParameter padded = ConvParam(1, g);
  padded.mutable_convolution_param()->clear_bias_filler();
  ConvolutionLayer<Dtype> layer2(padded);
  layer2.SetUp({&bottom}, {&top});
  std::copy(w, w + 4, layer2.blobs()[0]->mutable_cpu_data());
  layer2.Forward({&bottom}, {&top});
  ASSERT_EQ(top.shape(), (vector<int>{1, 1, 2, 2}));
  // Window origins (-1,-1), (-1,1), (1,-1), (1,1): taps w[3] at (0,0) -> -1;
  // w[3] at (0,2) -> -3; w[3] at (2,0) -> -7; w[0] at (1,1) -> 5, w[3] at
  // (2,2) -> -9: -4.
  const Dtype expected[] = {-1, -3, -7, -4};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(top.cpu_data()[i], expected[i], 1e-6);
}

TYPED_TEST(ConvolutionLayerTest, ForwardSimple) {
  this->CheckForward({2, 3, 6, 5}, 4, Geometry{3, 3});
}

TYPED_TEST(ConvolutionLayerTest, ForwardPadStride) {
  Geometry g{3, 2};
  g.pad_h = 1;
  g.pad_w = 2;
  g.stride_h = 2;
  g.stride_w = 3;
  this->CheckForward({3, 2, 7, 8}, 3, g);
}

TYPED_TEST(ConvolutionLayerTest, ForwardDilation) {
  Geometry g{3, 3};
  g.dilation_h = 2;
  g.dilation_w = 3;
  g.pad_h = 1;
  this->CheckForward({2, 3, 8, 9}, 2, g);
}

TYPED_TEST(ConvolutionLayerTest, ForwardGroups) {
  Geometry g{3, 3};
  g.group = 3;
  g.pad_h = g.pad_w = 1;
  this->CheckForward({2, 6, 5, 5}, 9, g);
}

TYPED_TEST(ConvolutionLayerTest, Forward1x1) {
  // Small and large images: kAuto batches the first and runs the second
  // per image as a direct GEMM on the bottom (576 positions, no im2col).
  this->CheckForward({3, 4, 3, 5}, 5, Geometry{1, 1});
  this->CheckForward({2, 3, 24, 24}, 4, Geometry{1, 1});
}

TYPED_TEST(ConvolutionLayerTest, Forward1x1Strided) {
  Geometry g{1, 1};
  g.stride_h = g.stride_w = 2;
  this->CheckForward({2, 3, 5, 6}, 2, g);
}

TYPED_TEST(ConvolutionLayerTest, ForwardKernelLargerThanImageWithPad) {
  Geometry g{5, 5};
  g.pad_h = g.pad_w = 2;
  this->CheckForward({2, 2, 3, 4}, 3, g);
}

TYPED_TEST(ConvolutionLayerTest, AutoAlgorithmChoice) {
  using Dtype = typename TypeParam::Dtype;
  Geometry g{5, 5};
  g.pad_h = g.pad_w = 2;
  struct Case {
    vector<int> shape;
    bool batched;
    int chunk;
  };
  const Case cases[] = {
      {{64, 3, 32, 32}, false, 1},  // 1024 positions: per image
      {{64, 32, 16, 16}, true, 2},  // 256 positions: 2 images
      {{64, 32, 8, 8}, true, 8},    // 64 positions: 8 images
      {{5, 32, 8, 8}, true, 5},     // the whole (small) batch
      {{1, 32, 8, 8}, false, 1},    // a single image
  };
  ScopedNumThreads one_thread(1);
  for (const Case& c : cases) {
    Blob<Dtype> bottom(c.shape), top;
    ConvolutionLayer<Dtype> layer(ConvParam(32, g));
    layer.SetUp({&bottom}, {&top});
    EXPECT_EQ(layer.batched(), c.batched) << bottom.shape_string();
    EXPECT_EQ(layer.images_per_chunk(), c.chunk) << bottom.shape_string();
  }
  // The buffer budget caps the chunk.
  Blob<Dtype> bottom(64, 32, 8, 8), top;
  ConvolutionLayer<Dtype> layer(ConvParam(32, g));
  layer.set_max_buffer_bytes(3 * sizeof(Dtype) * (800 + 32) * 64);
  layer.SetUp({&bottom}, {&top});
  EXPECT_EQ(layer.images_per_chunk(), 3);
}

TYPED_TEST(ConvolutionLayerTest, AutoAlgorithmChoiceThreaded) {
  using Dtype = typename TypeParam::Dtype;
  Geometry g{5, 5};
  g.pad_h = g.pad_w = 2;
  struct Case {
    vector<int> shape;
    int threads;
    bool batched;
    int chunk;
    vector<int> images;  // per worker
  };
  // With several threads every 2-D layer batches: each thread takes a range
  // of ceil(N / threads) images (ranges differ by at most one), cut into
  // the fewest chunks of at most the wanted size.
  const Case cases[] = {
      {{64, 3, 32, 32}, 2, true, 1, {32, 32}},  // one image fills a GEMM
      {{64, 32, 8, 8}, 2, true, 8, {32, 32}},
      {{5, 32, 8, 8}, 2, true, 3, {3, 2}},     // capped so both threads get one
      {{5, 32, 8, 8}, 4, true, 2, {2, 2, 1}},  // three chunks of at most 2
      // 196 positions want 3 images, but chunks of 3, 3, 2 leave one
      // thread 6 of the 8: four chunks of 2 instead.
      {{8, 32, 14, 14}, 2, true, 2, {4, 4}},
      {{12, 32, 14, 14}, 2, true, 3, {6, 6}},
      // 100 images of 8 x 8: counting 13 chunks of at most 8 out to the
      // threads gave them 56 and 44 images.
      {{100, 32, 8, 8}, 2, true, 8, {50, 50}},
      {{101, 32, 8, 8}, 2, true, 8, {51, 50}},
      {{100, 32, 8, 8}, 3, true, 7, {34, 33, 33}},
      {{1, 32, 8, 8}, 2, false, 1, {1}},  // a single image
  };
  for (const Case& c : cases) {
    ScopedNumThreads num_threads(c.threads);
    Blob<Dtype> bottom(c.shape), top;
    ConvolutionLayer<Dtype> layer(ConvParam(32, g));
    layer.SetUp({&bottom}, {&top});
    const std::string what =
        bottom.shape_string() + " on " + std::to_string(c.threads);
    EXPECT_EQ(layer.batched(), c.batched) << what;
    EXPECT_EQ(layer.images_per_chunk(), c.chunk) << what;
    EXPECT_EQ(layer.images_per_worker(), c.images) << what;
  }
}

TYPED_TEST(ConvolutionLayerTest, BatchedMatchesPerImage) {
  Geometry g{3, 3};
  g.pad_h = g.pad_w = 1;
  // 5 images in chunks of 2 (the last chunk holds one), and all at once.
  this->CheckBatchedMatchesPerImage({5, 3, 6, 5}, 4, g, 2);
  this->CheckBatchedMatchesPerImage({5, 3, 6, 5}, 4, g, 5);
}

TYPED_TEST(ConvolutionLayerTest, BatchedMatchesPerImageGroupsStrideDilation) {
  Geometry g{3, 2};
  g.group = 2;
  g.stride_h = 2;
  g.dilation_w = 2;
  g.pad_w = 1;
  this->CheckBatchedMatchesPerImage({4, 4, 7, 6}, 6, g, 3);
}

TYPED_TEST(ConvolutionLayerTest, BatchedMatchesPerImage1x1) {
  this->CheckBatchedMatchesPerImage({3, 4, 4, 3}, 2, Geometry{1, 1}, 2);
  // Chunks of one image: the GEMMs read the image and write the input
  // gradient in place of the columns; with groups, at their offsets.
  this->CheckBatchedMatchesPerImage({3, 4, 4, 3}, 2, Geometry{1, 1}, 1);
  Geometry grouped{1, 1};
  grouped.group = 2;
  this->CheckBatchedMatchesPerImage({3, 6, 5, 3}, 4, grouped, 1);
  this->CheckBatchedMatchesPerImage({3, 6, 5, 3}, 4, grouped, 2);
}

// Tolerance of the threaded comparisons: tighter than Tol() for float.
double ParallelTol(size_t dtype_size) { return dtype_size == 4 ? 1e-5 : 1e-10; }

TYPED_TEST(ConvolutionLayerTest, ParallelBatchedMatchesPerImage) {
  using Dtype = typename TypeParam::Dtype;
  Geometry g{3, 3};
  g.pad_h = g.pad_w = 1;
  const double tol = ParallelTol(sizeof(Dtype));
  // 7 images: chunks of 1 (7 chunks), 2 (the last holds one), 3 and 4
  // (two chunks), on 2 threads; and 3 threads with more threads than
  // chunks of 4.
  for (int chunk : {1, 2, 3, 4}) {
    this->CheckBatchedMatchesPerImage({7, 3, 6, 5}, 4, g, chunk, 2, tol);
  }
  this->CheckBatchedMatchesPerImage({7, 3, 6, 5}, 4, g, 2, 3, tol);
  this->CheckBatchedMatchesPerImage({7, 3, 6, 5}, 4, g, 4, 3, tol);
}

TYPED_TEST(ConvolutionLayerTest, ParallelBatchedMatchesPerImageGroups) {
  using Dtype = typename TypeParam::Dtype;
  Geometry g{3, 2};
  g.group = 2;
  g.stride_h = 2;
  g.dilation_w = 2;
  g.pad_w = 1;
  const double tol = ParallelTol(sizeof(Dtype));
  for (int chunk : {1, 2, 3}) {
    this->CheckBatchedMatchesPerImage({6, 4, 7, 6}, 6, g, chunk, 2, tol);
  }
  this->CheckBatchedMatchesPerImage({6, 4, 7, 6}, 6, g, 1, 4, tol);
}

TYPED_TEST(ConvolutionLayerTest, ParallelBatchedMatchesPerImage1x1) {
  using Dtype = typename TypeParam::Dtype;
  this->CheckBatchedMatchesPerImage({5, 4, 4, 3}, 2, Geometry{1, 1}, 2, 2,
                                    ParallelTol(sizeof(Dtype)));
  this->CheckBatchedMatchesPerImage({5, 4, 4, 3}, 2, Geometry{1, 1}, 1, 2,
                                    ParallelTol(sizeof(Dtype)));
}

// The thread count may change between Reshape and Backward; the layer then
// grows its per-worker scratch.
TYPED_TEST(ConvolutionLayerTest, ParallelThreadCountChangeAfterReshape) {
  using Dtype = typename TypeParam::Dtype;
  using Algo = typename BaseConvolutionLayer<Dtype>::Algorithm;
  Geometry g{3, 3};
  Blob<Dtype> bottom(6, 2, 5, 5), top;
  test::FillGaussian(&bottom);
  ConvolutionLayer<Dtype> layer(ConvParam(3, g));
  vector<Blob<Dtype>*> bottoms{&bottom}, tops{&top};
  vector<Dtype> diffs[2];
  for (int run = 0; run < 2; ++run) {
    ScopedNumThreads before(run == 0 ? 1 : 2);
    layer.set_algorithm(run == 0 ? Algo::kPerImage : Algo::kBatched);
    layer.set_max_buffer_bytes(1);  // chunks of one image
    layer.SetUp(bottoms, tops);
    layer.Forward(bottoms, tops);
    cpu_copy(top.count(), top.cpu_data(), top.mutable_cpu_diff());
    cpu_set(layer.blobs()[0]->count(), Dtype(0),
            layer.blobs()[0]->mutable_cpu_diff());
    cpu_set(layer.blobs()[1]->count(), Dtype(0),
            layer.blobs()[1]->mutable_cpu_diff());
    ScopedNumThreads after(run == 0 ? 1 : 5);
    layer.Backward(tops, {true}, bottoms);
    const Dtype* w = layer.blobs()[0]->cpu_diff();
    diffs[run].assign(w, w + layer.blobs()[0]->count());
    const Dtype* d = bottom.cpu_diff();
    diffs[run].insert(diffs[run].end(), d, d + bottom.count());
  }
  ExpectBlobsNear(diffs[0].data(), diffs[1].data(),
                  static_cast<int>(diffs[0].size()), ParallelTol(sizeof(Dtype)),
                  "weight and bottom diffs");
}

TYPED_TEST(ConvolutionLayerTest, NonDefaultAxisMatchesReshapedBottom) {
  using Dtype = typename TypeParam::Dtype;
  // (2, 2, 3, 5, 4) with axis 2 is four images of (3, 5, 4).
  Blob<Dtype> bottom({2, 2, 3, 5, 4}), flat(4, 3, 5, 4), top, flat_top;
  test::FillGaussian(&bottom);
  cpu_copy(bottom.count(), bottom.cpu_data(), flat.mutable_cpu_data());
  LayerParameter param = ConvParam(2, Geometry{3, 3});
  ConvolutionLayer<Dtype> ref(param);
  ref.SetUp({&flat}, {&flat_top});
  param.mutable_convolution_param()->set_axis(2);
  ConvolutionLayer<Dtype> layer(param);
  layer.SetUp({&bottom}, {&top});
  EXPECT_EQ(top.shape(), (vector<int>{2, 2, 2, 3, 2}));
  layer.blobs()[0]->CopyFrom(*ref.blobs()[0]);
  layer.blobs()[1]->CopyFrom(*ref.blobs()[1]);
  layer.Forward({&bottom}, {&top});
  ref.Forward({&flat}, {&flat_top});
  ExpectBlobsNear(flat_top.cpu_data(), top.cpu_data(), top.count(), this->Tol(),
                  "axis 2 forward");
}

// 3-D convolution through the N-D path, against a direct 3-D loop.
TYPED_TEST(ConvolutionLayerTest, Forward3D) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom({2, 2, 4, 5, 3}), top;
  test::FillGaussian(&bottom);
  LayerParameter param;
  ConvolutionParameter* p = param.mutable_convolution_param();
  p->set_num_output(3);
  for (int k : {3, 2, 2}) p->add_kernel_size(k);
  for (int s : {1, 2, 1}) p->add_stride(s);
  for (int pd : {1, 0, 1}) p->add_pad(pd);
  p->add_dilation(1);
  p->mutable_weight_filler()->set_type("gaussian");
  p->mutable_bias_filler()->set_type("gaussian");
  ConvolutionLayer<Dtype> layer(param);
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  // Depth (4 + 2 - 3) + 1 = 4, height (5 - 2) / 2 + 1 = 2, width 3 + 2 - 1.
  ASSERT_EQ(top.shape(), (vector<int>{2, 3, 4, 2, 4}));
  EXPECT_FALSE(layer.batched());
  const Blob<Dtype>& w = *layer.blobs()[0];
  const Dtype* bias = layer.blobs()[1]->cpu_data();
  for (int n = 0; n < 2; ++n) {
    for (int o = 0; o < 3; ++o) {
      for (int z = 0; z < 4; ++z) {
        for (int y = 0; y < 2; ++y) {
          for (int x = 0; x < 4; ++x) {
            double sum = bias[o];
            for (int c = 0; c < 2; ++c) {
              for (int i = 0; i < 3; ++i) {
                for (int j = 0; j < 2; ++j) {
                  for (int k = 0; k < 2; ++k) {
                    const int iz = z - 1 + i, iy = y * 2 + j, ix = x - 1 + k;
                    if (iz < 0 || iz >= 4 || iy >= 5 || ix < 0 || ix >= 3) {
                      continue;
                    }
                    sum += w.data_at({o, c, i, j, k}) *
                           bottom.data_at({n, c, iz, iy, ix});
                  }
                }
              }
            }
            EXPECT_NEAR(top.data_at({n, o, z, y, x}), sum, 1e-4);
          }
        }
      }
    }
  }
}

TYPED_TEST(ConvolutionLayerTest, ForceNdMatches2D) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 6, 5), top, top_nd;
  test::FillGaussian(&bottom);
  Geometry g{3, 2};
  g.pad_h = 1;
  g.stride_w = 2;
  g.dilation_h = 2;
  LayerParameter param = ConvParam(4, g);
  ConvolutionLayer<Dtype> layer(param);
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  param.mutable_convolution_param()->set_force_nd_im2col(true);
  ConvolutionLayer<Dtype> nd(param);
  nd.SetUp({&bottom}, {&top_nd});
  nd.blobs()[0]->CopyFrom(*layer.blobs()[0]);
  nd.blobs()[1]->CopyFrom(*layer.blobs()[1]);
  nd.Forward({&bottom}, {&top_nd});
  EXPECT_FALSE(nd.batched());
  ExpectBlobsNear(top.cpu_data(), top_nd.cpu_data(), top.count(), this->Tol(),
                  "force_nd_im2col forward");
}

TYPED_TEST(ConvolutionLayerTest, ParamDiffsAccumulateAndRespectFlags) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 2, 4, 4), top;
  test::FillGaussian(&bottom);
  ConvolutionLayer<Dtype> layer(ConvParam(2, Geometry{3, 3}));
  layer.SetUp({&bottom}, {&top});
  layer.Forward({&bottom}, {&top});
  test::FillGaussian(&top);
  cpu_copy(top.count(), top.cpu_data(), top.mutable_cpu_diff());
  Blob<Dtype>& w = *layer.blobs()[0];
  cpu_set(w.count(), Dtype(0), w.mutable_cpu_diff());
  cpu_set(2, Dtype(0), layer.blobs()[1]->mutable_cpu_diff());
  layer.Backward({&top}, {false}, {&bottom});
  vector<Dtype> once(w.cpu_diff(), w.cpu_diff() + w.count());
  const Dtype bias_once = layer.blobs()[1]->cpu_diff()[0];
  layer.Backward({&top}, {false}, {&bottom});
  for (int i = 0; i < w.count(); ++i) {
    EXPECT_NEAR(w.cpu_diff()[i], 2 * once[i], 1e-4 * (1 + std::fabs(once[i])));
  }
  EXPECT_NEAR(layer.blobs()[1]->cpu_diff()[0], 2 * bias_once, 1e-4);
  // Frozen parameters keep their diffs.
  layer.set_param_propagate_down(0, false);
  layer.set_param_propagate_down(1, false);
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_NEAR(w.cpu_diff()[0], 2 * once[0], 1e-4 * (1 + std::fabs(once[0])));
  EXPECT_NEAR(layer.blobs()[1]->cpu_diff()[0], 2 * bias_once, 1e-4);
}

TYPED_TEST(ConvolutionLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 6, 5), top;
  test::FillGaussian(&bottom);
  Geometry g{3, 3};
  g.pad_h = g.pad_w = 1;
  g.stride_h = g.stride_w = 2;
  ConvolutionLayer<Dtype> layer(ConvParam(2, g));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(ConvolutionLayerTest, GradientPerImageGroupsDilation) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 4, 6, 5), top;
  test::FillGaussian(&bottom);
  Geometry g{3, 2};
  g.group = 2;
  g.dilation_h = 2;
  g.pad_w = 1;
  ConvolutionLayer<Dtype> layer(ConvParam(4, g));
  layer.set_algorithm(BaseConvolutionLayer<Dtype>::Algorithm::kPerImage);
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(ConvolutionLayerTest, GradientBatchedChunks1x1TwoBottoms) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> b0(3, 3, 3, 4), b1(3, 3, 3, 4), t0, t1;
  test::FillGaussian(&b0);
  test::FillGaussian(&b1);
  ConvolutionLayer<Dtype> layer(ConvParam(2, Geometry{1, 1}));
  layer.set_algorithm(BaseConvolutionLayer<Dtype>::Algorithm::kBatched);
  layer.set_max_buffer_bytes(1);
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&b0, &b1}, {&t0, &t1});
}

TYPED_TEST(ConvolutionLayerTest, Gradient3D) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom({1, 2, 3, 4, 3}), top;
  test::FillGaussian(&bottom);
  LayerParameter param;
  ConvolutionParameter* p = param.mutable_convolution_param();
  p->set_num_output(2);
  p->add_kernel_size(2);
  p->add_pad(1);
  p->add_stride(2);
  p->mutable_weight_filler()->set_type("gaussian");
  p->mutable_bias_filler()->set_type("gaussian");
  ConvolutionLayer<Dtype> layer(param);
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, {&bottom}, {&top});
}

TYPED_TEST(ConvolutionLayerTest, ConfigErrors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 4, 6, 6), top;
  auto expect_error = [&](const LayerParameter& param, const char* what) {
    ConvolutionLayer<Dtype> layer(param);
    EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ConfigError) << what;
  };
  LayerParameter p = ConvParam(0, Geometry{3, 3});
  expect_error(p, "num_output 0");
  Geometry grouped{3, 3};
  grouped.group = 2;
  expect_error(ConvParam(3, grouped), "num_output not divisible by group");
  p = ConvParam(2, Geometry{3, 3});
  p.mutable_convolution_param()->set_pad_h(static_cast<uint32_t>(-1));
  expect_error(p, "negative pad");
  p = ConvParam(2, Geometry{3, 3});
  p.mutable_convolution_param()->set_stride_w(0);
  expect_error(p, "zero stride");
  expect_error(ConvParam(2, Geometry{0, 3}), "zero kernel");
  p = ConvParam(2, Geometry{3, 3});
  p.mutable_convolution_param()->clear_kernel_w();
  expect_error(p, "kernel_h without kernel_w");
  p = ConvParam(2, Geometry{3, 3});
  p.mutable_convolution_param()->add_kernel_size(3);
  expect_error(p, "kernel_size and kernel_h/w");
  LayerParameter q;
  q.mutable_convolution_param()->set_num_output(2);
  expect_error(q, "no kernel");
  for (int k : {3, 3, 3}) q.mutable_convolution_param()->add_kernel_size(k);
  expect_error(q, "three kernel sizes for two spatial axes");
  q.mutable_convolution_param()->clear_kernel_size();
  q.mutable_convolution_param()->add_kernel_size(3);
  q.mutable_convolution_param()->add_dilation(0);
  expect_error(q, "zero dilation");
  p = ConvParam(2, Geometry{3, 3});
  p.mutable_convolution_param()->set_axis(4);
  expect_error(p, "axis out of range");
}

TYPED_TEST(ConvolutionLayerTest, ShapeErrors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> bottom(2, 3, 6, 6), top;
  {
    Geometry g{3, 3};
    g.group = 2;
    ConvolutionLayer<Dtype> layer(ConvParam(4, g));
    EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ShapeError)
        << "channels not divisible by group";
  }
  {
    ConvolutionLayer<Dtype> layer(ConvParam(4, Geometry{7, 3}));
    try {
      layer.SetUp({&bottom}, {&top});
      ADD_FAILURE() << "kernel taller than the image was accepted";
    } catch (const ShapeError& e) {
      EXPECT_NE(string(e.what()).find("kernel extent 7"), string::npos)
          << e.what();
    }
  }
  {
    Geometry g{4, 3};
    g.dilation_h = 2;
    g.pad_h = 1;
    // Dilated extent 7: fits 6 + 2 * 1 rows, not 6.
    ConvolutionLayer<Dtype> ok(ConvParam(4, g));
    EXPECT_NO_THROW(ok.SetUp({&bottom}, {&top}));
    g.pad_h = 0;
    ConvolutionLayer<Dtype> bad(ConvParam(4, g));
    EXPECT_THROW(bad.SetUp({&bottom}, {&top}), ShapeError);
  }
  {
    // Bottom channels change after setup.
    ConvolutionLayer<Dtype> layer(ConvParam(2, Geometry{3, 3}));
    layer.SetUp({&bottom}, {&top});
    Blob<Dtype> wrong(2, 4, 6, 6);
    try {
      layer.Forward({&wrong}, {&top});
      ADD_FAILURE() << "4-channel bottom accepted by 3-channel weights";
    } catch (const ShapeError& e) {
      EXPECT_NE(string(e.what()).find("2 3 3 3"), string::npos) << e.what();
      EXPECT_NE(string(e.what()).find("2 4 6 6"), string::npos) << e.what();
    }
  }
  {
    // Stored weights that do not fit the bottom.
    LayerParameter param = ConvParam(2, Geometry{3, 3});
    Blob<Dtype> w(2, 5, 3, 3), b({2});
    w.ToProto(param.add_blobs());
    b.ToProto(param.add_blobs());
    ConvolutionLayer<Dtype> layer(param);
    EXPECT_THROW(layer.SetUp({&bottom}, {&top}), ShapeError);
  }
  {
    Blob<Dtype> b0(2, 3, 6, 6), b1(2, 3, 6, 5), t0, t1;
    ConvolutionLayer<Dtype> layer(ConvParam(2, Geometry{3, 3}));
    EXPECT_THROW(layer.SetUp({&b0, &b1}, {&t0, &t1}), ShapeError);
  }
  {
    Blob<Dtype> flat({4, 3}), t;
    ConvolutionLayer<Dtype> layer(ConvParam(2, Geometry{1, 1}));
    EXPECT_THROW(layer.SetUp({&flat}, {&t}), ShapeError);
  }
}

}  // namespace
}  // namespace poseidon
