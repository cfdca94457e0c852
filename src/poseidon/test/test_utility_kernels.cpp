// The GPU's arithmetic of the utility layers, checked on the CPU: every
// primitive of util/block_ops.hpp and util/reduce_ops.hpp is run twice on
// the host, once with the CPU passes' loops and once with the functor the
// GPU runs (HostPath::kGpuKernel, set up exactly as for the GPU), and the
// two must agree bit for bit (Reduction's two-pass sums on inputs whose
// sums are exact in any order). With the layers' own CPU tests
// (which run the shared layer bodies) this covers what the GPU will run
// except the launch itself (see test_utility_layers_gpu.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/blob.hpp"
#include "poseidon/util/block_ops.hpp"
#include "poseidon/util/index_upload.hpp"
#include "poseidon/util/reduce_ops.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

constexpr Poseidon::Brew kCpu = Poseidon::CPU;
constexpr HostPath kKernel = HostPath::kGpuKernel;
constexpr HostPath kLoops = HostPath::kCpuLoops;

template <typename Dtype>
class UtilityKernelsOnHostTest : public ::testing::Test {
 protected:
  UtilityKernelsOnHostTest() {
    Poseidon::set_mode(Poseidon::CPU);
    Poseidon::set_random_seed(1701);
  }

  // A Gaussian-filled blob of `count` elements.
  static std::unique_ptr<Blob<Dtype>> Random(int count) {
    auto blob = std::make_unique<Blob<Dtype>>(vector<int>{count});
    if (count > 0) test::FillGaussian(blob.get());
    return blob;
  }

  // Two copies of the same random destination, for the two host paths.
  static void RandomPair(int count, std::unique_ptr<Blob<Dtype>>* a,
                         std::unique_ptr<Blob<Dtype>>* b) {
    *a = Random(count);
    *b = std::make_unique<Blob<Dtype>>(vector<int>{count});
    (*b)->CopyFrom(**a);
  }

  // Bitwise equality, naming the first element that differs.
  static void ExpectSameBits(const Blob<Dtype>& kernel,
                             const Blob<Dtype>& loops,
                             const std::string& what) {
    ASSERT_EQ(kernel.count(), loops.count()) << what;
    for (int i = 0; i < kernel.count(); ++i) {
      const Dtype k = kernel.cpu_data()[i], l = loops.cpu_data()[i];
      ASSERT_EQ(std::memcmp(&k, &l, sizeof(Dtype)), 0)
          << what << " element " << i << ": kernel " << k << ", loops " << l;
    }
  }
};
TYPED_TEST_SUITE(UtilityKernelsOnHostTest, test::TestDtypes);

TYPED_TEST(UtilityKernelsOnHostTest, CopyBlocks) {
  using Dtype = TypeParam;
  struct Case {
    int outer, inner, src_stride, dst_stride;
  };
  for (const Case& c :
       {Case{3, 5, 5, 12}, Case{4, 7, 10, 7}, Case{1, 33, 33, 40},
        Case{6, 1, 3, 2}, Case{5, 4, 4, 4}}) {
    auto src = this->Random(c.outer * c.src_stride);
    std::unique_ptr<Blob<Dtype>> loops, kernel;
    this->RandomPair(c.outer * c.dst_stride, &loops, &kernel);
    CopyBlocks(kCpu, c.outer, c.inner, src->cpu_data(), c.src_stride,
               loops->mutable_cpu_data(), c.dst_stride, kLoops);
    CopyBlocks(kCpu, c.outer, c.inner, src->cpu_data(), c.src_stride,
               kernel->mutable_cpu_data(), c.dst_stride, kKernel);
    this->ExpectSameBits(*kernel, *loops,
                         "CopyBlocks outer " + std::to_string(c.outer) +
                             " inner " + std::to_string(c.inner));
  }
}

TYPED_TEST(UtilityKernelsOnHostTest, TileForwardAndBackward) {
  using Dtype = TypeParam;
  struct Case {
    int outer, inner, tiles;
  };
  for (const Case& c :
       {Case{2, 3, 4}, Case{1, 7, 1}, Case{5, 1, 3}, Case{3, 8, 5}}) {
    const std::string what = "outer " + std::to_string(c.outer) + " inner " +
                             std::to_string(c.inner) + " tiles " +
                             std::to_string(c.tiles);
    auto x = this->Random(c.outer * c.inner);
    std::unique_ptr<Blob<Dtype>> loops, kernel;
    this->RandomPair(c.outer * c.tiles * c.inner, &loops, &kernel);
    TileRows(kCpu, c.outer, c.inner, c.tiles, x->cpu_data(),
             loops->mutable_cpu_data(), kLoops);
    TileRows(kCpu, c.outer, c.inner, c.tiles, x->cpu_data(),
             kernel->mutable_cpu_data(), kKernel);
    this->ExpectSameBits(*kernel, *loops, "TileRows " + what);

    auto dy = this->Random(c.outer * c.tiles * c.inner);
    this->RandomPair(c.outer * c.inner, &loops, &kernel);
    SumTiles(kCpu, c.outer, c.inner, c.tiles, dy->cpu_data(),
             loops->mutable_cpu_data(), kLoops);
    SumTiles(kCpu, c.outer, c.inner, c.tiles, dy->cpu_data(),
             kernel->mutable_cpu_data(), kKernel);
    this->ExpectSameBits(*kernel, *loops, "SumTiles " + what);
  }
}

TYPED_TEST(UtilityKernelsOnHostTest, CopyWindowBothWays) {
  using Dtype = TypeParam;
  struct Case {
    vector<int> big, small, offsets;
  };
  const vector<Case> cases = {
      {{2, 3, 5, 6}, {2, 2, 3, 4}, {0, 1, 2, 1}},
      {{7}, {3}, {4}},
      {{3, 4, 5}, {3, 4, 5}, {0, 0, 0}},
      {{2, 1, 4, 3, 5}, {1, 1, 2, 3, 2}, {1, 0, 1, 0, 3}},
      {{4, 6}, {4, 1}, {0, 5}},
  };
  for (const Case& c : cases) {
    int big_count = 1, small_count = 1;
    for (int d : c.big) big_count *= d;
    for (int d : c.small) small_count *= d;
    const std::string what = std::to_string(c.big.size()) + "-D window of " +
                             std::to_string(small_count) + " in " +
                             std::to_string(big_count);
    auto big = this->Random(big_count);
    std::unique_ptr<Blob<Dtype>> loops, kernel;
    this->RandomPair(small_count, &loops, &kernel);
    CopyWindow(kCpu, c.big, c.small, c.offsets, big->cpu_data(),
               loops->mutable_cpu_data(), false, kLoops);
    CopyWindow(kCpu, c.big, c.small, c.offsets, big->cpu_data(),
               kernel->mutable_cpu_data(), false, kKernel);
    this->ExpectSameBits(*kernel, *loops, "to small, " + what);

    auto small = this->Random(small_count);
    this->RandomPair(big_count, &loops, &kernel);
    CopyWindow(kCpu, c.big, c.small, c.offsets, small->cpu_data(),
               loops->mutable_cpu_data(), true, kLoops);
    CopyWindow(kCpu, c.big, c.small, c.offsets, small->cpu_data(),
               kernel->mutable_cpu_data(), true, kKernel);
    this->ExpectSameBits(*kernel, *loops, "to big, " + what);
  }
}

TYPED_TEST(UtilityKernelsOnHostTest, GatherAndScatterRows) {
  using Dtype = TypeParam;
  const int item = 6;
  auto src = this->Random(5 * item);
  // Gather with int indices (Filter) and with Dtype indices (BatchReindex).
  const vector<int> index = {4, 0, 4, 2, 1, 1, 3};
  const int rows = static_cast<int>(index.size());
  Blob<Dtype> index_blob({rows});
  for (int r = 0; r < rows; ++r) index_blob.mutable_cpu_data()[r] = index[r];
  std::unique_ptr<Blob<Dtype>> loops, kernel;
  this->RandomPair(rows * item, &loops, &kernel);
  GatherRows(kCpu, rows, item, src->cpu_data(), index.data(),
             loops->mutable_cpu_data(), kLoops);
  GatherRows(kCpu, rows, item, src->cpu_data(), index.data(),
             kernel->mutable_cpu_data(), kKernel);
  this->ExpectSameBits(*kernel, *loops, "GatherRows (int indices)");
  this->RandomPair(rows * item, &loops, &kernel);
  GatherRows(kCpu, rows, item, src->cpu_data(), index_blob.cpu_data(),
             loops->mutable_cpu_data(), kLoops);
  GatherRows(kCpu, rows, item, src->cpu_data(), index_blob.cpu_data(),
             kernel->mutable_cpu_data(), kKernel);
  this->ExpectSameBits(*kernel, *loops, "GatherRows (Dtype indices)");

  // Scatter to distinct rows (Filter's backward); the others stay.
  const vector<int> targets = {1, 3, 4};
  auto rows_in = this->Random(3 * item);
  this->RandomPair(5 * item, &loops, &kernel);
  ScatterRows(kCpu, 3, item, rows_in->cpu_data(), targets.data(),
              loops->mutable_cpu_data(), kLoops);
  ScatterRows(kCpu, 3, item, rows_in->cpu_data(), targets.data(),
              kernel->mutable_cpu_data(), kKernel);
  this->ExpectSameBits(*kernel, *loops, "ScatterRows");
}

TYPED_TEST(UtilityKernelsOnHostTest, KeySegmentsListRowsInOrder) {
  int segments = 0;
  const vector<int> packed = KeySegments({2, 0, 2, 5, 0, 2}, &segments);
  ASSERT_EQ(segments, 3);
  // rows {0, 2, 5}, begin {0, 2, 5, 6}, perm: key 0 at m = 1, 4; key 2 at
  // m = 0, 2, 5; key 5 at m = 3.
  EXPECT_EQ(packed, (vector<int>{0, 2, 5, 0, 2, 5, 6, 1, 4, 0, 2, 5, 3}));
  EXPECT_TRUE(KeySegments({}, &segments).size() == 1u);
  EXPECT_EQ(segments, 0);
}

TYPED_TEST(UtilityKernelsOnHostTest, ScatterAddRowsInTheLoopsOrder) {
  using Dtype = TypeParam;
  // Repeated keys accumulate onto a non-zero destination (Embed's += into
  // the weight diff); row 2 gets nothing.
  const vector<int> keys = {3, 0, 3, 1, 3, 0, 4};
  const int item = 5;
  auto src = this->Random(static_cast<int>(keys.size()) * item);
  std::unique_ptr<Blob<Dtype>> loops, kernel;
  this->RandomPair(5 * item, &loops, &kernel);
  IndexUpload upload;
  ScatterAddRows(kCpu, keys, item, src->cpu_data(), loops->mutable_cpu_data(),
                 &upload, kLoops);
  ScatterAddRows(kCpu, keys, item, src->cpu_data(), kernel->mutable_cpu_data(),
                 &upload, kKernel);
  this->ExpectSameBits(*kernel, *loops, "ScatterAddRows");
  // A second call reuses the upload (BatchReindex's next pass).
  ScatterAddRows(kCpu, {2, 2}, item, src->cpu_data(), loops->mutable_cpu_data(),
                 &upload, kLoops);
  ScatterAddRows(kCpu, {2, 2}, item, src->cpu_data(),
                 kernel->mutable_cpu_data(), &upload, kKernel);
  this->ExpectSameBits(*kernel, *loops, "ScatterAddRows, second call");
}

TYPED_TEST(UtilityKernelsOnHostTest, EmbedLookupWithAndWithoutBias) {
  using Dtype = TypeParam;
  const int vocabulary = 6, n = 4;
  auto weight = this->Random(vocabulary * n);
  auto bias = this->Random(n);
  Blob<Dtype> index({2, 4});
  const int words[] = {5, 0, 2, 2, 1, 5, 3, 0};
  for (int m = 0; m < 8; ++m) index.mutable_cpu_data()[m] = words[m];
  for (const Dtype* b :
       {bias->cpu_data(), static_cast<const Dtype*>(nullptr)}) {
    std::unique_ptr<Blob<Dtype>> loops, kernel;
    this->RandomPair(8 * n, &loops, &kernel);
    EmbedLookup(kCpu, 8, n, index.cpu_data(), weight->cpu_data(), b,
                loops->mutable_cpu_data(), kLoops);
    EmbedLookup(kCpu, 8, n, index.cpu_data(), weight->cpu_data(), b,
                kernel->mutable_cpu_data(), kKernel);
    this->ExpectSameBits(*kernel, *loops,
                         b ? "EmbedLookup with bias" : "EmbedLookup");
  }
}

TYPED_TEST(UtilityKernelsOnHostTest, ReduceRowsForwardAndBackward) {
  using Dtype = TypeParam;
  struct Case {
    int num, dim;
  };
  for (const Case& c : {Case{1, 5000}, Case{3, 7}, Case{40, 300},
                        Case{70000, 3}, Case{4, 0}, Case{6, 1}}) {
    // Multiples of 1/8 in [-4, 4]: every partial sum (and sum of squares)
    // is exact in float, so the two paths' different summation orders must
    // give the same bits and any lost or doubled term shows.
    auto x = this->Random(c.num * c.dim);
    Dtype* xd = x->mutable_cpu_data();
    for (int i = 0; i < x->count(); ++i) {
      xd[i] = std::round(std::fmax(-4.0, std::fmin(4.0, xd[i])) * 8) / 8;
    }
    for (kernels::ReduceOp op :
         {kernels::kReduceSum, kernels::kReduceAsum, kernels::kReduceSumSq}) {
      const std::string what = "op " + std::to_string(op) + ", num " +
                               std::to_string(c.num) + ", dim " +
                               std::to_string(c.dim);
      Blob<Dtype> loops({c.num}), kernel({c.num}), scratch;
      const Dtype scale = Dtype(1.5);
      ReduceRows(kCpu, op, c.num, c.dim, scale, x->cpu_data(),
                 loops.mutable_cpu_data(), &scratch, kLoops);
      ReduceRows(kCpu, op, c.num, c.dim, scale, x->cpu_data(),
                 kernel.mutable_cpu_data(), &scratch, kKernel);
      this->ExpectSameBits(kernel, loops, "forward, " + what);

      // The backward is element-wise: the same bits for any input.
      auto dy = this->Random(c.num);
      std::unique_ptr<Blob<Dtype>> dx_loops, dx_kernel;
      this->RandomPair(c.num * c.dim, &dx_loops, &dx_kernel);
      ReduceRowsBackward(kCpu, op, c.num, c.dim, scale, x->cpu_data(),
                         dy->cpu_data(), dx_loops->mutable_cpu_data(), kLoops);
      ReduceRowsBackward(kCpu, op, c.num, c.dim, scale, x->cpu_data(),
                         dy->cpu_data(), dx_kernel->mutable_cpu_data(),
                         kKernel);
      this->ExpectSameBits(*dx_kernel, *dx_loops, "backward, " + what);
    }
  }
}

TYPED_TEST(UtilityKernelsOnHostTest, ReduceRowsZerosAndSignOfZero) {
  using Dtype = TypeParam;
  // ASUM's gradient at 0 is 0; an empty row reduces to 0 on both paths.
  Blob<Dtype> x({2, 3});
  const Dtype values[] = {0, -2, 3, 0, 0, -1};
  std::memcpy(x.mutable_cpu_data(), values, sizeof(values));
  Blob<Dtype> dy({2}), dx({2, 3}), y({2}), scratch;
  dy.mutable_cpu_data()[0] = 1;
  dy.mutable_cpu_data()[1] = -2;
  ReduceRowsBackward(kCpu, kernels::kReduceAsum, 2, 3, Dtype(1), x.cpu_data(),
                     dy.cpu_data(), dx.mutable_cpu_data(), kKernel);
  const Dtype want[] = {0, -1, 1, 0, 0, 2};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(dx.cpu_data()[i], want[i]) << i;
  ReduceRows(kCpu, kernels::kReduceSumSq, 2, 3, Dtype(2), x.cpu_data(),
             y.mutable_cpu_data(), &scratch, kKernel);
  EXPECT_EQ(y.cpu_data()[0], Dtype(26));
  EXPECT_EQ(y.cpu_data()[1], Dtype(2));
  Blob<Dtype> empty_y({3});
  cpu_set(3, Dtype(5), empty_y.mutable_cpu_data());
  ReduceRows(kCpu, kernels::kReduceSum, 3, 0, Dtype(1), x.cpu_data(),
             empty_y.mutable_cpu_data(), &scratch, kKernel);
  for (int n = 0; n < 3; ++n) EXPECT_EQ(empty_y.cpu_data()[n], Dtype(0));
}

TEST(UtilityKernelsOnHost, ReducePartsFillTheDeviceWithinBounds) {
  EXPECT_EQ(ReduceParts(1, 1 << 20), 1024);  // capped per output
  EXPECT_EQ(ReduceParts(100, 3), 3);         // never more than dim
  EXPECT_EQ(ReduceParts(1 << 17, 10), 1);    // enough outputs already
  EXPECT_EQ(ReduceParts(256, 10000), 256);   // 2^16 threads in all
  EXPECT_EQ(ReduceParts(5, 0), 1);
  EXPECT_EQ(ReduceParts(0, 5), 1);
}

TEST(UtilityKernelsOnHost, IndexUploadOnTheCpuIsTheVector) {
  IndexUpload upload;
  const vector<int> values = {3, 1, 2};
  EXPECT_EQ(upload.On(Poseidon::CPU, values), values.data());
  EXPECT_EQ(upload.On(Poseidon::CPU, {}), nullptr);
}

}  // namespace
}  // namespace poseidon
