// WindowData layer: small single-colour PNGs written with OpenCV and window
// files in a temporary directory; expected crops worked out by hand.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <opencv2/core.hpp>
#include <set>
#include <string>
#include <vector>

#include "data_layer_device_check.hpp"
#include "poseidon/util/image_codecs.hpp"
#include "poseidon/layers/window_data_layer.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using std::unique_ptr;

// The colour (B, G, R) of image "<name>.png".
struct Colour {
  int b, g, r;
  int operator[](int c) const { return c == 0 ? b : c == 1 ? g : r; }
};

template <typename TypeParam>
class WindowDataLayerTest : public test::MultiDeviceTest<TypeParam> {
 protected:
  using Dtype = typename TypeParam::Dtype;

  WindowDataLayerTest()
      : dir_(test::MakeTempDir() + "/"),
        data_(new Blob<Dtype>()),
        label_(new Blob<Dtype>()) {
    top_ = {data_.get(), label_.get()};
  }

  // Writes a width x height image of one colour.
  void Image(const string& name, int width, int height, Colour colour) {
    const cv::Mat image(height, width, CV_8UC3,
                        cv::Scalar(colour.b, colour.g, colour.r));
    CHECK(codecs::Write(dir_ + name, image));
  }

  // Writes the window file; returns its path.
  string Windows(const string& text) {
    WriteFileAtomically(dir_ + "windows.txt", text);
    return dir_ + "windows.txt";
  }

  LayerParameter Param(int batch_size, int crop_size, double fg_fraction) {
    LayerParameter p;
    p.set_type("WindowData");
    WindowDataParameter* wp = p.mutable_window_data_param();
    wp->set_source(dir_ + "windows.txt");
    wp->set_root_folder(dir_);
    wp->set_batch_size(batch_size);
    wp->set_fg_fraction(static_cast<float>(fg_fraction));
    p.mutable_transform_param()->set_crop_size(crop_size);
    return p;
  }

  unique_ptr<WindowDataLayer<Dtype>> SetUp(const LayerParameter& p) {
    auto layer = std::make_unique<WindowDataLayer<Dtype>>(p);
    layer->SetUp({}, top_);
    return layer;
  }

  Dtype At(int n, int c, int h, int w) const {
    return data_->data_at(n, c, h, w);
  }

  // Item n is `colour` inside rows [top, bottom) x cols [left, right), 0
  // elsewhere.
  void ExpectBox(int n, Colour colour, int top, int bottom, int left,
                 int right) const {
    const int crop = data_->shape(2);
    for (int c = 0; c < 3; ++c) {
      for (int h = 0; h < crop; ++h) {
        for (int w = 0; w < crop; ++w) {
          const bool inside = h >= top && h < bottom && w >= left && w < right;
          ASSERT_EQ(At(n, c, h, w), inside ? colour[c] : 0)
              << "item " << n << " at " << c << "," << h << "," << w;
        }
      }
    }
  }

  string dir_;
  unique_ptr<Blob<Dtype>> data_;
  unique_ptr<Blob<Dtype>> label_;
  vector<Blob<Dtype>*> top_;
};
TYPED_TEST_SUITE(WindowDataLayerTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(WindowDataLayerTest, WarpsWindowsBackgroundFirst) {
  using Dtype = typename TypeParam::Dtype;
  const Colour a{10, 20, 30}, b{40, 50, 60};
  this->Image("a.png", 8, 8, a);
  this->Image("b.png", 6, 6, b);
  // fg_threshold 0.7, bg_threshold 0.3: class 9 (overlap 0.5) is unused and
  // class 7 (overlap 0.1) becomes background 0.
  this->Windows(
      "# 0\na.png\n3 8 8\n2\n2 0.9 1 1 6 6\n9 0.5 0 0 7 7\n"
      "# 1\nb.png\n3 6 6\n1\n7 0.1 0 0 5 5\n");
  LayerParameter p = this->Param(4, 4, 0.5);
  p.mutable_window_data_param()->set_fg_threshold(0.7f);
  p.mutable_window_data_param()->set_bg_threshold(0.3f);
  p.mutable_window_data_param()->set_scale(0.5f);
  for (float m : {1.0f, 2.0f, 3.0f})
    p.mutable_transform_param()->add_mean_value(m);
  auto layer = LayerRegistry<Dtype>::CreateLayer(p);
  EXPECT_STREQ(layer->type(), "WindowData");
  layer->SetUp({}, this->top_);
  EXPECT_EQ(this->data_->shape(), (vector<int>{4, 3, 4, 4}));
  EXPECT_EQ(this->label_->shape(), (vector<int>{4}));
  for (int round = 0; round < 3; ++round) {
    layer->Forward({}, this->top_);
    for (int n = 0; n < 4; ++n) {
      const bool fg = n >= 2;
      EXPECT_EQ(this->label_->cpu_data()[n], fg ? 2 : 0);
      const Colour& colour = fg ? a : b;
      for (int c = 0; c < 3; ++c) {
        for (int i = 0; i < 16; ++i) {
          ASSERT_EQ(this->At(n, c, i / 4, i % 4),
                    static_cast<Dtype>((colour[c] - (c + 1)) * 0.5));
        }
      }
    }
  }
}

TYPED_TEST(WindowDataLayerTest, ContextPadLeavesAZeroBorderAndMirrors) {
  const Colour a{10, 20, 30};
  this->Image("a.png", 4, 4, a);
  this->Windows("# 0\na.png\n3 4 4\n1\n1 1.0 0 0 3 3\n");
  LayerParameter p = this->Param(4, 8, 1.0);
  p.mutable_window_data_param()->set_context_pad(2);
  // The window grows by 8 / (8 - 4) = 2 to (-2, -2)..(6, 6), 9 pixels wide
  // warped to 8: the image's 4 pixels become 4, after 2 padding pixels on
  // the left/top and 3 on the right/bottom.
  auto layer = this->SetUp(p);
  layer->Forward({}, this->top_);
  for (int n = 0; n < 4; ++n) this->ExpectBox(n, a, 2, 6, 2, 6);

  // Mirrored, the right padding (3) comes first.
  p.mutable_transform_param()->set_mirror(true);
  auto mirrored = this->SetUp(p);
  std::set<int> lefts;
  for (int round = 0; round < 4; ++round) {
    mirrored->Forward({}, this->top_);
    for (int n = 0; n < 4; ++n) {
      const int left = this->At(n, 0, 3, 2) != 0 ? 2 : 3;
      lefts.insert(left);
      this->ExpectBox(n, a, 2, 6, left, left + 4);
    }
  }
  EXPECT_EQ(lefts, (std::set<int>{2, 3}));
}

TYPED_TEST(WindowDataLayerTest, SquareModeWidensTheShortSide) {
  const Colour a{10, 20, 30};
  this->Image("a.png", 2, 6, a);
  this->Windows("# 0\na.png\n3 6 2\n1\n1 1.0 0 0 1 5\n");
  LayerParameter p = this->Param(1, 6, 1.0);
  // Warp: the 2 x 6 window fills the 6 x 6 crop.
  auto warp = this->SetUp(p);
  warp->Forward({}, this->top_);
  this->ExpectBox(0, a, 0, 6, 0, 6);
  // Square: the window becomes (-2, 0)..(4, 6), 7 x 7 warped to 6 x 6; the
  // image's 2 x 6 pixels become 2 x 5 after 2 padding columns.
  p.mutable_window_data_param()->set_crop_mode("square");
  auto square = this->SetUp(p);
  square->Forward({}, this->top_);
  this->ExpectBox(0, a, 0, 5, 2, 4);
}

TYPED_TEST(WindowDataLayerTest, MeanFileIsTakenAtTheCentre) {
  using Dtype = typename TypeParam::Dtype;
  const Colour a{100, 110, 120};
  this->Image("a.png", 5, 5, a);
  this->Windows("# 0\na.png\n3 5 5\n1\n1 1.0 0 0 4 4\n");
  Blob<float> mean(vector<int>{1, 3, 6, 6});
  for (int i = 0; i < mean.count(); ++i) mean.mutable_cpu_data()[i] = i % 50;
  BlobProto proto;
  mean.ToProto(&proto);
  WriteProtoToBinaryFile(proto, this->dir_ + "mean.binaryproto");
  LayerParameter p = this->Param(1, 4, 1.0);
  p.mutable_transform_param()->set_mean_file(this->dir_ + "mean.binaryproto");
  auto layer = this->SetUp(p);
  layer->Forward({}, this->top_);
  for (int c = 0; c < 3; ++c) {
    for (int h = 0; h < 4; ++h) {
      for (int w = 0; w < 4; ++w) {
        EXPECT_EQ(this->At(0, c, h, w),
                  static_cast<Dtype>(a[c] - mean.data_at(0, c, h + 1, w + 1)));
      }
    }
  }
  // A mean smaller than the crop is refused.
  p.mutable_transform_param()->set_crop_size(8);
  EXPECT_THROW(this->SetUp(p), ShapeError);
}

TYPED_TEST(WindowDataLayerTest, CachedImagesGiveTheSameBatches) {
  using Dtype = typename TypeParam::Dtype;
  this->Image("a.png", 7, 5, {10, 20, 30});
  this->Image("b.png", 6, 9, {40, 50, 60});
  this->Windows(
      "# 0\na.png\n3 5 7\n2\n1 0.9 0 0 3 4\n0 0.2 2 1 6 3\n"
      "# 1\nb.png\n3 9 6\n2\n3 0.8 1 2 5 8\n0 0.1 0 0 2 2\n");
  LayerParameter p = this->Param(6, 5, 0.5);
  p.mutable_window_data_param()->set_context_pad(1);
  p.mutable_transform_param()->set_mirror(true);
  auto read = [this](const LayerParameter& param) {
    Poseidon::set_random_seed(77);
    auto layer = this->SetUp(param);
    vector<Dtype> values;
    for (int round = 0; round < 3; ++round) {
      layer->Forward({}, this->top_);
      values.insert(values.end(), this->data_->cpu_data(),
                    this->data_->cpu_data() + this->data_->count());
      values.insert(values.end(), this->label_->cpu_data(),
                    this->label_->cpu_data() + this->label_->count());
    }
    return values;
  };
  const vector<Dtype> direct = read(p);
  p.mutable_window_data_param()->set_cache_images(true);
  Poseidon::set_random_seed(77);
  auto cached = this->SetUp(p);
  // The cache holds the files: they are no longer needed.
  std::filesystem::remove(this->dir_ + "a.png");
  std::filesystem::remove(this->dir_ + "b.png");
  vector<Dtype> values;
  for (int round = 0; round < 3; ++round) {
    cached->Forward({}, this->top_);
    values.insert(values.end(), this->data_->cpu_data(),
                  this->data_->cpu_data() + this->data_->count());
    values.insert(values.end(), this->label_->cpu_data(),
                  this->label_->cpu_data() + this->label_->count());
  }
  EXPECT_EQ(values, direct);
}

// In GPU mode the batches (windows drawn and mirrored at random from the
// same seed) reach the tops on the device and equal the CPU's.
TYPED_TEST(WindowDataLayerTest, BatchesOnTheDeviceMatchCpuMode) {
  using Dtype = typename TypeParam::Dtype;
  this->Image("a.png", 7, 5, {10, 20, 30});
  this->Image("b.png", 6, 9, {40, 50, 60});
  this->Windows(
      "# 0\na.png\n3 5 7\n2\n1 0.9 0 0 3 4\n0 0.2 2 1 6 3\n"
      "# 1\nb.png\n3 9 6\n2\n3 0.8 1 2 5 8\n0 0.1 0 0 2 2\n");
  LayerParameter p = this->Param(4, 5, 0.5);
  p.mutable_window_data_param()->set_context_pad(1);
  p.mutable_transform_param()->set_mirror(true);
  p.mutable_data_param()->set_prefetch(3);
  test::ExpectBatchesMatchCpuMode<Dtype>(
      TypeParam::device, [&p] { return LayerRegistry<Dtype>::CreateLayer(p); },
      2, 8, true);
}

TYPED_TEST(WindowDataLayerTest, WindowFileErrorsNameTheEntry) {
  using Dtype = typename TypeParam::Dtype;
  this->Image("a.png", 4, 4, {1, 2, 3});
  auto expect = [this](const string& text, const string& message) {
    this->Windows(text);
    WindowDataLayer<Dtype> layer(this->Param(2, 4, 0.5));
    try {
      layer.SetUp({}, this->top_);
      ADD_FAILURE() << "no error for: " << text;
    } catch (const IOError& e) {
      EXPECT_NE(string(e.what()).find(message), string::npos) << e.what();
    }
  };
  const string file = "window file '" + this->dir_ + "windows.txt'";
  expect("", file + " lists no images");
  expect("# 1\na.png\n3 4 4\n0\n", file +
                                       ", image entry 0: expected the "
                                       "line '# 0'");
  expect("# 0\na.png\n3 4\n", file +
                                  ", image entry 0: expected the image "
                                  "path");
  expect("# 0\na.png\n2 4 4\n0\n", "channels must be 1 or 3 (got 2)");
  expect("# 0\na.png\n3 4 4\n1\n1 0.9 0 0\n",
         file + ", image entry 0, window 0: expected 'class overlap");
  expect("# 0\na.png\n3 4 4\n1\n0 0.9 0 0 3 3\n",
         "a foreground window (overlap 0.9) needs a class > 0, got 0");
  expect("# 0\na.png\n3 4 4\n1\n1 0.9 3 0 1 3\n", "enclose nothing");

  std::filesystem::remove(this->dir_ + "windows.txt");
  WindowDataLayer<Dtype> missing(this->Param(2, 4, 0.5));
  try {
    missing.SetUp({}, this->top_);
    ADD_FAILURE() << "no error for a missing window file";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find(this->dir_ + "windows.txt"), string::npos)
        << e.what();
  }
}

TYPED_TEST(WindowDataLayerTest, ParameterErrors) {
  using Dtype = typename TypeParam::Dtype;
  this->Image("a.png", 4, 4, {1, 2, 3});
  this->Windows("# 0\na.png\n3 4 4\n1\n1 0.9 0 0 3 3\n");
  auto expect = [this](const LayerParameter& p, const string& message) {
    WindowDataLayer<Dtype> layer(p);
    try {
      layer.SetUp({}, this->top_);
      ADD_FAILURE() << "no error; expected " << message;
    } catch (const ConfigError& e) {
      EXPECT_NE(string(e.what()).find(message), string::npos) << e.what();
    }
  };
  expect(this->Param(2, 0, 1.0), "crop_size");
  expect(this->Param(0, 4, 1.0), "batch_size");
  expect(this->Param(2, 4, 1.5), "fg_fraction");
  LayerParameter p = this->Param(2, 4, 1.0);
  p.mutable_window_data_param()->set_crop_mode("stretch");
  expect(p, "crop_mode");
  p = this->Param(2, 4, 1.0);
  p.mutable_window_data_param()->set_context_pad(2);
  expect(p, "context_pad 2");
  p = this->Param(2, 4, 1.0);
  p.mutable_transform_param()->add_mean_value(1);
  p.mutable_transform_param()->add_mean_value(2);
  expect(p, "mean_value");
  // The only window is foreground; half a batch must be background.
  expect(this->Param(2, 4, 0.5), "has no background windows");
  this->Windows("# 0\na.png\n3 4 4\n1\n1 0.1 0 0 3 3\n");
  expect(this->Param(2, 4, 0.5), "has no foreground windows");
}

TYPED_TEST(WindowDataLayerTest, ImageErrorsAreRaisedByForward) {
  using Dtype = typename TypeParam::Dtype;
  this->Image("a.png", 4, 4, {1, 2, 3});
  auto expect = [this](const string& windows, const string& message) {
    this->Windows(windows);
    WindowDataLayer<Dtype> layer(this->Param(1, 4, 1.0));
    layer.SetUp({}, this->top_);
    try {
      layer.Forward({}, this->top_);
      ADD_FAILURE() << "no error; expected " << message;
    } catch (const IOError& e) {
      EXPECT_NE(string(e.what()).find(message), string::npos) << e.what();
    }
  };
  expect("# 0\ngone.png\n3 4 4\n1\n1 0.9 0 0 3 3\n", this->dir_ + "gone.png");
  expect("# 0\na.png\n3 4 4\n1\n1 0.9 1 1 4 3\n",
         "image '" + this->dir_ +
             "a.png' (4 x 4) does not contain the "
             "window (1, 1) to (4, 3)");
}

}  // namespace
}  // namespace poseidon
