// ParallelFor: every index exactly once in contiguous, balanced ranges for
// many sizes and thread counts; work really reaches the pool threads;
// exceptions reach the caller; nested and concurrent loops; one thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/parallel.hpp"

namespace poseidon {
namespace {

class ParallelForTest : public ::testing::Test {
 protected:
  ParallelForTest() : saved_threads_(Poseidon::num_threads()) {}
  ~ParallelForTest() override { Poseidon::set_num_threads(saved_threads_); }

 private:
  const int saved_threads_;
};

// One call of the loop body.
struct Call {
  int begin, end, worker;
  std::thread::id thread;
};

std::vector<Call> RecordCalls(int n) {
  std::mutex mu;
  std::vector<Call> calls;
  ParallelFor(n, [&](int begin, int end, int worker) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back({begin, end, worker, std::this_thread::get_id()});
  });
  std::sort(calls.begin(), calls.end(),
            [](const Call& a, const Call& b) { return a.worker < b.worker; });
  return calls;
}

TEST_F(ParallelForTest, CoversEveryIndexOnceInBalancedRanges) {
  for (int threads : {1, 2, 3, 4, 7}) {
    Poseidon::set_num_threads(threads);
    for (int n : {0, 1, 2, 3, 5, 7, 8, 16, 100, 1001}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + ", n " +
                   std::to_string(n));
      std::vector<std::atomic<int>> hits(n);
      ParallelFor(n, [&](int begin, int end, int) {
        for (int i = begin; i < end; ++i) ++hits[i];
      });
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;

      const std::vector<Call> calls = RecordCalls(n);
      const int parts = std::min(n, threads);
      EXPECT_EQ(ParallelForWorkers(n), parts);
      ASSERT_EQ(static_cast<int>(calls.size()), parts);
      int next = 0;
      for (int w = 0; w < parts; ++w) {
        EXPECT_EQ(calls[w].worker, w);
        EXPECT_EQ(calls[w].begin, next);
        const int size = calls[w].end - calls[w].begin;
        // Sizes differ by at most one, larger ones first.
        EXPECT_EQ(size, n / parts + (w < n % parts ? 1 : 0));
        next = calls[w].end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST_F(ParallelForTest, RunsOnPoolThreads) {
  Poseidon::set_num_threads(3);
  const std::vector<Call> calls = RecordCalls(9);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].thread, std::this_thread::get_id());
  EXPECT_NE(calls[1].thread, std::this_thread::get_id());
  EXPECT_NE(calls[2].thread, std::this_thread::get_id());
  EXPECT_NE(calls[1].thread, calls[2].thread);
}

TEST_F(ParallelForTest, ManyShortLoops) {
  Poseidon::set_num_threads(2);
  std::atomic<long> sum{0};
  for (int i = 0; i < 2000; ++i) {
    ParallelFor(2 + i % 3, [&](int begin, int end, int) {
      for (int k = begin; k < end; ++k) sum += k;
    });
  }
  // Each round adds 0 + 1 (+ 2 (+ 3)).
  long expected = 0;
  for (int i = 0; i < 2000; ++i) {
    const int n = 2 + i % 3;
    expected += n * (n - 1) / 2;
  }
  EXPECT_EQ(sum.load(), expected);
}

TEST_F(ParallelForTest, RethrowsTheLowestWorkersException) {
  Poseidon::set_num_threads(4);
  std::atomic<int> ranges_run{0};
  try {
    ParallelFor(8, [&](int, int, int worker) {
      ++ranges_run;
      if (worker >= 2) {
        throw std::runtime_error("worker " + std::to_string(worker));
      }
    });
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "worker 2");
  }
  EXPECT_EQ(ranges_run.load(), 4);  // the other ranges still ran

  // An exception on the caller's own range, and the pool still works after.
  EXPECT_THROW(ParallelFor(4,
                           [](int, int, int worker) {
                             if (worker == 0) throw ConfigError("caller");
                           }),
               ConfigError);
  const std::vector<Call> calls = RecordCalls(4);
  EXPECT_EQ(calls.size(), 4u);
}

TEST_F(ParallelForTest, ExceptionWithOneThread) {
  Poseidon::set_num_threads(1);
  EXPECT_THROW(ParallelFor(3, [](int, int, int) { throw ShapeError("x"); }),
               ShapeError);
}

TEST_F(ParallelForTest, NestedLoopRunsSeriallyOnTheCallingThread) {
  Poseidon::set_num_threads(2);
  std::vector<std::atomic<int>> hits(4 * 5);
  std::atomic<bool> inner_left_thread{false};
  ParallelFor(4, [&](int begin, int end, int) {
    const std::thread::id outer = std::this_thread::get_id();
    for (int i = begin; i < end; ++i) {
      ParallelFor(5, [&](int b, int e, int) {
        if (std::this_thread::get_id() != outer) inner_left_thread = true;
        for (int j = b; j < e; ++j) ++hits[i * 5 + j];
      });
    }
  });
  EXPECT_FALSE(inner_left_thread.load());
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST_F(ParallelForTest, OneThreadRunsOneRangeOnTheCaller) {
  Poseidon::set_num_threads(1);
  const std::vector<Call> calls = RecordCalls(10);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].begin, 0);
  EXPECT_EQ(calls[0].end, 10);
  EXPECT_EQ(calls[0].worker, 0);
  EXPECT_EQ(calls[0].thread, std::this_thread::get_id());
}

// Two threads issuing loops at once: one gets the pool, the other runs its
// ranges itself; both see every index once.
TEST_F(ParallelForTest, ConcurrentCallers) {
  Poseidon::set_num_threads(2);
  auto run = [](std::atomic<int>* failures) {
    for (int i = 0; i < 300; ++i) {
      std::vector<std::atomic<int>> hits(7);
      ParallelFor(7, [&](int begin, int end, int) {
        for (int k = begin; k < end; ++k) ++hits[k];
      });
      for (auto& h : hits) {
        if (h.load() != 1) ++*failures;
      }
    }
  };
  std::atomic<int> failures{0};
  std::thread other(run, &failures);
  run(&failures);
  other.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(ParallelForTest, NumThreadsSetting) {
  EXPECT_GE(Poseidon::num_threads(), 1);
  Poseidon::set_num_threads(3);
  EXPECT_EQ(Poseidon::num_threads(), 3);
  EXPECT_EQ(ParallelForWorkers(2), 2);
  EXPECT_EQ(ParallelForWorkers(0), 0);
  EXPECT_THROW(Poseidon::set_num_threads(0), ConfigError);
  EXPECT_THROW(Poseidon::set_num_threads(-2), ConfigError);
  EXPECT_EQ(Poseidon::num_threads(), 3);
}

// See Note [One thread pool] in common.cpp.
TEST_F(ParallelForTest, MoreThanOnePoolThreadMakesOpenBlasSingleThreaded) {
  Poseidon::set_num_threads(2);
  EXPECT_EQ(openblas_get_num_threads(), 1);
}

// An empty product whose N is as large as an int allows (InnerProduct with
// num_output 2147483646 on an empty batch): cutting the columns into slices
// once computed N + 15 in int, which overflowed (found by fuzz_layer_setup;
// the overflow shows under UBSan, the hardening build of these tests).
TEST_F(ParallelForTest, EmptyParallelGemmWithTheLargestNLeavesCAlone) {
  Poseidon::set_num_threads(2);
  const float a = 1, b = 1;
  float c = 7;
  for (int N : {INT_MAX - 1, INT_MAX}) {
    cpu_gemm_parallel<float>(CblasNoTrans, CblasTrans, 0, N, 0, 1.f, &a, &b,
                             0.f, &c);
    EXPECT_EQ(c, 7) << "N " << N;
  }
}

// cpu_gemm_parallel against cpu_gemm for every transpose combination, with
// column counts that do and do not split evenly into 16-column slices.
TEST_F(ParallelForTest, ParallelGemmMatchesGemm) {
  const CBLAS_TRANSPOSE kinds[] = {CblasNoTrans, CblasTrans};
  for (int threads : {1, 2, 3}) {
    Poseidon::set_num_threads(threads);
    for (CBLAS_TRANSPOSE ta : kinds) {
      for (CBLAS_TRANSPOSE tb : kinds) {
        for (int N : {5, 64, 200}) {
          const int M = 120, K = 300;  // N = 64 and 200 split
          std::vector<double> A(M * K), B(K * N), want(M * N), got(M * N);
          for (size_t i = 0; i < A.size(); ++i) A[i] = 0.01 * (i % 37) - 0.1;
          for (size_t i = 0; i < B.size(); ++i) B[i] = 0.02 * (i % 29) - 0.3;
          for (size_t i = 0; i < want.size(); ++i) {
            want[i] = got[i] = 0.5 * (i % 7);
          }
          cpu_gemm<double>(ta, tb, M, N, K, 1.5, A.data(), B.data(), 0.25,
                           want.data());
          cpu_gemm_parallel<double>(ta, tb, M, N, K, 1.5, A.data(), B.data(),
                                    0.25, got.data());
          for (int i = 0; i < M * N; ++i) {
            ASSERT_NEAR(got[i], want[i], 1e-9 * (1 + std::abs(want[i])))
                << "element " << i << ", threads " << threads << ", N " << N
                << ", trans " << (ta == CblasTrans) << (tb == CblasTrans);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace poseidon
