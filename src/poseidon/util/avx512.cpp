// Avx512KernelsAvailable: the CPU check, in baseline code.
#include "poseidon/util/avx512.hpp"

#include <cstdlib>
#include <cstring>

namespace poseidon {
namespace {

bool Detect() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("fma")) {
    return false;
  }
  const char* force = std::getenv("POSEIDON_KERNELS");
  return force == nullptr || std::strcmp(force, "blas") != 0;
}

}  // namespace

bool Avx512KernelsAvailable() {
  static const bool available = Detect();
  return available;
}

}  // namespace poseidon
