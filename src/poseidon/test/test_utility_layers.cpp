// Utility layers: registration of all eleven, then Silence, Parameter,
// ArgMax, Slice, Tile and Reduction: hand-computed forwards, gradient checks,
// edge cases and the errors at SetUp. Crop, Filter, BatchReindex and Embed
// are in test_indexing_layers.cpp, MVN in test_mvn_layer.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layers/argmax_layer.hpp"
#include "poseidon/layers/parameter_layer.hpp"
#include "poseidon/layers/reduction_layer.hpp"
#include "poseidon/layers/silence_layer.hpp"
#include "poseidon/layers/slice_layer.hpp"
#include "poseidon/layers/tile_layer.hpp"
#include "test_util.hpp"
#include "utility_layer_test.hpp"

namespace poseidon {
namespace {

using test::ExpectError;
using test::Param;
using test::SetIota;
using test::SetValues;
using test::Unravel;
using test::UtilityLayerTest;

// ---------------------------------------------------------------- Registry

template <typename TypeParam>
class UtilityLayerRegistryTest : public UtilityLayerTest<TypeParam> {};
TYPED_TEST_SUITE(UtilityLayerRegistryTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(UtilityLayerRegistryTest, EveryTypeIsRegistered) {
  using Dtype = typename TypeParam::Dtype;
  for (const char* type :
       {"Silence", "Parameter", "ArgMax", "Slice", "Tile", "Reduction", "Crop",
        "Filter", "BatchReindex", "Embed", "MVN"}) {
    ASSERT_TRUE(LayerRegistry<Dtype>::Has(type)) << type;
    auto layer = LayerRegistry<Dtype>::CreateLayer(Param(type));
    EXPECT_STREQ(layer->type(), type);
  }
}

// ----------------------------------------------------------------- Silence

template <typename TypeParam>
class SilenceLayerTest : public UtilityLayerTest<TypeParam> {};
TYPED_TEST_SUITE(SilenceLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(SilenceLayerTest, ConsumesAndZeroesRequestedDiffs) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> a({2, 3}), b({4});
  test::FillGaussian(&a);
  cpu_set(a.count(), Dtype(5), a.mutable_cpu_diff());
  cpu_set(b.count(), Dtype(7), b.mutable_cpu_diff());
  vector<Blob<Dtype>*> bottom = {&a, &b};
  vector<Blob<Dtype>*> no_top;
  SilenceLayer<Dtype> layer(Param("Silence"));
  layer.SetUp(bottom, no_top);
  EXPECT_EQ(layer.Forward(bottom, no_top), Dtype(0));
  layer.Backward(no_top, {true, false}, bottom);
  for (int i = 0; i < a.count(); ++i) EXPECT_EQ(a.cpu_diff()[i], Dtype(0));
  for (int i = 0; i < b.count(); ++i) EXPECT_EQ(b.cpu_diff()[i], Dtype(7));

  SilenceLayer<Dtype> with_top(Param("Silence"));
  EXPECT_THROW(with_top.SetUp(bottom, this->top_vec_), ConfigError);
}

TYPED_TEST(SilenceLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> a({2, 3, 2});
  test::FillGaussian(&a);
  vector<Blob<Dtype>*> bottom = {&a};
  vector<Blob<Dtype>*> no_top;
  SilenceLayer<Dtype> layer(Param("Silence"));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, bottom, no_top);
}

// --------------------------------------------------------------- Parameter

template <typename TypeParam>
class ParameterLayerTest : public UtilityLayerTest<TypeParam> {
 protected:
  static LayerParameter ShapeParam(std::initializer_list<int64_t> dims) {
    LayerParameter p = Param("Parameter");
    BlobShape* shape = p.mutable_parameter_param()->mutable_shape();
    for (int64_t d : dims) shape->add_dim(d);
    return p;
  }
};
TYPED_TEST_SUITE(ParameterLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(ParameterLayerTest, TopIsTheBlobAndDiffAccumulates) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> no_bottom;
  ParameterLayer<Dtype> layer(this->ShapeParam({2, 3}));
  layer.SetUp(no_bottom, this->top_vec_);
  ASSERT_EQ(layer.blobs().size(), 1u);
  Blob<Dtype>& w = *layer.blobs()[0];
  EXPECT_EQ(w.shape(), (vector<int>{2, 3}));
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 3}));
  EXPECT_EQ(w.asum_data(), Dtype(0));  // no filler: starts at zero
  SetValues(&w, {1, 2, 3, 4, 5, 6});
  layer.Forward(no_bottom, this->top_vec_);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(this->top_.cpu_data()[i], i + 1);

  cpu_set(w.count(), Dtype(1), w.mutable_cpu_diff());
  for (int i = 0; i < 6; ++i) this->top_.mutable_cpu_diff()[i] = Dtype(10 * i);
  layer.Backward(this->top_vec_, {}, no_bottom);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(w.cpu_diff()[i], Dtype(1 + 10 * i));
  layer.set_param_propagate_down(0, false);
  layer.Backward(this->top_vec_, {}, no_bottom);
  EXPECT_EQ(w.cpu_diff()[5], Dtype(51));
}

TYPED_TEST(ParameterLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> no_bottom;
  ParameterLayer<Dtype> layer(this->ShapeParam({3, 2, 2}));
  layer.SetUp(no_bottom, this->top_vec_);
  test::FillGaussian(layer.blobs()[0].get());
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradientAfterSetUp(&layer, no_bottom, this->top_vec_, -1);
}

TYPED_TEST(ParameterLayerTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> no_bottom;
  ParameterLayer<Dtype> no_shape(Param("Parameter"));
  ExpectError<ConfigError>([&] { no_shape.SetUp(no_bottom, this->top_vec_); },
                           {"parameter_param.shape"});
  ParameterLayer<Dtype> negative(this->ShapeParam({2, -3}));
  ExpectError<ConfigError>([&] { negative.SetUp(no_bottom, this->top_vec_); },
                           {"parameter_param.shape", "{2 -3}", "-3"});
  // Weights given inline must match the declared shape.
  LayerParameter p = this->ShapeParam({2, 3});
  BlobProto* stored = p.add_blobs();
  stored->mutable_shape()->add_dim(3);
  for (int i = 0; i < 3; ++i) stored->add_data(i);
  ParameterLayer<Dtype> mismatched(p);
  ExpectError<ShapeError>([&] { mismatched.SetUp(no_bottom, this->top_vec_); },
                          {"3 (3)", "{2 3}"});
}

// ------------------------------------------------------------------ ArgMax

template <typename TypeParam>
class ArgMaxLayerTest : public UtilityLayerTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  ArgMaxLayerTest() {
    // Row 0 ties its maximum (5 at 1 and 3); equal values rank the higher
    // index first.
    SetValues(&rows_, {1, 5, 3, 5, 2, -1, -3, 0, -2, -5});
  }
  static LayerParameter ArgParam(int top_k, bool out_max_val) {
    LayerParameter p = Param("ArgMax");
    p.mutable_argmax_param()->set_top_k(top_k);
    p.mutable_argmax_param()->set_out_max_val(out_max_val);
    return p;
  }
  static LayerParameter AxisParam(int top_k, bool out_max_val, int axis) {
    LayerParameter p = ArgParam(top_k, out_max_val);
    p.mutable_argmax_param()->set_axis(axis);
    return p;
  }
  void ExpectTop(std::initializer_list<double> values) {
    ASSERT_EQ(static_cast<int>(values.size()), top_.count());
    int i = 0;
    for (double v : values) {
      EXPECT_EQ(top_.cpu_data()[i], Dtype(v)) << "top element " << i;
      ++i;
    }
  }
  Blob<Dtype> rows_{2, 5};
  using UtilityLayerTest<TypeParam>::top_;
};
TYPED_TEST_SUITE(ArgMaxLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(ArgMaxLayerTest, PerItemIndicesAndValues) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->rows_};
  ArgMaxLayer<Dtype> top1(Param("ArgMax"));
  top1.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 1, 1}));
  top1.Forward(bottom, this->top_vec_);
  this->ExpectTop({3, 2});

  ArgMaxLayer<Dtype> top3(this->ArgParam(3, true));
  top3.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 2, 3}));
  top3.Forward(bottom, this->top_vec_);
  this->ExpectTop({3, 1, 2, 5, 5, 3, 2, 0, 3, 0, -1, -2});
}

TYPED_TEST(ArgMaxLayerTest, FlattensEachItem) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> x({2, 3, 2, 2});
  SetIota(&x);
  x.mutable_cpu_data()[5] = 100;    // item 0, flat position 5
  x.mutable_cpu_data()[12] = 1000;  // item 1, flat position 0
  vector<Blob<Dtype>*> bottom = {&x};
  ArgMaxLayer<Dtype> layer(this->ArgParam(2, false));
  layer.SetUp(bottom, this->top_vec_);
  // As many axes as the bottom (at least 3), padded with 1s.
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 1, 2, 1}));
  layer.Forward(bottom, this->top_vec_);
  this->ExpectTop({5, 11, 0, 11});
}

TYPED_TEST(ArgMaxLayerTest, AlongAxisMatchesNaiveReference) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> x({2, 4, 3});
  test::FillGaussian(&x);
  vector<Blob<Dtype>*> bottom = {&x};
  for (int axis : {1, -1}) {
    const int a = axis < 0 ? axis + 3 : axis;
    for (bool values : {false, true}) {
      ArgMaxLayer<Dtype> layer(this->AxisParam(2, values, axis));
      layer.SetUp(bottom, this->top_vec_);
      vector<int> expected_shape = x.shape();
      expected_shape[a] = 2;
      ASSERT_EQ(this->top_.shape(), expected_shape);
      layer.Forward(bottom, this->top_vec_);
      for (int i = 0; i < this->top_.count(); ++i) {
        vector<int> idx = Unravel(expected_shape, i);
        const int k = idx[a];
        // Rank of each candidate along the axis, by brute force.
        vector<std::pair<Dtype, int>> line;
        for (int j = 0; j < x.shape(a); ++j) {
          idx[a] = j;
          line.push_back({x.data_at(idx), j});
        }
        std::sort(line.rbegin(), line.rend());
        const Dtype want = values ? line[k].first : Dtype(line[k].second);
        EXPECT_EQ(this->top_.cpu_data()[i], want)
            << "axis " << axis << " values " << values << " element " << i;
      }
    }
  }
}

TYPED_TEST(ArgMaxLayerTest, ErrorsAndNoGradient) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->rows_};
  ArgMaxLayer<Dtype> zero_k(this->ArgParam(0, false));
  ExpectError<ConfigError>([&] { zero_k.SetUp(bottom, this->top_vec_); },
                           {"top_k"});
  ArgMaxLayer<Dtype> big_k(this->ArgParam(6, false));
  ExpectError<ConfigError>([&] { big_k.SetUp(bottom, this->top_vec_); },
                           {"top_k 6", "2 5 (10)"});
  ArgMaxLayer<Dtype> big_axis_k(this->AxisParam(3, false, 0));
  ExpectError<ConfigError>([&] { big_axis_k.SetUp(bottom, this->top_vec_); },
                           {"top_k 3", "axis 0"});
  ArgMaxLayer<Dtype> bad_axis(this->AxisParam(1, false, 2));
  ExpectError<ConfigError>([&] { bad_axis.SetUp(bottom, this->top_vec_); },
                           {"argmax_param.axis 2", "num_axes 2"});
  ArgMaxLayer<Dtype> layer(Param("ArgMax"));
  layer.SetUp(bottom, this->top_vec_);
  EXPECT_FALSE(layer.AllowForceBackward(0));
  EXPECT_THROW(layer.Backward(this->top_vec_, {true}, bottom), ConfigError);
  layer.Backward(this->top_vec_, {false}, bottom);
}

// ------------------------------------------------------------------- Slice

template <typename TypeParam>
class SliceLayerTest : public UtilityLayerTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  SliceLayerTest() {
    SetIota(&x_);
    for (auto& t : tops_) top_ptrs_.push_back(&t);
  }
  static LayerParameter SliceParam(int axis,
                                   std::initializer_list<int> points) {
    LayerParameter p = Param("Slice");
    p.mutable_slice_param()->set_axis(axis);
    for (int point : points) p.mutable_slice_param()->add_slice_point(point);
    return p;
  }
  // Every element of each top equals the bottom's element at the same index
  // shifted along `axis` by the lengths of the tops before it.
  void ExpectSlices(const vector<Blob<Dtype>*>& tops, int axis) {
    int offset = 0;
    for (const Blob<Dtype>* t : tops) {
      for (int i = 0; i < t->count(); ++i) {
        vector<int> idx = Unravel(t->shape(), i);
        idx[axis] += offset;
        ASSERT_EQ(t->cpu_data()[i], x_.data_at(idx)) << "element " << i;
      }
      offset += t->shape(axis);
    }
    EXPECT_EQ(offset, x_.shape(axis));
  }
  Blob<Dtype> x_{2, 6, 3};
  Blob<Dtype> tops_[3];
  vector<Blob<Dtype>*> top_ptrs_;
};
TYPED_TEST_SUITE(SliceLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(SliceLayerTest, EqualSplitOnChannels) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->x_};
  SliceLayer<Dtype> layer(Param("Slice"));
  layer.SetUp(bottom, this->top_ptrs_);
  for (const Blob<Dtype>* t : this->top_ptrs_) {
    EXPECT_EQ(t->shape(), (vector<int>{2, 2, 3}));
  }
  layer.Forward(bottom, this->top_ptrs_);
  this->ExpectSlices(this->top_ptrs_, 1);
  // Hand-checked corner: top[2][1][0][2] is x[1][4][2] = 18 + 12 + 2.
  EXPECT_EQ(this->tops_[2].data_at({1, 0, 2}), Dtype(32));
}

TYPED_TEST(SliceLayerTest, SlicePointsAndNegativeAxis) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->x_};
  SliceLayer<Dtype> layer(this->SliceParam(1, {1, 4}));
  layer.SetUp(bottom, this->top_ptrs_);
  EXPECT_EQ(this->tops_[0].shape(), (vector<int>{2, 1, 3}));
  EXPECT_EQ(this->tops_[1].shape(), (vector<int>{2, 3, 3}));
  EXPECT_EQ(this->tops_[2].shape(), (vector<int>{2, 2, 3}));
  layer.Forward(bottom, this->top_ptrs_);
  this->ExpectSlices(this->top_ptrs_, 1);

  vector<Blob<Dtype>*> two = {&this->tops_[0], &this->tops_[1]};
  SliceLayer<Dtype> last(this->SliceParam(-1, {2}));
  last.SetUp(bottom, two);
  EXPECT_EQ(this->tops_[0].shape(), (vector<int>{2, 6, 2}));
  EXPECT_EQ(this->tops_[1].shape(), (vector<int>{2, 6, 1}));
  last.Forward(bottom, two);
  this->ExpectSlices(two, 2);
}

TYPED_TEST(SliceLayerTest, LegacySliceDimAndSingleTop) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->x_};
  vector<Blob<Dtype>*> two = {&this->tops_[0], &this->tops_[1]};
  LayerParameter p = Param("Slice");
  p.mutable_slice_param()->set_slice_dim(0);
  SliceLayer<Dtype> legacy(p);
  legacy.SetUp(bottom, two);
  EXPECT_EQ(this->tops_[0].shape(), (vector<int>{1, 6, 3}));
  legacy.Forward(bottom, two);
  this->ExpectSlices(two, 0);

  SliceLayer<Dtype> single(Param("Slice"));
  single.SetUp(bottom, this->top_vec_);
  single.Forward(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.cpu_data(), this->x_.cpu_data());
  EXPECT_EQ(this->top_.cpu_diff(), this->x_.cpu_diff());
}

TYPED_TEST(SliceLayerTest, BackwardReassembles) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->x_};
  SliceLayer<Dtype> layer(this->SliceParam(1, {2, 5}));
  layer.SetUp(bottom, this->top_ptrs_);
  layer.Forward(bottom, this->top_ptrs_);
  for (Blob<Dtype>* t : this->top_ptrs_) {
    cpu_copy(t->count(), t->cpu_data(), t->mutable_cpu_diff());
  }
  layer.Backward(this->top_ptrs_, {true}, bottom);
  for (int i = 0; i < this->x_.count(); ++i) {
    EXPECT_EQ(this->x_.cpu_diff()[i], Dtype(i));
  }
}

TYPED_TEST(SliceLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  test::FillGaussian(&this->x_);
  vector<Blob<Dtype>*> bottom = {&this->x_};
  SliceLayer<Dtype> layer(this->SliceParam(1, {1, 3}));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, bottom, this->top_ptrs_);
  vector<Blob<Dtype>*> two = {&this->tops_[0], &this->tops_[1]};
  SliceLayer<Dtype> on_num(this->SliceParam(0, {}));
  checker.CheckGradient(&on_num, bottom, two);
}

TYPED_TEST(SliceLayerTest, BadSlicePointsNameThemselves) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->x_};
  vector<Blob<Dtype>*>& tops = this->top_ptrs_;
  SliceLayer<Dtype> unordered(this->SliceParam(1, {4, 1}));
  ExpectError<ConfigError>([&] { unordered.SetUp(bottom, tops); },
                           {"slice_point {4 1}", "not strictly increasing"});
  SliceLayer<Dtype> repeated(this->SliceParam(1, {2, 2}));
  EXPECT_THROW(repeated.SetUp(bottom, tops), ConfigError);
  SliceLayer<Dtype> too_far(this->SliceParam(1, {2, 6}));
  ExpectError<ConfigError>([&] { too_far.SetUp(bottom, tops); },
                           {"slice_point {2 6}", "point 6", "2 6 3 (36)"});
  SliceLayer<Dtype> zero(this->SliceParam(1, {0, 3}));
  EXPECT_THROW(zero.SetUp(bottom, tops), ConfigError);
  SliceLayer<Dtype> count(this->SliceParam(1, {2}));
  ExpectError<ConfigError>([&] { count.SetUp(bottom, tops); },
                           {"1 points", "3 tops need 2"});
  vector<Blob<Dtype>*> four = tops;
  four.push_back(&this->top_);
  SliceLayer<Dtype> uneven(Param("Slice"));
  ExpectError<ShapeError>([&] { uneven.SetUp(bottom, four); },
                          {"4 equal pieces", "dimension 6"});
  SliceLayer<Dtype> bad_axis(this->SliceParam(3, {}));
  ExpectError<ConfigError>([&] { bad_axis.SetUp(bottom, tops); },
                           {"slice_param.axis 3", "num_axes 3"});
  LayerParameter both = this->SliceParam(1, {});
  both.mutable_slice_param()->set_slice_dim(1);
  SliceLayer<Dtype> both_layer(both);
  EXPECT_THROW(both_layer.SetUp(bottom, tops), ConfigError);
}

// -------------------------------------------------------------------- Tile

template <typename TypeParam>
class TileLayerTest : public UtilityLayerTest<TypeParam> {
 protected:
  static LayerParameter TileParam(int axis, int tiles) {
    LayerParameter p = Param("Tile");
    p.mutable_tile_param()->set_axis(axis);
    p.mutable_tile_param()->set_tiles(tiles);
    return p;
  }
};
TYPED_TEST_SUITE(TileLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(TileLayerTest, TilesWholeBlocks) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> x({2, 3});
  SetValues(&x, {1, 2, 3, 4, 5, 6});
  vector<Blob<Dtype>*> bottom = {&x};
  TileLayer<Dtype> cols(this->TileParam(1, 2));
  cols.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 6}));
  cols.Forward(bottom, this->top_vec_);
  const Dtype by_cols[] = {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(this->top_.cpu_data()[i], by_cols[i]);

  TileLayer<Dtype> rows(this->TileParam(0, 3));
  rows.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{6, 3}));
  rows.Forward(bottom, this->top_vec_);
  for (int i = 0; i < 18; ++i) {
    EXPECT_EQ(this->top_.cpu_data()[i], Dtype(i % 6 + 1)) << i;
  }
}

TYPED_TEST(TileLayerTest, MiddleAxisMatchesIndexMap) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> x({2, 3, 2});
  test::FillGaussian(&x);
  vector<Blob<Dtype>*> bottom = {&x};
  TileLayer<Dtype> layer(this->TileParam(-2, 3));
  layer.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 9, 2}));
  layer.Forward(bottom, this->top_vec_);
  for (int i = 0; i < this->top_.count(); ++i) {
    vector<int> idx = Unravel(this->top_.shape(), i);
    idx[1] %= 3;
    EXPECT_EQ(this->top_.cpu_data()[i], x.data_at(idx)) << i;
  }
}

TYPED_TEST(TileLayerTest, BackwardSumsCopies) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> x({2, 2});
  vector<Blob<Dtype>*> bottom = {&x};
  TileLayer<Dtype> layer(this->TileParam(1, 3));
  layer.SetUp(bottom, this->top_vec_);
  layer.Forward(bottom, this->top_vec_);
  SetIota(&this->top_);
  cpu_copy(12, this->top_.cpu_data(), this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true}, bottom);
  // Row 0 of the top diff is 0..5: x diff [0+2+4, 1+3+5]; row 1 adds 6 each.
  const Dtype want[] = {6, 9, 24, 27};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(x.cpu_diff()[i], want[i]);
}

TYPED_TEST(TileLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> x({2, 3, 2});
  test::FillGaussian(&x);
  vector<Blob<Dtype>*> bottom = {&x};
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  TileLayer<Dtype> middle(this->TileParam(1, 3));
  checker.CheckGradient(&middle, bottom, this->top_vec_);
  TileLayer<Dtype> last(this->TileParam(-1, 2));
  checker.CheckGradient(&last, bottom, this->top_vec_);
}

TYPED_TEST(TileLayerTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> x({2, 3});
  vector<Blob<Dtype>*> bottom = {&x};
  TileLayer<Dtype> no_tiles(Param("Tile"));
  ExpectError<ConfigError>([&] { no_tiles.SetUp(bottom, this->top_vec_); },
                           {"tile_param.tiles"});
  TileLayer<Dtype> zero(this->TileParam(1, 0));
  ExpectError<ConfigError>([&] { zero.SetUp(bottom, this->top_vec_); },
                           {"tile_param.tiles", "0"});
  TileLayer<Dtype> bad_axis(this->TileParam(-3, 2));
  ExpectError<ConfigError>([&] { bad_axis.SetUp(bottom, this->top_vec_); },
                           {"tile_param.axis -3", "2 3 (6)"});
}

// --------------------------------------------------------------- Reduction

template <typename TypeParam>
class ReductionLayerTest : public UtilityLayerTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  ReductionLayerTest() { SetValues(&x_, {1, -2, 3, 0, 4, -1}); }
  static LayerParameter ReduceParam(ReductionParameter::ReductionOp op,
                                    int axis, float coeff = 1) {
    LayerParameter p = Param("Reduction");
    p.mutable_reduction_param()->set_operation(op);
    p.mutable_reduction_param()->set_axis(axis);
    p.mutable_reduction_param()->set_coeff(coeff);
    return p;
  }
  // Forward of x_ reduced from axis 1 with `op` and `coeff`.
  vector<Dtype> Reduce(ReductionParameter::ReductionOp op, float coeff) {
    vector<Blob<Dtype>*> bottom = {&x_};
    ReductionLayer<Dtype> layer(ReduceParam(op, 1, coeff));
    layer.SetUp(bottom, this->top_vec_);
    EXPECT_EQ(this->top_.shape(), vector<int>{2});
    layer.Forward(bottom, this->top_vec_);
    return {this->top_.cpu_data()[0], this->top_.cpu_data()[1]};
  }
  // x_'s diff after a Backward from top diff {1, -1} with `op` and `coeff`.
  vector<Dtype> ReduceBackward(ReductionParameter::ReductionOp op,
                               float coeff) {
    vector<Blob<Dtype>*> bottom = {&x_};
    ReductionLayer<Dtype> layer(ReduceParam(op, 1, coeff));
    layer.SetUp(bottom, this->top_vec_);
    layer.Forward(bottom, this->top_vec_);
    this->top_.mutable_cpu_diff()[0] = 1;
    this->top_.mutable_cpu_diff()[1] = -1;
    layer.Backward(this->top_vec_, {true}, bottom);
    return vector<Dtype>(x_.cpu_diff(), x_.cpu_diff() + 6);
  }
  Blob<Dtype> x_{2, 3};  // [[1, -2, 3], [0, 4, -1]]
};
TYPED_TEST_SUITE(ReductionLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(ReductionLayerTest, EachOperationByHand) {
  using Dtype = typename TypeParam::Dtype;
  using RP = ReductionParameter;
  EXPECT_EQ(this->Reduce(RP::SUM, 1), (vector<Dtype>{2, 3}));
  EXPECT_EQ(this->Reduce(RP::SUM, 2), (vector<Dtype>{4, 6}));
  EXPECT_EQ(this->Reduce(RP::ASUM, 1), (vector<Dtype>{6, 5}));
  EXPECT_EQ(this->Reduce(RP::SUMSQ, 0.5), (vector<Dtype>{7, 8.5}));
  const vector<Dtype> mean = this->Reduce(RP::MEAN, 3);
  EXPECT_NEAR(mean[0], 2, 1e-6);
  EXPECT_NEAR(mean[1], 3, 1e-6);
}

TYPED_TEST(ReductionLayerTest, BackwardByHand) {
  using Dtype = typename TypeParam::Dtype;
  using RP = ReductionParameter;
  EXPECT_EQ(this->ReduceBackward(RP::SUM, 2),
            (vector<Dtype>{2, 2, 2, -2, -2, -2}));
  // sign(0) = 0.
  EXPECT_EQ(this->ReduceBackward(RP::ASUM, 1),
            (vector<Dtype>{1, -1, 1, 0, -1, 1}));
  EXPECT_EQ(this->ReduceBackward(RP::SUMSQ, 1),
            (vector<Dtype>{2, -4, 6, 0, -8, 2}));
  const vector<Dtype> mean = this->ReduceBackward(RP::MEAN, 3);
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(mean[i], i < 3 ? 1 : -1, 1e-6);
}

TYPED_TEST(ReductionLayerTest, AxisZeroGivesScalarAndLastAxis) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->x_};
  ReductionLayer<Dtype> all(Param("Reduction"));  // SUM from axis 0
  all.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.num_axes(), 0);
  EXPECT_EQ(this->top_.count(), 1);
  all.Forward(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.cpu_data()[0], Dtype(5));

  Blob<Dtype> y({2, 3, 4});
  SetIota(&y);
  bottom = {&y};
  ReductionLayer<Dtype> last(this->ReduceParam(ReductionParameter::MEAN, -1));
  last.SetUp(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{2, 3}));
  last.Forward(bottom, this->top_vec_);
  for (int i = 0; i < 6; ++i) {
    EXPECT_NEAR(this->top_.cpu_data()[i], 4 * i + 1.5, 1e-5) << i;
  }
}

TYPED_TEST(ReductionLayerTest, EmptyReductionIsZero) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> empty({3, 0});
  vector<Blob<Dtype>*> bottom = {&empty};
  ReductionLayer<Dtype> layer(this->ReduceParam(ReductionParameter::MEAN, 1));
  layer.SetUp(bottom, this->top_vec_);
  layer.Forward(bottom, this->top_vec_);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(this->top_.cpu_data()[i], Dtype(0));
  layer.Backward(this->top_vec_, {true}, bottom);
}

TYPED_TEST(ReductionLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  using RP = ReductionParameter;
  Blob<Dtype> x({2, 3, 4});
  test::FillGaussian(&x);
  vector<Blob<Dtype>*> bottom = {&x};
  for (RP::ReductionOp op : {RP::SUM, RP::ASUM, RP::SUMSQ, RP::MEAN}) {
    for (int axis : {0, 1, -1}) {
      ReductionLayer<Dtype> layer(this->ReduceParam(op, axis, 1.5));
      // ASUM has a kink at 0.
      test::GradientChecker<Dtype> checker(1e-3, 1e-2, 0, 2e-3);
      checker.CheckGradient(&layer, bottom, this->top_vec_);
    }
  }
}

TYPED_TEST(ReductionLayerTest, AxisOutOfRange) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->x_};
  for (int axis : {2, -3}) {
    ReductionLayer<Dtype> layer(
        this->ReduceParam(ReductionParameter::SUM, axis));
    ExpectError<ConfigError>(
        [&] { layer.SetUp(bottom, this->top_vec_); },
        {"reduction_param.axis " + std::to_string(axis), "2 3 (6)"});
  }
}

}  // namespace
}  // namespace poseidon
