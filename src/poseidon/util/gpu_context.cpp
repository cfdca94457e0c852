// Per-thread GPU contexts, the device listing, and the CUDA backends of the
// memory caches. In a CPU-only build only the listing remains (no devices).
#include "poseidon/util/gpu_context.hpp"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "poseidon/common.hpp"
#include "poseidon/util/status.hpp"

#ifndef CPU_ONLY
#include "poseidon/util/device_check.hpp"
#endif

namespace poseidon {
namespace gpu {
namespace {

bool EnvFlag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == "1";
}

size_t EnvWorkspaceLimit() {
  const char* v = std::getenv("POSEIDON_CUDNN_WORKSPACE_MB");
  if (v == nullptr) return Settings().workspace_limit;
  char* end = nullptr;
  const long long mb = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || mb < 0) {
    LOG(WARNING) << "Ignoring POSEIDON_CUDNN_WORKSPACE_MB=\"" << v
                 << "\": not a number of MiB";
    return Settings().workspace_limit;
  }
  return static_cast<size_t>(mb) << 20;
}

std::atomic<bool> g_deterministic{EnvFlag("POSEIDON_DETERMINISTIC")};
std::atomic<bool> g_allow_tf32{EnvFlag("POSEIDON_ALLOW_TF32")};
std::atomic<size_t> g_workspace_limit{EnvWorkspaceLimit()};

}  // namespace

Settings GetSettings() {
  Settings s;
  s.deterministic = g_deterministic;
  s.allow_tf32 = g_allow_tf32;
  s.workspace_limit = g_workspace_limit;
  return s;
}
void SetDeterministic(bool on) { g_deterministic = on; }
void SetAllowTf32(bool on) { g_allow_tf32 = on; }
void SetWorkspaceLimit(size_t bytes) { g_workspace_limit = bytes; }

#ifdef CPU_ONLY

int DeviceCount() { return 0; }
std::string UnavailableReason() {
  return "Poseidon was built without CUDA (USE_CUDA=OFF)";
}
DeviceInfo QueryDevice(int id) {
  POSEIDON_THROW(ConfigError, "no GPU ", id, ": ", UnavailableReason());
}
std::string LibraryVersions() { return "no CUDA (CPU-only build)"; }
void RequireDevice(const std::string& who, int id) {
  POSEIDON_THROW(ConfigError, who, ": ", UnavailableReason());
}
BlockCache::Stats DeviceMemoryStats() { return {}; }
void EmptyCache() {}

#else  // CUDA build

const char* CurandErrorString(curandStatus_t status) {
  switch (status) {
    case CURAND_STATUS_SUCCESS: return "success";
    case CURAND_STATUS_VERSION_MISMATCH: return "header and library versions differ";
    case CURAND_STATUS_NOT_INITIALIZED: return "generator not initialized";
    case CURAND_STATUS_ALLOCATION_FAILED: return "memory allocation failed";
    case CURAND_STATUS_TYPE_ERROR: return "wrong generator type";
    case CURAND_STATUS_OUT_OF_RANGE: return "argument out of range";
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE: return "length not a multiple of the dimension";
    case CURAND_STATUS_DOUBLE_PRECISION_REQUIRED: return "device lacks double precision";
    case CURAND_STATUS_LAUNCH_FAILURE: return "kernel launch failed";
    case CURAND_STATUS_PREEXISTING_FAILURE: return "an earlier failure";
    case CURAND_STATUS_INITIALIZATION_FAILED: return "initialization of CUDA failed";
    case CURAND_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CURAND_STATUS_INTERNAL_ERROR: return "internal error";
    default: return "unknown cuRAND status";
  }
}

namespace {

struct Listing {
  int count = 0;
  std::string reason;
};

const Listing& Devices() {
  static const Listing listing = [] {
    Listing l;
    const cudaError_t err = cudaGetDeviceCount(&l.count);
    if (err != cudaSuccess) {
      l.count = 0;
      l.reason = err == cudaErrorInsufficientDriver ||
                         err == cudaErrorNoDevice
                     ? StrCat("no NVIDIA GPU or driver on this machine (CUDA: ",
                              cudaGetErrorString(err), ")")
                     : StrCat("the CUDA runtime found no usable GPU (",
                              cudaGetErrorString(err), ")");
      cudaGetLastError();  // not sticky; clear it
    } else if (l.count == 0) {
      l.reason = "the CUDA runtime found no GPU";
    }
    return l;
  }();
  return listing;
}

// Keeps the calling thread's current device at `device` for a scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cudaGetDevice(&previous_);
    if (previous_ != device) cudaSetDevice(device);
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

class DeviceBackend final : public BlockCache::Backend {
 public:
  explicit DeviceBackend(int device) : device_(device) {}
  void* Allocate(size_t bytes) override {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) {
      cudaGetLastError();  // out of memory is not sticky; clear it
      return nullptr;
    }
    return ptr;
  }
  void Release(void* ptr) override {
    DeviceGuard guard(device_);
    cudaFree(ptr);  // errors at process teardown are not actionable
  }
  // Never throws (it runs in destructors): if no event can be recorded, the
  // stream is waited for instead, and the block needs no mark.
  void* RecordMark(void* stream) override {
    DeviceGuard guard(device_);
    cudaEvent_t event = nullptr;
    if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) ==
            cudaSuccess &&
        cudaEventRecord(event, static_cast<cudaStream_t>(stream)) ==
            cudaSuccess) {
      return event;
    }
    if (event != nullptr) cudaEventDestroy(event);
    cudaGetLastError();
    cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    return nullptr;
  }
  void WaitForMark(void* mark, void* stream) override {
    POSEIDON_CUDA_CHECK(cudaStreamWaitEvent(
        static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(mark), 0));
  }
  void ReleaseMark(void* mark) override {
    cudaEventDestroy(static_cast<cudaEvent_t>(mark));
  }
  std::string Name() const override { return StrCat("GPU ", device_); }

 private:
  int device_;
};

class PinnedBackend final : public BlockCache::Backend {
 public:
  void* Allocate(size_t bytes) override {
    void* ptr = nullptr;
    if (cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return ptr;
  }
  void Release(void* ptr) override { cudaFreeHost(ptr); }
  // Host memory is only touched by synchronous copies: no marks needed.
  void* RecordMark(void*) override { return nullptr; }
  void WaitForMark(void*, void*) override {}
  void ReleaseMark(void*) override {}
  std::string Name() const override { return "pinned host memory"; }
};

// The caches live for the whole process and are never destroyed (see the
// header).
std::mutex g_cache_mutex;
std::vector<BlockCache*>& DeviceCaches() {
  static auto* caches = new std::vector<BlockCache*>();
  return *caches;
}

BlockCache& DeviceCache(int device) {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  auto& caches = DeviceCaches();
  if (static_cast<int>(caches.size()) <= device) {
    caches.resize(device + 1, nullptr);
  }
  if (caches[device] == nullptr) {
    caches[device] = new BlockCache(std::make_unique<DeviceBackend>(device));
  }
  return *caches[device];
}

BlockCache& PinnedCache() {
  static auto* cache = new BlockCache(std::make_unique<PinnedBackend>());
  return *cache;
}

// The calling thread's device, stream and handles (see the header).
struct ThreadContext {
  int device = -1;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  curandGenerator_t curand = nullptr;
#ifdef USE_CUDNN
  cudnnHandle_t cudnn = nullptr;
#endif
  bool cublas_tf32 = false;  // the math mode set on `cublas`
  bool has_seed = false;
  unsigned long long seed = 0;
  void* workspace = nullptr;  // see Workspace()
  size_t workspace_bytes = 0;

  ~ThreadContext() { Release(); }

  // Errors are ignored: this runs at thread exit, possibly after the CUDA
  // runtime has shut down.
  void Release() {
    if (device < 0) return;
    if (curand) curandDestroyGenerator(curand);
    if (cublas) cublasDestroy(cublas);
#ifdef USE_CUDNN
    if (cudnn) cudnnDestroy(cudnn);
    cudnn = nullptr;
#endif
    if (workspace) DeviceCache(device).Free(workspace, stream);
    workspace = nullptr;
    workspace_bytes = 0;
    if (stream) cudaStreamDestroy(stream);
    curand = nullptr;
    cublas = nullptr;
    stream = nullptr;
    device = -1;
  }
};

// The thread's context as it is, perhaps not yet bound to a device.
ThreadContext& ThisThread() {
  thread_local ThreadContext context;
  return context;
}

// The thread's context bound to Poseidon::device().
ThreadContext& Current() {
  ThreadContext& context = ThisThread();
  const int want = Poseidon::device();
  if (context.device != want) {
    RequireDevice(StrCat("GPU ", want), want);
    context.Release();
    POSEIDON_CUDA_CHECK(cudaSetDevice(want));
    POSEIDON_CUDA_CHECK(
        cudaStreamCreateWithFlags(&context.stream, cudaStreamNonBlocking));
    context.device = want;
  } else {
    // Another library (or the Python host) may have switched the thread's
    // device; ours is the one Poseidon::device() names.
    int current = -1;
    cudaGetDevice(&current);
    if (current != want) POSEIDON_CUDA_CHECK(cudaSetDevice(want));
  }
  return context;
}

}  // namespace

int DeviceCount() { return Devices().count; }
std::string UnavailableReason() { return Devices().reason; }

void RequireDevice(const std::string& who, int id) {
  const int count = DeviceCount();
  if (count == 0) {
    POSEIDON_THROW(ConfigError, who, ": no GPU is available: ",
                   UnavailableReason());
  }
  POSEIDON_REQUIRE(id >= 0 && id < count, ConfigError, who, ": there is no GPU ",
                   id, "; this machine has ", count, " (ids 0 to ", count - 1,
                   ")");
}

DeviceInfo QueryDevice(int id) {
  RequireDevice(StrCat("device_query --gpu=", id), id);
  cudaDeviceProp prop;
  POSEIDON_CUDA_CHECK(cudaGetDeviceProperties(&prop, id));
  DeviceInfo info;
  info.id = id;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.total_memory = prop.totalGlobalMem;
  info.multiprocessors = prop.multiProcessorCount;
  info.max_threads_per_block = prop.maxThreadsPerBlock;
  info.warp_size = prop.warpSize;
  info.shared_memory_per_block = prop.sharedMemPerBlock;
  info.registers_per_block = prop.regsPerBlock;
  info.memory_bus_width = prop.memoryBusWidth;
  info.l2_cache_bytes = prop.l2CacheSize;
  info.ecc = prop.ECCEnabled != 0;
  info.pci_bus = prop.pciBusID;
  info.pci_device = prop.pciDeviceID;
  info.pci_domain = prop.pciDomainID;
  // CUDA 13 dropped the clock fields from cudaDeviceProp.
  cudaDeviceGetAttribute(&info.clock_khz, cudaDevAttrClockRate, id);
  cudaDeviceGetAttribute(&info.memory_clock_khz, cudaDevAttrMemoryClockRate,
                         id);
  {
    DeviceGuard guard(id);
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      info.free_memory = free_bytes;
    }
  }
  return info;
}

std::string LibraryVersions() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::string out = StrCat("CUDA runtime ", runtime / 1000, ".",
                           (runtime % 1000) / 10, ", driver ");
  out += driver == 0 ? std::string("none")
                     : StrCat(driver / 1000, ".", (driver % 1000) / 10);
#ifdef USE_CUDNN
  const size_t v = cudnnGetVersion();
  out += StrCat(", cuDNN ", v / 10000, ".", (v % 10000) / 100, ".", v % 100);
#else
  out += ", no cuDNN (USE_CUDNN=OFF)";
#endif
  return out;
}

cudaStream_t Stream() { return Current().stream; }

cublasHandle_t Cublas() {
  ThreadContext& c = Current();
  if (c.cublas == nullptr) {
    POSEIDON_CUBLAS_CHECK(cublasCreate(&c.cublas));
    POSEIDON_CUBLAS_CHECK(cublasSetStream(c.cublas, c.stream));
    c.cublas_tf32 = false;  // a new handle computes in full FP32
  }
  const bool tf32 = g_allow_tf32;
  if (tf32 != c.cublas_tf32) {
    POSEIDON_CUBLAS_CHECK(cublasSetMathMode(
        c.cublas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    c.cublas_tf32 = tf32;
  }
  return c.cublas;
}

curandGenerator_t Curand() {
  ThreadContext& c = Current();
  if (c.curand == nullptr) {
    POSEIDON_CURAND_CHECK(
        curandCreateGenerator(&c.curand, CURAND_RNG_PSEUDO_DEFAULT));
    POSEIDON_CURAND_CHECK(curandSetStream(c.curand, c.stream));
    const unsigned long long seed =
        c.has_seed ? c.seed : static_cast<unsigned long long>(Poseidon::rng_seed());
    POSEIDON_CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(c.curand, seed));
  }
  return c.curand;
}

void Reseed(unsigned long long seed) {
  // A thread that has no generator yet (or no GPU at all) only remembers the
  // seed for when it makes one.
  ThreadContext& c = ThisThread();
  c.has_seed = true;
  c.seed = seed;
  if (c.curand != nullptr) {
    POSEIDON_CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(c.curand, seed));
    POSEIDON_CURAND_CHECK(curandSetGeneratorOffset(c.curand, 0));
  }
}

#ifdef USE_CUDNN
cudnnHandle_t Cudnn() {
  ThreadContext& c = Current();
  if (c.cudnn == nullptr) {
    POSEIDON_CUDNN_CHECK(cudnnCreate(&c.cudnn));
    POSEIDON_CUDNN_CHECK(cudnnSetStream(c.cudnn, c.stream));
  }
  return c.cudnn;
}
#endif

void* Workspace(size_t bytes) {
  ThreadContext& c = Current();
  if (bytes > c.workspace_bytes) {
    if (c.workspace != nullptr) DeviceCache(c.device).Free(c.workspace, c.stream);
    c.workspace = nullptr;
    c.workspace_bytes = 0;  // stays so if the allocation below throws
    c.workspace = DeviceCache(c.device).Allocate(bytes, c.stream);
    c.workspace_bytes = bytes;
  }
  return c.workspace;
}

void Synchronize() { POSEIDON_CUDA_CHECK(cudaStreamSynchronize(Stream())); }

void* DeviceAlloc(size_t bytes) {
  ThreadContext& c = Current();
  return DeviceCache(c.device).Allocate(bytes, c.stream);
}

void DeviceFree(void* ptr, int device) {
  ThreadContext& c = ThisThread();
  if (c.device == device) {
    DeviceCache(device).Free(ptr, c.stream);
    return;
  }
  // Freed by a thread that does not compute on `device` (teardown, or a
  // blob handed between threads): its stream is unknown, so wait for the
  // whole device before the block can serve anyone.
  {
    DeviceGuard guard(device);
    cudaDeviceSynchronize();
  }
  DeviceCache(device).Free(ptr, nullptr);
}

void* PinnedAlloc(size_t bytes) { return PinnedCache().Allocate(bytes); }
void PinnedFree(void* ptr) { PinnedCache().Free(ptr); }

BlockCache::Stats DeviceMemoryStats() {
  if (!Available()) return {};
  return DeviceCache(Current().device).stats();
}

void EmptyCache() {
  if (!Available()) return;
  std::vector<BlockCache*> caches;
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    caches = DeviceCaches();
  }
  for (BlockCache* cache : caches) {
    if (cache != nullptr) cache->EmptyCache();
  }
  PinnedCache().EmptyCache();
}

#endif  // CPU_ONLY

}  // namespace gpu
}  // namespace poseidon
