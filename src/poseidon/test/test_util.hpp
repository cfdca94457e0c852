// Shared test fixtures: typed tests over device x dtype (CPU float/double here;
// GPU types join in CUDA builds and carry "GPU" in their names so CPU-only CI
// can filter them), paths to test data, and small blob helpers.
#ifndef POSEIDON_TEST_TEST_UTIL_HPP_
#define POSEIDON_TEST_TEST_UTIL_HPP_

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "poseidon/blob.hpp"
#include "poseidon/common.hpp"
#include "poseidon/filler.hpp"

namespace poseidon {
namespace test {

template <typename TypeParam>
struct CPUDevice {
  using Dtype = TypeParam;
  static constexpr Poseidon::Brew device = Poseidon::CPU;
};

// Base fixture for typed tests: sets the mode and a fixed seed per test.
template <typename TypeParam>
class MultiDeviceTest : public ::testing::Test {
 public:
  using Dtype = typename TypeParam::Dtype;

 protected:
  MultiDeviceTest() {
    Poseidon::set_mode(TypeParam::device);
    Poseidon::set_random_seed(1701);
  }
};

using TestDtypesAndDevices =
    ::testing::Types<CPUDevice<float>, CPUDevice<double>>;
using TestDtypes = ::testing::Types<float, double>;

inline std::string SourceDir() { return POSEIDON_SOURCE_DIR; }
inline std::string BinaryDir() { return POSEIDON_BINARY_DIR; }
inline std::string TestDataDir() {
  return SourceDir() + "/src/poseidon/test/test_data";
}

// A fresh temporary directory, removed when the test run ends.
std::string MakeTempDir();

// Fills a blob with Gaussian noise N(0, std^2).
template <typename Dtype>
void FillGaussian(Blob<Dtype>* blob, double std = 1.0) {
  FillerParameter p;
  p.set_type("gaussian");
  p.set_std(std);
  GetFiller<Dtype>(p)->Fill(blob);
}

// Fills a blob with U(min, max).
template <typename Dtype>
void FillUniform(Blob<Dtype>* blob, double min, double max) {
  FillerParameter p;
  p.set_type("uniform");
  p.set_min(min);
  p.set_max(max);
  GetFiller<Dtype>(p)->Fill(blob);
}

}  // namespace test
}  // namespace poseidon

#endif  // POSEIDON_TEST_TEST_UTIL_HPP_
