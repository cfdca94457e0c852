// poseidon_train: the device, chosen from --gpu or the solver (SelectDevice,
// the device workers' GPUs), the GPU memory line after training, and the
// device_query action.
#include <gflags/gflags.h>

#include <string>
#include <thread>

#include "poseidon/layer_factory.hpp"
#include "poseidon/util/device_select.hpp"
#include "poseidon/util/gpu_context.hpp"
#include "poseidon_train.hpp"

namespace poseidon {
namespace train_tool {

// GPU mode on the device --gpu names (or, for train, the solver's
// solver_mode: GPU and device_id), with the --deterministic and
// --allow_tf32 switches; CPU mode otherwise. Under mpirun the ranks of a host
// take the listed GPUs in turn (util/device_select.hpp).
// Training on several GPUs in one process: one device worker on each
// (set by SelectDevice for train).
vector<int> g_worker_gpus;

void SelectDevice(const SolverParameter* solver) {
  string flag = FLAGS_gpu;
  // As in Caffe, only a solver_mode the file states counts: the field's
  // default (GPU) does not move a solver that never mentions it.
  if (flag.empty() && solver != nullptr && solver->has_solver_mode() &&
      solver->solver_mode() == SolverParameter::GPU) {
#ifdef CPU_ONLY
    LOG(WARNING) << "the solver asks for solver_mode: GPU, but this build "
                 << "has no CUDA; training on the CPU";
    return;
#else
    // Model-zoo solvers state solver_mode: GPU; on a machine without one
    // they train on the CPU, as in a CPU-only build (--gpu still insists).
    if (gpu::DeviceCount() == 0) {
      LOG(WARNING) << "the solver asks for solver_mode: GPU, but no GPU is "
                   << "available (" << gpu::UnavailableReason()
                   << "); training on the CPU";
      return;
    }
    // Caffe's device_id; ranks sharing a host spread over its GPUs unless
    // the solver pins one.
    flag = solver->has_device_id() || LocalRankFromEnvironment().size == 1
               ? std::to_string(solver->device_id())
               : string("all");
#endif
  }
  if (flag.empty()) return;
#ifdef CPU_ONLY
  POSEIDON_THROW(ConfigError, "--gpu=", flag,
                 " given, but Poseidon was built without CUDA (configure "
                 "with -DUSE_CUDA=ON -DUSE_CUDNN=ON)");
#else
  POSEIDON_REQUIRE(gpu::DeviceCount() > 0, ConfigError, "--gpu=", flag,
                   ": no GPU is available: ", gpu::UnavailableReason());
  const vector<int> ids = ParseGpuList(flag, gpu::DeviceCount());
  bool shared = false;
  int id = 0;
  if (solver != nullptr) {  // train: every listed GPU when alone on a host
    g_worker_gpus = GpusForProcess(ids, LocalRankFromEnvironment(), &shared);
    id = g_worker_gpus[0];
    if (g_worker_gpus.size() == 1) g_worker_gpus.clear();
  } else {
    id = GpuForLocalRank(ids, LocalRankFromEnvironment(), &shared);
  }
  LOG_IF(WARNING, shared) << "--gpu=" << flag << " lists fewer GPUs than "
                          << "this host runs ranks: ranks share GPU " << id;
  if (FLAGS_deterministic) gpu::SetDeterministic(true);
  if (FLAGS_allow_tf32) gpu::SetAllowTf32(true);
  Poseidon::set_device(id);
  Poseidon::set_mode(Poseidon::GPU);
  const gpu::DeviceInfo info = gpu::QueryDevice(id);
  LOG(INFO) << "Using GPU " << id << ": " << info.name << " (compute "
            << info.major << "." << info.minor << ", "
            << info.total_memory / (1 << 20) << " MiB; "
            << gpu::LibraryVersions() << "; TF32 "
            << (gpu::GetSettings().allow_tf32 ? "on" : "off")
            << ", deterministic "
            << (gpu::GetSettings().deterministic ? "on" : "off") << ")";
#endif
}

// What the GPU's caching allocator held at its peak (GPU mode only).
void LogGpuMemory() {
  if (Poseidon::mode() != Poseidon::GPU) return;
  const BlockCache::Stats s = gpu::DeviceMemoryStats();
  LOG(INFO) << "GPU memory: peak " << s.peak_in_use / 1048576.0
            << " MiB in use, " << s.peak_reserved / 1048576.0
            << " MiB reserved (" << s.backend_allocations
            << " allocations from the driver, " << s.cache_hits
            << " served from the cache)";
}

int DeviceQuery() {
  LOG(INFO) << "Poseidon " << gflags::VersionString() << "; GPU libraries: "
            << gpu::LibraryVersions();
  LOG(INFO) << "Hardware threads: " << std::thread::hardware_concurrency()
            << "; registered layer types: "
            << LayerRegistry<float>::LayerTypeList().size();
  const int count = gpu::DeviceCount();
  if (count == 0) {
    LOG(INFO) << "No GPU: " << gpu::UnavailableReason();
    POSEIDON_REQUIRE(FLAGS_gpu.empty(), ConfigError, "--gpu=", FLAGS_gpu,
                     ": no GPU is available: ", gpu::UnavailableReason());
    return 0;
  }
  const vector<int> ids = FLAGS_gpu.empty() ? ParseGpuList("all", count)
                                            : ParseGpuList(FLAGS_gpu, count);
  for (int id : ids) {
    const gpu::DeviceInfo d = gpu::QueryDevice(id);
    LOG(INFO) << "Device id:                     " << d.id;
    LOG(INFO) << "Name:                          " << d.name;
    LOG(INFO) << "Compute capability:            " << d.major << "." << d.minor;
    LOG(INFO) << "Total global memory:           " << d.total_memory
              << " bytes (" << d.free_memory << " free)";
    LOG(INFO) << "Multiprocessors:               " << d.multiprocessors;
    LOG(INFO) << "Clock rate:                    " << d.clock_khz << " kHz";
    LOG(INFO) << "Memory clock, bus width:       " << d.memory_clock_khz
              << " kHz, " << d.memory_bus_width << " bits";
    LOG(INFO) << "L2 cache:                      " << d.l2_cache_bytes
              << " bytes";
    LOG(INFO) << "Shared memory, registers/block:" << " "
              << d.shared_memory_per_block << " bytes, "
              << d.registers_per_block;
    LOG(INFO) << "Warp size, max threads/block:  " << d.warp_size << ", "
              << d.max_threads_per_block;
    LOG(INFO) << "ECC:                           " << (d.ecc ? "on" : "off");
    LOG(INFO) << "PCI domain:bus:device:         " << d.pci_domain << ":"
              << d.pci_bus << ":" << d.pci_device;
  }
  return 0;
}

}  // namespace train_tool
}  // namespace poseidon
