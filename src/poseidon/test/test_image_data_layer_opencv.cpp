// ImageData layer: small PNGs written with OpenCV into a temporary directory.
#include <gtest/gtest.h>

#include <memory>
#include <opencv2/core.hpp>
#include <set>

#include "data_layer_device_check.hpp"
#include "poseidon/util/image_codecs.hpp"
#include "poseidon/layers/image_data_layer.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

constexpr int kImages = 3;

template <typename TypeParam>
class ImageDataLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  // Image i is 4 x 5, every pixel (B, G, R) = (10i, 10i + 1, 10i + 2),
  // labelled 100 + i.
  ImageDataLayerTest()
      : dir_(test::MakeTempDir() + "/"),
        data_(new Blob<Dtype>()),
        label_(new Blob<Dtype>()) {
    string list;
    for (int i = 0; i < kImages; ++i) {
      const cv::Mat image(4, 5, CV_8UC3,
                          cv::Scalar(10 * i, 10 * i + 1, 10 * i + 2));
      const string name = "img" + std::to_string(i) + ".png";
      CHECK(codecs::Write(dir_ + name, image));
      list += name + " " + std::to_string(100 + i) + "\n";
    }
    WriteFileAtomically(dir_ + "list.txt", list);
    top_ = {data_.get(), label_.get()};
  }

  LayerParameter Param(int batch_size) {
    LayerParameter p;
    p.set_type("ImageData");
    ImageDataParameter* ip = p.mutable_image_data_param();
    ip->set_source(dir_ + "list.txt");
    ip->set_root_folder(dir_);
    ip->set_batch_size(batch_size);
    return p;
  }

  vector<int> NextLabels(Layer<Dtype>* layer) {
    layer->Forward({}, top_);
    vector<int> labels;
    for (int i = 0; i < label_->count(); ++i)
      labels.push_back(static_cast<int>(label_->cpu_data()[i]));
    return labels;
  }

  string dir_;
  std::unique_ptr<Blob<Dtype>> data_;
  std::unique_ptr<Blob<Dtype>> label_;
  vector<Blob<Dtype>*> top_;
};
TYPED_TEST_SUITE(ImageDataLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(ImageDataLayerTest, ReadsImagesInListOrderAndWraps) {
  using Dtype = typename TypeParam::Dtype;
  auto layer = LayerRegistry<Dtype>::CreateLayer(this->Param(2));
  EXPECT_STREQ(layer->type(), "ImageData");
  layer->SetUp({}, this->top_);
  EXPECT_EQ(this->data_->shape(), (vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(this->label_->shape(), (vector<int>{2}));
  const vector<vector<int>> expected{{0, 1}, {2, 0}, {1, 2}};
  for (const auto& images : expected) {
    EXPECT_EQ(this->NextLabels(layer.get()),
              (vector<int>{100 + images[0], 100 + images[1]}));
    for (int n = 0; n < 2; ++n)
      for (int c = 0; c < 3; ++c)
        EXPECT_EQ(this->data_->data_at(n, c, 3, 4), 10 * images[n] + c);
  }
}

// In GPU mode the batches reach the tops on the device and equal the CPU's
// (shuffled and mirrored at random from the same seed).
TYPED_TEST(ImageDataLayerTest, BatchesOnTheDeviceMatchCpuMode) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p = this->Param(2);
  p.mutable_image_data_param()->set_shuffle(true);
  p.mutable_transform_param()->set_mirror(true);
  p.mutable_data_param()->set_prefetch(2);
  p.set_phase(TRAIN);
  test::ExpectBatchesMatchCpuMode<Dtype>(
      TypeParam::device, [&p] { return LayerRegistry<Dtype>::CreateLayer(p); },
      2, 7, true);
}

TYPED_TEST(ImageDataLayerTest, ResizesAndReadsGray) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p = this->Param(1);
  p.mutable_image_data_param()->set_new_height(6);
  p.mutable_image_data_param()->set_new_width(7);
  p.mutable_image_data_param()->set_is_color(false);
  ImageDataLayer<Dtype> layer(p);
  layer.SetUp({}, this->top_);
  EXPECT_EQ(this->data_->shape(), (vector<int>{1, 1, 6, 7}));
  layer.Forward({}, this->top_);
  // A uniform image stays uniform; gray is close to the BGR values.
  const Dtype first = this->data_->cpu_data()[0];
  EXPECT_NEAR(first, 1, 1);
  for (int i = 0; i < 42; ++i) EXPECT_EQ(this->data_->cpu_data()[i], first);

  p.mutable_image_data_param()->set_new_width(0);
  ImageDataLayer<Dtype> half(p);
  EXPECT_THROW(half.SetUp({}, this->top_), ConfigError);
}

TYPED_TEST(ImageDataLayerTest, ShuffleVisitsEveryImageOncePerPass) {
  using Dtype = typename TypeParam::Dtype;
  LayerParameter p = this->Param(1);
  p.mutable_image_data_param()->set_shuffle(true);
  ImageDataLayer<Dtype> layer(p);
  layer.SetUp({}, this->top_);
  for (int pass = 0; pass < 3; ++pass) {
    std::set<int> labels;
    for (int i = 0; i < kImages; ++i)
      labels.insert(this->NextLabels(&layer)[0]);
    EXPECT_EQ(labels, (std::set<int>{100, 101, 102}));
  }
}

TYPED_TEST(ImageDataLayerTest, BadListLineNamesFileAndLine) {
  using Dtype = typename TypeParam::Dtype;
  WriteFileAtomically(this->dir_ + "list.txt", "img0.png 1\nimg1.png one\n");
  ImageDataLayer<Dtype> layer(this->Param(1));
  try {
    layer.SetUp({}, this->top_);
    FAIL() << "a bad list line was accepted";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find(this->dir_ + "list.txt:2:"), string::npos)
        << e.what();
  }
}

TYPED_TEST(ImageDataLayerTest, UnreadableImageIsNamed) {
  using Dtype = typename TypeParam::Dtype;
  WriteFileAtomically(this->dir_ + "list.txt",
                      "img0.png 1\nimg1.png 2\nmissing.png 3\n");
  ImageDataLayer<Dtype> layer(this->Param(2));
  layer.SetUp({}, this->top_);
  EXPECT_EQ(this->NextLabels(&layer), (vector<int>{1, 2}));
  try {
    layer.Forward({}, this->top_);
    FAIL() << "a missing image was read";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find(this->dir_ + "missing.png"), string::npos)
        << e.what();
  }

  WriteFileAtomically(this->dir_ + "list.txt", "missing.png 3\n");
  ImageDataLayer<Dtype> first_missing(this->Param(1));
  EXPECT_THROW(first_missing.SetUp({}, this->top_), IOError);
}

TYPED_TEST(ImageDataLayerTest, ImagesOfAnotherSizeInABatch) {
  using Dtype = typename TypeParam::Dtype;
  CHECK(codecs::Write(this->dir_ + "big.png", cv::Mat(6, 6, CV_8UC3)));
  WriteFileAtomically(this->dir_ + "list.txt", "img0.png 1\nbig.png 2\n");
  ImageDataLayer<Dtype> layer(this->Param(2));
  layer.SetUp({}, this->top_);
  EXPECT_THROW(layer.Forward({}, this->top_), ShapeError);
}

}  // namespace
}  // namespace poseidon
