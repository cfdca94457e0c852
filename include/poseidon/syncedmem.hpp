// SyncedMemory: one buffer that may live on the host, on a GPU, or both, and
// copies lazily to wherever it is read next. Blob holds two of these (data and
// diff). In a CPU-only build the device half compiles away.
//
// Ownership: the memory is owned unless set_cpu_data()/set_gpu_data() handed in
// an external pointer, which is observed only. Not thread-safe: one thread at a
// time (communication threads get explicit buffers, never a SyncedMemory).
#ifndef POSEIDON_SYNCEDMEM_HPP_
#define POSEIDON_SYNCEDMEM_HPP_

#include <cstddef>

#include "poseidon/common.hpp"

namespace poseidon {

class SyncedMemory {
 public:
  enum SyncedHead { UNINITIALIZED, HEAD_AT_CPU, HEAD_AT_GPU, SYNCED };

  SyncedMemory() = default;
  explicit SyncedMemory(size_t size) : size_(size) {}
  ~SyncedMemory();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(SyncedMemory);

  const void* cpu_data();
  void set_cpu_data(void* data);  // observes `data`; caller keeps ownership
  const void* gpu_data();
  void set_gpu_data(void* data);
  void* mutable_cpu_data();
  void* mutable_gpu_data();
  SyncedHead head() const { return head_; }
  size_t size() const { return size_; }

 private:
  void ToCpu();
  void ToGpu();

  void* cpu_ptr_ = nullptr;
  void* gpu_ptr_ = nullptr;
  size_t size_ = 0;
  SyncedHead head_ = UNINITIALIZED;
  bool own_cpu_data_ = false;
  bool own_gpu_data_ = false;
  int device_ = -1;
};

}  // namespace poseidon

#endif  // POSEIDON_SYNCEDMEM_HPP_
