// libFuzzer harness: a net prototxt (text), as `poseidon_train` and
// caffe.Net read it: parsed, upgraded (V0/V1 nets, input fields, data
// transformations), then a Net built from it in the TRAIN phase (layers
// set up, shapes inferred, weights filled). Seeds: every .prototxt of the
// repository (fuzz_seeds).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "poseidon/net.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/upgrade_proto.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  fuzz::Init();
  const std::string text(reinterpret_cast<const char*>(data), size);
  POSEIDON_FUZZ_EXPECT_ERRORS({
    NetParameter param;
    ReadProtoFromTextString(text, "fuzz.prototxt", &param);
    UpgradeNetAsNeeded("fuzz.prototxt", &param);
    fuzz::ConfineFilePaths(&param);
    if (!param.has_state()) param.mutable_state()->set_phase(TRAIN);
    Net<float> net(param);
  });
  return 0;
}
