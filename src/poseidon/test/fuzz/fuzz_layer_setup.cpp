// libFuzzer harness: the set-up of the sliding-window and fully connected
// layers (Convolution, Deconvolution, Im2col, Pooling, SPP, Crop,
// InnerProduct). One input is a small net, an Input layer and one of them
// whose numeric fields come from the input, favouring the edges of their
// types (fuzz_layers.hpp); the Net is built (layers set up, shapes
// inferred, weights filled) and, when every blob is small, run forward and
// backward once. Seeds: a valid net of every layer and the geometries of
// issue 35 (fuzz_seeds).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fuzz_common.hpp"
#include "fuzz_layers.hpp"
#include "poseidon/net.hpp"
#include "poseidon/util/alloc_guard.hpp"

namespace {

// Blobs at most this large run a pass: a layer's work is then at most the
// product of two of them (a window's elements, or the weights, per output).
constexpr int kMaxRunCount = 4096;
// Below fuzz::kAllocationLimit: legal but large nets (a million outputs of a
// 4 x 4 kernel: 200 MB of weights to fill) took 19 s an input under ASan;
// now they fail fast, by the checks before allocation this harness tests.
constexpr size_t kLayerAllocationLimit = size_t{16} << 20;

bool SmallEnough(const poseidon::Net<float>& net) {
  for (const auto& blob : net.blobs()) {
    if (blob->count() > kMaxRunCount) return false;
  }
  for (const auto& blob : net.params()) {
    if (blob->count() > kMaxRunCount) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  fuzz::Init();
  SetHostAllocationLimit(kLayerAllocationLimit);
  const fuzz::LayerSetupCase c = fuzz::DecodeLayerSetup(data, size);
  POSEIDON_FUZZ_EXPECT_ERRORS({
    Net<float> net(fuzz::BuildLayerSetupNet(c));
    if (SmallEnough(net)) {
      net.Forward();
      net.Backward();
    }
  });
  return 0;
}
