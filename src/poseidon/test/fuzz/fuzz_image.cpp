// libFuzzer harness: an image file as the ImageData layer reads it (OpenCV
// decoding, resizing, the data transformer), and as convert_imageset stores
// it (ReadImageToDatum, raw and encoded). Options pick colour, resizing,
// crop and mirror. Seeds: Fashion-MNIST images as PNG, JPEG, BMP, PGM/PPM,
// TIFF and WebP files (fuzz_seeds).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "fuzz_input.hpp"
#include "poseidon/layer_factory.hpp"
#include "poseidon/util/image_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  fuzz::Init();
  const fuzz::FuzzInput input = fuzz::SplitInput(data, size, 1);
  if (input.records.empty()) return 0;
  const std::string image = fuzz::WriteScratchFile("image", input.records[0]);
  fuzz::WriteScratchFile("list.txt", "image 3\n");
  const uint8_t flags = input.options[0];
  const bool is_color = flags & 1;
  const int resize = flags & 2 ? 1 + input.options[1] % 48 : 0;
  LayerParameter param;
  param.set_name("images");
  param.set_type("ImageData");
  param.add_top("data");
  param.add_top("label");
  param.set_phase(flags & 4 ? TRAIN : TEST);
  ImageDataParameter* images = param.mutable_image_data_param();
  images->set_source(fuzz::ScratchDir() + "/list.txt");
  images->set_root_folder(fuzz::ScratchDir() + "/");
  images->set_batch_size(2);
  images->set_is_color(is_color);
  images->set_new_height(resize);
  images->set_new_width(resize);
  param.mutable_transform_param()->set_mirror(flags & 8);
  param.mutable_transform_param()->set_crop_size(input.options[2] % 24);
  POSEIDON_FUZZ_EXPECT_ERRORS({
    auto layer = LayerRegistry<float>::CreateLayer(param);
    Blob<float> top_data, top_label;
    const vector<Blob<float>*> bottom, top{&top_data, &top_label};
    layer->SetUp(bottom, top);
    layer->Forward(bottom, top);
  });
  POSEIDON_FUZZ_EXPECT_ERRORS({
    Datum datum;
    ReadImageToDatum(image, 1, resize, resize, is_color,
                     flags & 16 ? "png" : "", &datum);
  });
  return 0;
}
