// Shared by fuzz_layer_setup (the harness) and fuzz_seeds (its seeds): how
// an input describes a small net, an Input layer and one sliding-window or
// fully connected layer whose numeric fields come from the input, favouring
// the values at the edges of the fields' types.
//
// Input layout (bytes past the end read as 0):
//   1 byte   the layer: Convolution, Deconvolution, Im2col, Pooling, SPP,
//            Crop, InnerProduct (byte % 7)
//   1 byte   the number of bottom axes: 4, 3, 5 (byte % 3)
//   values   the bottom's dimensions, one per axis
//   2 bytes  flags: which optional fields are set, and in which form
//   values   kLayerValues field values (their use depends on the layer and
//            the flags; see BuildLayerSetupNet)
// A value is one byte b: b < 0xC0 gives b % 16; b < 0xF0 gives entry
// (b - 0xC0) % 16 of kEdgeValues; otherwise the next 8 bytes,
// little-endian. Each field takes the value cast to its type, so 2^63 - 1
// is 4294967295 in a uint32 field and -1 in an int32 one.
// Thread safety: none needed (libFuzzer's one thread).
#ifndef POSEIDON_TEST_FUZZ_FUZZ_LAYERS_HPP_
#define POSEIDON_TEST_FUZZ_FUZZ_LAYERS_HPP_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "poseidon/proto/caffe.pb.h"

namespace poseidon {
namespace fuzz {

constexpr int kLayerKinds = 7;
constexpr int kLayerValues = 16;

// What one input decodes to.
struct LayerSetupCase {
  int kind = 0;                // Convolution ... InnerProduct, as above
  std::vector<uint64_t> dims;  // the bottom's, 3 to 5 of them
  uint8_t flags = 0;
  uint8_t flags2 = 0;
  uint64_t values[kLayerValues] = {};
};

LayerSetupCase DecodeLayerSetup(const uint8_t* data, size_t size);
// The shortest input that decodes to `c`.
std::string EncodeLayerSetup(const LayerSetupCase& c);

// The net of `c`: "data" (Input of c.dims), for Crop also "ref" (Input of
// the reference dims), and the layer "fuzzed" writing "out"; TRAIN phase,
// force_backward.
NetParameter BuildLayerSetupNet(const LayerSetupCase& c);

// Writes fuzz_layer_setup's seeds under root/layer_setup: a valid net of
// every layer and the geometries of issue 35 (pad, stride and dilation
// 2147483647, pad 2000000000 and 4294967295, num_output 1000000000), and
// the inputs of its findings.
// Returns how many.
int WriteLayerSetupSeeds(const std::string& root);

}  // namespace fuzz
}  // namespace poseidon

#endif  // POSEIDON_TEST_FUZZ_FUZZ_LAYERS_HPP_
