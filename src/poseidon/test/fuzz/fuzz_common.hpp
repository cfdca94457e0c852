// Shared set-up of the libFuzzer harnesses (one executable per loader,
// fuzz_<loader>.cpp; built with -DBUILD_fuzzers=ON, see
// docs/reliability.md).
//
// The contract every harness checks: whatever the bytes, the loader returns
// or throws a poseidon::Error. Anything else is a finding: a crash or a
// sanitizer report, a CHECK failure (glog aborts), another exception type
// escaping (std::terminate), an allocation libFuzzer finds too large
// (-malloc_limit_mb), or a hang (-timeout).
//
// Thread safety: Init() and ScratchDir() are called from libFuzzer's one
// thread.
#ifndef POSEIDON_TEST_FUZZ_FUZZ_COMMON_HPP_
#define POSEIDON_TEST_FUZZ_FUZZ_COMMON_HPP_

#include <google/protobuf/message.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "poseidon/common.hpp"
#include "poseidon/solver.hpp"

namespace poseidon {
namespace fuzz {

// Quiet logging (glog errors only, protobuf's none), one compute thread, and a host allocation
// limit of kAllocationLimit, so that an input declaring a large but legal
// size fails fast with OutOfMemoryError. Idempotent.
void Init();
constexpr size_t kAllocationLimit = size_t{256} << 20;

// A directory of this process for the files a harness writes (removed at
// exit); every path a fuzzed message names is moved into it.
const std::string& ScratchDir();
// Writes `size` bytes to ScratchDir()/name; returns the path.
std::string WriteScratchFile(const std::string& name, const uint8_t* data,
                             size_t size);
std::string WriteScratchFile(const std::string& name,
                             const std::string& contents);

// Rewrites every string field naming a file or directory (source, mean_file,
// file_name, root_folder, snapshot_prefix, net, weights, ...), in the message
// and all messages inside it, to a path under ScratchDir(), so that fuzzed
// inputs neither read nor write the rest of the file system.
void ConfineFilePaths(google::protobuf::Message* message);

// The source tree, for inputs a harness builds from repository files.
std::string SourcePath(const std::string& relative);

// The solver types, in the order the first byte of a fuzz_solverstate
// input picks them.
extern const char* const kSolverTypes[6];
// A solver of `type` over a small DummyData net (fixed seed), snapshotting
// to `prefix`: the solver fuzz_solverstate restores into and fuzz_seeds
// writes its states with.
template <typename Dtype>
std::unique_ptr<Solver<Dtype>> MakeStateSolver(const std::string& type,
                                               const std::string& prefix);

}  // namespace fuzz
}  // namespace poseidon

// Runs the statements given; a poseidon::Error (the clear error bad input
// must give) is the expected outcome and is swallowed, anything else
// escapes. Variadic: a braced block may hold commas.
#define POSEIDON_FUZZ_EXPECT_ERRORS(...) \
  do {                                   \
    try {                                \
      __VA_ARGS__;                       \
    } catch (const ::poseidon::Error&) { \
    }                                    \
  } while (0)

#endif  // POSEIDON_TEST_FUZZ_FUZZ_COMMON_HPP_
