// CLOCK_MONOTONIC (std::chrono::steady_clock's clock) in nanoseconds, for
// the signal handlers and the wait notes (signal_handler.cpp,
// wait_notes.cpp): clock_gettime is async-signal-safe.
#ifndef POSEIDON_UTIL_MONOTONIC_HPP_
#define POSEIDON_UTIL_MONOTONIC_HPP_

#include <time.h>

#include <cstdint>

namespace poseidon {

// 0 when the clock cannot be read.
inline int64_t MonotonicNs() {
  struct timespec now;
  if (clock_gettime(CLOCK_MONOTONIC, &now) != 0) return 0;
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

}  // namespace poseidon

#endif  // POSEIDON_UTIL_MONOTONIC_HPP_
