// Avx512KernelsAvailable and Avx2KernelsAvailable: the CPU checks, in
// baseline code.
#include "poseidon/util/avx512.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace poseidon {
namespace {

// POSEIDON_KERNELS: unset or "auto" lets the CPU decide; "avx2" keeps the
// AVX-512 kernels off, so a CPU with AVX-512 runs what an AVX2-only CPU
// runs (to measure and test that path); "blas" turns every hand-written
// kernel off. Anything else is a mistake, named once on stderr and taken
// as "auto" (a benchmark should not die of a typo in a variable).
enum class KernelChoice { kAuto, kAvx2, kBlas };

KernelChoice Choice() {
  const char* value = std::getenv("POSEIDON_KERNELS");
  if (value == nullptr || *value == '\0' || std::strcmp(value, "auto") == 0) {
    return KernelChoice::kAuto;
  }
  if (std::strcmp(value, "avx2") == 0) return KernelChoice::kAvx2;
  if (std::strcmp(value, "blas") == 0) return KernelChoice::kBlas;
  std::fprintf(stderr,
               "warning: POSEIDON_KERNELS=%s is not one of auto, avx2, blas; "
               "using auto\n",
               value);
  return KernelChoice::kAuto;
}

KernelChoice CachedChoice() {
  static const KernelChoice choice = Choice();
  return choice;
}

bool Detect() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") &&
         CachedChoice() == KernelChoice::kAuto;
}

bool DetectAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         CachedChoice() != KernelChoice::kBlas;
}

}  // namespace

bool Avx512KernelsAvailable() {
  static const bool available = Detect();
  return available;
}

bool Avx512KernelsHeldOff() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") &&
         CachedChoice() == KernelChoice::kAvx2;
}

bool Avx2KernelsAvailable() {
  static const bool available = DetectAvx2();
  return available;
}

}  // namespace poseidon
