// The float GEMM dispatch: oneDNN or OpenBLAS (Note [Float GEMM]).
#include "poseidon/util/sgemm.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

#include "poseidon/common.hpp"

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

void OneDnnSgemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M,
                 int N, int K, float alpha, const float* A, int lda,
                 const float* B, int ldb, float beta, float* C, int ldc) {
  // oneDNN rejects zero leading dimensions, which an empty product has
  // (lda = K = 0); such products cost nothing, so OpenBLAS does them.
  if (M <= 0 || N <= 0 || K <= 0) {
    OpenBlasSgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                  ldc);
    return;
  }
  SetOneDnnThreads();
  const dnnl_status_t status =
      dnnl_sgemm(trans_a == CblasNoTrans ? 'N' : 'T',
                 trans_b == CblasNoTrans ? 'N' : 'T', M, N, K, alpha, A, lda,
                 B, ldb, beta, C, ldc);
  CHECK_EQ(status, dnnl_success)
      << "dnnl_sgemm(" << M << " x " << N << " x " << K << ", lda " << lda
      << ", ldb " << ldb << ", ldc " << ldc << ") failed with status "
      << static_cast<int>(status);
}
#endif

SgemmBackend Choose() {
  if (const char* force = std::getenv("POSEIDON_SGEMM")) {
    if (std::strcmp(force, "openblas") == 0) return SgemmBackend::kOpenBlas;
    if (std::strcmp(force, "onednn") == 0 &&
        SgemmBackendAvailable(SgemmBackend::kOneDnn)) {
      return SgemmBackend::kOneDnn;
    }
    LOG(WARNING) << "Ignoring POSEIDON_SGEMM=\"" << force << "\": "
                 << (std::strcmp(force, "onednn") == 0
                         ? "this build has no oneDNN (USE_DNNL=OFF)"
                         : "use openblas or onednn");
  }
  // OpenBLAS unless asked otherwise: Note [Float GEMM].
  return SgemmBackend::kOpenBlas;
}

std::string Describe(SgemmBackend backend) {
#ifdef USE_DNNL
  if (backend == SgemmBackend::kOneDnn) {
    const dnnl_version_t* v = dnnl_version();
    return "oneDNN " + std::to_string(v->major) + "." +
           std::to_string(v->minor) + "." + std::to_string(v->patch) +
           " dnnl_sgemm (POSEIDON_SGEMM=onednn)";
  }
  return "OpenBLAS cblas_sgemm (POSEIDON_SGEMM=onednn selects oneDNN's)";
#else
  (void)backend;
  return "OpenBLAS cblas_sgemm (built without oneDNN: USE_DNNL=OFF)";
#endif
}

}  // namespace

SgemmBackend ActiveSgemmBackend() {
  static const SgemmBackend backend = Choose();
  return backend;
}

const char* SgemmDescription() {
  static const std::string text = "CPU float GEMM: " +
                                  Describe(ActiveSgemmBackend());
  return text.c_str();
}

bool SgemmBackendAvailable(SgemmBackend backend) {
#ifdef USE_DNNL
  return true;
#else
  return backend == SgemmBackend::kOpenBlas;
#endif
}

void SgemmWith(SgemmBackend backend, CBLAS_TRANSPOSE trans_a,
               CBLAS_TRANSPOSE trans_b, int M, int N, int K, float alpha,
               const float* A, int lda, const float* B, int ldb, float beta,
               float* C, int ldc) {
#ifdef USE_DNNL
  if (backend == SgemmBackend::kOneDnn) {
    OneDnnSgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
    return;
  }
#endif
  CHECK(backend == SgemmBackend::kOpenBlas)
      << "SgemmWith: this build has no oneDNN (USE_DNNL=OFF)";
  OpenBlasSgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

int OneDnnThreadsOfThisThread() {
#ifdef USE_DNNL
  return omp_get_max_threads();
#else
  return 0;
#endif
}

void Sgemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int M, int N,
           int K, float alpha, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc) {
  SgemmWith(ActiveSgemmBackend(), trans_a, trans_b, M, N, K, alpha, A, lda, B,
            ldb, beta, C, ldc);
}

}  // namespace poseidon
