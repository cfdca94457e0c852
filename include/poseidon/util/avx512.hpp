// The run-time check behind Poseidon's hand-written AVX-512 kernels
// (util/direct_conv.hpp, util/pool_rows.hpp).
//
// Note [AVX-512 isolation]
// The kernels are compiled with function-level target attributes
// (POSEIDON_AVX512 in their .cpp files) rather than a per-file -mavx512f,
// so that the rest of each file, what it instantiates from headers
// (std::vector, std::min: code the linker may share with other files) and
// its static initialisation stay baseline x86-64 code. They are reachable
// only through entry points whose callers check Avx512KernelsAvailable()
// first, so the binary runs on CPUs without AVX-512.
#ifndef POSEIDON_UTIL_AVX512_HPP_
#define POSEIDON_UTIL_AVX512_HPP_

namespace poseidon {

// True when the CPU running the process has AVX-512F and FMA (checked once,
// thread-safe) and the environment variable POSEIDON_KERNELS is unset or
// "auto": "blas" turns every hand-written kernel off and "avx2" the AVX-512
// ones only, so that a CPU with AVX-512 runs the AVX2 paths (to measure
// them beside the AVX-512 ones, and to test them on such CPUs).
bool Avx512KernelsAvailable();

// True when the CPU has AVX-512F and FMA but POSEIDON_KERNELS=avx2 holds
// those kernels off (for the messages that say why a path was chosen).
bool Avx512KernelsHeldOff();

// True when the CPU has AVX2 and FMA and POSEIDON_KERNELS is not "blas":
// the AVX2 kernels (util/sgemm_avx2.hpp), compiled and reached the same
// way as the AVX-512 ones (POSEIDON_AVX2 target attributes).
bool Avx2KernelsAvailable();

}  // namespace poseidon

#endif  // POSEIDON_UTIL_AVX512_HPP_
