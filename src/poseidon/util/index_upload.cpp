// IndexUpload: host values through a SyncedMemory to the device.
#include "poseidon/util/index_upload.hpp"

#include <cstring>

namespace poseidon {

const int* IndexUpload::On(Poseidon::Brew dev, const std::vector<int>& values) {
  if (values.empty()) return nullptr;
  if (dev == Poseidon::CPU) return values.data();
  const size_t bytes = values.size() * sizeof(int);
  if (!memory_ || memory_->size() < bytes) {
    memory_ = std::make_unique<SyncedMemory>(bytes);
  }
  // mutable_cpu_data waits for the previous upload to have read the host
  // half; gpu_data uploads without waiting (see syncedmem.hpp).
  std::memcpy(memory_->mutable_cpu_data(), values.data(), bytes);
  return static_cast<const int*>(memory_->gpu_data());
}

}  // namespace poseidon
