# Sanitizer and fuzzing builds (clang only; CPU configuration only):
#   -DPOSEIDON_SANITIZE=address,undefined   AddressSanitizer + UBSan
#   -DPOSEIDON_SANITIZE=thread              ThreadSanitizer
#   -DBUILD_fuzzers=ON                      libFuzzer harnesses
#                                           (src/poseidon/test/fuzz/)
# BUILD_fuzzers instruments everything for coverage (fuzzer-no-link), so one
# ASan/UBSan build serves both the unit tests and the fuzz targets
# (scripts/run_hardening.sh). See docs/reliability.md.
set(POSEIDON_SANITIZE "" CACHE STRING
    "Sanitizers for every target: address,undefined | thread (clang)")
option(BUILD_fuzzers "Build the libFuzzer harnesses (clang)" OFF)

set(POSEIDON_INSTRUMENTED OFF)
if(POSEIDON_SANITIZE OR BUILD_fuzzers)
  set(POSEIDON_INSTRUMENTED ON)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "POSEIDON_SANITIZE and BUILD_fuzzers need clang: "
            "configure with -DCMAKE_CXX_COMPILER=clang++ "
            "-DCMAKE_C_COMPILER=clang (Debian: apt-get install clang "
            "libclang-rt-dev)")
  endif()
  if(USE_CUDA)
    message(FATAL_ERROR "POSEIDON_SANITIZE and BUILD_fuzzers are for the "
            "CPU configuration (USE_CUDA=OFF)")
  endif()
endif()

if(POSEIDON_SANITIZE)
  if(POSEIDON_SANITIZE MATCHES "thread" AND
     POSEIDON_SANITIZE MATCHES "address")
    message(FATAL_ERROR "ThreadSanitizer and AddressSanitizer exclude each "
            "other; build them in two directories")
  endif()
  add_compile_options(-fsanitize=${POSEIDON_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${POSEIDON_SANITIZE})
  if(POSEIDON_SANITIZE MATCHES "undefined")
    # Every UB report fails the test that caused it.
    add_compile_options(-fno-sanitize-recover=all)
  endif()
endif()
if(BUILD_fuzzers)
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
