// util/image_io and the DataTransformer's image paths: reading, encoding,
// decoding, Datum conversion, list files.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <opencv2/imgcodecs.hpp>  // IMREAD_* flags
#include <opencv2/core.hpp>

#include "poseidon/data_transformer.hpp"
#include "poseidon/util/image_codecs.hpp"
#include "poseidon/util/image_io.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

// A 3 x 4 BGR image whose pixel (h, w) channel c is 10 * (h * 4 + w) + c.
cv::Mat TestImage() {
  cv::Mat image(3, 4, CV_8UC3);
  for (int h = 0; h < 3; ++h)
    for (int w = 0; w < 4; ++w)
      for (int c = 0; c < 3; ++c)
        image.at<cv::Vec3b>(h, w)[c] = static_cast<uchar>(10 * (h * 4 + w) + c);
  return image;
}

string WritePng(const cv::Mat& image) {
  const string path = test::MakeTempDir() + "/image.png";
  CHECK(codecs::Write(path, image));
  return path;
}

TEST(ImageIOTest, ReadImageToDatumStoresChannelMajorPixels) {
  const string path = WritePng(TestImage());
  Datum datum;
  ReadImageToDatum(path, 3, 0, 0, true, "", &datum);
  EXPECT_FALSE(datum.encoded());
  EXPECT_EQ(datum.label(), 3);
  EXPECT_EQ(datum.channels(), 3);
  EXPECT_EQ(datum.height(), 3);
  EXPECT_EQ(datum.width(), 4);
  ASSERT_EQ(datum.data().size(), 36u);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 12; ++i)
      EXPECT_EQ(static_cast<uchar>(datum.data()[c * 12 + i]), 10 * i + c);

  ReadImageToDatum(path, 0, 6, 8, false, "", &datum);
  EXPECT_EQ(datum.channels(), 1);
  EXPECT_EQ(datum.height(), 6);
  EXPECT_EQ(datum.width(), 8);
}

TEST(ImageIOTest, EncodedDatumsKeepTheFileOrReencode) {
  const string path = WritePng(TestImage());
  Datum datum;
  ReadImageToDatum(path, 1, 0, 0, true, "png", &datum);
  EXPECT_TRUE(datum.encoded());
  EXPECT_EQ(datum.data(), ReadFileToString(path));  // the file's own bytes
  const cv::Mat decoded = DecodeDatumToCVMatNative(datum);
  ASSERT_EQ(decoded.channels(), 3);
  EXPECT_EQ(cv::norm(decoded, TestImage(), cv::NORM_INF), 0);
  EXPECT_EQ(DecodeDatumToCVMat(datum, false).channels(), 1);

  // Gray requested from a colour file: re-encoded as 1 channel.
  ReadImageToDatum(path, 1, 0, 0, false, "png", &datum);
  EXPECT_NE(datum.data(), ReadFileToString(path));
  EXPECT_EQ(DecodeDatumToCVMatNative(datum).channels(), 1);

  ReadImageToDatum(path, 1, 5, 7, true, "png", &datum);
  const cv::Mat resized = DecodeDatumToCVMatNative(datum);
  EXPECT_EQ(resized.rows, 5);
  EXPECT_EQ(resized.cols, 7);

  Datum garbage;
  garbage.set_encoded(true);
  garbage.set_data("not an image");
  EXPECT_THROW(DecodeDatumToCVMat(garbage, true), IOError);
}

TEST(ImageIOTest, ErrorsNameTheImage) {
  const string dir = test::MakeTempDir();
  Datum datum;
  try {
    ReadImageToDatum(dir + "/absent.png", 0, 0, 0, true, "", &datum);
    FAIL() << "a missing image was read";
  } catch (const IOError& e) {
    EXPECT_NE(string(e.what()).find(dir + "/absent.png"), string::npos);
  }
  WriteFileAtomically(dir + "/fake.png", "not a png");
  EXPECT_THROW(ReadImageToCVMat(dir + "/fake.png", 0, 0, true), IOError);
  EXPECT_THROW(
      ReadImageToDatum(dir + "/fake.png", 0, 0, 0, true, "png", &datum),
      IOError);
  EXPECT_THROW(ReadImageToCVMat(dir + "/fake.png", 4, 0, true), ConfigError);
  EXPECT_THROW(CVMatToDatum(cv::Mat(2, 2, CV_32FC1), &datum), ShapeError);
}

// OpenCV reports some failures by throwing cv::Exception (an encoder it
// lacks, an allocation for a huge declared size); they arrive as Poseidon
// errors naming the image, never as a foreign exception.
TEST(ImageIOTest, OpenCvExceptionsBecomeErrors) {
  const string dir = test::MakeTempDir();
  ASSERT_TRUE(codecs::Write(dir + "/small.png", cv::Mat(3, 4, CV_8UC3,
                                                      cv::Scalar(1, 2, 3))));
  Datum datum;
  try {
    ReadImageToDatum(dir + "/small.png", 0, 0, 0, true, "xyz", &datum);
    FAIL() << "encoded as .xyz";
  } catch (const ConfigError& e) {
    EXPECT_NE(string(e.what()).find("small.png' as 'xyz': OpenCV failed"),
              string::npos)
        << e.what();
  }
}

TEST(ImageIOTest, ReadImageListParsesPathsAndLabels) {
  const string list = test::MakeTempDir() + "/list.txt";
  WriteFileAtomically(list,
                      "a.png 0\n\n  dir/with space.jpg\t12 \r\nc.png -1\n");
  const auto entries = ReadImageList(list);
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0], std::make_pair(string("a.png"), 0));
  EXPECT_EQ(entries[1], std::make_pair(string("dir/with space.jpg"), 12));
  EXPECT_EQ(entries[2], std::make_pair(string("c.png"), -1));

  for (const char* bad : {"a.png 0\nb.png x\n", "a.png 0\nb.png\n",
                          "a.png 0\n7\n", "a.png 0\nb.png 1.5\n"}) {
    WriteFileAtomically(list, bad);
    try {
      ReadImageList(list);
      FAIL() << "accepted: " << bad;
    } catch (const IOError& e) {
      EXPECT_NE(string(e.what()).find(list + ":2:"), string::npos) << e.what();
    }
  }
  WriteFileAtomically(list, "\n\n");
  EXPECT_THROW(ReadImageList(list), IOError);
  EXPECT_THROW(ReadImageList(list + ".missing"), IOError);
}

template <typename TypeParam>
class ImageTransformTest : public test::MultiDeviceTest<TypeParam> {};
TYPED_TEST_SUITE(ImageTransformTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(ImageTransformTest, MatAndDatumGiveTheSameResult) {
  using Dtype = typename TypeParam::Dtype;
  TransformationParameter p;
  p.set_crop_size(2);
  p.set_scale(0.5);
  p.add_mean_value(1);
  p.add_mean_value(2);
  p.add_mean_value(3);
  DataTransformer<Dtype> t(p, TEST);
  const cv::Mat image = TestImage();
  EXPECT_EQ(t.InferBlobShape(image), (vector<int>{1, 3, 2, 2}));
  Blob<Dtype> from_mat({1, 3, 2, 2});
  t.Transform(image, &from_mat);
  Datum datum;
  CVMatToDatum(image, &datum);
  Blob<Dtype> from_datum({1, 3, 2, 2});
  t.Transform(datum, &from_datum);
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(from_mat.cpu_data()[i], from_datum.cpu_data()[i]);
  }
  // Centre crop: h_off = 0, w_off = 1. Channel 2 at (1, 0) is pixel (1, 1).
  EXPECT_DOUBLE_EQ(from_mat.data_at(0, 2, 1, 0), (10 * 5 + 2 - 3) * 0.5);

  vector<cv::Mat> images{image, image};
  Blob<Dtype> batch({2, 3, 2, 2});
  t.Transform(images, &batch);
  EXPECT_EQ(batch.data_at(1, 2, 1, 0), from_mat.data_at(0, 2, 1, 0));
}

TYPED_TEST(ImageTransformTest, EncodedDatumsHonourForceColorAndGray) {
  using Dtype = typename TypeParam::Dtype;
  Datum datum;
  ReadImageToDatum(WritePng(TestImage()), 0, 0, 0, true, "png", &datum);
  TransformationParameter p;
  EXPECT_EQ(DataTransformer<Dtype>(p, TEST).InferBlobShape(datum),
            (vector<int>{1, 3, 3, 4}));
  p.set_force_gray(true);
  DataTransformer<Dtype> gray(p, TEST);
  EXPECT_EQ(gray.InferBlobShape(datum), (vector<int>{1, 1, 3, 4}));
  Blob<Dtype> blob({1, 1, 3, 4});
  gray.Transform(datum, &blob);

  cv::Mat one_channel(2, 2, CV_8UC1, cv::Scalar(9));
  ReadImageToDatum(WritePng(one_channel), 0, 0, 0, false, "png", &datum);
  p.set_force_gray(false);
  p.set_force_color(true);
  DataTransformer<Dtype> color(p, TEST);
  Blob<Dtype> rgb({1, 3, 2, 2});
  color.Transform(datum, &rgb);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(rgb.cpu_data()[i], 9);
}

// The codecs come from the plugin beside the library; the library itself
// does not link OpenCV's imgcodecs, whose dependencies (GDAL and some 150
// libraries) cost every process 0.2 s at start.
TEST(ImageCodecsTest, PluginBesideTheLibraryRoundTripsAnImage) {
  const string plugin = codecs::PluginPath();
  EXPECT_EQ(plugin, StrCat(POSEIDON_BINARY_DIR, "/lib/libposeidon_imgcodecs.so"));
  EXPECT_TRUE(FileExists(plugin)) << plugin;
  std::vector<uchar> bytes;
  ASSERT_TRUE(codecs::Encode(".png", TestImage(), &bytes));
  const cv::Mat buffer(1, static_cast<int>(bytes.size()), CV_8UC1,
                       bytes.data());
  const cv::Mat decoded = codecs::Decode(buffer, cv::IMREAD_COLOR);
  ASSERT_EQ(decoded.size(), TestImage().size());
  EXPECT_EQ(cv::norm(decoded, TestImage(), cv::NORM_INF), 0);
  EXPECT_TRUE(codecs::Read(test::MakeTempDir() + "/none.png",
                           cv::IMREAD_COLOR).empty());
}

TEST(ImageCodecsTest, LibraryDoesNotLinkImgcodecs) {
  const string command =
      StrCat("ldd '", POSEIDON_BINARY_DIR, "/lib/libposeidon.so' 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  string out;
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof(chunk), pipe)) > 0) out.append(chunk, n);
  ASSERT_EQ(pclose(pipe), 0) << out;
  EXPECT_NE(out.find("libopencv_core"), string::npos) << out;
  EXPECT_EQ(out.find("libopencv_imgcodecs"), string::npos) << out;
}

}  // namespace
}  // namespace poseidon
