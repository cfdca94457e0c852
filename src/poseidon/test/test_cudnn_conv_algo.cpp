// The host logic of the cuDNN convolution algorithm choice
// (util/cudnn_conv_algo.hpp): the selection rule over measurements, the
// key every choice is cached under, and the process-wide cache.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "poseidon/util/cudnn_conv_algo.hpp"

namespace poseidon {
namespace {

using cudnn::ConvAlgoCache;
using cudnn::ConvAlgoChoice;
using cudnn::ConvAlgoKey;
using cudnn::ConvAlgoPerf;
using cudnn::ConvPass;
using cudnn::SelectConvAlgo;

ConvAlgoPerf Perf(int algo, bool ok, float time, size_t memory,
                  bool deterministic, int math_type = 0) {
  ConvAlgoPerf p;
  p.algo = algo;
  p.ok = ok;
  p.time_ms = time;
  p.memory = memory;
  p.deterministic = deterministic;
  p.math_type = math_type;
  return p;
}

constexpr size_t kMiB = size_t(1) << 20;

TEST(SelectConvAlgoTest, PicksTheFastestSuccessfulOne) {
  const std::vector<ConvAlgoPerf> results = {
      Perf(0, true, 3.0f, 0, true), Perf(1, true, 1.5f, kMiB, true, 3),
      Perf(2, false, 0.1f, 0, true), Perf(6, true, 2.0f, 0, false)};
  const ConvAlgoChoice c = SelectConvAlgo(results, false, 64 * kMiB);
  ASSERT_TRUE(c.valid());
  EXPECT_EQ(c.algo, 1);
  EXPECT_EQ(c.workspace, kMiB);
  EXPECT_FLOAT_EQ(c.time_ms, 1.5f);
  EXPECT_TRUE(c.deterministic);
  EXPECT_EQ(c.math_type, 3);
  EXPECT_EQ(c.candidates, 3);  // the failed one does not count
}

TEST(SelectConvAlgoTest, RespectsTheWorkspaceLimit) {
  const std::vector<ConvAlgoPerf> results = {
      Perf(4, true, 0.5f, 100 * kMiB, true), Perf(1, true, 1.0f, kMiB, true),
      Perf(0, true, 2.0f, 0, true)};
  EXPECT_EQ(SelectConvAlgo(results, false, 100 * kMiB).algo, 4);
  EXPECT_EQ(SelectConvAlgo(results, false, 99 * kMiB).algo, 1);
  EXPECT_EQ(SelectConvAlgo(results, false, 0).algo, 0);
}

TEST(SelectConvAlgoTest, DeterministicModeSkipsNonDeterministicAlgorithms) {
  const std::vector<ConvAlgoPerf> results = {
      Perf(0, true, 0.5f, 0, false), Perf(3, true, 0.7f, 0, false),
      Perf(1, true, 0.9f, 0, true)};
  EXPECT_EQ(SelectConvAlgo(results, false, kMiB).algo, 0);
  const ConvAlgoChoice c = SelectConvAlgo(results, true, kMiB);
  EXPECT_EQ(c.algo, 1);
  EXPECT_TRUE(c.deterministic);
  EXPECT_EQ(c.candidates, 1);
}

TEST(SelectConvAlgoTest, TiesGoToLessWorkspaceThenLowerId) {
  const std::vector<ConvAlgoPerf> results = {
      Perf(5, true, 1.0f, 2 * kMiB, true), Perf(3, true, 1.0f, kMiB, true),
      Perf(2, true, 1.0f, kMiB, true)};
  EXPECT_EQ(SelectConvAlgo(results, false, 8 * kMiB).algo, 2);
}

TEST(SelectConvAlgoTest, NothingQualifies) {
  EXPECT_FALSE(SelectConvAlgo({}, false, kMiB).valid());
  const std::vector<ConvAlgoPerf> results = {
      Perf(0, false, 1.0f, 0, true), Perf(1, true, 1.0f, 2 * kMiB, true),
      Perf(2, true, 1.0f, 0, false), Perf(-1, true, 1.0f, 0, true)};
  const ConvAlgoChoice c = SelectConvAlgo(results, true, kMiB);
  EXPECT_FALSE(c.valid());
  EXPECT_EQ(c.algo, -1);
  EXPECT_EQ(c.candidates, 0);
}

ConvAlgoKey SampleKey() {
  ConvAlgoKey k;
  k.pass = ConvPass::kForward;
  k.device = 0;
  k.data_type = 0;
  k.input = {8, 3, 32, 32};
  k.filter = {16, 3, 5, 5};
  k.output = {8, 16, 32, 32};
  k.pad = {2, 2};
  k.stride = {1, 1};
  k.dilation = {1, 1};
  k.groups = 1;
  k.workspace_limit = 1024 * kMiB;
  return k;
}

TEST(ConvAlgoKeyTest, EveryFieldTakesPart) {
  const ConvAlgoKey base = SampleKey();
  std::vector<ConvAlgoKey> variants(13, base);
  variants[0].pass = ConvPass::kBackwardData;
  variants[1].device = 1;
  variants[2].data_type = 1;
  variants[3].input[0] = 16;
  variants[4].filter[1] = 1;
  variants[5].output[2] = 16;
  variants[6].pad = {1, 2};
  variants[7].stride = {2, 1};
  variants[8].dilation = {1, 2};
  variants[9].groups = 3;
  variants[10].deterministic = true;
  variants[11].allow_tf32 = true;
  variants[12].workspace_limit = 512 * kMiB;
  EXPECT_TRUE(base == SampleKey());
  for (size_t i = 0; i < variants.size(); ++i) {
    EXPECT_FALSE(variants[i] == base) << "variant " << i;
    // A strict weak order: exactly one of a < b, b < a.
    EXPECT_NE(variants[i] < base, base < variants[i]) << "variant " << i;
  }
  EXPECT_FALSE(base < base);
  EXPECT_EQ(base.ToString(),
            "forward dtype 0 gpu 0 x 8x3x32x32 w 16x3x5x5 y 8x16x32x32 pad "
            "2,2 stride 1,1 dilation 1,1 groups 1 deterministic 0 tf32 0 "
            "limit 1024 MiB");
  EXPECT_STREQ(cudnn::ConvPassName(ConvPass::kBackwardFilter),
               "backward filter");
}

TEST(ConvAlgoCacheTest, LookupInsertAndFirstInsertionWins) {
  ConvAlgoCache cache;
  const ConvAlgoKey key = SampleKey();
  ConvAlgoChoice found;
  EXPECT_FALSE(cache.Lookup(key, &found));
  ConvAlgoChoice first;
  first.algo = 1;
  first.workspace = kMiB;
  EXPECT_EQ(cache.Insert(key, first).algo, 1);
  ConvAlgoChoice second;
  second.algo = 7;
  EXPECT_EQ(cache.Insert(key, second).algo, 1);
  ASSERT_TRUE(cache.Lookup(key, &found));
  EXPECT_EQ(found.algo, 1);
  EXPECT_EQ(found.workspace, kMiB);
  ConvAlgoKey other = key;
  other.pass = ConvPass::kBackwardFilter;
  EXPECT_FALSE(cache.Lookup(other, &found));
  EXPECT_EQ(cache.size(), 1u);
  cache.Clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(&ConvAlgoCache::Global(), &ConvAlgoCache::Global());
}

TEST(ConvAlgoCacheTest, ManyThreads) {
  ConvAlgoCache cache;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 200; ++i) {
        ConvAlgoKey key = SampleKey();
        key.input[0] = i;  // shared with the other threads
        ConvAlgoChoice c;
        c.algo = t;
        const ConvAlgoChoice kept = cache.Insert(key, c);
        ConvAlgoChoice seen;
        ASSERT_TRUE(cache.Lookup(key, &seen));
        ASSERT_EQ(seen.algo, kept.algo);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(cache.size(), 200u);
}

}  // namespace
}  // namespace poseidon
