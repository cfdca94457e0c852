// Time dilation and shared parameters for emulated-cluster benchmarks.
#include "poseidon/util/emulation.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>

namespace poseidon {
namespace emulation {

// Note [Time dilation]
// An emulated cluster of R ranks on a machine of C cores runs each rank's
// layers as sleeps, but the rest of a rank's work is real: the kernel's TCP
// for every byte sent, the parameter server's sums, the shared-memory sums
// of the host level, the SFB rebuild (2MNK(W-1) FLOPs per layer) and the
// update. At 32 ranks on 2 cores, 10 Gbit/s links or one VGG19-22K rebuild
// per rank need many times the machine. Dilating time by k makes the
// emulated cluster k times slower than the one it stands for: the links run
// at rate / k (the benchmark caps them), the profiled layer times are
// multiplied by k, and every section of real compute is stretched to k times
// its CPU time (DilatedCompute: wall time, which contention inflates, is not
// the measure). The cost model's measured rates are divided by k, so its
// predictions are in the same dilated seconds. Ratios (speed-ups, one mode
// against another) are then those of the undilated cluster, and times divide
// by k, as long as the real work fits: OverrunSeconds() counts the sections
// that took longer than k times their CPU time, which is the machine being
// too small for that k. What is not dilated: the latency of a message
// through the namespaces' links (tens of microseconds, made k times smaller
// relative to everything else), and compute outside the stretched sections
// (the communication threads' own bookkeeping).
namespace {

std::atomic<double> g_dilation{1.0};
std::atomic<double> g_overrun_seconds{0.0};
thread_local double t_debt_seconds = 0;

constexpr double kMinSleepSeconds = 1e-3;

double WallSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

void SetDilation(double k) {
  POSEIDON_REQUIRE(k >= 1 && k <= 1000, ConfigError,
                   "the emulation's time dilation must be in [1, 1000], got ",
                   k);
  g_dilation.store(k);
}

double Dilation() { return g_dilation.load(std::memory_order_relaxed); }

double OverrunSeconds() { return g_overrun_seconds.load(); }

DilatedCompute::DilatedCompute() {
  if (Dilation() == 1.0) return;
  active_ = true;
  wall_start_ = WallSeconds();
  cpu_start_ = ThreadCpuSeconds();
}

double SleepAfterSection(double k, double cpu, double wall, double* debt,
                         double* overrun) {
  if (k == 1.0) return 0;
  const double owed = k * cpu - wall;
  if (owed < 0) {
    *overrun -= owed;  // took longer than k times its CPU time: contention
    return 0;
  }
  *debt += owed;
  return *debt >= kMinSleepSeconds ? *debt : 0;
}

DilatedCompute::~DilatedCompute() {
  if (!active_) return;
  double overrun = 0;
  const double sleep = SleepAfterSection(
      Dilation(), ThreadCpuSeconds() - cpu_start_, WallSeconds() - wall_start_,
      &t_debt_seconds, &overrun);
  if (overrun > 0) {
    double seen = g_overrun_seconds.load();
    while (!g_overrun_seconds.compare_exchange_weak(seen, seen + overrun)) {
    }
  }
  if (sleep <= 0) return;
  const double start = WallSeconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
  t_debt_seconds -= WallSeconds() - start;  // sleeping overshoots: credit it
}

SharedRegion::SharedRegion(const std::string& name, size_t bytes)
    : name_(name) {
  POSEIDON_REQUIRE(name.size() > 1 && name[0] == '/' &&
                       name.find('/', 1) == std::string::npos,
                   ConfigError, "shared-memory name '", name,
                   "' must be '/' followed by a name without '/'");
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
  POSEIDON_REQUIRE(fd >= 0, IOError, "cannot open shared memory '", name,
                   "': ", std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    POSEIDON_THROW(IOError, "cannot stat shared memory '", name,
                   "': ", std::strerror(err));
  }
  // Grow only: another process may have mapped the object at its size.
  if (static_cast<size_t>(st.st_size) < bytes &&
      ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    POSEIDON_THROW(IOError, "cannot size shared memory '", name, "' to ",
                   bytes, " bytes: ", std::strerror(err));
  }
  size_ = bytes == 0 ? 1 : bytes;
  void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  POSEIDON_REQUIRE(p != MAP_FAILED, IOError, "cannot map ", size_,
                   " bytes of shared memory '", name,
                   "': ", std::strerror(err));
  data_ = static_cast<char*>(p);
}

SharedRegion::~SharedRegion() {
  if (data_ != nullptr) munmap(data_, size_);
}

void SharedRegion::Unlink() { shm_unlink(name_.c_str()); }

}  // namespace emulation
}  // namespace poseidon
