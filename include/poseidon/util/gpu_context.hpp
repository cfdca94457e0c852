// The GPU as the rest of Poseidon sees it: which devices exist, and for the
// calling thread, its device's compute stream and library handles, and the
// memory caches.
//
// Threads: every thread that computes on a GPU has its own context: the
// device Poseidon::device() names, one non-blocking stream on it, and a
// cuBLAS handle, a cuRAND generator and a cuDNN handle bound to that stream,
// each made on first use and kept until the thread ends or switches device.
// All of a thread's kernels, library calls and copies go to its stream, so
// the host waits only where it reads results (SyncedMemory's copies to the
// host, reductions that return a scalar). A data prefetch thread gets its own
// stream this way too, which is what lets the next batch's copy overlap
// compute.
//
// Memory: device memory and pinned host memory come from BlockCaches
// (util/caching_allocator.hpp), one per device plus one for pinned memory,
// made on first use and kept for the life of the process (never destroyed:
// at exit the CUDA runtime may already be gone).
//
// The device listing works in every build: in a CPU-only build, or on a
// machine without a usable GPU, DeviceCount() is 0 and UnavailableReason()
// says why. Everything else exists only in CUDA builds.
#ifndef POSEIDON_UTIL_GPU_CONTEXT_HPP_
#define POSEIDON_UTIL_GPU_CONTEXT_HPP_

#include <cstddef>
#include <string>
#include <vector>

#ifndef CPU_ONLY
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>
#ifdef USE_CUDNN
#include <cudnn.h>
#endif
#endif

#include "poseidon/util/caching_allocator.hpp"

namespace poseidon {
namespace gpu {

// CUDA devices this process can use; 0 in a CPU-only build or without a
// driver or device. Never throws; the answer is read once.
int DeviceCount();
// Why DeviceCount() is 0 ("Poseidon was built without CUDA", the CUDA
// runtime's message), or "" when there is a device.
std::string UnavailableReason();
inline bool Available() { return DeviceCount() > 0; }

// What `poseidon_train device_query` prints for one device.
struct DeviceInfo {
  int id = 0;
  std::string name;
  int major = 0, minor = 0;        // compute capability
  size_t total_memory = 0;         // bytes
  size_t free_memory = 0;          // bytes, at the time of the query
  int multiprocessors = 0;
  int max_threads_per_block = 0;
  int warp_size = 0;
  size_t shared_memory_per_block = 0;
  int registers_per_block = 0;
  int clock_khz = 0;
  int memory_clock_khz = 0;
  int memory_bus_width = 0;        // bits
  int l2_cache_bytes = 0;
  bool ecc = false;
  int pci_bus = 0, pci_device = 0, pci_domain = 0;
};
// Throws ConfigError for an id outside [0, DeviceCount()).
DeviceInfo QueryDevice(int id);
// Versions of the CUDA runtime, driver and cuDNN this build uses, e.g.
// "CUDA runtime 13.0, driver 13.0, cuDNN 9.19.0"; "none" without CUDA.
std::string LibraryVersions();

// Throws ConfigError unless `id` names a usable device; `who` starts the
// message ("--gpu=3", "solver device_id").
void RequireDevice(const std::string& who, int id);

// Process-wide switches of the GPU path, read by cuBLAS/cuDNN callers.
//   deterministic: cuDNN algorithms are restricted to deterministic ones
//     (bitwise-repeatable runs; the equivalence tests use it). Default off,
//     or POSEIDON_DETERMINISTIC=1.
//   allow_tf32: FP32 convolutions and GEMMs may use TF32 tensor cores
//     (about 10 bits of mantissa in the products). Default off, as Caffe
//     computes in full FP32, or POSEIDON_ALLOW_TF32=1.
//   workspace_limit: the most scratch memory one cuDNN call may use; the
//     algorithm search skips algorithms that need more. Default 1 GiB, or
//     POSEIDON_CUDNN_WORKSPACE_MB.
struct Settings {
  bool deterministic = false;
  bool allow_tf32 = false;
  size_t workspace_limit = size_t(1) << 30;
};
Settings GetSettings();
void SetDeterministic(bool on);
void SetAllowTf32(bool on);
void SetWorkspaceLimit(size_t bytes);

// Statistics of the calling thread's device cache (zeros without CUDA).
BlockCache::Stats DeviceMemoryStats();
// Releases every cached block of every device and of pinned memory.
void EmptyCache();

#ifndef CPU_ONLY
// The calling thread's compute stream on Poseidon::device() (made, with
// cudaSetDevice, on first use).
cudaStream_t Stream();
cublasHandle_t Cublas();
// Seeded from the thread's Poseidon seed when made and again whenever
// Poseidon::set_random_seed() is called.
curandGenerator_t Curand();
#ifdef USE_CUDNN
cudnnHandle_t Cudnn();
#endif
// Waits until the calling thread's stream has run everything queued on it.
void Synchronize();

// Device memory on the calling thread's device, in its stream's order.
void* DeviceAlloc(size_t bytes);
// Returns memory from DeviceAlloc on `device`. It is reused in the order of
// the calling thread's stream when that thread computes on `device`, and
// after the whole device is idle otherwise.
void DeviceFree(void* ptr, int device);
// Page-locked host memory (fast, asynchronous copies).
void* PinnedAlloc(size_t bytes);
void PinnedFree(void* ptr);

// Scratch memory for library calls (cuDNN workspaces) on the calling
// thread's device: one buffer per thread, grown to the largest request and
// reused in stream order, so layers need not keep their own. Valid until
// the thread's next Workspace() call.
void* Workspace(size_t bytes);

// Called by Poseidon::set_random_seed on the calling thread.
void Reseed(unsigned long long seed);
#endif  // CPU_ONLY

}  // namespace gpu
}  // namespace poseidon

#endif  // POSEIDON_UTIL_GPU_CONTEXT_HPP_
