// Splits a fuzz input into the options and records of the data harnesses
// (fuzz_datum, fuzz_image, fuzz_hdf5); fuzz_seeds writes inputs the same
// way (EncodeRecords).
//
// Layout: 4 option bytes, then records, each a 2-byte little-endian length
// and that many bytes (a short last record takes what is left).
#ifndef POSEIDON_TEST_FUZZ_FUZZ_INPUT_HPP_
#define POSEIDON_TEST_FUZZ_FUZZ_INPUT_HPP_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace poseidon {
namespace fuzz {

struct FuzzInput {
  uint8_t options[4] = {0, 0, 0, 0};
  std::vector<std::string> records;
};

inline FuzzInput SplitInput(const uint8_t* data, size_t size,
                            size_t max_records) {
  FuzzInput input;
  size_t at = 0;
  for (int i = 0; i < 4 && at < size; ++i) input.options[i] = data[at++];
  while (at < size && input.records.size() < max_records) {
    size_t length = data[at];
    if (at + 1 < size) length |= static_cast<size_t>(data[at + 1]) << 8;
    at += 2;
    if (at > size) break;
    length = std::min(length, size - at);
    input.records.emplace_back(reinterpret_cast<const char*>(data + at),
                               length);
    at += length;
  }
  return input;
}

inline std::string EncodeRecords(const uint8_t options[4],
                                 const std::vector<std::string>& records) {
  std::string out(reinterpret_cast<const char*>(options), 4);
  for (const std::string& r : records) {
    const size_t length = std::min<size_t>(r.size(), 65535);
    out += static_cast<char>(length & 0xff);
    out += static_cast<char>(length >> 8);
    out += r.substr(0, length);
  }
  return out;
}

}  // namespace fuzz
}  // namespace poseidon

#endif  // POSEIDON_TEST_FUZZ_FUZZ_INPUT_HPP_
