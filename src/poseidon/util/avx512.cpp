// Avx512KernelsAvailable and Avx2KernelsAvailable: the CPU checks, in
// baseline code.
#include "poseidon/util/avx512.hpp"

#include <cstdlib>
#include <cstring>

namespace poseidon {
namespace {

bool KernelsAllowed() {
  const char* force = std::getenv("POSEIDON_KERNELS");
  return force == nullptr || std::strcmp(force, "blas") != 0;
}

bool Detect() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") &&
         KernelsAllowed();
}

bool DetectAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         KernelsAllowed();
}

}  // namespace

bool Avx512KernelsAvailable() {
  static const bool available = Detect();
  return available;
}

bool Avx2KernelsAvailable() {
  static const bool available = DetectAvx2();
  return available;
}

}  // namespace poseidon
