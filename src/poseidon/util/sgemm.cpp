// The float GEMM dispatch: Poseidon's AVX-512 or AVX2 kernel, OpenBLAS or
// oneDNN (Note [Float GEMM]).
#include "poseidon/util/sgemm.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

#include "poseidon/common.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/sgemm_avx2.hpp"
#include "poseidon/util/sgemm_avx512.hpp"

#ifdef USE_DNNL
#include <oneapi/dnnl/dnnl.h>

// From libgomp, the OpenMP runtime Debian's oneDNN is built on; declared
// here rather than through <omp.h> so this file needs no -fopenmp.
extern "C" {
int omp_get_max_threads(void);
void omp_set_num_threads(int n);
}
#endif

namespace poseidon {
namespace {

void OpenBlasSgemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M,
                   int N, int K, float alpha, const float* A, int lda,
                   const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
              beta, C, ldc);
}

#ifdef USE_DNNL
// Holds the calling thread's OpenMP thread count at 1 (Note [Float GEMM]):
// oneDNN then never starts an OpenMP team.
void SetOneDnnThreads() {
  thread_local bool set = false;
  if (!set) {
    omp_set_num_threads(1);
    set = true;
  }
}

void OneDnnSgemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N,
                 int K, float alpha, const float* A, int lda, const float* B,
                 int ldb, float beta, float* C, int ldc) {
  // oneDNN rejects zero leading dimensions, which an empty product has
  // (lda = K = 0); such products cost nothing, so OpenBLAS does them.
  if (M <= 0 || N <= 0 || K <= 0) {
    OpenBlasSgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                  ldc);
    return;
  }
  SetOneDnnThreads();
  const dnnl_status_t status = dnnl_sgemm(
      trans_a == CblasNoTrans ? 'N' : 'T', trans_b == CblasNoTrans ? 'N' : 'T',
      M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  CHECK_EQ(status, dnnl_success)
      << "dnnl_sgemm(" << M << " x " << N << " x " << K << ", lda " << lda
      << ", ldb " << ldb << ", ldc " << ldc << ") failed with status "
      << static_cast<int>(status);
}
#endif

SgemmBackend Choose() {
  const SgemmBackend fallback = Avx512KernelsAvailable() ? SgemmBackend::kAvx512
                                : Avx2KernelsAvailable()
                                    ? SgemmBackend::kAvx2
                                    : SgemmBackend::kOpenBlas;
  const char* force = std::getenv("POSEIDON_SGEMM");
  if (force == nullptr) return fallback;  // Note [Float GEMM]
  if (std::strcmp(force, "openblas") == 0) return SgemmBackend::kOpenBlas;
  // The backends that may be missing, and why.
  const struct {
    const char* name;
    SgemmBackend backend;
    const char* missing;
  } optional[] = {
      {"avx512", SgemmBackend::kAvx512,
       "this CPU has no AVX-512, or POSEIDON_KERNELS is blas or avx2"},
      {"avx2", SgemmBackend::kAvx2,
       "this CPU has no AVX2 and FMA or POSEIDON_KERNELS=blas"},
      {"onednn", SgemmBackend::kOneDnn,
       "this build has no oneDNN (USE_DNNL=OFF)"},
  };
  for (const auto& o : optional) {
    if (std::strcmp(force, o.name) != 0) continue;
    if (SgemmBackendAvailable(o.backend)) return o.backend;
    LOG(WARNING) << "Ignoring POSEIDON_SGEMM=" << o.name << ": " << o.missing;
    return fallback;
  }
  LOG(WARNING) << "Ignoring POSEIDON_SGEMM=\"" << force
               << "\": use avx512, avx2, openblas or onednn";
  return fallback;
}

std::string Describe(SgemmBackend backend) {
  const char* env = std::getenv("POSEIDON_SGEMM");
  const std::string asked = env != nullptr ? env : "";
  switch (backend) {
    case SgemmBackend::kAvx512:
      return asked == "avx512"
                 ? "Poseidon's AVX-512 kernel (POSEIDON_SGEMM=avx512)"
                 : "Poseidon's AVX-512 kernel (POSEIDON_SGEMM=openblas "
                   "selects OpenBLAS)";
    case SgemmBackend::kAvx2: {
      const bool held_off = Avx512KernelsHeldOff();
      return "Poseidon's AVX2 kernel, " + Avx2SgemmBlocking() +
             (asked == "avx2" ? " (POSEIDON_SGEMM=avx2)"
              : held_off      ? " (POSEIDON_KERNELS=avx2 holds AVX-512 off; "
                                "POSEIDON_SGEMM=openblas selects OpenBLAS)"
                              : " (no AVX-512 on this CPU; "
                                "POSEIDON_SGEMM=openblas selects OpenBLAS)");
    }
    case SgemmBackend::kOneDnn: {
#ifdef USE_DNNL
      const dnnl_version_t* v = dnnl_version();
      return "oneDNN " + std::to_string(v->major) + "." +
             std::to_string(v->minor) + "." + std::to_string(v->patch) +
             " dnnl_sgemm (POSEIDON_SGEMM=onednn)";
#else
      break;
#endif
    }
    case SgemmBackend::kOpenBlas:
      break;
  }
  if (asked == "openblas") {
    return "OpenBLAS cblas_sgemm (POSEIDON_SGEMM=openblas)";
  }
  return Avx512KernelsAvailable() || Avx2KernelsAvailable()
             ? "OpenBLAS cblas_sgemm"
             : "OpenBLAS cblas_sgemm (neither AVX-512 nor AVX2 on this CPU, "
               "or POSEIDON_KERNELS=blas)";
}

}  // namespace

SgemmBackend ActiveSgemmBackend() {
  static const SgemmBackend backend = Choose();
  return backend;
}

const char* SgemmDescription() {
  static const std::string text =
      "CPU float GEMM: " + Describe(ActiveSgemmBackend());
  return text.c_str();
}

bool SgemmBackendAvailable(SgemmBackend backend) {
  switch (backend) {
    case SgemmBackend::kOpenBlas:
      return true;
    case SgemmBackend::kAvx512:
      return Avx512KernelsAvailable();
    case SgemmBackend::kAvx2:
      return Avx2KernelsAvailable();
    case SgemmBackend::kOneDnn:
#ifdef USE_DNNL
      return true;
#else
      return false;
#endif
  }
  return false;
}

void SgemmWith(SgemmBackend backend, CBLAS_TRANSPOSE trans_a,
               CBLAS_TRANSPOSE trans_b, int M, int N, int K, float alpha,
               const float* A, int lda, const float* B, int ldb, float beta,
               float* C, int ldc) {
  if (backend == SgemmBackend::kAvx512) {
    Avx512Sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (backend == SgemmBackend::kAvx2) {
    Avx2Sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#ifdef USE_DNNL
  if (backend == SgemmBackend::kOneDnn) {
    OneDnnSgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#endif
  CHECK(backend == SgemmBackend::kOpenBlas)
      << "SgemmWith: this build has no oneDNN (USE_DNNL=OFF)";
  OpenBlasSgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

int OneDnnThreadsOfThisThread() {
#ifdef USE_DNNL
  return omp_get_max_threads();
#else
  return 0;
#endif
}

void Sgemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N,
           int K, float alpha, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc) {
  SgemmWith(ActiveSgemmBackend(), trans_a, trans_b, M, N, K, alpha, A, lda, B,
            ldb, beta, C, ldc);
}

}  // namespace poseidon
