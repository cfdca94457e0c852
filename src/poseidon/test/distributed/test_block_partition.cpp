// BlockPartition: every element in exactly one block, blocks within the size
// limit and as few as possible, shards balanced, the map deterministic.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/util/status.hpp"

namespace poseidon {
namespace dist {
namespace {

// VGG-16's learnable blobs (weights, bias) in net order.
std::vector<size_t> Vgg16Blobs() {
  const int conv[][2] = {{3, 64},    {64, 64},   {64, 128},  {128, 128},
                         {128, 256}, {256, 256}, {256, 256}, {256, 512},
                         {512, 512}, {512, 512}, {512, 512}, {512, 512},
                         {512, 512}};
  std::vector<size_t> blobs;
  for (const auto& c : conv) {
    blobs.push_back(static_cast<size_t>(c[0]) * c[1] * 9);
    blobs.push_back(c[1]);
  }
  for (const auto& fc :
       {std::pair<size_t, size_t>{25088, 4096}, {4096, 4096}, {4096, 1000}}) {
    blobs.push_back(fc.first * fc.second);
    blobs.push_back(fc.second);
  }
  return blobs;
}

void CheckPartition(const std::vector<size_t>& blobs, size_t elem, size_t block,
                    int shards) {
  SCOPED_TRACE(::testing::Message() << blobs.size() << " blobs, block " << block
                                    << " bytes, " << shards << " shards");
  const BlockPartition part(blobs, elem, block, shards);
  ASSERT_EQ(part.num_blobs(), static_cast<int>(blobs.size()));
  ASSERT_EQ(part.num_shards(), shards);
  const size_t per_block = block / elem;
  size_t largest = 0;
  for (size_t b = 0; b < blobs.size(); ++b) {
    // Contiguous, in order, covering [0, count) once, fewest blocks.
    size_t next = 0, smallest = SIZE_MAX, biggest = 0;
    for (int id : part.blob_blocks(static_cast<int>(b))) {
      const ParamBlock& blk = part.blocks()[id];
      EXPECT_EQ(blk.blob, static_cast<int>(b));
      EXPECT_EQ(blk.offset, next);
      EXPECT_GT(blk.count, 0u);
      EXPECT_LE(blk.count * elem, block);
      next += blk.count;
      smallest = std::min(smallest, blk.count);
      biggest = std::max(biggest, blk.count);
      largest = std::max(largest, blk.count * elem);
    }
    EXPECT_EQ(next, blobs[b]) << "blob " << b;
    EXPECT_EQ(part.blob_blocks(static_cast<int>(b)).size(),
              (blobs[b] + per_block - 1) / per_block)
        << "blob " << b;
    if (blobs[b] > 0) EXPECT_LE(biggest - smallest, 1u) << "blob " << b;
  }
  // Every block belongs to exactly one shard, and the byte counts add up.
  std::vector<int> owners(part.blocks().size(), 0);
  size_t total = 0, busiest = 0;
  for (int s = 0; s < shards; ++s) {
    size_t bytes = 0;
    for (int id : part.shard_blocks(s)) {
      ++owners[id];
      EXPECT_EQ(part.blocks()[id].shard, s);
      bytes += part.blocks()[id].count * elem;
    }
    EXPECT_EQ(bytes, part.shard_bytes(s));
    total += bytes;
    busiest = std::max(busiest, bytes);
  }
  EXPECT_EQ(std::count(owners.begin(), owners.end(), 1),
            static_cast<long>(owners.size()));
  EXPECT_EQ(total,
            std::accumulate(blobs.begin(), blobs.end(), size_t{0}) * elem);
  // Greedy bound: at most the average plus one block.
  EXPECT_LE(busiest, total / shards + largest);
}

TEST(BlockPartitionTest, CoversEveryElementOnceAndBalances) {
  CheckPartition(Vgg16Blobs(), 4, kDefaultBlockBytes, 8);
  CheckPartition(Vgg16Blobs(), 8, kDefaultBlockBytes, 3);
  CheckPartition({10, 0, 7, 1}, 4, 12, 2);
  CheckPartition({5}, 4, 4, 7);  // more shards than blocks
  CheckPartition({}, 4, 16, 2);
  std::mt19937 rng(1701);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<size_t> blobs(1 + rng() % 12);
    for (size_t& b : blobs) b = rng() % 5000;
    CheckPartition(blobs, 4, 4 * (1 + rng() % 300), 1 + rng() % 9);
  }
}

TEST(BlockPartitionTest, Vgg16IsNearlyEvenOverEightShards) {
  const BlockPartition part(Vgg16Blobs(), 4, kDefaultBlockBytes, 8);
  size_t lo = SIZE_MAX, hi = 0;
  for (int s = 0; s < 8; ++s) {
    lo = std::min(lo, part.shard_bytes(s));
    hi = std::max(hi, part.shard_bytes(s));
  }
  EXPECT_LT(static_cast<double>(hi) / lo, 1.07) << lo << " vs " << hi;
  // fc6's 98 blocks spread over all 8 shards.
  std::vector<int> per_shard(8, 0);
  for (int id : part.blob_blocks(26)) ++per_shard[part.blocks()[id].shard];
  EXPECT_EQ(part.blob_blocks(26).size(), 98u);
  for (int s = 0; s < 8; ++s) EXPECT_GE(per_shard[s], 12) << "shard " << s;
}

TEST(BlockPartitionTest, DeterministicAndEvenCuts) {
  const std::vector<size_t> blobs = {10, 3, 10};
  const BlockPartition a(blobs, 4, 16, 2), b(blobs, 4, 16, 2);
  ASSERT_EQ(a.blocks().size(), b.blocks().size());
  for (size_t i = 0; i < a.blocks().size(); ++i) {
    EXPECT_EQ(a.blocks()[i].blob, b.blocks()[i].blob);
    EXPECT_EQ(a.blocks()[i].offset, b.blocks()[i].offset);
    EXPECT_EQ(a.blocks()[i].count, b.blocks()[i].count);
    EXPECT_EQ(a.blocks()[i].shard, b.blocks()[i].shard);
  }
  // 10 elements, 4 per block: 3 blocks of 4, 3, 3 (no tail of 2).
  std::vector<size_t> counts;
  for (int id : a.blob_blocks(0)) counts.push_back(a.blocks()[id].count);
  EXPECT_EQ(counts, (std::vector<size_t>{4, 3, 3}));
  // Largest first to the least loaded shard, the lower shard on ties: the
  // two 4-element blocks of blobs 0 and 2 go to shards 0 and 1.
  EXPECT_EQ(a.blocks()[a.blob_blocks(0)[0]].shard, 0);
  EXPECT_EQ(a.blocks()[a.blob_blocks(2)[0]].shard, 1);
  EXPECT_EQ(a.shard_bytes(0) + a.shard_bytes(1), 23u * 4);
  EXPECT_LE(std::max(a.shard_bytes(0), a.shard_bytes(1)) -
                std::min(a.shard_bytes(0), a.shard_bytes(1)),
            4u * 4);
}

TEST(BlockPartitionTest, BadSettingsAreConfigErrors) {
  EXPECT_THROW(BlockPartition({4}, 4, 3, 2), ConfigError);
  EXPECT_THROW(BlockPartition({4}, 0, 16, 2), ConfigError);
  EXPECT_THROW(BlockPartition({4}, 4, 16, 0), ConfigError);
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
