// ParamServer: the staggered push/pull order (rounds, each rank starting at
// its own shard, the ranks on different shards at every step), and exchanges
// over loopback ranks giving every rank the rank-order sum, bit for bit,
// with several threads, synchronous sends and exchanges back to back.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dist/run_ranks.hpp"
#include "poseidon/dist/block_partition.hpp"
#include "poseidon/dist/param_server.hpp"

namespace poseidon {
namespace dist {
namespace {

using Ref = ParamServer<float>::BlockRef;

std::vector<Ref> AllBlocks(const BlockPartition& part) {
  std::vector<Ref> refs;
  for (size_t b = 0; b < part.blocks().size(); ++b) {
    refs.push_back({static_cast<int>(b), nullptr});
  }
  return refs;
}

// For every rank: a permutation of `blocks`; rounds in order (a block's
// round is its place among its shard's blocks in `blocks`); within a round,
// the shards from the rank's own upwards.
void CheckStaggered(const BlockPartition& part,
                    const std::vector<Ref>& blocks) {
  const int n = part.num_shards();
  std::vector<int> round_of(part.blocks().size(), -1);
  std::vector<int> seen(n, 0);
  for (const Ref& b : blocks)
    round_of[b.id] = seen[part.blocks()[b.id].shard]++;
  for (int rank = 0; rank < n; ++rank) {
    SCOPED_TRACE(::testing::Message() << "rank " << rank);
    const std::vector<Ref> order =
        ParamServer<float>::StaggeredOrder(part, blocks, rank);
    ASSERT_EQ(order.size(), blocks.size());
    std::multiset<int> want, got;
    for (const Ref& b : blocks) want.insert(b.id);
    for (const Ref& b : order) got.insert(b.id);
    EXPECT_EQ(got, want);
    for (size_t i = 1; i < order.size(); ++i) {
      const int r0 = round_of[order[i - 1].id], r1 = round_of[order[i].id];
      ASSERT_LE(r0, r1) << "position " << i;
      if (r0 == r1) {
        const int d0 = (part.blocks()[order[i - 1].id].shard - rank + n) % n;
        const int d1 = (part.blocks()[order[i].id].shard - rank + n) % n;
        EXPECT_LT(d0, d1) << "position " << i << " in round " << r0;
      }
    }
  }
}

TEST(ParamServerOrderTest, RoundsStartAtTheRanksOwnShard) {
  // Blobs of uneven sizes: shards get different numbers of blocks.
  const std::vector<size_t> blobs = {5000, 120, 70000, 33, 9000, 40000, 7};
  for (int shards : {1, 2, 3, 8}) {
    SCOPED_TRACE(::testing::Message() << shards << " shards");
    const BlockPartition part(blobs, sizeof(float), 4096, shards);
    const std::vector<Ref> all = AllBlocks(part);
    CheckStaggered(part, all);
    // One exchange of a wait-free group: the blocks of blobs 4 and 5.
    std::vector<Ref> group;
    for (int blob : {4, 5}) {
      for (int id : part.blob_blocks(blob)) group.push_back({id, nullptr});
    }
    CheckStaggered(part, group);
  }
}

// Where every shard has a block in round 0, the ranks' first n pushes go to
// n different shards at every step (no shard's link takes them all).
TEST(ParamServerOrderTest, RanksLoadDifferentShardsAtEachStep) {
  const int n = 4;
  const BlockPartition part({100000, 60000, 60000}, sizeof(float), 16384, n);
  const std::vector<Ref> all = AllBlocks(part);
  std::vector<std::vector<Ref>> orders;
  for (int rank = 0; rank < n; ++rank) {
    orders.push_back(ParamServer<float>::StaggeredOrder(part, all, rank));
  }
  for (int step = 0; step < n; ++step) {
    std::set<int> shards;
    for (int rank = 0; rank < n; ++rank) {
      shards.insert(part.blocks()[orders[rank][step].id].shard);
    }
    EXPECT_EQ(static_cast<int>(shards.size()), n) << "step " << step;
  }
}

// A value whose float sum over ranks depends on the order of the additions.
float Term(int rank, size_t i) {
  const double big = (rank % 2 == 0 ? 1 : -1) * 1e7 * (1 + (i + rank) % 5);
  return static_cast<float>(big + 0.001 * ((i * 7919 + rank * 31) % 1000));
}

struct ExchangeCase {
  int ranks;
  int threads;  // push and pull threads each
  bool synchronous;
};

class ParamServerExchangeTest : public ::testing::TestWithParam<ExchangeCase> {
};

// Two exchanges posted back to back (the blocks of blob 0, then of blobs 1
// and 2) for two iterations: every rank ends with (((g_0 + g_1) + g_2) ...)
// in every element, the same bits everywhere.
TEST_P(ParamServerExchangeTest, EveryRankGetsTheRankOrderSum) {
  const ExchangeCase c = GetParam();
  LoopbackOptions options;
  options.synchronous_send = c.synchronous;
  options.timeout = std::chrono::seconds(20);
  LoopbackWorld world(c.ranks, options);
  const std::vector<size_t> blobs = {30000, 777, 12000};
  size_t total = 0;
  for (size_t b : blobs) total += b;
  RunRanks(&world, [&](Communicator* comm) {
    const BlockPartition part(blobs, sizeof(float), 8192, comm->size());
    ParamServer<float> server(comm, &part, c.threads, c.threads);
    for (int64_t iter = 0; iter < 2; ++iter) {
      std::vector<float> grad(total);
      for (size_t i = 0; i < total; ++i) {
        grad[i] = Term(comm->rank(), i + iter);
      }
      std::vector<size_t> start = {0, blobs[0], blobs[0] + blobs[1]};
      std::vector<std::vector<int>> groups = {{0}, {1, 2}};
      std::vector<std::future<Status>> done;
      std::vector<std::shared_ptr<std::promise<Status>>> promises;
      for (const auto& group : groups) {
        std::vector<ParamServer<float>::BlockRef> refs;
        for (int blob : group) {
          for (int id : part.blob_blocks(blob)) {
            refs.push_back(
                {id, grad.data() + start[blob] + part.blocks()[id].offset});
          }
        }
        auto promise = std::make_shared<std::promise<Status>>();
        done.push_back(promise->get_future());
        server.Exchange(iter, refs,
                        [promise](Status s) { promise->set_value(s); });
        promises.push_back(promise);
      }
      for (auto& f : done) {
        const Status s = f.get();
        ASSERT_TRUE(s.ok()) << s.message();
      }
      for (size_t i = 0; i < total; ++i) {
        float want = Term(0, i + iter);
        for (int r = 1; r < comm->size(); ++r) want = want + Term(r, i + iter);
        ASSERT_EQ(std::memcmp(&want, &grad[i], sizeof(float)), 0)
            << "rank " << comm->rank() << " element " << i << ": " << grad[i]
            << ", the rank-order sum is " << want;
      }
    }
  });
}

std::string CaseName(const ::testing::TestParamInfo<ExchangeCase>& info) {
  return StrCat(info.param.ranks, "ranks_", info.param.threads, "threads",
                info.param.synchronous ? "_synchronous" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ParamServerExchangeTest,
    ::testing::Values(ExchangeCase{1, 1, false}, ExchangeCase{2, 1, true},
                      ExchangeCase{3, 1, false}, ExchangeCase{3, 2, true},
                      ExchangeCase{5, 3, false}, ExchangeCase{5, 1, true}),
    CaseName);

}  // namespace
}  // namespace dist
}  // namespace poseidon
