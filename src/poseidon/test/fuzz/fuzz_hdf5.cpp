// libFuzzer harness: HDF5 files as the HDF5Data layer reads them (datasets
// "data" and "label": their types, ranks and shapes checked, read as
// numbers, served in batches, moved on as a resumed solver does). Options
// pick the batch size, shuffling and the batches skipped.
//
// Two modes. Structured (the default): the input describes up to three
// datasets (name, element type, rank, dimensions, chunked storage with
// dimensions far beyond the bytes written, contents), written through the
// HDF5 library, so that every input is a well-formed file and what is
// fuzzed is Poseidon's reading of it. Raw (options[3] bit 0, honoured only
// with POSEIDON_FUZZ_HDF5_RAW=1): the bytes are the file itself; this also
// fuzzes libhdf5's own parser, whose crashes on corrupt files are bugs of
// that library (docs/reliability.md), which is why CI's smoke run leaves it
// out. Either way no HDF5 object may stay open after an input. Seeds: small
// files written by Poseidon's own HDF5 writer (fuzz_seeds).
#include <hdf5.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "fuzz_input.hpp"
#include "poseidon/layer_factory.hpp"

namespace {

// Element types a dataset may have: numbers Poseidon reads, and a string
// type it must refuse.
hid_t ElementType(uint8_t selector) {
  static const hid_t* const kTypes[] = {
      &H5T_NATIVE_SCHAR_g, &H5T_NATIVE_UCHAR_g,  &H5T_NATIVE_SHORT_g,
      &H5T_NATIVE_INT_g,   &H5T_NATIVE_LLONG_g,  &H5T_NATIVE_FLOAT_g,
      &H5T_NATIVE_DOUBLE_g, &H5T_C_S1_g};
  H5open();  // the type ids above exist once the library is open
  return *kTypes[selector % 8];
}

// Writes the datasets the input describes to `path`. Record 0: 8 bytes per
// dataset (name, type, rank, five dimensions); record 1 + d: the bytes of
// dataset d, repeated to fill it. A dimension byte >= 250 declares
// 2^(byte - 223) rows in chunked storage, of which nothing is written: from
// 2^27, more than the fuzz allocation limit holds even at one value a row,
// up to 2^32, more than a dimension may have; either must be refused
// before anything is allocated. (Smaller huge sizes were valid files that
// only took long: 2^25 empty rows shuffled for 30 s under the sanitizers.)
bool WriteStructured(const poseidon::fuzz::FuzzInput& input,
                     const std::string& path) {
  static const char* const kNames[] = {"data", "label", "extra", "Data"};
  const std::string& spec = input.records.empty() ? "" : input.records[0];
  const hid_t file =
      H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) return false;
  for (size_t d = 0; d < 3 && 8 * d + 8 <= spec.size(); ++d) {
    const uint8_t* b = reinterpret_cast<const uint8_t*>(spec.data()) + 8 * d;
    const int rank = b[2] % 6;
    std::vector<hsize_t> dims(rank);
    bool huge = false;
    size_t count = 1;
    for (int i = 0; i < rank; ++i) {
      if (b[3 + i] >= 250) {
        dims[i] = hsize_t{1} << (b[3 + i] - 223);
        huge = true;
      } else {
        dims[i] = b[3 + i] % 9;
      }
      count = huge ? 0 : count * dims[i];
    }
    const hid_t space = rank == 0 ? H5Screate(H5S_SCALAR)
                                  : H5Screate_simple(rank, dims.data(),
                                                     nullptr);
    hid_t type = H5Tcopy(ElementType(b[1]));
    if (b[1] % 8 == 7) H5Tset_size(type, 1 + b[1] / 8 % 8);
    const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    if (huge) {
      std::vector<hsize_t> chunk(rank, 1);
      H5Pset_chunk(plist, rank, chunk.data());
    }
    const hid_t set = H5Dcreate2(file, kNames[b[0] % 4], type, space,
                                 H5P_DEFAULT, plist, H5P_DEFAULT);
    if (set >= 0 && !huge && count > 0) {
      const std::string& bytes =
          d + 1 < input.records.size() ? input.records[d + 1] : spec;
      std::vector<char> buffer(count * H5Tget_size(type));
      for (size_t i = 0; i < buffer.size() && !bytes.empty(); ++i) {
        buffer[i] = bytes[i % bytes.size()];
      }
      H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data());
    }
    if (set >= 0) H5Dclose(set);
    H5Pclose(plist);
    H5Tclose(type);
    H5Sclose(space);
  }
  return H5Fclose(file) >= 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poseidon;
  fuzz::Init();
  static const bool raw_allowed = [] {
    const char* raw = std::getenv("POSEIDON_FUZZ_HDF5_RAW");
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // HDF5's own stack prints
    return raw != nullptr && std::string(raw) == "1";
  }();
  const fuzz::FuzzInput input = fuzz::SplitInput(data, size, 4);
  const std::string file = fuzz::ScratchDir() + "/data.h5";
  if (raw_allowed && (input.options[3] & 1)) {
    if (input.records.empty()) return 0;
    fuzz::WriteScratchFile("data.h5", input.records[0]);
  } else if (!WriteStructured(input, file)) {
    return 0;
  }
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
  // Every handle opened for the input is closed again (a leak LeakSanitizer
  // cannot tell from HDF5's own: see scripts/sanitizer_suppressions).
  const ssize_t open_objects = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  CHECK_EQ(open_objects, 0) << "HDF5 objects left open after an input";
  return 0;
}
