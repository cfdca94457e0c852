// BlockPartition: even cuts per blob, then a largest-first greedy over shards.
#include "poseidon/distributed/block_partition.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "poseidon/common.hpp"

namespace poseidon {
namespace dist {

BlockPartition::BlockPartition(const std::vector<size_t>& blob_counts,
                               size_t elem_bytes, size_t block_bytes,
                               int num_shards)
    : elem_bytes_(elem_bytes), block_bytes_(block_bytes) {
  POSEIDON_REQUIRE(elem_bytes > 0, ConfigError,
                   "block partition: element size must be positive");
  POSEIDON_REQUIRE(block_bytes >= elem_bytes, ConfigError,
                   "distributed.block_size ", block_bytes,
                   " bytes is smaller than one ", elem_bytes,
                   "-byte parameter element");
  POSEIDON_REQUIRE(num_shards >= 1, ConfigError,
                   "block partition: needs at least one server shard, got ",
                   num_shards);
  const size_t per_block = block_bytes / elem_bytes;  // elements, >= 1
  blob_blocks_.resize(blob_counts.size());
  for (size_t b = 0; b < blob_counts.size(); ++b) {
    const size_t count = blob_counts[b];
    if (count == 0) continue;
    const size_t pieces = (count + per_block - 1) / per_block;
    const size_t base = count / pieces, extra = count % pieces;
    size_t offset = 0;
    for (size_t i = 0; i < pieces; ++i) {
      ParamBlock block;
      block.blob = static_cast<int>(b);
      block.offset = offset;
      block.count = base + (i < extra ? 1 : 0);
      offset += block.count;
      blob_blocks_[b].push_back(static_cast<int>(blocks_.size()));
      blocks_.push_back(block);
    }
    CHECK_EQ(offset, count);
  }

  std::vector<int> order(blocks_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  // Ids already run by blob then offset, so a stable sort by size keeps that
  // as the tie-break.
  std::stable_sort(order.begin(), order.end(), [this](int a, int b) {
    return blocks_[a].count > blocks_[b].count;
  });
  using Load = std::pair<size_t, int>;  // (bytes so far, shard)
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> least;
  for (int s = 0; s < num_shards; ++s) least.push({0, s});
  shard_bytes_.assign(num_shards, 0);
  shard_blocks_.resize(num_shards);
  for (int id : order) {
    Load load = least.top();
    least.pop();
    blocks_[id].shard = load.second;
    load.first += blocks_[id].count * elem_bytes_;
    shard_bytes_[load.second] = load.first;
    least.push(load);
  }
  for (size_t id = 0; id < blocks_.size(); ++id) {
    shard_blocks_[blocks_[id].shard].push_back(static_cast<int>(id));
  }
}

const std::vector<int>& BlockPartition::blob_blocks(int blob) const {
  CHECK(blob >= 0 && blob < num_blobs())
      << "blob " << blob << " of " << num_blobs();
  return blob_blocks_[blob];
}

const std::vector<int>& BlockPartition::shard_blocks(int shard) const {
  CHECK(shard >= 0 && shard < num_shards())
      << "shard " << shard << " of " << num_shards();
  return shard_blocks_[shard];
}

size_t BlockPartition::shard_bytes(int shard) const {
  CHECK(shard >= 0 && shard < num_shards())
      << "shard " << shard << " of " << num_shards();
  return shard_bytes_[shard];
}

}  // namespace dist
}  // namespace poseidon
