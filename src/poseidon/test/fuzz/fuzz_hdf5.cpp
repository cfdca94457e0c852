// libFuzzer harness: an HDF5 file as the HDF5Data layer reads it (datasets
// "data" and "label": their types, ranks and shapes checked, read as
// numbers, served in batches, moved on as a resumed solver does). Options
// pick the batch size and shuffling. Seeds: small HDF5 files written by
// Poseidon's own HDF5 writer (fuzz_seeds).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "fuzz_input.hpp"
#include "poseidon/layer_factory.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  fuzz::Init();
  const fuzz::FuzzInput input = fuzz::SplitInput(data, size, 1);
  if (input.records.empty()) return 0;
  const std::string file = fuzz::WriteScratchFile("data.h5", input.records[0]);
  fuzz::WriteScratchFile("list.txt", file + "\n");
  LayerParameter param;
  param.set_name("hdf5");
  param.set_type("HDF5Data");
  param.add_top("data");
  param.add_top("label");
  HDF5DataParameter* hdf5 = param.mutable_hdf5_data_param();
  hdf5->set_source(fuzz::ScratchDir() + "/list.txt");
  hdf5->set_batch_size(1 + input.options[0] % 5);
  hdf5->set_shuffle(input.options[1] & 1);
  POSEIDON_FUZZ_EXPECT_ERRORS({
    auto layer = LayerRegistry<float>::CreateLayer(param);
    Blob<float> top_data, top_label;
    const vector<Blob<float>*> bottom, top{&top_data, &top_label};
    layer->SetUp(bottom, top);
    layer->Forward(bottom, top);
    layer->SkipBatches(input.options[2] % 8);
    layer->Forward(bottom, top);
  });
  return 0;
}
