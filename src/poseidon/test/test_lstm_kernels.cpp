// The recurrent layers' element-wise bodies (kernels/lstm_kernels.hpp) on
// the CPU: the GPU runs them through operator()(i), which splits i into a
// row and a column, and the CPU through Apply(row, col) in nested loops
// (util/for_each_rows.hpp); both must write the same bits. The column sums
// the GPU uses for bias gradients (SumRows) must round as the CPU's loop of
// axpy calls does, and the bias broadcast (AddRowVector) as an axpy per row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "poseidon/kernels/lstm_kernels.hpp"
#include "poseidon/layers/recurrent_layer.hpp"
#include "poseidon/util/for_each_rows.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

template <typename Dtype>
class LstmKernelsTest : public ::testing::Test {
 protected:
  // A buffer of n values in [-2, 2], deterministic.
  static vector<Dtype> Values(int n, int salt) {
    vector<Dtype> v(n);
    for (int i = 0; i < n; ++i) {
      v[i] = static_cast<Dtype>(2.0 * std::sin(0.37 * i + 1.3 * salt));
    }
    return v;
  }

  // Stream flags: 1, 0, 1, 0.5, ... (cont need not be binary).
  static vector<Dtype> Conts(int n) {
    vector<Dtype> v(n);
    for (int i = 0; i < n; ++i) v[i] = i % 3 == 1 ? 0 : (i % 3 == 2 ? 0.5 : 1);
    return v;
  }

  static void ExpectSameBits(const vector<Dtype>& a, const vector<Dtype>& b,
                             const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(Dtype)), 0)
          << what << " element " << i << ": " << a[i] << " vs " << b[i];
    }
  }

  // Runs `make(outputs)` both ways on fresh copies of `outputs` (what the
  // functor writes, pre-filled so that in-place updates are covered too)
  // and expects the same bits.
  template <typename MakeF>
  static void ExpectSplitMatches(int rows, int cols,
                                 const vector<vector<Dtype>>& outputs,
                                 MakeF make, const std::string& what) {
    vector<vector<Dtype>> by_rows = outputs, by_index = outputs;
    cpu_for_each_rows(rows, cols, make(&by_rows));
    cpu_for_each(rows * cols, make(&by_index));
    for (size_t k = 0; k < outputs.size(); ++k) {
      ExpectSameBits(by_index[k], by_rows[k],
                     what + " output " + std::to_string(k));
    }
  }
};
TYPED_TEST_SUITE(LstmKernelsTest, test::TestDtypes);

TYPED_TEST(LstmKernelsTest, LstmBodiesSplitTheIndexAsTheRowLoopDoes) {
  using Dtype = TypeParam;
  const int N = 5, D = 7;
  const vector<Dtype> c_prev = this->Values(N * D, 1);
  const vector<Dtype> gates = this->Values(N * 4 * D, 2);
  const vector<Dtype> cont = this->Conts(N);
  const vector<Dtype> cont_next = this->Conts(N + 1);
  for (const bool fused : {false, true}) {
    this->ExpectSplitMatches(
        N, D,
        {vector<Dtype>(N * 4 * D), vector<Dtype>(N * D), vector<Dtype>(N * D),
         vector<Dtype>(N * D)},
        [&](vector<vector<Dtype>>* out) {
          return kernels::LstmForward<Dtype>{
              D,
              c_prev.data(),
              gates.data(),
              cont.data(),
              (*out)[0].data(),
              (*out)[1].data(),
              (*out)[2].data(),
              fused ? cont_next.data() + 1 : nullptr,
              fused ? (*out)[3].data() : nullptr};
        },
        fused ? "LstmForward with hc_next" : "LstmForward");
  }

  vector<Dtype> acts(N * 4 * D), c(N * D), h(N * D);
  cpu_for_each_rows(N, D,
                    kernels::LstmForward<Dtype>{
                        D, c_prev.data(), gates.data(), cont.data(),
                        acts.data(), c.data(), h.data(), nullptr, nullptr});
  const vector<Dtype> dh_out = this->Values(N * D, 3);
  const vector<Dtype> rec = this->Values(N * D, 4);
  const vector<Dtype> final_dh = this->Values(N * D, 5);
  const kernels::HiddenGrad<Dtype> grads[] = {
      {nullptr, nullptr, nullptr, final_dh.data()},             // LSTMUnit
      {dh_out.data(), nullptr, nullptr, nullptr},               // last step
      {dh_out.data(), nullptr, nullptr, final_dh.data()},       // last, exposed
      {dh_out.data(), rec.data(), cont_next.data(), nullptr}};  // t < T - 1
  for (const kernels::HiddenGrad<Dtype>& dh : grads) {
    // dc and dc_prev the same array, as LSTMLayer runs it.
    this->ExpectSplitMatches(
        N, D, {this->Values(N * D, 6), vector<Dtype>(N * 4 * D)},
        [&](vector<vector<Dtype>>* out) {
          return kernels::LstmBackward<Dtype>{
              D,        c_prev.data(),    acts.data(),
              c.data(), cont.data(),      (*out)[0].data(),
              dh,       (*out)[0].data(), (*out)[1].data()};
        },
        "LstmBackward");
  }
}

TYPED_TEST(LstmKernelsTest, RnnAndRowBodiesSplitTheIndexAsTheRowLoopDoes) {
  using Dtype = TypeParam;
  const int N = 6, H = 5;
  const vector<Dtype> a = this->Values(N * H, 1);
  const vector<Dtype> cont = this->Conts(N);
  const vector<Dtype> b = this->Values(H, 2);
  this->ExpectSplitMatches(
      N, H, {vector<Dtype>(N * H), vector<Dtype>(N * H)},
      [&](vector<vector<Dtype>>* out) {
        return kernels::RnnForward<Dtype>{H, a.data(), (*out)[0].data(),
                                          cont.data(), (*out)[1].data()};
      },
      "RnnForward");
  const vector<Dtype> dh_out = this->Values(N * H, 3);
  const vector<Dtype> rec = this->Values(N * H, 4);
  this->ExpectSplitMatches(
      N, H, {vector<Dtype>(N * H)},
      [&](vector<vector<Dtype>>* out) {
        return kernels::RnnBackward<Dtype>{
            H, a.data(),
            kernels::HiddenGrad<Dtype>{dh_out.data(), rec.data(), cont.data(),
                                       nullptr},
            (*out)[0].data()};
      },
      "RnnBackward");
  this->ExpectSplitMatches(
      N, H, {this->Values(N * H, 5), vector<Dtype>(N * H)},
      [&](vector<vector<Dtype>>* out) {
        return kernels::RnnOutputForward<Dtype>{H, b.data(), (*out)[0].data(),
                                                (*out)[1].data()};
      },
      "RnnOutputForward");
  this->ExpectSplitMatches(
      N, H, {vector<Dtype>(N * H)},
      [&](vector<vector<Dtype>>* out) {
        return kernels::ContScale<Dtype>{H, cont.data(), a.data(),
                                         (*out)[0].data()};
      },
      "ContScale");
  this->ExpectSplitMatches(
      N, H, {this->Values(N * H, 6)},
      [&](vector<vector<Dtype>>* out) {
        return kernels::AddRowVector<Dtype>{H, b.data(), (*out)[0].data()};
      },
      "AddRowVector");
}

// The GPU's bias sums and broadcasts round as the CPU's axpy loops.
TYPED_TEST(LstmKernelsTest, RowSumsAndBroadcastRoundAsAxpyLoops) {
  using Dtype = TypeParam;
  const int rows = 37, cols = 23;
  const vector<Dtype> x = this->Values(rows * cols, 1);
  vector<Dtype> cpu = this->Values(cols, 2), gpu_body = cpu;
  AddRowSums(Poseidon::CPU, rows, cols, x.data(), cpu.data());
  cpu_for_each(cols,
               kernels::SumRows<Dtype>{rows, cols, x.data(), gpu_body.data()});
  this->ExpectSameBits(gpu_body, cpu, "SumRows vs AddRowSums(CPU)");

  const vector<Dtype> b = this->Values(cols, 3);
  vector<Dtype> axpy = x, body = x;
  for (int r = 0; r < rows; ++r) {
    cpu_axpy(cols, Dtype(1), b.data(), axpy.data() + r * cols);
  }
  cpu_for_each(rows * cols,
               kernels::AddRowVector<Dtype>{cols, b.data(), body.data()});
  this->ExpectSameBits(body, axpy, "AddRowVector vs axpy per row");
}

// The rows split over the thread pool once the work is large.
TYPED_TEST(LstmKernelsTest, LargeGridsSplitOverThreadsWithTheSameResult) {
  using Dtype = TypeParam;
  const int N = 64, D = 300;
  const vector<Dtype> c_prev = this->Values(N * D, 1);
  const vector<Dtype> gates = this->Values(N * 4 * D, 2);
  const vector<Dtype> cont = this->Conts(N);
  auto run = [&](int threads) {
    const int saved = Poseidon::num_threads();
    Poseidon::set_num_threads(threads);
    vector<Dtype> acts(N * 4 * D), c(N * D), h(N * D);
    cpu_for_each_rows(N, D,
                      kernels::LstmForward<Dtype>{
                          D, c_prev.data(), gates.data(), cont.data(),
                          acts.data(), c.data(), h.data(), nullptr, nullptr});
    Poseidon::set_num_threads(saved);
    return h;
  };
  this->ExpectSameBits(run(4), run(1), "h with 4 threads vs 1");
}

}  // namespace
}  // namespace poseidon
