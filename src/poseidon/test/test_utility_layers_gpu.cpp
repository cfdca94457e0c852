// The utility layers on a GPU: each layer with a computing GPU path runs
// forward and backward in GPU mode and must (1) leave its results on the
// device (a CPU fallback would leave them on the host) and (2) agree with
// its CPU pass (test::ExpectCpuGpuAgree). The aliasing layers (Flatten,
// Reshape, single-input Concat) must copy nothing. Every test here skips,
// with the reason, where no GPU is usable; the GPU's arithmetic is checked
// on the CPU by test_utility_kernels.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gpu_agreement.hpp"
#include "poseidon/layer.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/syncedmem.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

LayerParameter Param(const char* type, int tops = 1) {
  LayerParameter p;
  p.set_type(type);
  for (int i = 0; i < tops; ++i) p.add_top("top" + std::to_string(i));
  return p;
}

template <typename Dtype>
std::unique_ptr<Blob<Dtype>> Gaussian(const vector<int>& shape) {
  auto blob = std::make_unique<Blob<Dtype>>(shape);
  test::FillGaussian(blob.get());
  return blob;
}

template <typename Dtype>
std::unique_ptr<Blob<Dtype>> Values(const vector<int>& shape,
                                    const vector<double>& values) {
  auto blob = std::make_unique<Blob<Dtype>>(shape);
  CHECK_EQ(blob->count(), static_cast<int>(values.size()));
  for (int i = 0; i < blob->count(); ++i) {
    blob->mutable_cpu_data()[i] = static_cast<Dtype>(values[i]);
  }
  return blob;
}

template <typename Dtype>
vector<Blob<Dtype>*> Raw(const vector<std::unique_ptr<Blob<Dtype>>>& blobs) {
  vector<Blob<Dtype>*> raw;
  for (const auto& b : blobs) raw.push_back(b.get());
  return raw;
}

// In GPU mode, runs the layer forward and backward from copies of
// `bottoms` and expects the tops' data (unless they alias a bottom), the
// requested bottom diffs and the parameter diffs to have been written on
// the device. Does nothing where no GPU is usable.
template <typename Dtype>
void ExpectResultsOnGpu(const LayerParameter& param,
                        const vector<Blob<Dtype>*>& bottoms,
                        vector<bool> propagate_down, bool tops_alias = false) {
  if (!test::GpuSkipReason().empty()) return;
  if (propagate_down.empty()) propagate_down.assign(bottoms.size(), true);
  Poseidon::set_mode(Poseidon::GPU);
  vector<std::unique_ptr<Blob<Dtype>>> bottom, top;
  for (Blob<Dtype>* b : bottoms) {
    bottom.emplace_back(new Blob<Dtype>());
    bottom.back()->CopyFrom(*b, false, true);
  }
  for (int i = 0; i < std::max(1, param.top_size()); ++i) {
    top.emplace_back(new Blob<Dtype>());
  }
  auto layer = LayerRegistry<Dtype>::CreateLayer(param);
  layer->SetUp(Raw(bottom), Raw(top));
  layer->Forward(Raw(bottom), Raw(top));
  for (size_t i = 0; i < top.size(); ++i) {
    if (!tops_alias) {
      EXPECT_EQ(top[i]->data()->head(), SyncedMemory::HEAD_AT_GPU)
          << param.type() << " top " << i << " was not written on the GPU";
    }
    math::set<Dtype>(Poseidon::GPU, top[i]->count(), Dtype(1),
                     top[i]->mutable_gpu_diff());
  }
  layer->Backward(Raw(top), propagate_down, Raw(bottom));
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    EXPECT_EQ(bottom[i]->diff()->head(), SyncedMemory::HEAD_AT_GPU)
        << param.type() << " bottom " << i
        << " diff was not written on the GPU";
  }
  for (size_t i = 0; i < layer->blobs().size(); ++i) {
    if (!layer->param_propagate_down(static_cast<int>(i))) continue;
    EXPECT_EQ(layer->blobs()[i]->diff()->head(), SyncedMemory::HEAD_AT_GPU)
        << param.type() << " param " << i << " diff was not written on the GPU";
  }
  Poseidon::set_mode(Poseidon::CPU);
}

template <typename Dtype>
class UtilityLayersGPUTest : public ::testing::Test {
 protected:
  UtilityLayersGPUTest() {
    Poseidon::set_mode(Poseidon::CPU);
    Poseidon::set_random_seed(1701);
  }
  ~UtilityLayersGPUTest() override { Poseidon::set_mode(Poseidon::CPU); }
  void SetUp() override {
    if (!test::GpuSkipReason().empty()) {
      GTEST_SKIP() << "GPU test skipped: " << test::GpuSkipReason();
    }
  }

  // Both checks on `param` with `bottoms`.
  void Check(const LayerParameter& param,
             const vector<std::unique_ptr<Blob<Dtype>>>& bottoms,
             const vector<bool>& propagate_down = {}, bool tops_alias = false) {
    ExpectResultsOnGpu<Dtype>(param, Raw(bottoms), propagate_down, tops_alias);
    test::ExpectCpuGpuAgree<Dtype>(param, Raw(bottoms), propagate_down);
  }
};
TYPED_TEST_SUITE(UtilityLayersGPUTest, test::TestDtypes);

TYPED_TEST(UtilityLayersGPUTest, ConcatAgreesWithCpu) {
  using Dtype = TypeParam;
  vector<std::unique_ptr<Blob<Dtype>>> bottoms;
  bottoms.push_back(Gaussian<Dtype>({2, 3, 4, 5}));
  bottoms.push_back(Gaussian<Dtype>({2, 5, 4, 5}));
  bottoms.push_back(Gaussian<Dtype>({2, 1, 4, 5}));
  LayerParameter last = Param("Concat");
  last.mutable_concat_param()->set_axis(-1);
  vector<std::unique_ptr<Blob<Dtype>>> by_width;
  by_width.push_back(Gaussian<Dtype>({2, 3, 4, 2}));
  by_width.push_back(Gaussian<Dtype>({2, 3, 4, 7}));
  this->Check(last, by_width, {true, false});
  this->Check(Param("Concat"), bottoms);
}

TYPED_TEST(UtilityLayersGPUTest, SliceAgreesWithCpu) {
  using Dtype = TypeParam;
  vector<std::unique_ptr<Blob<Dtype>>> bottoms;
  bottoms.push_back(Gaussian<Dtype>({3, 6, 4, 5}));
  LayerParameter points = Param("Slice", 3);
  points.mutable_slice_param()->set_axis(-2);
  points.mutable_slice_param()->add_slice_point(1);
  points.mutable_slice_param()->add_slice_point(3);
  this->Check(points, bottoms);
  this->Check(Param("Slice", 2), bottoms);
}

TYPED_TEST(UtilityLayersGPUTest, SplitAgreesWithCpu) {
  using Dtype = TypeParam;
  vector<std::unique_ptr<Blob<Dtype>>> bottoms;
  bottoms.push_back(Gaussian<Dtype>({4, 3, 5}));
  this->Check(Param("Split", 1), bottoms, {}, /*tops_alias=*/true);
  this->Check(Param("Split", 2), bottoms, {}, /*tops_alias=*/true);
  this->Check(Param("Split", 3), bottoms, {}, /*tops_alias=*/true);
}

TYPED_TEST(UtilityLayersGPUTest, CropAgreesWithCpu) {
  using Dtype = TypeParam;
  vector<std::unique_ptr<Blob<Dtype>>> bottoms;
  bottoms.push_back(Gaussian<Dtype>({2, 4, 7, 9}));
  bottoms.push_back(Gaussian<Dtype>({1, 3, 4, 5}));
  LayerParameter per_axis = Param("Crop");
  per_axis.mutable_crop_param()->set_axis(1);
  for (int o : {1, 2, 3}) per_axis.mutable_crop_param()->add_offset(o);
  this->Check(per_axis, bottoms, {true, false});
  LayerParameter all = Param("Crop");
  all.mutable_crop_param()->set_axis(0);
  all.mutable_crop_param()->add_offset(1);
  this->Check(all, bottoms, {true, true});
}

TYPED_TEST(UtilityLayersGPUTest, TileAgreesWithCpu) {
  using Dtype = TypeParam;
  vector<std::unique_ptr<Blob<Dtype>>> bottoms;
  bottoms.push_back(Gaussian<Dtype>({2, 3, 4}));
  for (int axis : {0, 1, -1}) {
    LayerParameter p = Param("Tile");
    p.mutable_tile_param()->set_axis(axis);
    p.mutable_tile_param()->set_tiles(3);
    this->Check(p, bottoms);
  }
}

TYPED_TEST(UtilityLayersGPUTest, BatchReindexAgreesWithCpu) {
  using Dtype = TypeParam;
  vector<std::unique_ptr<Blob<Dtype>>> bottoms;
  bottoms.push_back(Gaussian<Dtype>({5, 2, 3}));
  bottoms.push_back(Values<Dtype>({7}, {4, 0, 4, 2, 4, 0, 1}));
  this->Check(Param("BatchReindex"), bottoms, {true, false});
}

TYPED_TEST(UtilityLayersGPUTest, FilterAgreesWithCpu) {
  using Dtype = TypeParam;
  vector<std::unique_ptr<Blob<Dtype>>> bottoms;
  bottoms.push_back(Gaussian<Dtype>({6, 2, 3}));
  bottoms.push_back(Gaussian<Dtype>({6}));
  bottoms.push_back(Values<Dtype>({6}, {0, 1, 1, 0, 0, 1}));
  this->Check(Param("Filter", 2), bottoms, {true, true, false});
}

TYPED_TEST(UtilityLayersGPUTest, EmbedAgreesWithCpu) {
  using Dtype = TypeParam;
  vector<std::unique_ptr<Blob<Dtype>>> bottoms;
  bottoms.push_back(Values<Dtype>({2, 4}, {0, 4, 2, 4, 1, 0, 4, 4}));
  for (bool bias : {true, false}) {
    LayerParameter p = Param("Embed");
    EmbedParameter* e = p.mutable_embed_param();
    e->set_num_output(6);
    e->set_input_dim(5);
    e->set_bias_term(bias);
    e->mutable_weight_filler()->set_type("gaussian");
    e->mutable_bias_filler()->set_type("gaussian");
    this->Check(p, bottoms, {false});
  }
}

TYPED_TEST(UtilityLayersGPUTest, ReductionAgreesWithCpu) {
  using Dtype = TypeParam;
  vector<std::unique_ptr<Blob<Dtype>>> bottoms;
  bottoms.push_back(Gaussian<Dtype>({3, 4, 50}));
  using RP = ReductionParameter;
  for (RP::ReductionOp op : {RP::SUM, RP::ASUM, RP::SUMSQ, RP::MEAN}) {
    for (int axis : {0, 1, -1}) {
      LayerParameter p = Param("Reduction");
      p.mutable_reduction_param()->set_operation(op);
      p.mutable_reduction_param()->set_axis(axis);
      p.mutable_reduction_param()->set_coeff(1.5);
      this->Check(p, bottoms);
    }
  }
}

TYPED_TEST(UtilityLayersGPUTest, ParameterAgreesWithCpu) {
  using Dtype = TypeParam;
  LayerParameter p = Param("Parameter");
  BlobShape* shape = p.mutable_parameter_param()->mutable_shape();
  for (int d : {3, 2, 4}) shape->add_dim(d);
  // Weights given inline, so the top is not all zeros.
  Blob<Dtype> w({3, 2, 4});
  test::FillGaussian(&w);
  w.ToProto(p.add_blobs());
  vector<std::unique_ptr<Blob<Dtype>>> none;
  this->Check(p, none);
}

TYPED_TEST(UtilityLayersGPUTest, ArgMaxStaysOnCpuAndAgrees) {
  using Dtype = TypeParam;
  // The forward is the CPU pass (no GPU ArgMax, as in Caffe); the backward
  // has nothing to do and must not fall back or fail.
  vector<std::unique_ptr<Blob<Dtype>>> bottoms;
  bottoms.push_back(Gaussian<Dtype>({4, 3, 5}));
  LayerParameter p = Param("ArgMax");
  p.mutable_argmax_param()->set_top_k(2);
  p.mutable_argmax_param()->set_out_max_val(true);
  test::ExpectCpuGpuAgree<Dtype>(p, Raw(bottoms), {false});
}

TYPED_TEST(UtilityLayersGPUTest, SilenceZeroesDiffsOnGpu) {
  using Dtype = TypeParam;
  Poseidon::set_mode(Poseidon::GPU);
  Blob<Dtype> a({2, 3}), b({4});
  math::set<Dtype>(Poseidon::GPU, 6, Dtype(5), a.mutable_gpu_diff());
  math::set<Dtype>(Poseidon::GPU, 4, Dtype(7), b.mutable_gpu_diff());
  vector<Blob<Dtype>*> bottom = {&a, &b}, no_top;
  auto layer = LayerRegistry<Dtype>::CreateLayer(Param("Silence", 0));
  layer->SetUp(bottom, no_top);
  layer->Forward(bottom, no_top);
  layer->Backward(no_top, {true, false}, bottom);
  EXPECT_EQ(a.diff()->head(), SyncedMemory::HEAD_AT_GPU);
  EXPECT_EQ(b.diff()->head(), SyncedMemory::HEAD_AT_GPU);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a.cpu_diff()[i], Dtype(0));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b.cpu_diff()[i], Dtype(7));
}

TYPED_TEST(UtilityLayersGPUTest, AliasingLayersCopyNothing) {
  using Dtype = TypeParam;
  Poseidon::set_mode(Poseidon::GPU);
  LayerParameter flatten = Param("Flatten");
  LayerParameter reshape = Param("Reshape");
  BlobShape* shape = reshape.mutable_reshape_param()->mutable_shape();
  for (int d : {0, -1}) shape->add_dim(d);
  LayerParameter concat = Param("Concat");
  LayerParameter slice = Param("Slice");
  for (const LayerParameter& p : {flatten, reshape, concat, slice}) {
    Blob<Dtype> x({2, 3, 4}), top;
    math::set<Dtype>(Poseidon::GPU, x.count(), Dtype(2), x.mutable_gpu_data());
    vector<Blob<Dtype>*> bottom = {&x}, tops = {&top};
    auto layer = LayerRegistry<Dtype>::CreateLayer(p);
    layer->SetUp(bottom, tops);
    layer->Forward(bottom, tops);
    EXPECT_EQ(top.data().get(), x.data().get()) << p.type();
    EXPECT_EQ(x.data()->head(), SyncedMemory::HEAD_AT_GPU) << p.type();
    math::set<Dtype>(Poseidon::GPU, top.count(), Dtype(3),
                     top.mutable_gpu_diff());
    layer->Backward(tops, {true}, bottom);
    EXPECT_EQ(top.diff().get(), x.diff().get()) << p.type();
    EXPECT_EQ(x.diff()->head(), SyncedMemory::HEAD_AT_GPU) << p.type();
  }
}

TYPED_TEST(UtilityLayersGPUTest, DummyDataWritesConstantTopsOnce) {
  using Dtype = TypeParam;
  Poseidon::set_mode(Poseidon::GPU);
  LayerParameter p = Param("DummyData", 2);
  DummyDataParameter* d = p.mutable_dummy_data_param();
  d->add_shape()->add_dim(5);
  d->add_data_filler()->set_type("constant");
  d->mutable_data_filler(0)->set_value(3);
  d->add_data_filler()->set_type("gaussian");
  Blob<Dtype> constant, noise;
  vector<Blob<Dtype>*> no_bottom, tops = {&constant, &noise};
  auto layer = LayerRegistry<Dtype>::CreateLayer(p);
  layer->SetUp(no_bottom, tops);
  for (int pass = 0; pass < 3; ++pass) {
    layer->Forward(no_bottom, tops);
    constant.gpu_data();  // a consumer reads both on the device
    noise.gpu_data();
    // After the first upload the constant top is never written again; the
    // refilled one is written on the host every pass.
    EXPECT_EQ(constant.data()->head(), SyncedMemory::SYNCED) << pass;
    layer->Forward(no_bottom, tops);
    EXPECT_EQ(constant.data()->head(), SyncedMemory::SYNCED) << pass;
    EXPECT_EQ(noise.data()->head(), SyncedMemory::HEAD_AT_CPU) << pass;
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(constant.cpu_data()[i], Dtype(3));
}

}  // namespace
}  // namespace poseidon
