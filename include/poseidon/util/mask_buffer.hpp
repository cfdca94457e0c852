// MaskBuffer<T>: a layer's buffer of integers (Dropout's keep mask,
// Eltwise MAX's argmax) that lives wherever the layer computes, as a Blob's
// data does (a SyncedMemory underneath, so device memory comes from the
// caching allocator and reads on the other device copy lazily). It keeps
// its capacity: Resize reallocates only when asked for more elements than
// ever before. Not thread-safe, like Blob.
#ifndef POSEIDON_UTIL_MASK_BUFFER_HPP_
#define POSEIDON_UTIL_MASK_BUFFER_HPP_

#include <memory>
#include <type_traits>

#include "poseidon/common.hpp"
#include "poseidon/syncedmem.hpp"

namespace poseidon {

template <typename T>
class MaskBuffer {
  static_assert(std::is_integral<T>::value, "masks hold integers");

 public:
  MaskBuffer() = default;
  POSEIDON_DISABLE_COPY_AND_ASSIGN(MaskBuffer);

  // Sets the element count; contents are kept only if no reallocation is
  // needed (callers rewrite the mask after resizing).
  void Resize(int count) {
    CHECK_GE(count, 0) << "MaskBuffer::Resize(" << count << ")";
    if (count > capacity_ || !memory_) {
      capacity_ = count > 0 ? count : 1;  // pointers exist even when empty
      memory_ = std::make_unique<SyncedMemory>(sizeof(T) * capacity_);
    }
    count_ = count;
  }
  int count() const { return count_; }

  const T* data_on(Poseidon::Brew dev) const {
    CHECK(memory_) << "MaskBuffer read before Resize";
    return static_cast<const T*>(dev == Poseidon::GPU ? memory_->gpu_data()
                                                      : memory_->cpu_data());
  }
  T* mutable_data_on(Poseidon::Brew dev) {
    CHECK(memory_) << "MaskBuffer written before Resize";
    return static_cast<T*>(dev == Poseidon::GPU ? memory_->mutable_gpu_data()
                                                : memory_->mutable_cpu_data());
  }

 private:
  std::unique_ptr<SyncedMemory> memory_;
  int capacity_ = 0;
  int count_ = 0;
};

}  // namespace poseidon

#endif  // POSEIDON_UTIL_MASK_BUFFER_HPP_
