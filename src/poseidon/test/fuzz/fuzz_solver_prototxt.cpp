// libFuzzer harness: a solver prototxt (text), as `poseidon_train train
// --solver` reads it: parsed, upgraded (solver_type), the solver built
// (train and test nets, lr policy, snapshot settings checked) and run for
// two iterations. A solver without a net of its own trains the small net
// below. Seeds: the repository's solver prototxts (fuzz_seeds).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "poseidon/solver.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/io.hpp"

namespace {

// DummyData -> InnerProduct -> SoftmaxWithLoss, in both phases.
const char kNet[] = R"(
name: "fuzz_net"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 }
                     data_filler { type: "gaussian" }
                     data_filler { type: "constant" value: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 2 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label"
  top: "loss" }
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  fuzz::Init();
  const std::string text(reinterpret_cast<const char*>(data), size);
  POSEIDON_FUZZ_EXPECT_ERRORS({
    SolverParameter param;
    ReadProtoFromTextString(text, "fuzz_solver.prototxt", &param);
    fuzz::ConfineFilePaths(&param);
    // Nets named by file cannot be followed (they are confined); use the
    // inline ones, or the small net.
    param.clear_net();
    param.clear_train_net();
    param.clear_test_net();
    if (!param.has_net_param() && !param.has_train_net_param()) {
      ReadProtoFromTextString(kNet, "fuzz net", param.mutable_net_param());
    }
    // Bounds on the work of one execution, not on what is valid.
    for (int i = 0; i < param.test_iter_size(); ++i) {
      param.set_test_iter(i, std::min(param.test_iter(i), 3));
    }
    param.set_iter_size(std::min(param.iter_size(), 3));
    param.set_solver_mode(SolverParameter::CPU);
    auto solver = CreateSolver<float>(param);
    solver->Step(2);
  });
  return 0;
}
