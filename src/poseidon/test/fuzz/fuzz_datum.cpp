// libFuzzer harness: Datum records as a Data layer reads them from an LMDB
// (raw uint8 pixels, float_data, or encoded images), through the data
// transformer. The records are written to a real LMDB, read by a real Data
// layer (prefetch thread included) for a few batches, with the data moved on
// as a resumed solver does. Options pick the transformation (crop, mirror,
// phase, mean values, scale, force_color/force_gray) and the batch size.
// Seeds: Fashion-MNIST images as raw, float and PNG/JPEG Datums
// (fuzz_seeds).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "fuzz_input.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/util/db.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  fuzz::Init();
  const fuzz::FuzzInput input = fuzz::SplitInput(data, size, 6);
  if (input.records.empty()) return 0;
  const std::string source = fuzz::ScratchDir() + "/lmdb";
  std::filesystem::remove_all(source);
  {
    db::Writer writer("lmdb", source);
    for (size_t i = 0; i < input.records.size(); ++i) {
      writer.Put(StrCat("record_", i), input.records[i]);
    }
    writer.Finish();
  }
  const uint8_t flags = input.options[0];
  LayerParameter param;
  param.set_name("data");
  param.set_type("Data");
  param.add_top("data");
  param.add_top("label");
  param.set_phase(flags & 1 ? TRAIN : TEST);
  param.mutable_data_param()->set_source(source);
  param.mutable_data_param()->set_batch_size(1 + input.options[2] % 4);
  param.mutable_data_param()->set_prefetch(1 + (flags >> 6));
  TransformationParameter* transform = param.mutable_transform_param();
  transform->set_mirror(flags & 2);
  transform->set_force_color(flags & 4);
  transform->set_force_gray((flags & 12) == 8);
  if (flags & 16) transform->set_scale(1.0f / 256);
  for (int i = 0; i < (flags >> 5 & 1) * (1 + 2 * (input.options[3] & 1));
       ++i) {
    transform->add_mean_value(100 + i);
  }
  transform->set_crop_size(input.options[1] % 32);
  POSEIDON_FUZZ_EXPECT_ERRORS({
    auto layer = LayerRegistry<float>::CreateLayer(param);
    Blob<float> top_data, top_label;
    const vector<Blob<float>*> bottom, top{&top_data, &top_label};
    layer->SetUp(bottom, top);
    layer->Forward(bottom, top);
    layer->SkipBatches(input.options[3] >> 1 & 7);
    layer->Forward(bottom, top);
    layer->Forward(bottom, top);
  });
  return 0;
}
