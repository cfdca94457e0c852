// DataTransformer on Datums: scale, mean (file and values), crop, mirror,
// against values worked out by hand.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "poseidon/data_transformer.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

constexpr int kC = 2, kH = 3, kW = 4;

// A 2 x 3 x 4 datum whose pixel at (c, h, w) is c * 12 + h * 4 + w.
Datum MakeDatum() {
  Datum d;
  d.set_channels(kC);
  d.set_height(kH);
  d.set_width(kW);
  d.set_label(7);
  string pixels;
  for (int i = 0; i < kC * kH * kW; ++i) pixels.push_back(static_cast<char>(i));
  d.set_data(pixels);
  return d;
}

int Pixel(int c, int h, int w) { return c * kH * kW + h * kW + w; }

template <typename TypeParam>
class DataTransformerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  vector<Dtype> Run(const TransformationParameter& param, Phase phase,
                    const Datum& datum = MakeDatum()) {
    DataTransformer<Dtype> t(param, phase);
    Blob<Dtype> blob(t.InferBlobShape(datum));
    t.Transform(datum, &blob);
    return vector<Dtype>(blob.cpu_data(), blob.cpu_data() + blob.count());
  }
};
TYPED_TEST_SUITE(DataTransformerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(DataTransformerTest, IdentityKeepsPixels) {
  const auto out = this->Run(TransformationParameter(), TRAIN);
  ASSERT_EQ(out.size(), 24u);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(out[i], i);
}

TYPED_TEST(DataTransformerTest, ScaleAndMeanValuePerChannel) {
  TransformationParameter p;
  p.set_scale(0.5);
  p.add_mean_value(1);
  p.add_mean_value(4);
  const auto out = this->Run(p, TEST);
  for (int c = 0; c < kC; ++c)
    for (int h = 0; h < kH; ++h)
      for (int w = 0; w < kW; ++w) {
        const int i = Pixel(c, h, w);
        EXPECT_DOUBLE_EQ(out[i], (i - (c == 0 ? 1.0 : 4.0)) * 0.5);
      }
}

TYPED_TEST(DataTransformerTest, OneMeanValueServesAllChannels) {
  TransformationParameter p;
  p.add_mean_value(10);
  const auto out = this->Run(p, TEST);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(out[i], i - 10);
}

TYPED_TEST(DataTransformerTest, MeanValueCountMustMatchChannels) {
  TransformationParameter p;
  for (int i = 0; i < 3; ++i) p.add_mean_value(i);
  EXPECT_THROW(this->Run(p, TEST), ShapeError);
}

TYPED_TEST(DataTransformerTest, MeanFileIsSubtractedPerPixel) {
  using Dtype = typename TypeParam::Dtype;
  const string file = test::MakeTempDir() + "/mean.binaryproto";
  BlobProto mean;
  mean.set_num(1);
  mean.set_channels(kC);
  mean.set_height(kH);
  mean.set_width(kW);
  for (int i = 0; i < 24; ++i) mean.add_data(0.25f * i);
  WriteProtoToBinaryFile(mean, file);

  TransformationParameter p;
  p.set_mean_file(file);
  p.set_scale(2);
  auto out = this->Run(p, TEST);
  for (int i = 0; i < 24; ++i) EXPECT_DOUBLE_EQ(out[i], (i - 0.25 * i) * 2);

  // Centre crop 2x2 at TEST: h_off = (3 - 2) / 2 = 0, w_off = (4 - 2) / 2 = 1;
  // the mean is read at the input position.
  p.set_crop_size(2);
  out = this->Run(p, TEST);
  ASSERT_EQ(out.size(), 8u);
  for (int c = 0; c < kC; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 2; ++w) {
        const int in = Pixel(c, h, w + 1);
        EXPECT_DOUBLE_EQ(out[(c * 2 + h) * 2 + w], (in - 0.25 * in) * 2);
      }

  p.add_mean_value(1);
  EXPECT_THROW(DataTransformer<Dtype>(p, TEST), ConfigError);
  p.clear_mean_value();
  Datum other = MakeDatum();
  other.set_height(2);
  other.set_data(other.data().substr(0, 16));
  EXPECT_THROW(this->Run(p, TEST, other), ShapeError);
  p.set_mean_file(file + ".missing");
  EXPECT_THROW(DataTransformer<Dtype>(p, TEST), IOError);
}

TYPED_TEST(DataTransformerTest, CenterCropAtTest) {
  TransformationParameter p;
  p.set_crop_size(3);
  // h_off = 0, w_off = (4 - 3) / 2 = 0.
  const auto out = this->Run(p, TEST);
  ASSERT_EQ(out.size(), 18u);
  for (int c = 0; c < kC; ++c)
    for (int h = 0; h < 3; ++h)
      for (int w = 0; w < 3; ++w)
        EXPECT_EQ(out[(c * 3 + h) * 3 + w], Pixel(c, h, w));
}

TYPED_TEST(DataTransformerTest, RandomCropAtTrainCoversAllOffsets) {
  TransformationParameter p;
  p.set_crop_size(2);
  std::set<std::pair<int, int>> offsets;
  for (int trial = 0; trial < 200; ++trial) {
    const auto out = this->Run(p, TRAIN);
    // The top-left pixel of channel 0 gives the offset.
    const int h_off = static_cast<int>(out[0]) / kW;
    const int w_off = static_cast<int>(out[0]) % kW;
    ASSERT_LE(h_off, kH - 2);
    ASSERT_LE(w_off, kW - 2);
    for (int c = 0; c < kC; ++c)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 2; ++w)
          ASSERT_EQ(out[(c * 2 + h) * 2 + w], Pixel(c, h + h_off, w + w_off));
    offsets.insert({h_off, w_off});
  }
  EXPECT_EQ(offsets.size(), 6u);  // 2 vertical x 3 horizontal positions
}

TYPED_TEST(DataTransformerTest, MirrorFlipsHalfTheTime) {
  TransformationParameter p;
  p.set_mirror(true);
  int flipped = 0;
  const int trials = 200;
  for (int trial = 0; trial < trials; ++trial) {
    const auto out = this->Run(p, TEST);
    const bool is_flipped = out[0] == Pixel(0, 0, kW - 1);
    for (int c = 0; c < kC; ++c)
      for (int h = 0; h < kH; ++h)
        for (int w = 0; w < kW; ++w)
          ASSERT_EQ(out[Pixel(c, h, w)],
                    Pixel(c, h, is_flipped ? kW - 1 - w : w));
    flipped += is_flipped;
  }
  EXPECT_GT(flipped, trials / 4);
  EXPECT_LT(flipped, 3 * trials / 4);
}

TYPED_TEST(DataTransformerTest, CropMirrorMeanScaleTogether) {
  TransformationParameter p;
  p.set_crop_size(2);
  p.set_mirror(true);
  p.set_scale(0.5);
  p.add_mean_value(2);
  p.add_mean_value(3);
  const auto out = this->Run(p, TEST);
  // Centre window rows 0-1, columns 1-2; maybe mirrored.
  const bool flipped = out[0] == (Pixel(0, 0, 2) - 2) * 0.5;
  for (int c = 0; c < kC; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 2; ++w) {
        const int src_w = 1 + (flipped ? 1 - w : w);
        EXPECT_DOUBLE_EQ(out[(c * 2 + h) * 2 + w],
                         (Pixel(c, h, src_w) - (c == 0 ? 2 : 3)) * 0.5);
      }
}

TYPED_TEST(DataTransformerTest, SeededRunsRepeat) {
  TransformationParameter p;
  p.set_crop_size(2);
  p.set_mirror(true);
  Poseidon::set_random_seed(99);
  vector<vector<typename TypeParam::Dtype>> first;
  for (int i = 0; i < 10; ++i) first.push_back(this->Run(p, TRAIN));
  Poseidon::set_random_seed(99);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(this->Run(p, TRAIN), first[i]);
}

TYPED_TEST(DataTransformerTest, FloatDataDatums) {
  Datum d;
  d.set_channels(1);
  d.set_height(1);
  d.set_width(3);
  d.add_float_data(0.5);
  d.add_float_data(-1);
  d.add_float_data(2);
  TransformationParameter p;
  p.set_scale(2);
  p.add_mean_value(0.5);
  const auto out = this->Run(p, TEST, d);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_DOUBLE_EQ(out[0], 0);
  EXPECT_DOUBLE_EQ(out[1], -3);
  EXPECT_DOUBLE_EQ(out[2], 3);
}

TYPED_TEST(DataTransformerTest, BadInputsAndShapes) {
  using Dtype = typename TypeParam::Dtype;
  TransformationParameter p;
  p.set_crop_size(4);  // taller than the 3-row datum
  DataTransformer<Dtype> crop(p, TRAIN);
  EXPECT_THROW(crop.InferBlobShape(MakeDatum()), ShapeError);

  DataTransformer<Dtype> plain(TransformationParameter(), TEST);
  EXPECT_EQ(plain.InferBlobShape(MakeDatum()), (vector<int>{1, kC, kH, kW}));
  Blob<Dtype> wrong({1, kC, kW, kH});
  EXPECT_THROW(plain.Transform(MakeDatum(), &wrong), ShapeError);
  Blob<Dtype> without_num({kC, kH, kW});
  plain.Transform(MakeDatum(), &without_num);
  EXPECT_EQ(without_num.cpu_data()[5], 5);

  Datum short_data = MakeDatum();
  short_data.set_data("abc");
  Blob<Dtype> blob({1, kC, kH, kW});
  EXPECT_THROW(plain.Transform(short_data, &blob), IOError);

  TransformationParameter both;
  both.set_force_color(true);
  both.set_force_gray(true);
  EXPECT_THROW(DataTransformer<Dtype>(both, TEST), ConfigError);
}

TYPED_TEST(DataTransformerTest, BatchOfDatums) {
  using Dtype = typename TypeParam::Dtype;
  DataTransformer<Dtype> t(TransformationParameter(), TEST);
  vector<Datum> datums{MakeDatum(), MakeDatum()};
  Blob<Dtype> blob({2, kC, kH, kW});
  t.Transform(datums, &blob);
  EXPECT_EQ(blob.data_at(1, 1, 2, 3), Pixel(1, 2, 3));
  Blob<Dtype> too_small({1, kC, kH, kW});
  EXPECT_THROW(t.Transform(datums, &too_small), ShapeError);
}

}  // namespace
}  // namespace poseidon
