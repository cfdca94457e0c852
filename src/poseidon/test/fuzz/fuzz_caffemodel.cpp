// libFuzzer harness: a binary .caffemodel, as `--weights` and caffe.Net
// read it: parsed, upgraded (V0 and V1 nets with their blobs), copied into
// LeNet (models/lenet/deploy.prototxt) by layer name; every stored blob also
// loaded on its own (as a mean file is), and a net built from the file's
// own layers (blobs given inline). Seeds: LeNet's weights in the current,
// V1 and V0 formats, and CIFAR-10 quick's (fuzz_seeds).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_common.hpp"
#include "poseidon/net.hpp"
#include "poseidon/util/io.hpp"
#include "poseidon/util/upgrade_proto.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  fuzz::Init();
  // Copying weights changes only values, never what the next input sees.
  static const std::unique_ptr<Net<float>> lenet = [] {
    NetParameter param;
    ReadNetParamsFromTextFile(fuzz::SourcePath("models/lenet/deploy.prototxt"),
                              &param);
    param.mutable_layer(0)->mutable_input_param()->mutable_shape(0)->set_dim(
        0, 1);
    return std::make_unique<Net<float>>(param);
  }();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  NetParameter param;
  POSEIDON_FUZZ_EXPECT_ERRORS({
    ReadProtoFromBinaryString(bytes, "fuzz.caffemodel", &param);
    UpgradeNetAsNeeded("fuzz.caffemodel", &param);
  });
  POSEIDON_FUZZ_EXPECT_ERRORS(lenet->CopyTrainedLayersFrom(param));
  for (const LayerParameter& layer : param.layer()) {
    for (const BlobProto& stored : layer.blobs()) {
      POSEIDON_FUZZ_EXPECT_ERRORS({
        Blob<float> blob;
        blob.FromProto(stored);
      });
    }
  }
  if (param.layer_size() <= 32) {
    POSEIDON_FUZZ_EXPECT_ERRORS({
      fuzz::ConfineFilePaths(&param);
      Net<float> net(param);
    });
  }
  return 0;
}
