// Support for the emulated-cluster benchmarks (poseidon_train's
// --emulate_compute, scripts/bench/bench_emulated_cluster.py), where many
// ranks share one small machine: every layer's compute is replaced by a
// sleep of its profiled time, and only the communication is real.
//
//   Time dilation (Note [Time dilation]): everything runs k times slower
//   than the machine being emulated, so that the ranks' real work (sending
//   bytes through the kernel's TCP, summing, the SFB rebuild, the update)
//   fits on the few real cores. SetDilation(k) once per process, then each
//   section of real compute is stretched with a DilatedCompute.
//
//   Shared parameters (Note [Shared emulated parameters]): the ranks of an
//   emulated cluster all keep their parameters, gradients and solver history
//   in one mapping of a shared-memory file, so that 32 replicas of a 230M-
//   parameter net need the memory of one. The values are meaningless (ranks
//   overwrite each other), which emulation tolerates: it measures time.
//
// Thread safety: SetDilation before any other thread reads Dilation();
// DilatedCompute objects are per thread (the sleep debt is thread-local).
#ifndef POSEIDON_UTIL_EMULATION_HPP_
#define POSEIDON_UTIL_EMULATION_HPP_

#include <cstddef>
#include <string>

#include "poseidon/common.hpp"

namespace poseidon {
namespace emulation {

// The time dilation factor, 1 (none) unless set; SetDilation throws
// ConfigError unless 1 <= k <= 1000.
void SetDilation(double k);
double Dilation();

// Stretches a section of real compute on this thread: on destruction it
// sleeps so that the section's wall time is Dilation() times the thread's
// CPU time in it. Sleeps shorter than a millisecond are owed and paid at a
// later section of the same thread. Does nothing when Dilation() is 1.
class DilatedCompute {
 public:
  DilatedCompute();
  ~DilatedCompute();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(DilatedCompute);

 private:
  double wall_start_ = 0;
  double cpu_start_ = 0;
  bool active_ = false;
};

// DilatedCompute's arithmetic, for tests: a section that used `cpu` seconds
// of CPU time in `wall` seconds at dilation `k` owes k cpu - wall; a negative
// balance goes to *overrun (as a positive number), a positive one to *debt.
// Returns how long to sleep now: *debt once it reaches a millisecond, else 0.
double SleepAfterSection(double k, double cpu, double wall, double* debt,
                         double* overrun);

// Seconds of wall time that DilatedCompute sections on this thread could not
// stretch because they already took longer than Dilation() times their CPU
// time (the machine is overloaded: dilate more); for the end-of-run report.
double OverrunSeconds();

// A read-write mapping of the POSIX shared-memory object `name` (a leading
// '/' and no other), at least `bytes` long: created when missing, grown when
// shorter, never shrunk (another process may map it). Throws IOError naming
// the object on failure. Unlink() removes the name (mappings stay valid).
class SharedRegion {
 public:
  SharedRegion(const std::string& name, size_t bytes);
  ~SharedRegion();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(SharedRegion);

  char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  void Unlink();

 private:
  std::string name_;
  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace emulation
}  // namespace poseidon

#endif  // POSEIDON_UTIL_EMULATION_HPP_
