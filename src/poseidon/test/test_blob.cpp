// Blob: shapes, axis canonicalisation, proto round trips and reductions.
#include <gtest/gtest.h>

#include "poseidon/blob.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename Dtype>
class BlobTest : public ::testing::Test {};
TYPED_TEST_SUITE(BlobTest, test::TestDtypes);

TYPED_TEST(BlobTest, ReshapeAndCounts) {
  Blob<TypeParam> blob({2, 3, 4, 5});
  EXPECT_EQ(blob.count(), 120);
  EXPECT_EQ(blob.count(1), 60);
  EXPECT_EQ(blob.count(1, 3), 12);
  EXPECT_EQ(blob.shape(-1), 5);
  EXPECT_EQ(blob.CanonicalAxisIndex(-4), 0);
  EXPECT_THROW(blob.CanonicalAxisIndex(4), ShapeError);
  EXPECT_EQ(blob.shape_string(), "2 3 4 5 (120)");
  EXPECT_EQ(blob.offset(1, 2, 3, 4), 119);
  blob.Reshape({7});
  EXPECT_EQ(blob.num(), 7);
  EXPECT_EQ(blob.channels(), 1);
  EXPECT_THROW(blob.Reshape({2, -1}), ShapeError);
}

TYPED_TEST(BlobTest, DataStartsZeroAndUpdates) {
  Blob<TypeParam> blob({3, 4});
  for (int i = 0; i < blob.count(); ++i) EXPECT_EQ(blob.cpu_data()[i], 0);
  for (int i = 0; i < blob.count(); ++i) {
    blob.mutable_cpu_data()[i] = i;
    blob.mutable_cpu_diff()[i] = 0.5 * i;
  }
  blob.Update();
  for (int i = 0; i < blob.count(); ++i) {
    EXPECT_DOUBLE_EQ(blob.cpu_data()[i], 0.5 * i);
  }
  EXPECT_DOUBLE_EQ(blob.asum_diff(), 0.5 * 66);
  EXPECT_DOUBLE_EQ(blob.sumsq_data(), 0.25 * 506);
}

TYPED_TEST(BlobTest, ProtoRoundTripAndLegacyShape) {
  Blob<TypeParam> blob({2, 3});
  for (int i = 0; i < 6; ++i) blob.mutable_cpu_data()[i] = i - 2.5;
  BlobProto proto;
  blob.ToProto(&proto);
  Blob<TypeParam> copy;
  copy.FromProto(proto);
  ASSERT_EQ(copy.shape(), blob.shape());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(copy.cpu_data()[i], i - 2.5);

  BlobProto legacy;
  legacy.set_num(1);
  legacy.set_channels(1);
  legacy.set_height(2);
  legacy.set_width(3);
  for (int i = 0; i < 6; ++i) legacy.add_data(i);
  EXPECT_TRUE(blob.ShapeEquals(legacy));
  Blob<TypeParam> wrong({3, 2});
  EXPECT_FALSE(wrong.ShapeEquals(legacy));
  EXPECT_THROW(wrong.FromProto(proto, /*reshape=*/false), ShapeError);
  legacy.clear_data();
  legacy.add_data(1);
  EXPECT_THROW(copy.FromProto(legacy), IOError);

  // A stored diff of the wrong length is a corrupt file too, not a crash.
  BlobProto bad_diff;
  blob.ToProto(&bad_diff);
  bad_diff.add_diff(1);
  EXPECT_THROW(copy.FromProto(bad_diff), IOError);
  bad_diff.clear_diff();
  bad_diff.add_double_diff(1);
  EXPECT_THROW(copy.FromProto(bad_diff), IOError);
}

TYPED_TEST(BlobTest, ShareDataAliases) {
  Blob<TypeParam> a({4}), b({4});
  b.ShareData(a);
  a.mutable_cpu_data()[2] = 7;
  EXPECT_EQ(b.cpu_data()[2], 7);
  b.mutable_cpu_diff()[0] = 1;
  EXPECT_EQ(a.cpu_diff()[0], 0);
}

}  // namespace
}  // namespace poseidon
