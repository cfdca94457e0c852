// Lazy host/device synchronisation for SyncedMemory.
#include "poseidon/syncedmem.hpp"

#include <cstdlib>
#include <cstring>

#include "poseidon/util/alloc_guard.hpp"

#ifndef CPU_ONLY
#include <cuda_runtime.h>

#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {
namespace {

// 64-byte alignment suits AVX-512 loads and cache lines.
constexpr size_t kHostAlignment = 64;

void* HostAlloc(size_t size) {
  size_t rounded = (size + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* ptr = std::aligned_alloc(kHostAlignment, rounded == 0 ? kHostAlignment : rounded);
  if (ptr == nullptr) {
    POSEIDON_THROW(OutOfMemoryError, "out of host memory allocating ", size,
                   " bytes");
  }
  return ptr;
}

}  // namespace

SyncedMemory::~SyncedMemory() {
  FreeCpu();
  FreeGpu();
#ifndef CPU_ONLY
  if (upload_event_ != nullptr) {
    cudaEventDestroy(static_cast<cudaEvent_t>(upload_event_));
  }
#endif
}

void SyncedMemory::WaitForUpload() {
#ifndef CPU_ONLY
  if (!upload_pending_) return;
  upload_pending_ = false;
  // A destructor may get here: errors are not thrown (a failed copy shows
  // at the next checked call on the stream).
  cudaEventSynchronize(static_cast<cudaEvent_t>(upload_event_));
#endif
}

void SyncedMemory::AllocateCpu() {
  RequireAllocatable(size_, "host memory for a blob");
#ifndef CPU_ONLY
  // Pinned memory for threads that compute on a GPU: their copies are the
  // ones that must be fast. (Allocation is rare: blobs keep their capacity.)
  if (Poseidon::mode() == Poseidon::GPU && gpu::Available()) {
    cpu_ptr_ = gpu::PinnedAlloc(size_);
    cpu_pinned_ = true;
    own_cpu_data_ = true;
    return;
  }
#endif
  cpu_ptr_ = HostAlloc(size_);
  cpu_pinned_ = false;
  own_cpu_data_ = true;
}

void SyncedMemory::FreeCpu() {
  WaitForUpload();
  if (cpu_ptr_ != nullptr && own_cpu_data_) {
#ifndef CPU_ONLY
    if (cpu_pinned_) {
      gpu::PinnedFree(cpu_ptr_);
    } else {
      std::free(cpu_ptr_);
    }
#else
    std::free(cpu_ptr_);
#endif
  }
  cpu_ptr_ = nullptr;
  own_cpu_data_ = false;
  cpu_pinned_ = false;
}

void SyncedMemory::AllocateGpu() {
#ifndef CPU_ONLY
  gpu_ptr_ = gpu::DeviceAlloc(size_);
  device_ = Poseidon::device();
  own_gpu_data_ = true;
#else
  NO_GPU;
#endif
}

void SyncedMemory::FreeGpu() {
#ifndef CPU_ONLY
  if (gpu_ptr_ != nullptr && own_gpu_data_) gpu::DeviceFree(gpu_ptr_, device_);
#endif
  gpu_ptr_ = nullptr;
  own_gpu_data_ = false;
}

void SyncedMemory::ToCpu() {
  switch (head_) {
    case UNINITIALIZED:
      AllocateCpu();
      std::memset(cpu_ptr_, 0, size_);
      head_ = HEAD_AT_CPU;
      break;
    case HEAD_AT_GPU:
#ifndef CPU_ONLY
      if (cpu_ptr_ == nullptr) AllocateCpu();
      POSEIDON_CUDA_CHECK(cudaMemcpyAsync(cpu_ptr_, gpu_ptr_, size_,
                                          cudaMemcpyDeviceToHost,
                                          gpu::Stream()));
      gpu::Synchronize();
      head_ = SYNCED;
#else
      NO_GPU;
#endif
      break;
    case HEAD_AT_CPU:
    case SYNCED:
      break;
  }
}

void SyncedMemory::ToGpu() {
#ifndef CPU_ONLY
  switch (head_) {
    case UNINITIALIZED:
      AllocateGpu();
      POSEIDON_CUDA_CHECK(cudaMemsetAsync(gpu_ptr_, 0, size_, gpu::Stream()));
      head_ = HEAD_AT_GPU;
      break;
    case HEAD_AT_CPU:
      if (gpu_ptr_ == nullptr) AllocateGpu();
      POSEIDON_CUDA_CHECK(cudaMemcpyAsync(gpu_ptr_, cpu_ptr_, size_,
                                          cudaMemcpyHostToDevice,
                                          gpu::Stream()));
      // The host copy may change as soon as we return (mutable_cpu_data):
      // from pageable memory the copy has already read it when
      // cudaMemcpyAsync returns; from pinned memory it reads it later, so
      // mark the copy's end and wait for it before the host next writes.
      if (cpu_pinned_) {
        if (upload_event_ == nullptr) {
          cudaEvent_t event;
          POSEIDON_CUDA_CHECK(
              cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
          upload_event_ = event;
        }
        POSEIDON_CUDA_CHECK(cudaEventRecord(
            static_cast<cudaEvent_t>(upload_event_), gpu::Stream()));
        upload_pending_ = true;
      }
      head_ = SYNCED;
      break;
    case HEAD_AT_GPU:
    case SYNCED:
      break;
  }
#else
  NO_GPU;
#endif
}

#ifndef CPU_ONLY
void SyncedMemory::async_gpu_push(void* stream) {
  CHECK_EQ(head_, HEAD_AT_CPU) << "async_gpu_push needs fresh host data";
  if (gpu_ptr_ == nullptr) AllocateGpu();
  POSEIDON_CUDA_CHECK(cudaMemcpyAsync(gpu_ptr_, cpu_ptr_, size_,
                                      cudaMemcpyHostToDevice,
                                      static_cast<cudaStream_t>(stream)));
  head_ = SYNCED;
}
#endif

const void* SyncedMemory::cpu_data() {
  ToCpu();
  return cpu_ptr_;
}

void SyncedMemory::set_cpu_data(void* data) {
  CHECK(data != nullptr);
  FreeCpu();
  cpu_ptr_ = data;
  head_ = HEAD_AT_CPU;
  own_cpu_data_ = false;
}

void SyncedMemory::own_cpu_data() {
  if (cpu_ptr_ == nullptr || own_cpu_data_) return;
  const void* observed = cpu_ptr_;
  cpu_ptr_ = nullptr;
  AllocateCpu();
  std::memcpy(cpu_ptr_, observed, size_);
}

const void* SyncedMemory::gpu_data() {
  ToGpu();
  return gpu_ptr_;
}

void SyncedMemory::set_gpu_data(void* data) {
#ifndef CPU_ONLY
  CHECK(data != nullptr);
  FreeGpu();
  gpu_ptr_ = data;
  device_ = Poseidon::device();
  head_ = HEAD_AT_GPU;
  own_gpu_data_ = false;
#else
  NO_GPU;
#endif
}

void* SyncedMemory::mutable_cpu_data() {
  ToCpu();
  WaitForUpload();
  head_ = HEAD_AT_CPU;
  return cpu_ptr_;
}

void* SyncedMemory::mutable_gpu_data() {
  ToGpu();
  head_ = HEAD_AT_GPU;
  return gpu_ptr_;
}

}  // namespace poseidon
