// IndexUpload: pinned staging memory, one asynchronous copy per call and an
// event that says when the staging memory may be reused.
#include "poseidon/util/index_upload.hpp"

#include <cstring>

#ifndef CPU_ONLY
#include <cuda_runtime.h>

#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {

IndexUpload::~IndexUpload() { Release(); }

void IndexUpload::Release() {
#ifndef CPU_ONLY
  if (event_ != nullptr) {
    // The staging memory goes back to the pinned cache: the copy reading
    // it must be done. Errors are ignored here (a destructor, possibly at
    // exit).
    auto event = static_cast<cudaEvent_t>(event_);
    (void)cudaEventSynchronize(event);
    (void)cudaEventDestroy(event);
  }
  if (host_ != nullptr) gpu::PinnedFree(host_);
  if (device_ != nullptr) gpu::DeviceFree(device_, device_id_);
#endif
  event_ = nullptr;
  host_ = nullptr;
  device_ = nullptr;
  capacity_ = 0;
  device_id_ = -1;
}

const int* IndexUpload::On(Poseidon::Brew dev, const std::vector<int>& values) {
  if (values.empty()) return nullptr;
  if (dev == Poseidon::CPU) return values.data();
#ifdef CPU_ONLY
  NO_GPU;
#else
  cudaStream_t stream = gpu::Stream();  // selects the thread's device
  const int device = Poseidon::device();
  if (event_ != nullptr && device != device_id_) Release();
  if (event_ == nullptr) {
    cudaEvent_t event;
    POSEIDON_CUDA_CHECK(
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    event_ = event;
    device_id_ = device;
  } else {
    POSEIDON_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
  }
  const size_t bytes = values.size() * sizeof(int);
  if (values.size() > capacity_) {
    if (host_ != nullptr) gpu::PinnedFree(host_);
    if (device_ != nullptr) gpu::DeviceFree(device_, device_id_);
    host_ = nullptr;
    device_ = nullptr;
    capacity_ = 0;
    host_ = static_cast<int*>(gpu::PinnedAlloc(bytes));
    device_ = static_cast<int*>(gpu::DeviceAlloc(bytes));
    capacity_ = values.size();
  }
  std::memcpy(host_, values.data(), bytes);
  POSEIDON_CUDA_CHECK(
      cudaMemcpyAsync(device_, host_, bytes, cudaMemcpyHostToDevice, stream));
  POSEIDON_CUDA_CHECK(
      cudaEventRecord(static_cast<cudaEvent_t>(event_), stream));
  return device_;
#endif
}

}  // namespace poseidon
