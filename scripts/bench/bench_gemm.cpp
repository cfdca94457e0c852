// bench_gemm: single-precision GEMM throughput of OpenBLAS (as Poseidon
// links it), oneDNN's dnnl_sgemm, BLIS's bli_sgemm and Poseidon's own
// kernel (util/sgemm_avx512.hpp on AVX-512 CPUs, util/sgemm_avx2.hpp on
// AVX2 CPUs without AVX-512; column "poseidon") on the products the
// convolutions of ResNet-50, VGG-16 and GoogLeNet produce, plus square
// matrices. A benchmark, not a test: the figures depend on the machine and
// what else runs on it, so the libraries are timed interleaved (one call of
// each in turn, repeated) and the medians and their ratios are printed.
//
//   build/tools/bench_gemm [--reps=N] [--threads=1,2] [--filter=substring]
//
// Each convolution contributes its three products, row-major as in
// BaseConvolutionLayer: forward C(M,N) = W(M,K) * col(K,N) ("fwd", NN), the
// weight gradient dW(M,K) += dY(M,N) * col(K,N)^T ("wgrad", NT) and the input
// gradient dcol(K,N) = W(M,K)^T * dY(M,N) ("dgrad", TN), with M the output
// channels, K = Cin * kh * kw and N the output pixels of the images in one
// call. Threads: 1 runs each library single-threaded (Poseidon's case when
// its own pool has more than one thread), 2 lets each library use two
// (Poseidon's kernel, single-threaded by design, then gets the columns split
// over two std::threads started per call, as cpu_gemm_parallel splits them
// over the pool).
// OpenBLAS's cblas.h first: blis.h may bring a cblas.h of its own.
// clang-format off
#include <cblas.h>
#include <blis.h>
// clang-format on
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "poseidon/util/avx512.hpp"
#include "poseidon/util/sgemm_avx2.hpp"
#include "poseidon/util/sgemm_avx512.hpp"

extern "C" void omp_set_num_threads(int n);

namespace {

struct Shape {
  std::string name;
  char ta, tb;  // 'N' or 'T', for op(A) and op(B)
  int m, n, k;
  float beta;
};

// Convolution (M = Cout, K = Cin*kh*kw, N = pixels per call) -> 3 products.
void AddConv(std::vector<Shape>* out, const std::string& name, int cout,
             int kdim, int pixels) {
  out->push_back({name + " fwd", 'N', 'N', cout, pixels, kdim, 0.f});
  out->push_back({name + " wgrad", 'N', 'T', cout, kdim, pixels, 1.f});
  out->push_back({name + " dgrad", 'T', 'N', kdim, pixels, cout, 0.f});
}

// An InnerProduct layer's three products (Caffe's layout: weights N_out x
// K_in, not transposed): forward top = bottom * W^T, the weight gradient
// dW += dtop^T * bottom, the input gradient dbottom = dtop * W.
void AddInnerProduct(std::vector<Shape>* out, const std::string& name,
                     int batch, int in, int outputs) {
  out->push_back({name + " fwd", 'N', 'T', batch, outputs, in, 0.f});
  out->push_back({name + " wgrad", 'T', 'N', outputs, in, batch, 1.f});
  out->push_back({name + " dgrad", 'N', 'N', batch, in, outputs, 0.f});
}

std::vector<Shape> Shapes() {
  std::vector<Shape> s;
  // ResNet-50 at 224x224: one image per call for the large maps, 8 for the
  // 14x14 and 7x7 stages (Poseidon batches images into one product there).
  AddConv(&s, "resnet50 conv1 7x7 (1 img)", 64, 3 * 49, 112 * 112);
  AddConv(&s, "resnet50 res2 1x1 64->64 (1 img)", 64, 64, 56 * 56);
  AddConv(&s, "resnet50 res2 3x3 64 (1 img)", 64, 64 * 9, 56 * 56);
  AddConv(&s, "resnet50 res2 1x1 64->256 (1 img)", 256, 64, 56 * 56);
  AddConv(&s, "resnet50 res3 3x3 128 (2 img)", 128, 128 * 9, 2 * 28 * 28);
  AddConv(&s, "resnet50 res4 3x3 256 (8 img)", 256, 256 * 9, 8 * 14 * 14);
  AddConv(&s, "resnet50 res4 1x1 256->1024 (8 img)", 1024, 256, 8 * 14 * 14);
  AddConv(&s, "resnet50 res5 3x3 512 (8 img)", 512, 512 * 9, 8 * 7 * 7);
  // VGG-16.
  AddConv(&s, "vgg16 conv1_2 (1 img)", 64, 64 * 9, 224 * 224);
  AddConv(&s, "vgg16 conv3_2 (1 img)", 256, 256 * 9, 56 * 56);
  AddConv(&s, "vgg16 conv5_2 (8 img)", 512, 512 * 9, 8 * 14 * 14);
  // GoogLeNet inception 3a / 4a.
  AddConv(&s, "googlenet 3a 1x1 192->64 (4 img)", 64, 192, 4 * 28 * 28);
  AddConv(&s, "googlenet 3a 5x5 16->32 (4 img)", 32, 16 * 25, 4 * 28 * 28);
  AddConv(&s, "googlenet 4a 3x3 96->208 (8 img)", 208, 96 * 9, 8 * 14 * 14);
  // LeNet at batch 64 (the demo's net; 8 images per product).
  AddConv(&s, "lenet conv1 5x5 1->20 (8 img)", 20, 25, 8 * 24 * 24);
  AddConv(&s, "lenet conv2 5x5 20->50 (8 img)", 50, 20 * 25, 8 * 8 * 8);
  AddInnerProduct(&s, "lenet fc1 800->500 (64 img)", 64, 800, 500);
  for (int n : {512, 1024, 2048}) {
    const std::string d = std::to_string(n);
    s.push_back({"square " + d, 'N', 'N', n, n, n, 0.f});
  }
  return s;
}

struct Problem {
  Shape s;
  std::vector<float> a, b, c;
  int lda, ldb, ldc;
};

void OpenBlas(const Problem& p, float* c) {
  cblas_sgemm(CblasRowMajor, p.s.ta == 'N' ? CblasNoTrans : CblasTrans,
              p.s.tb == 'N' ? CblasNoTrans : CblasTrans, p.s.m, p.s.n, p.s.k,
              1.f, p.a.data(), p.lda, p.b.data(), p.ldb, p.s.beta, c, p.ldc);
}

void Dnnl(const Problem& p, float* c) {
  dnnl_sgemm(p.s.ta, p.s.tb, p.s.m, p.s.n, p.s.k, 1.f, p.a.data(), p.lda,
             p.b.data(), p.ldb, p.s.beta, c, p.ldc);
}

void Blis(const Problem& p, float* c) {
  // Row-major op(A) (M x K): element (i, k) at rs*i + cs*k.
  const inc_t rsa = p.s.ta == 'N' ? p.lda : 1, csa = p.s.ta == 'N' ? 1 : p.lda;
  const inc_t rsb = p.s.tb == 'N' ? p.ldb : 1, csb = p.s.tb == 'N' ? 1 : p.ldb;
  float alpha = 1.f, beta = p.s.beta;
  bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, p.s.m, p.s.n, p.s.k, &alpha,
            const_cast<float*>(p.a.data()), rsa, csa,
            const_cast<float*>(p.b.data()), rsb, csb, &beta, c, p.ldc, 1);
}

int g_threads = 1;  // for Poseidon's kernel: SetThreads

void OwnPart(const Problem& p, float* c, int n0, int n1) {
  const float* b = p.s.tb == 'N' ? p.b.data() + n0
                                 : p.b.data() + static_cast<size_t>(n0) * p.ldb;
  (poseidon::Avx512KernelsAvailable() ? poseidon::Avx512Sgemm
                                      : poseidon::Avx2Sgemm)(
      p.s.ta == 'N' ? CblasNoTrans : CblasTrans,
      p.s.tb == 'N' ? CblasNoTrans : CblasTrans, p.s.m, n1 - n0, p.s.k, 1.f,
      p.a.data(), p.lda, b, p.ldb, p.s.beta, c + n0, p.ldc);
}

void Own(const Problem& p, float* c) {
  if (g_threads == 1) {
    OwnPart(p, c, 0, p.s.n);
    return;
  }
  // Columns in multiples of 16 per thread, the last thread the rest.
  std::vector<std::thread> helpers;
  const int per = (p.s.n / g_threads + 15) / 16 * 16;
  for (int t = 1; t < g_threads; ++t) {
    const int n0 = std::min(p.s.n, t * per);
    const int n1 = t + 1 == g_threads ? p.s.n : std::min(p.s.n, n0 + per);
    helpers.emplace_back([&p, c, n0, n1] { OwnPart(p, c, n0, n1); });
  }
  OwnPart(p, c, 0, std::min(p.s.n, per));
  for (std::thread& t : helpers) t.join();
}

using Fn = void (*)(const Problem&, float*);
struct Lib {
  const char* name;
  Fn fn;
};
const Lib kLibs[] = {{"openblas", OpenBlas},
                     {"onednn", Dnnl},
                     {"blis", Blis},
                     {"poseidon", Own}};
constexpr int kNumLibs = 4;
int g_num_libs = kNumLibs;  // 3 where the CPU has neither AVX-512 nor AVX2

void SetThreads(int n) {
  g_threads = n;
  openblas_set_num_threads(n);
  omp_set_num_threads(n);  // oneDNN (OpenMP build)
  bli_thread_set_num_threads(n);
}

double Seconds(Fn fn, const Problem& p, float* c, double min_seconds) {
  // Enough calls to last min_seconds, timed together.
  using Clock = std::chrono::steady_clock;
  int calls = 0;
  const auto t0 = Clock::now();
  double elapsed = 0;
  do {
    fn(p, c);
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (elapsed < min_seconds);
  return elapsed / calls;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

float MaxRelDiff(const std::vector<float>& x, const std::vector<float>& y) {
  float worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float d = std::abs(x[i] - y[i]) / (1.f + std::abs(x[i]));
    worst = std::max(worst, d);
  }
  return worst;
}

std::string Arg(int argc, char** argv, const char* key, const char* def) {
  const size_t len = std::strlen(key);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], key, len) == 0 && argv[i][len] == '=') {
      return argv[i] + len + 1;
    }
  }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = std::atoi(Arg(argc, argv, "--reps", "5").c_str());
  const std::string filter = Arg(argc, argv, "--filter", "");
  std::vector<int> thread_counts;
  for (char ch : Arg(argc, argv, "--threads", "1,2")) {
    if (ch >= '1' && ch <= '9') thread_counts.push_back(ch - '0');
  }
  // The three libraries all export cblas_sgemm; make sure the one timed as
  // "openblas" is OpenBLAS (link order), as in Poseidon's library.
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&cblas_sgemm), &info);
  std::printf("cblas_sgemm from %s\n", info.dli_fname);
  if (std::strstr(info.dli_fname, "openblas") == nullptr) {
    std::fprintf(stderr, "bench_gemm: cblas_sgemm is not OpenBLAS's\n");
    return 1;
  }
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("OpenBLAS %s (core %s; OPENBLAS_CORETYPE=%s)\n",
              openblas_get_config(), openblas_get_corename(),
              coretype ? coretype : "unset");
  const dnnl_version_t* v = dnnl_version();
  std::printf("oneDNN %d.%d.%d (cpu runtime %u)\n", v->major, v->minor,
              v->patch, v->cpu_runtime);
  std::printf("BLIS %s (arch %s)\n", bli_info_get_version_str(),
              bli_arch_string(bli_arch_query_id()));
  if (poseidon::Avx512KernelsAvailable()) {
    std::printf("Poseidon's kernel: AVX-512\n");
  } else if (poseidon::Avx2KernelsAvailable()) {
    std::printf("Poseidon's kernel: AVX2, %s\n",
                poseidon::Avx2SgemmBlocking().c_str());
  } else {
    g_num_libs = kNumLibs - 1;
    std::printf(
        "Poseidon's kernels: not on this CPU (neither AVX-512 nor "
        "AVX2, or POSEIDON_KERNELS=blas)\n");
  }
  std::printf(
      "GFLOP/s, median of %d interleaved repeats; ratio = lib / "
      "openblas\n",
      reps);

  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int threads : thread_counts) {
    SetThreads(threads);
    std::printf("\n== %d thread(s)\n%-58s %9s %9s %9s %9s %7s %7s %7s\n",
                threads, "product (M x N x K, op)", "openblas", "onednn",
                "blis", "poseidon", "dnnl/ob", "blis/ob", "own/ob");
    std::vector<double> log_ratio_sum(kNumLibs, 0.0);
    std::vector<double> conv_log_ratio_sum(kNumLibs, 0.0);
    std::vector<double> ratio_min(kNumLibs, 1e30), ratio_max(kNumLibs, 0);
    int count = 0, conv_count = 0;
    for (const Shape& s : Shapes()) {
      if (!filter.empty() && s.name.find(filter) == std::string::npos) {
        continue;
      }
      Problem p{s, {}, {}, {}, 0, 0, s.n};
      p.lda = s.ta == 'N' ? s.k : s.m;
      p.ldb = s.tb == 'N' ? s.n : s.k;
      p.a.resize(static_cast<size_t>(s.m) * s.k);
      p.b.resize(static_cast<size_t>(s.k) * s.n);
      p.c.resize(static_cast<size_t>(s.m) * s.n);
      for (float& x : p.a) x = dist(gen);
      for (float& x : p.b) x = dist(gen);
      // Check the libraries agree before timing them (beta = 0 here).
      std::vector<std::vector<float>> out(kNumLibs);
      for (int l = 0; l < g_num_libs; ++l) {
        out[l].assign(p.c.size(), 0.f);
        Shape zero = s;
        zero.beta = 0;
        Problem q = p;
        q.s = zero;
        kLibs[l].fn(q, out[l].data());
      }
      for (int l = 1; l < g_num_libs; ++l) {
        const float d = MaxRelDiff(out[0], out[l]);
        if (d > 1e-3f * std::max(1, s.k / 256)) {
          std::fprintf(stderr,
                       "bench_gemm: %s: %s differs from openblas by "
                       "%g\n",
                       s.name.c_str(), kLibs[l].name, d);
          return 1;
        }
      }
      const double flops = 2.0 * s.m * s.n * s.k;
      std::vector<std::vector<double>> secs(kNumLibs);
      for (int r = 0; r < reps; ++r) {
        for (int l = 0; l < g_num_libs; ++l) {
          // Let the previous library's spinning threads go to sleep.
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          secs[l].push_back(Seconds(kLibs[l].fn, p, p.c.data(), 0.05));
        }
      }
      double gf[kNumLibs] = {1, 1, 1, 0};
      for (int l = 0; l < g_num_libs; ++l) {
        gf[l] = flops / Median(secs[l]) / 1e9;
      }
      char label[128];
      std::snprintf(label, sizeof(label), "%s %dx%dx%d %c%c", s.name.c_str(),
                    s.m, s.n, s.k, s.ta, s.tb);
      std::printf("%-58s %9.1f %9.1f %9.1f %9.1f %7.2f %7.2f %7.2f\n", label,
                  gf[0], gf[1], gf[2], gf[3], gf[1] / gf[0], gf[2] / gf[0],
                  gf[3] / gf[0]);
      std::fflush(stdout);
      for (int l = 0; l < g_num_libs; ++l) {
        log_ratio_sum[l] += std::log(gf[l] / gf[0]);
        ratio_min[l] = std::min(ratio_min[l], gf[l] / gf[0]);
        ratio_max[l] = std::max(ratio_max[l], gf[l] / gf[0]);
        if (s.name.find("square") == std::string::npos) {
          conv_log_ratio_sum[l] += std::log(gf[l] / gf[0]);
        }
      }
      ++count;
      if (s.name.find("square") == std::string::npos) ++conv_count;
    }
    if (count > 0) {
      std::printf(
          "geometric mean ratio over %d products (range): "
          "onednn/openblas %.2f (%.2f-%.2f), blis/openblas %.2f "
          "(%.2f-%.2f)",
          count, std::exp(log_ratio_sum[1] / count), ratio_min[1], ratio_max[1],
          std::exp(log_ratio_sum[2] / count), ratio_min[2], ratio_max[2]);
      if (g_num_libs == kNumLibs) {
        std::printf(", poseidon/openblas %.2f (%.2f-%.2f)",
                    std::exp(log_ratio_sum[3] / count), ratio_min[3],
                    ratio_max[3]);
      }
      std::printf("\n");
    }
    if (conv_count > 0) {
      std::printf(
          "over the %d layer products (not square): onednn/openblas %.2f, "
          "blis/openblas %.2f",
          conv_count, std::exp(conv_log_ratio_sum[1] / conv_count),
          std::exp(conv_log_ratio_sum[2] / conv_count));
      if (g_num_libs == kNumLibs) {
        std::printf(", poseidon/openblas %.2f",
                    std::exp(conv_log_ratio_sum[3] / conv_count));
      }
      std::printf("\n");
    }
  }
  return 0;
}
