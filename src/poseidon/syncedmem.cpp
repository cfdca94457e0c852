// Lazy host/device synchronisation for SyncedMemory.
#include "poseidon/syncedmem.hpp"

#include <cstdlib>
#include <cstring>

#ifndef CPU_ONLY
#include <cuda_runtime.h>
#include "poseidon/util/device_check.hpp"
#endif

namespace poseidon {
namespace {

// 64-byte alignment suits AVX-512 loads and cache lines.
constexpr size_t kHostAlignment = 64;

void* HostAlloc(size_t size) {
  size_t rounded = (size + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* ptr = std::aligned_alloc(kHostAlignment, rounded == 0 ? kHostAlignment : rounded);
  if (ptr == nullptr) {
    POSEIDON_THROW(Error, "out of host memory allocating ", size, " bytes");
  }
  return ptr;
}

}  // namespace

SyncedMemory::~SyncedMemory() {
  if (cpu_ptr_ && own_cpu_data_) std::free(cpu_ptr_);
#ifndef CPU_ONLY
  if (gpu_ptr_ && own_gpu_data_) cudaFree(gpu_ptr_);
#endif
}

void SyncedMemory::ToCpu() {
  switch (head_) {
    case UNINITIALIZED:
      cpu_ptr_ = HostAlloc(size_);
      std::memset(cpu_ptr_, 0, size_);
      own_cpu_data_ = true;
      head_ = HEAD_AT_CPU;
      break;
    case HEAD_AT_GPU:
#ifndef CPU_ONLY
      if (cpu_ptr_ == nullptr) {
        cpu_ptr_ = HostAlloc(size_);
        own_cpu_data_ = true;
      }
      POSEIDON_CUDA_CHECK(
          cudaMemcpy(cpu_ptr_, gpu_ptr_, size_, cudaMemcpyDeviceToHost));
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
      POSEIDON_CUDA_CHECK(cudaGetDevice(&device_));
      POSEIDON_CUDA_CHECK(cudaMalloc(&gpu_ptr_, size_));
      POSEIDON_CUDA_CHECK(cudaMemset(gpu_ptr_, 0, size_));
      own_gpu_data_ = true;
      head_ = HEAD_AT_GPU;
      break;
    case HEAD_AT_CPU:
      if (gpu_ptr_ == nullptr) {
        POSEIDON_CUDA_CHECK(cudaGetDevice(&device_));
        POSEIDON_CUDA_CHECK(cudaMalloc(&gpu_ptr_, size_));
        own_gpu_data_ = true;
      }
      POSEIDON_CUDA_CHECK(
          cudaMemcpy(gpu_ptr_, cpu_ptr_, size_, cudaMemcpyHostToDevice));
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

const void* SyncedMemory::cpu_data() {
  ToCpu();
  return cpu_ptr_;
}

void SyncedMemory::set_cpu_data(void* data) {
  CHECK(data != nullptr);
  if (own_cpu_data_) std::free(cpu_ptr_);
  cpu_ptr_ = data;
  head_ = HEAD_AT_CPU;
  own_cpu_data_ = false;
}

const void* SyncedMemory::gpu_data() {
  ToGpu();
  return gpu_ptr_;
}

void SyncedMemory::set_gpu_data(void* data) {
#ifndef CPU_ONLY
  CHECK(data != nullptr);
  if (own_gpu_data_) POSEIDON_CUDA_CHECK(cudaFree(gpu_ptr_));
  gpu_ptr_ = data;
  head_ = HEAD_AT_GPU;
  own_gpu_data_ = false;
#else
  NO_GPU;
#endif
}

void* SyncedMemory::mutable_cpu_data() {
  ToCpu();
  head_ = HEAD_AT_CPU;
  return cpu_ptr_;
}

void* SyncedMemory::mutable_gpu_data() {
  ToGpu();
  head_ = HEAD_AT_GPU;
  return gpu_ptr_;
}

}  // namespace poseidon
