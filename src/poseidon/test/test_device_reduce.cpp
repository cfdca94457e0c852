// DeviceSum, DeviceDot and OnesVector (util/device_reduce.hpp) on each
// device.
#include <gtest/gtest.h>

#include <vector>

#include "poseidon/util/device_reduce.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename TypeParam>
class DeviceReduceTest : public test::MultiDeviceTest<TypeParam> {};
TYPED_TEST_SUITE(DeviceReduceTest, test::TestDtypesAndDevices,
                 test::DeviceNames);

TYPED_TEST(DeviceReduceTest, SumAndDotStayInDeviceMemory) {
  using Dtype = typename TypeParam::Dtype;
  const Poseidon::Brew dev = TypeParam::device;
  Blob<Dtype> x({1000}), y({1000}), out({3});
  double sum = 0, dot = 0;
  for (int i = 0; i < 1000; ++i) {
    x.mutable_cpu_data()[i] = Dtype(i % 13) - 6;
    y.mutable_cpu_data()[i] = Dtype(i % 5) * Dtype(0.5);
    sum += x.cpu_data()[i];
    dot += double(x.cpu_data()[i]) * y.cpu_data()[i];
  }
  OnesVector<Dtype> ones;
  Dtype* o = out.mutable_data_on(dev);
  DeviceSum(dev, 1000, x.data_on(dev), o, &ones);
  DeviceDot(dev, 1000, x.data_on(dev), y.data_on(dev), o + 1);
  DeviceSum(dev, 0, x.data_on(dev), o + 2, &ones);
  EXPECT_EQ(out.cpu_data()[0], Dtype(sum));
  EXPECT_EQ(out.cpu_data()[1], Dtype(dot));
  EXPECT_EQ(out.cpu_data()[2], Dtype(0));
}

TYPED_TEST(DeviceReduceTest, OnesVectorGrowsAndKeepsItsOnes) {
  using Dtype = typename TypeParam::Dtype;
  const Poseidon::Brew dev = TypeParam::device;
  OnesVector<Dtype> ones;
  ones.Get(dev, 3);
  const Dtype* p = ones.Get(dev, 2);  // no refill: the same memory
  EXPECT_EQ(p, ones.Get(dev, 3));
  Blob<Dtype> out({1});
  DeviceSum(dev, 100, ones.Get(dev, 100), out.mutable_data_on(dev), &ones);
  EXPECT_EQ(out.cpu_data()[0], Dtype(100));
}

}  // namespace
}  // namespace poseidon
