// Helpers shared by the tests (compiled into the test binary).
#include "test_util.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "poseidon/util/gpu_context.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/timeline.hpp"

namespace poseidon {
namespace test {
namespace {

std::mutex g_temp_mutex;
// Each directory with the process that made it: a forked death-test child
// that leaves through exit() must not remove its parent's directories.
struct TempDir {
  pid_t owner;
  std::string path;
};
std::vector<TempDir>& TempDirs() {
  static auto* dirs = new std::vector<TempDir>();
  return *dirs;
}

void RemoveTempDirs() {
  std::lock_guard<std::mutex> lock(g_temp_mutex);
  const pid_t self = ::getpid();
  for (const TempDir& dir : TempDirs()) {
    if (dir.owner != self) continue;
    std::error_code ignored;
    std::filesystem::remove_all(dir.path, ignored);
  }
  TempDirs().clear();
}

// Removes every directory MakeTempDir handed out when the test run ends.
// A death test's child leaves through exit() and never reaches TearDown, so
// the directories are removed at exit too.
class TempDirCleaner final : public ::testing::Environment {
 public:
  void TearDown() override { RemoveTempDirs(); }
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
  static const int registered = std::atexit(RemoveTempDirs);
  (void)registered;
  std::lock_guard<std::mutex> lock(g_temp_mutex);
  TempDirs().push_back({::getpid(), dir});
  return std::string(dir);
}

int CountTimelineEvents(Timeline* timeline, const std::string& lane,
                        const std::string& cat) {
  const std::string tid = StrCat("\"tid\":", timeline->Lane(lane), ",");
  const std::string category = StrCat("\"cat\":\"", cat, "\"");
  const std::string json = timeline->ToJson();
  int n = 0;
  size_t at = 0;
  while (at < json.size()) {
    size_t end = json.find('\n', at);
    if (end == std::string::npos) end = json.size();
    const std::string line = json.substr(at, end - at);
    if (line.find(tid) != std::string::npos &&
        line.find(category) != std::string::npos) {
      ++n;
    }
    at = end + 1;
  }
  return n;
}

}  // namespace test
}  // namespace poseidon
