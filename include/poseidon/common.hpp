// Process-wide basics: the compute mode (CPU/GPU), the per-thread random
// generator, and the macros every layer and solver uses for explicit
// instantiation over float and double.
//
// Thread safety: the mode, device and RNG live in a thread-local Context, so
// each worker thread (one Net replica each) has its own; a new thread starts
// from the process defaults set by Poseidon::set_mode()/set_random_seed().
#ifndef POSEIDON_COMMON_HPP_
#define POSEIDON_COMMON_HPP_

#include <glog/logging.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "poseidon/util/status.hpp"

// Instantiates a class template for the two supported element types.
#define INSTANTIATE_CLASS(classname)   \
  template class classname<float>;     \
  template class classname<double>

#define POSEIDON_DISABLE_COPY_AND_ASSIGN(classname) \
  classname(const classname&) = delete;             \
  classname& operator=(const classname&) = delete

#define NOT_IMPLEMENTED LOG(FATAL) << "Not implemented yet"

// A CPU-only build still compiles GPU entry points; calling one is an error.
#define NO_GPU \
  POSEIDON_THROW(::poseidon::Error, "Poseidon was built without CUDA (USE_CUDA=OFF)")

namespace poseidon {

using std::shared_ptr;
using std::vector;
using std::string;

// Initializes glog/gflags for a command-line tool. Safe to call once.
void GlobalInit(int* argc, char*** argv);

// Logs `message` at WARNING the first time it is passed in this process
// (thread-safe): for conditions met on every pass, such as a layer that falls
// back from the engine it was asked for.
void LogWarningOnce(const std::string& message);

// Process and per-thread settings. The interface mirrors Caffe's Caffe class so
// that pycaffe's set_mode_cpu()/set_random_seed() map directly.
class Poseidon {
 public:
  enum Brew { CPU, GPU };

  static Brew mode();
  // set_mode/set_device set the calling thread's mode (device) and the
  // default of threads started later, as Caffe's do.
  static void set_mode(Brew mode);
  static void set_device(int device_id);
  static int device();
  // Sets only the calling thread's mode and device, leaving the process
  // defaults alone: for helper threads (data prefetch) that must compute
  // where the thread they serve does.
  static void set_thread_context(Brew mode, int device_id);
  // Seeds the calling thread's generator and the default for new threads.
  // A negative seed draws one from the system's entropy source.
  static void set_random_seed(int64_t seed);
  static std::mt19937& rng();
  // A fresh seed drawn from the calling thread's generator.
  static uint64_t rng_seed();

  // Multi-worker bookkeeping (device workers inside a process).
  static int solver_count();
  static void set_solver_count(int count);
  static int solver_rank();
  static void set_solver_rank(int rank);
  static bool root_solver() { return solver_rank() == 0 && node_rank() == 0; }

  // This process's place in a distributed job (the MPI rank and world size;
  // 0 and 1 when training alone), process-wide. Rank 0 alone logs at INFO
  // level, tests print and snapshots are written (root_solver()).
  static int node_rank();
  static int node_count();
  static void set_node(int rank, int count);

  // The part of every Data layer's database that the calling thread's nets
  // read: records i with i % count == index (see layers/data_layer.hpp).
  // Thread-local, default {0, 1}; the distributed trainer sets it on each
  // worker's thread before building the solver. Throws ConfigError unless
  // 0 <= index < count. `partitioned` asks for the part databases
  // "<source>_<index>" (scripts/partition_data) instead of every count-th
  // record of one shared database.
  struct DataShard {
    int index = 0;
    int count = 1;
    bool partitioned = false;
  };
  static const DataShard& data_shard();
  static void set_data_shard(const DataShard& shard);
  // Throws ConfigError, its message starting with `who`, unless
  // 0 <= index < count; the check of set_data_shard and the data layers'
  // SetShard.
  static void RequireValidShard(const std::string& who, int index, int count);

  // Threads a layer may use for work inside one Forward/Backward
  // (util/parallel.hpp), process-wide. Defaults to the env variable
  // POSEIDON_NUM_THREADS if it is a positive integer, else to
  // std::thread::hardware_concurrency(). set_num_threads throws ConfigError
  // for n < 1; call it between iterations, not while layers run.
  static int num_threads();
  static void set_num_threads(int n);
};

}  // namespace poseidon

#endif  // POSEIDON_COMMON_HPP_
