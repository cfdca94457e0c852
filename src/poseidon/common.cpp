// The thread-local context behind Poseidon's mode/seed/device settings.
#include "poseidon/common.hpp"

#include <cblas.h>
#include <gflags/gflags.h>

#include "poseidon/util/gpu_context.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

namespace poseidon {
namespace {

// Process defaults copied into each thread's Context on first use.
std::atomic<int> g_default_mode{Poseidon::CPU};
std::atomic<int> g_default_device{0};
std::atomic<int64_t> g_default_seed{-1};
std::atomic<int> g_solver_count{1};
std::atomic<int> g_num_threads{0};
std::atomic<int> g_node_rank{0};
std::atomic<int> g_node_count{1};  // 0: not yet read from the environment

int DefaultNumThreads() {
  if (const char* env = std::getenv("POSEIDON_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1 && n <= 4096) {
      return static_cast<int>(n);
    }
    LOG(WARNING) << "Ignoring POSEIDON_NUM_THREADS=\"" << env
                 << "\": not a positive integer";
  }
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

uint64_t EntropySeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

struct Context {
  Context()
      : mode(static_cast<Poseidon::Brew>(g_default_mode.load())),
        device(g_default_device.load()) {
    int64_t seed = g_default_seed.load();
    rng.seed(seed < 0 ? EntropySeed() : static_cast<uint64_t>(seed));
  }
  Poseidon::Brew mode;
  int device;
  int solver_rank = 0;
  Poseidon::DataShard data_shard;
  std::mt19937 rng;
};

Context& ThisThread() {
  thread_local Context context;
  return context;
}

}  // namespace

void LogWarningOnce(const std::string& message) {
  static std::mutex mutex;
  static auto* seen = new std::set<std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  if (seen->insert(message).second) LOG(WARNING) << message;
}

void GlobalInit(int* argc, char*** argv) {
  static std::once_flag once;
  std::call_once(once, [&] {
    gflags::ParseCommandLineFlags(argc, argv, true);
    google::InitGoogleLogging(*(argv)[0]);
    FLAGS_logtostderr = true;
    google::InstallFailureSignalHandler();
  });
}

Poseidon::Brew Poseidon::mode() { return ThisThread().mode; }

void Poseidon::set_mode(Brew mode) {
#ifdef CPU_ONLY
  if (mode == GPU) NO_GPU;
#else
  if (mode == GPU) gpu::RequireDevice("GPU mode", ThisThread().device);
#endif
  g_default_mode = mode;
  ThisThread().mode = mode;
}

void Poseidon::set_device(int device_id) {
  POSEIDON_REQUIRE(device_id >= 0, ConfigError, "set_device(", device_id,
                   "): device ids start at 0");
  // A wrong id on a machine with GPUs fails here; on one without, the
  // error comes where a GPU is first asked for (set_mode(GPU)).
  if (gpu::DeviceCount() > 0) {
    gpu::RequireDevice(StrCat("set_device(", device_id, ")"), device_id);
  }
  g_default_device = device_id;
  ThisThread().device = device_id;
}

int Poseidon::device() { return ThisThread().device; }

void Poseidon::set_thread_context(Brew mode, int device_id) {
  POSEIDON_REQUIRE(device_id >= 0, ConfigError, "device ids start at 0, got ",
                   device_id);
#ifdef CPU_ONLY
  if (mode == GPU) NO_GPU;
#else
  if (mode == GPU) gpu::RequireDevice("GPU mode", device_id);
#endif
  ThisThread().mode = mode;
  ThisThread().device = device_id;
}

void Poseidon::set_random_seed(int64_t seed) {
  g_default_seed = seed;
  const uint64_t value = seed < 0 ? EntropySeed() : static_cast<uint64_t>(seed);
  ThisThread().rng.seed(value);
#ifndef CPU_ONLY
  gpu::Reseed(value);
#endif
}

std::mt19937& Poseidon::rng() { return ThisThread().rng; }

uint64_t Poseidon::rng_seed() {
  auto& g = ThisThread().rng;
  return (static_cast<uint64_t>(g()) << 32) ^ g();
}

int Poseidon::solver_count() { return g_solver_count; }
void Poseidon::set_solver_count(int count) { g_solver_count = count; }
int Poseidon::solver_rank() { return ThisThread().solver_rank; }
void Poseidon::set_solver_rank(int rank) { ThisThread().solver_rank = rank; }

int Poseidon::node_rank() { return g_node_rank; }
int Poseidon::node_count() { return g_node_count; }

void Poseidon::set_node(int rank, int count) {
  POSEIDON_REQUIRE(count >= 1 && rank >= 0 && rank < count, ConfigError,
                   "node rank ", rank, " of ", count,
                   " is out of range (need 0 <= rank < count)");
  g_node_rank = rank;
  g_node_count = count;
}

const Poseidon::DataShard& Poseidon::data_shard() {
  return ThisThread().data_shard;
}

void Poseidon::RequireValidShard(const std::string& who, int index,
                                 int count) {
  POSEIDON_REQUIRE(count >= 1 && index >= 0 && index < count, ConfigError,
                   who, ": data shard ", index, " of ", count,
                   " is out of range (need 0 <= index < count)");
}

void Poseidon::set_data_shard(const DataShard& shard) {
  RequireValidShard("set_data_shard", shard.index, shard.count);
  ThisThread().data_shard = shard;
}

// Note [One thread pool]
// OpenBLAS keeps its own threads, which spin (yielding) for a while after
// each call; beside Poseidon's pool (util/parallel.hpp) they take turns on
// the same cores with the pool's threads. On the 2-core development machine
// CIFAR-10 quick's training iteration on 2 threads took 40-44 ms with
// OpenBLAS on 2 threads and 35 ms with it on 1. So whenever the pool has
// more than one thread, OpenBLAS runs single-threaded and the products that
// used its threads are split over the pool instead (cpu_gemm_parallel in
// util/math_functions.hpp, for InnerProduct; the convolutions already split
// the batch). With one pool thread, OpenBLAS keeps its own setting.
namespace {

void ApplyBlasThreads(int n) {
  if (n > 1 && openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

}  // namespace

int Poseidon::num_threads() {
  int n = g_num_threads.load();
  if (n == 0) {
    int expected = 0;
    if (g_num_threads.compare_exchange_strong(expected,
                                              DefaultNumThreads())) {
      ApplyBlasThreads(g_num_threads.load());
    }
    n = g_num_threads.load();
  }
  return n;
}

void Poseidon::set_num_threads(int n) {
  POSEIDON_REQUIRE(n >= 1, ConfigError,
                   "the number of threads must be at least 1, got ", n);
  g_num_threads = n;
  ApplyBlasThreads(n);
}

}  // namespace poseidon
