// libFuzzer harness: a binary .solverstate, as `--snapshot` reads it: the
// first byte picks the solver type (SGD, Nesterov, AdaGrad, RMSProp,
// AdaDelta, Adam), the rest is the state, restored into a fresh solver of
// that type (history shapes and counts checked, the weights it names
// loaded, the data moved on), which then trains one iteration. Seeds:
// states of each type written by the solvers (fuzz_seeds).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "poseidon/solver.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  fuzz::Init();
  if (size == 0) return 0;
  const char* type = fuzz::kSolverTypes[data[0] % 6];
  // The weights the seeds name (learned_net "snap_iter_0.caffemodel",
  // found beside the state).
  static const bool weights_written = [] {
    fuzz::MakeStateSolver<float>("SGD", fuzz::ScratchDir() + "/snap")
        ->Snapshot();
    return true;
  }();
  (void)weights_written;
  const std::string state =
      fuzz::WriteScratchFile("fuzz.solverstate", data + 1, size - 1);
  auto solver =
      fuzz::MakeStateSolver<float>(type, fuzz::ScratchDir() + "/run");
  POSEIDON_FUZZ_EXPECT_ERRORS({
    solver->Restore(state.c_str());
    solver->Step(1);
  });
  return 0;
}
