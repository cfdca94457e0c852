// SyncedMemory: one buffer that may live on the host, on a GPU, or both, and
// copies lazily to wherever it is read next. Blob holds two of these (data and
// diff). In a CPU-only build the device half compiles away.
//
// Head states, as in Caffe: UNINITIALIZED (nothing allocated; the first read
// gives zeros), HEAD_AT_CPU / HEAD_AT_GPU (that copy is the newest; the other
// is stale), SYNCED (both hold the same bytes). A read (cpu_data/gpu_data)
// copies only if its side is stale; a mutable_ access makes its side the
// head.
//
// Memory: device memory comes from the device's caching allocator, and host
// memory allocated while the thread is in GPU mode is pinned (from the pinned
// cache), so copies run at full speed (util/gpu_context.hpp). Copies run on
// the calling thread's stream; a copy to the host waits for it, so the host
// never reads a stale value. A copy to the device from pinned memory does
// not make the host wait: an event marks its end, and the host waits for it
// only before it next writes or frees the host copy. async_gpu_push() starts
// a copy to the device on another stream without waiting (the data prefetch
// thread's).
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
  // After set_cpu_data: copies the observed host bytes into memory of its
  // own, so that the observed buffer may go away. A no-op when the host
  // copy is owned already.
  void own_cpu_data();
  const void* gpu_data();
  void set_gpu_data(void* data);
  void* mutable_cpu_data();
  void* mutable_gpu_data();
  SyncedHead head() const { return head_; }
  size_t size() const { return size_; }
  // Whether the host copy is page-locked (pinned) memory.
  bool cpu_pinned() const { return cpu_pinned_; }
  // The GPU the device copy lives on, -1 if there is none.
  int device() const { return device_; }

#ifndef CPU_ONLY
  // Starts copying the host data to the device on `stream` and returns at
  // once; the head becomes SYNCED. The caller synchronises `stream` before
  // another stream reads the device copy or the host copy changes. Needs
  // head() == HEAD_AT_CPU.
  void async_gpu_push(void* stream);
#endif

 private:
  void ToCpu();
  void ToGpu();
  void AllocateCpu();
  void AllocateGpu();
  void FreeCpu();
  void FreeGpu();
  // Waits until a copy to the device has read the host copy (see above).
  void WaitForUpload();

  void* cpu_ptr_ = nullptr;
  void* gpu_ptr_ = nullptr;
  size_t size_ = 0;
  SyncedHead head_ = UNINITIALIZED;
  bool own_cpu_data_ = false;
  bool own_gpu_data_ = false;
  bool cpu_pinned_ = false;
  int device_ = -1;
  void* upload_event_ = nullptr;  // cudaEvent_t, made on first use
  bool upload_pending_ = false;
};

}  // namespace poseidon

#endif  // POSEIDON_SYNCEDMEM_HPP_
