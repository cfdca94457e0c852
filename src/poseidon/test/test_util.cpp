// Helpers shared by the tests (compiled into the test binary).
#include "test_util.hpp"

#include <unistd.h>

namespace poseidon {
namespace test {

std::string MakeTempDir() {
  std::string tmpl = "/tmp/poseidon_test_XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  CHECK(dir != nullptr) << "mkdtemp failed";
  return std::string(dir);
}

}  // namespace test
}  // namespace poseidon
