// The layers that pick, reorder or look up items: Crop, Filter (including a
// batch with nothing selected, alone and inside a Net), BatchReindex and
// Embed: forwards against hand-computed or naive reference values, gradient
// checks, edge cases and the errors. The other utility layers are in
// test_utility_layers.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "gradient_checker.hpp"
#include "poseidon/layers/batch_reindex_layer.hpp"
#include "poseidon/layers/crop_layer.hpp"
#include "poseidon/layers/embed_layer.hpp"
#include "poseidon/layers/filter_layer.hpp"
#include "poseidon/net.hpp"
#include "poseidon/util/io.hpp"
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

// -------------------------------------------------------------------- Crop

template <typename TypeParam>
class CropLayerTest : public UtilityLayerTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  CropLayerTest() { SetIota(&x_); }
  static LayerParameter CropParam(int axis, std::initializer_list<int> offs) {
    LayerParameter p = Param("Crop");
    p.mutable_crop_param()->set_axis(axis);
    for (int o : offs) p.mutable_crop_param()->add_offset(o);
    return p;
  }
  // Crops x_ to `ref` with `p`, checks the top shape, and compares every top
  // element with x_ at the index shifted by `shift`.
  void ExpectCrop(const LayerParameter& p, const vector<int>& ref_shape,
                  const vector<int>& top_shape, const vector<int>& shift) {
    Blob<Dtype> ref(ref_shape);
    vector<Blob<Dtype>*> bottom = {&x_, &ref};
    CropLayer<Dtype> layer(p);
    layer.SetUp(bottom, this->top_vec_);
    ASSERT_EQ(this->top_.shape(), top_shape);
    layer.Forward(bottom, this->top_vec_);
    for (int i = 0; i < this->top_.count(); ++i) {
      vector<int> idx = Unravel(top_shape, i);
      for (size_t d = 0; d < idx.size(); ++d) idx[d] += shift[d];
      ASSERT_EQ(this->top_.cpu_data()[i], x_.data_at(idx)) << "element " << i;
    }
  }
  Blob<Dtype> x_{2, 3, 5, 6};
};
TYPED_TEST_SUITE(CropLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(CropLayerTest, OffsetsPerAxisOneForAllOrNone) {
  // Axes before `axis` keep bottom[0]'s size whatever bottom[1] says.
  this->ExpectCrop(this->CropParam(2, {1, 2}), {1, 1, 3, 2}, {2, 3, 3, 2},
                   {0, 0, 1, 2});
  this->ExpectCrop(this->CropParam(2, {1}), {2, 3, 4, 4}, {2, 3, 4, 4},
                   {0, 0, 1, 1});
  this->ExpectCrop(Param("Crop"), {2, 3, 2, 3}, {2, 3, 2, 3}, {0, 0, 0, 0});
  this->ExpectCrop(this->CropParam(-1, {2}), {1, 1, 1, 4}, {2, 3, 5, 4},
                   {0, 0, 0, 2});
  this->ExpectCrop(this->CropParam(0, {1, 1, 2, 3}), {1, 2, 2, 3}, {1, 2, 2, 3},
                   {1, 1, 2, 3});
}

TYPED_TEST(CropLayerTest, BackwardPadsWithZeros) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> ref({2, 3, 3, 2});
  cpu_set(ref.count(), Dtype(9), ref.mutable_cpu_diff());
  vector<Blob<Dtype>*> bottom = {&this->x_, &ref};
  CropLayer<Dtype> layer(this->CropParam(2, {1, 3}));
  layer.SetUp(bottom, this->top_vec_);
  EXPECT_TRUE(layer.AllowForceBackward(0));
  EXPECT_FALSE(layer.AllowForceBackward(1));
  layer.Forward(bottom, this->top_vec_);
  cpu_set(this->top_.count(), Dtype(1), this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true, true}, bottom);
  for (int i = 0; i < this->x_.count(); ++i) {
    const vector<int> idx = Unravel(this->x_.shape(), i);
    const bool inside = idx[2] >= 1 && idx[2] < 4 && idx[3] >= 3 && idx[3] < 5;
    EXPECT_EQ(this->x_.cpu_diff()[i], Dtype(inside ? 1 : 0)) << i;
  }
  EXPECT_EQ(ref.asum_diff(), Dtype(0));
}

TYPED_TEST(CropLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> x({2, 2, 4, 5});
  Blob<Dtype> ref({2, 2, 2, 3});
  test::FillGaussian(&x);
  vector<Blob<Dtype>*> bottom = {&x, &ref};
  CropLayer<Dtype> layer(this->CropParam(2, {1, 2}));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, bottom, this->top_vec_, 0);
}

TYPED_TEST(CropLayerTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> ref({2, 3, 3, 2});
  vector<Blob<Dtype>*> bottom = {&this->x_, &ref};
  CropLayer<Dtype> too_far(this->CropParam(2, {3, 0}));
  ExpectError<ConfigError>([&] { too_far.SetUp(bottom, this->top_vec_); },
                           {"crop_param.offset {3 0}", "offset 3 on axis 2",
                            "dimension 5", "2 3 5 6 (180)", "2 3 3 2 (36)"});
  CropLayer<Dtype> wrong_count(this->CropParam(2, {1, 1, 1}));
  ExpectError<ConfigError>([&] { wrong_count.SetUp(bottom, this->top_vec_); },
                           {"crop_param.offset {1 1 1}", "3 values"});
  CropLayer<Dtype> bad_axis(this->CropParam(4, {}));
  ExpectError<ConfigError>([&] { bad_axis.SetUp(bottom, this->top_vec_); },
                           {"crop_param.axis 4", "num_axes 4"});
  Blob<Dtype> big({2, 3, 6, 2});
  bottom = {&this->x_, &big};
  CropLayer<Dtype> larger(Param("Crop"));
  ExpectError<ShapeError>([&] { larger.SetUp(bottom, this->top_vec_); },
                          {"2 3 6 2 (72)", "2 3 5 6 (180)", "axis 2"});
  Blob<Dtype> flat({2, 3, 5});
  bottom = {&this->x_, &flat};
  CropLayer<Dtype> axes(Param("Crop"));
  EXPECT_THROW(axes.SetUp(bottom, this->top_vec_), ShapeError);
}

// ------------------------------------------------------------------ Filter

template <typename TypeParam>
class FilterLayerTest : public UtilityLayerTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  FilterLayerTest() {
    test::FillGaussian(&data_);
    SetValues(&labels_, {0, 1, 2, 3});
    SetValues(&selector_, {0, 1, 0, 1});
  }
  vector<Blob<Dtype>*> Bottoms() { return {&data_, &labels_, &selector_}; }
  vector<Blob<Dtype>*> Tops() { return {&top_data_, &top_labels_}; }

  Blob<Dtype> data_{4, 2, 3};
  Blob<Dtype> labels_{vector<int>{4}};
  Blob<Dtype> selector_{vector<int>{4}};
  Blob<Dtype> top_data_, top_labels_;
};
TYPED_TEST_SUITE(FilterLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(FilterLayerTest, KeepsSelectedItemsInOrder) {
  using Dtype = typename TypeParam::Dtype;
  FilterLayer<Dtype> layer(Param("Filter"));
  layer.SetUp(this->Bottoms(), this->Tops());
  // Before any Forward, the tops hold the whole batch.
  EXPECT_EQ(this->top_data_.shape(), (vector<int>{4, 2, 3}));
  EXPECT_TRUE(layer.AllowForceBackward(0));
  EXPECT_TRUE(layer.AllowForceBackward(1));
  EXPECT_FALSE(layer.AllowForceBackward(2));
  layer.Forward(this->Bottoms(), this->Tops());
  EXPECT_EQ(this->top_data_.shape(), (vector<int>{2, 2, 3}));
  EXPECT_EQ(this->top_labels_.shape(), vector<int>{2});
  EXPECT_EQ(this->top_labels_.cpu_data()[0], Dtype(1));
  EXPECT_EQ(this->top_labels_.cpu_data()[1], Dtype(3));
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(this->top_data_.cpu_data()[i], this->data_.cpu_data()[6 + i]);
    EXPECT_EQ(this->top_data_.cpu_data()[6 + i],
              this->data_.cpu_data()[18 + i]);
  }
  // Backward scatters the diffs back and zeroes the unselected items.
  cpu_copy(12, this->top_data_.cpu_data(), this->top_data_.mutable_cpu_diff());
  cpu_set(24, Dtype(7), this->data_.mutable_cpu_diff());
  layer.Backward(this->Tops(), {true, false, false}, this->Bottoms());
  for (int i = 0; i < 24; ++i) {
    const bool kept = (i / 6) % 2 == 1;
    EXPECT_EQ(this->data_.cpu_diff()[i],
              kept ? this->data_.cpu_data()[i] : Dtype(0))
        << i;
  }
  EXPECT_THROW(
      layer.Backward(this->Tops(), {true, false, true}, this->Bottoms()),
      ConfigError);
}

TYPED_TEST(FilterLayerTest, NothingSelectedGivesEmptyTops) {
  using Dtype = typename TypeParam::Dtype;
  SetValues(&this->selector_, {0, 0, 0, 0});
  FilterLayer<Dtype> layer(Param("Filter"));
  layer.SetUp(this->Bottoms(), this->Tops());
  layer.Forward(this->Bottoms(), this->Tops());
  EXPECT_EQ(this->top_data_.shape(), (vector<int>{0, 2, 3}));
  EXPECT_EQ(this->top_labels_.shape(), vector<int>{0});
  EXPECT_EQ(this->top_data_.count(), 0);
  cpu_set(24, Dtype(7), this->data_.mutable_cpu_diff());
  cpu_set(4, Dtype(7), this->labels_.mutable_cpu_diff());
  layer.Backward(this->Tops(), {true, true, false}, this->Bottoms());
  EXPECT_EQ(this->data_.asum_diff(), Dtype(0));
  EXPECT_EQ(this->labels_.asum_diff(), Dtype(0));
  // The same layer grows back when items are selected again.
  SetValues(&this->selector_, {1, 1, 1, 1});
  layer.Forward(this->Bottoms(), this->Tops());
  EXPECT_EQ(this->top_data_.shape(), (vector<int>{4, 2, 3}));
  for (int i = 0; i < 24; ++i) {
    EXPECT_EQ(this->top_data_.cpu_data()[i], this->data_.cpu_data()[i]);
  }
}

TYPED_TEST(FilterLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  test::FillGaussian(&this->labels_);
  SetValues(&this->selector_, {1, 0, 1, 1});
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  for (int b : {0, 1}) {
    FilterLayer<Dtype> layer(Param("Filter"));
    checker.CheckGradient(&layer, this->Bottoms(), this->Tops(), b);
  }
  SetValues(&this->selector_, {0, 0, 0, 0});
  FilterLayer<Dtype> empty(Param("Filter"));
  checker.CheckGradient(&empty, this->Bottoms(), this->Tops(), 0);
}

TYPED_TEST(FilterLayerTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> wide_selector({4, 2});
  vector<Blob<Dtype>*> bottom = {&this->data_, &wide_selector};
  vector<Blob<Dtype>*> one_top = {&this->top_data_};
  FilterLayer<Dtype> wide(Param("Filter"));
  ExpectError<ShapeError>([&] { wide.SetUp(bottom, one_top); },
                          {"selector", "4 2 (8)"});
  Blob<Dtype> column_selector({4, 1});
  bottom = {&this->data_, &column_selector};
  FilterLayer<Dtype> column(Param("Filter"));
  column.SetUp(bottom, one_top);  // (N, 1) is a valid selector
  Blob<Dtype> short_data({3, 2});
  bottom = {&short_data, &this->selector_};
  FilterLayer<Dtype> items(Param("Filter"));
  ExpectError<ShapeError>([&] { items.SetUp(bottom, one_top); },
                          {"3 2 (6)", "4 (4)"});
  FilterLayer<Dtype> tops(Param("Filter"));
  ExpectError<ConfigError>([&] { tops.SetUp(this->Bottoms(), one_top); },
                           {"3 bottoms need 2 tops"});
}

// A Net whose Filter selects nothing: the loss is 0 and the backward pass
// runs through the empty blobs, leaving a zero gradient.
TYPED_TEST(FilterLayerTest, EmptySelectionInsideNet) {
  using Dtype = typename TypeParam::Dtype;
  const char* text = R"(
    name: "filter_empty" force_backward: true
    layer { name: "in" type: "Input" top: "x" top: "s"
            input_param { shape { dim: 4 dim: 3 } shape { dim: 4 } } }
    layer { name: "filter" type: "Filter" bottom: "x" bottom: "s" top: "fx" }
    layer { name: "sq" type: "Reduction" bottom: "fx" top: "loss"
            reduction_param { operation: SUMSQ } loss_weight: 1 }
  )";
  NetParameter param;
  ReadProtoFromTextString(text, "<test net>", &param);
  Net<Dtype> net(param);
  Blob<Dtype>* x = net.blob_by_name("x").get();
  Blob<Dtype>* s = net.blob_by_name("s").get();
  SetIota(x);
  SetValues(s, {0, 0, 0, 0});
  Dtype loss = -1;
  net.Forward(&loss);
  EXPECT_EQ(loss, Dtype(0));
  EXPECT_EQ(net.blob_by_name("fx")->shape(), (vector<int>{0, 3}));
  net.Backward();
  EXPECT_EQ(x->asum_diff(), Dtype(0));

  SetValues(s, {0, 1, 0, 1});  // rows 1 and 3: 3..5 and 9..11
  net.Forward(&loss);
  EXPECT_NEAR(loss, 9 + 16 + 25 + 81 + 100 + 121, 1e-3);
  net.Backward();
  for (int i = 0; i < 12; ++i) {
    const bool kept = i / 3 == 1 || i / 3 == 3;
    EXPECT_NEAR(x->cpu_diff()[i], kept ? 2 * i : 0, 1e-5) << i;
  }
}

// ------------------------------------------------------------ BatchReindex

template <typename TypeParam>
class BatchReindexLayerTest : public UtilityLayerTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  BatchReindexLayerTest() {
    test::FillGaussian(&data_);
    SetValues(&index_, {4, 0, 4, 2});
  }
  vector<Blob<Dtype>*> Bottoms() { return {&data_, &index_}; }
  Blob<Dtype> data_{5, 2, 3};
  Blob<Dtype> index_{vector<int>{4}};
};
TYPED_TEST_SUITE(BatchReindexLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(BatchReindexLayerTest, GathersAndScatterAdds) {
  using Dtype = typename TypeParam::Dtype;
  BatchReindexLayer<Dtype> layer(Param("BatchReindex"));
  layer.SetUp(this->Bottoms(), this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{4, 2, 3}));
  EXPECT_FALSE(layer.AllowForceBackward(1));
  layer.Forward(this->Bottoms(), this->top_vec_);
  const int source[] = {4, 0, 4, 2};
  for (int j = 0; j < 4; ++j) {
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(this->top_.cpu_data()[j * 6 + i],
                this->data_.cpu_data()[source[j] * 6 + i]);
    }
  }
  SetIota(&this->top_);
  cpu_copy(24, this->top_.cpu_data(), this->top_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true, false}, this->Bottoms());
  for (int i = 0; i < 6; ++i) {
    const Dtype* dx = this->data_.cpu_diff();
    EXPECT_EQ(dx[0 * 6 + i], Dtype(6 + i));  // from top 1
    EXPECT_EQ(dx[1 * 6 + i], Dtype(0));
    EXPECT_EQ(dx[2 * 6 + i], Dtype(18 + i));  // from top 3
    EXPECT_EQ(dx[3 * 6 + i], Dtype(0));
    EXPECT_EQ(dx[4 * 6 + i], Dtype(i + 12 + i));  // tops 0 and 2
  }
  EXPECT_THROW(layer.Backward(this->top_vec_, {true, true}, this->Bottoms()),
               ConfigError);
}

TYPED_TEST(BatchReindexLayerTest, EmptyIndexList) {
  using Dtype = typename TypeParam::Dtype;
  Blob<Dtype> none({0});
  vector<Blob<Dtype>*> bottom = {&this->data_, &none};
  BatchReindexLayer<Dtype> layer(Param("BatchReindex"));
  layer.SetUp(bottom, this->top_vec_);
  layer.Forward(bottom, this->top_vec_);
  EXPECT_EQ(this->top_.shape(), (vector<int>{0, 2, 3}));
  cpu_set(30, Dtype(7), this->data_.mutable_cpu_diff());
  layer.Backward(this->top_vec_, {true, false}, bottom);
  EXPECT_EQ(this->data_.asum_diff(), Dtype(0));
}

TYPED_TEST(BatchReindexLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  BatchReindexLayer<Dtype> layer(Param("BatchReindex"));
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  checker.CheckGradient(&layer, this->Bottoms(), this->top_vec_, 0);
}

TYPED_TEST(BatchReindexLayerTest, BadIndices) {
  using Dtype = typename TypeParam::Dtype;
  for (double bad : {5.0, -1.0, 1.5}) {
    SetValues(&this->index_, {0, 1, bad, 2});
    BatchReindexLayer<Dtype> layer(Param("BatchReindex"));
    layer.SetUp(this->Bottoms(), this->top_vec_);
    std::ostringstream value;
    value << "index " << Dtype(bad) << " at position 2";
    ExpectError<ConfigError>(
        [&] { layer.Forward(this->Bottoms(), this->top_vec_); },
        {value.str(), "5 2 3 (30)"});
  }
  Blob<Dtype> matrix({2, 2});
  vector<Blob<Dtype>*> bottom = {&this->data_, &matrix};
  BatchReindexLayer<Dtype> layer(Param("BatchReindex"));
  ExpectError<ShapeError>([&] { layer.SetUp(bottom, this->top_vec_); },
                          {"1-D", "2 2 (4)"});
}

// ------------------------------------------------------------------- Embed

template <typename TypeParam>
class EmbedLayerTest : public UtilityLayerTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;
  EmbedLayerTest() { SetValues(&words_, {0, 4, 2, 4, 1, 0}); }
  static LayerParameter EmbedParam(int num_output, int input_dim,
                                   bool bias = true) {
    LayerParameter p = Param("Embed");
    EmbedParameter* e = p.mutable_embed_param();
    e->set_num_output(num_output);
    e->set_input_dim(input_dim);
    e->set_bias_term(bias);
    e->mutable_weight_filler()->set_type("gaussian");
    e->mutable_bias_filler()->set_type("gaussian");
    return p;
  }
  Blob<Dtype> words_{2, 3};
};
TYPED_TEST_SUITE(EmbedLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(EmbedLayerTest, LooksUpRowsPlusBias) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->words_};
  for (bool bias : {true, false}) {
    EmbedLayer<Dtype> layer(this->EmbedParam(3, 5, bias));
    layer.SetUp(bottom, this->top_vec_);
    ASSERT_EQ(layer.blobs().size(), bias ? 2u : 1u);
    EXPECT_EQ(layer.blobs()[0]->shape(), (vector<int>{5, 3}));
    EXPECT_EQ(this->top_.shape(), (vector<int>{2, 3, 3}));
    layer.Forward(bottom, this->top_vec_);
    const Dtype* w = layer.blobs()[0]->cpu_data();
    for (int m = 0; m < 6; ++m) {
      const int row = static_cast<int>(this->words_.cpu_data()[m]);
      for (int n = 0; n < 3; ++n) {
        const Dtype b = bias ? layer.blobs()[1]->cpu_data()[n] : Dtype(0);
        EXPECT_NEAR(this->top_.cpu_data()[m * 3 + n], w[row * 3 + n] + b, 1e-6);
      }
    }
  }
}

TYPED_TEST(EmbedLayerTest, BackwardAccumulatesPerRow) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->words_};
  EmbedLayer<Dtype> layer(this->EmbedParam(3, 5));
  layer.SetUp(bottom, this->top_vec_);
  EXPECT_FALSE(layer.AllowForceBackward(0));
  layer.Forward(bottom, this->top_vec_);
  cpu_set(18, Dtype(1), this->top_.mutable_cpu_diff());
  for (auto& blob : layer.blobs()) {
    cpu_set(blob->count(), Dtype(1), blob->mutable_cpu_diff());
  }
  layer.Backward(this->top_vec_, {false}, bottom);
  // Words {0, 4, 2, 4, 1, 0}: rows 0 and 4 twice, 1 and 2 once, 3 never.
  const Dtype per_row[] = {3, 2, 2, 1, 3};
  for (int k = 0; k < 5; ++k) {
    for (int n = 0; n < 3; ++n) {
      EXPECT_EQ(layer.blobs()[0]->cpu_diff()[k * 3 + n], per_row[k]);
    }
  }
  for (int n = 0; n < 3; ++n) {
    EXPECT_EQ(layer.blobs()[1]->cpu_diff()[n], Dtype(7));
  }
  EXPECT_THROW(layer.Backward(this->top_vec_, {true}, bottom), ConfigError);
}

TYPED_TEST(EmbedLayerTest, Gradient) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->words_};
  test::GradientChecker<Dtype> checker(1e-2, 1e-3);
  for (bool bias : {true, false}) {
    EmbedLayer<Dtype> layer(this->EmbedParam(3, 5, bias));
    checker.CheckGradient(&layer, bottom, this->top_vec_, -2);
  }
}

TYPED_TEST(EmbedLayerTest, Errors) {
  using Dtype = typename TypeParam::Dtype;
  vector<Blob<Dtype>*> bottom = {&this->words_};
  for (double bad : {5.0, -1.0, 2.5}) {
    SetValues(&this->words_, {0, 1, 2, bad, 1, 0});
    EmbedLayer<Dtype> layer(this->EmbedParam(3, 5));
    layer.SetUp(bottom, this->top_vec_);
    std::ostringstream value;
    value << "index " << Dtype(bad) << " at position 3";
    ExpectError<ConfigError>([&] { layer.Forward(bottom, this->top_vec_); },
                             {value.str(), "input_dim = 5"});
  }
  EmbedLayer<Dtype> no_output(this->EmbedParam(0, 5));
  ExpectError<ConfigError>([&] { no_output.SetUp(bottom, this->top_vec_); },
                           {"embed_param.num_output"});
  EmbedLayer<Dtype> no_input(this->EmbedParam(3, 0));
  ExpectError<ConfigError>([&] { no_input.SetUp(bottom, this->top_vec_); },
                           {"embed_param.input_dim"});
  LayerParameter p = this->EmbedParam(3, 5, false);
  BlobProto* w = p.add_blobs();
  w->mutable_shape()->add_dim(3);
  w->mutable_shape()->add_dim(5);
  for (int i = 0; i < 15; ++i) w->add_data(i);
  EmbedLayer<Dtype> transposed(p);
  ExpectError<ShapeError>([&] { transposed.SetUp(bottom, this->top_vec_); },
                          {"3 5 (15)", "5 x 3"});
}

}  // namespace
}  // namespace poseidon
