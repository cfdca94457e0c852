// Helpers shared by the tests (compiled into the test binary).
#include "test_util.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "poseidon/util/gpu_context.hpp"
#include "poseidon/util/io.hpp"

namespace poseidon {
namespace test {
namespace {

std::mutex g_temp_mutex;
std::vector<std::string>& TempDirs() {
  static auto* dirs = new std::vector<std::string>();
  return *dirs;
}

// Removes every directory MakeTempDir handed out when the test run ends.
class TempDirCleaner final : public ::testing::Environment {
 public:
  void TearDown() override {
    std::lock_guard<std::mutex> lock(g_temp_mutex);
    for (const auto& dir : TempDirs()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
    TempDirs().clear();
  }
};

const auto* const g_cleaner =
    ::testing::AddGlobalTestEnvironment(new TempDirCleaner);

}  // namespace

std::string GpuSkipReason() {
  static const std::string reason = [] {
    const std::string why = gpu::UnavailableReason();
    // scripts/gpu_check.sh sets POSEIDON_REQUIRE_GPU=1: there a GPU test
    // that cannot run is a failure, not a skip.
    const char* require = std::getenv("POSEIDON_REQUIRE_GPU");
    if (!why.empty() && require != nullptr && std::string(require) == "1") {
      LOG(FATAL) << "POSEIDON_REQUIRE_GPU=1, but no GPU is usable: " << why;
    }
    return why;
  }();
  return reason;
}

NetParameter ParseNet(const std::string& text) {
  NetParameter param;
  ReadProtoFromTextString(text, "<test net>", &param);
  return param;
}

std::string MakeTempDir() {
  std::string tmpl = "/tmp/poseidon_test_XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  CHECK(dir != nullptr) << "mkdtemp failed";
  std::lock_guard<std::mutex> lock(g_temp_mutex);
  TempDirs().push_back(dir);
  return std::string(dir);
}

}  // namespace test
}  // namespace poseidon
