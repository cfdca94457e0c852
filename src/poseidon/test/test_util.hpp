// Shared test fixtures: typed tests over device x dtype (CPU float/double,
// and GPU float/double in CUDA builds, skipped with the reason where no GPU
// is usable), paths to test data, and small blob helpers.
#ifndef POSEIDON_TEST_TEST_UTIL_HPP_
#define POSEIDON_TEST_TEST_UTIL_HPP_

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "poseidon/blob.hpp"
#include "poseidon/common.hpp"
#include "poseidon/filler.hpp"
#include "poseidon/util/status.hpp"

namespace poseidon {
class Timeline;
namespace test {

template <typename TypeParam>
struct CPUDevice {
  using Dtype = TypeParam;
  static constexpr Poseidon::Brew device = Poseidon::CPU;
};

template <typename TypeParam>
struct GPUDevice {
  using Dtype = TypeParam;
  static constexpr Poseidon::Brew device = Poseidon::GPU;
};

// Why GPU tests cannot run here ("" when they can): a CPU-only build, or a
// CUDA build on a machine without a usable GPU.
std::string GpuSkipReason();

// Base fixture for typed tests: sets the mode and a fixed seed per test. A
// GPU variant skips (GTEST_SKIP, with the reason) where no GPU is usable;
// its constructor then runs in CPU mode, so that fixtures may build blobs.
template <typename TypeParam>
class MultiDeviceTest : public ::testing::Test {
 public:
  using Dtype = typename TypeParam::Dtype;

 protected:
  MultiDeviceTest() {
    const bool runnable =
        TypeParam::device == Poseidon::CPU || GpuSkipReason().empty();
    Poseidon::set_mode(runnable ? TypeParam::device : Poseidon::CPU);
    Poseidon::set_random_seed(1701);
  }
  void SetUp() override {
    if (TypeParam::device == Poseidon::GPU && !GpuSkipReason().empty()) {
      GTEST_SKIP() << "GPU test skipped: " << GpuSkipReason();
    }
  }
  ~MultiDeviceTest() override { Poseidon::set_mode(Poseidon::CPU); }
};

// Every typed layer test runs on the CPU and, in CUDA builds, on the GPU;
// GPU variants carry "GPUDevice" in their names (CPU-only CI filters or skips
// them).
#ifdef CPU_ONLY
using TestDtypesAndDevices =
    ::testing::Types<CPUDevice<float>, CPUDevice<double>>;
#else
using TestDtypesAndDevices =
    ::testing::Types<CPUDevice<float>, CPUDevice<double>, GPUDevice<float>,
                     GPUDevice<double>>;
#endif
// Names typed-test variants by device and type ("CPUFloat", "GPUDouble"),
// so GPU tests carry "GPU" in their names: pass as TYPED_TEST_SUITE's third
// argument.
struct DeviceNames {
  template <typename T>
  static std::string GetName(int) {
    const std::string device =
        T::device == Poseidon::GPU ? "GPU" : "CPU";
    return device + (sizeof(typename T::Dtype) == sizeof(float) ? "Float"
                                                                : "Double");
  }
};

using TestDtypes = ::testing::Types<float, double>;

// The source and build trees the test binary was built from; the variables
// POSEIDON_SOURCE_DIR / POSEIDON_BINARY_DIR override them where the binary
// runs on another machine (scripts/gpu_check.sh).
inline std::string SourceDir() {
  const char* dir = std::getenv("POSEIDON_SOURCE_DIR");
  return dir != nullptr ? dir : POSEIDON_SOURCE_DIR;
}
inline std::string BinaryDir() {
  const char* dir = std::getenv("POSEIDON_BINARY_DIR");
  return dir != nullptr ? dir : POSEIDON_BINARY_DIR;
}
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

// Asserts |want[i] - got[i]| <= tol (1 + |want[i]|) for each of the n
// elements, naming `what` and the first element that differs.
template <typename Dtype>
void ExpectRelativelyClose(const Dtype* want, const Dtype* got, int n,
                           double tol, const std::string& what) {
  for (int i = 0; i < n; ++i) {
    ASSERT_NEAR(want[i], got[i], tol * (1 + std::fabs(want[i])))
        << what << ": element " << i << " of " << n;
  }
}

// Sets Poseidon's thread count for a scope, then restores it.
class ScopedNumThreads {
 public:
  explicit ScopedNumThreads(int n) : saved_(Poseidon::num_threads()) {
    Poseidon::set_num_threads(n);
  }
  ~ScopedNumThreads() { Poseidon::set_num_threads(saved_); }
  POSEIDON_DISABLE_COPY_AND_ASSIGN(ScopedNumThreads);

 private:
  const int saved_;
};

// A NetParameter from prototxt text (a parse error throws, naming
// "<test net>").
NetParameter ParseNet(const std::string& text);

// The message of the ErrorType (any poseidon::Error by default) that `fn`
// throws; a test failure and "(no error)" when it throws none.
template <typename ErrorType = Error, typename Fn>
std::string ErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const ErrorType& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "(no error)";
}

// Whether `text` contains `part`; a failure shows both.
inline ::testing::AssertionResult Contains(const std::string& text,
                                           const std::string& part) {
  if (text.find(part) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "'" << part << "' is not in: " << text;
}

// The events of category `cat` on the timeline's lane `lane` so far (its
// trace has one event per line; a lane's events carry its id).
int CountTimelineEvents(Timeline* timeline, const std::string& lane,
                        const std::string& cat);

}  // namespace test
}  // namespace poseidon

#endif  // POSEIDON_TEST_TEST_UTIL_HPP_
