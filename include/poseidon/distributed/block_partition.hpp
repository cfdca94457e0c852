// BlockPartition: how the parameter server cuts a net's parameter blobs into
// blocks of at most `block_size` bytes (DistributedParameter.block_size,
// default 4 MB) and spreads them over the server shards. Every rank builds
// the same partition from the same blob sizes, so no map is exchanged.
//
// Cutting: a blob of c elements becomes the fewest blocks that fit, ceil(c /
// floor(block_size / elem_bytes)), of near-equal size (differing by one
// element at most), so no tiny tail block is left. Empty blobs get no block.
// Assignment (longest-processing-time greedy): blocks taken largest first
// (ties by blob, then offset) each go to the shard with the fewest bytes so
// far (ties to the lower shard). The busiest shard then holds at most the
// average plus one block, and a large blob's blocks land on different shards,
// so one layer's push is served by many shards in parallel.
//
// Immutable after construction; safe to share between threads.
#ifndef POSEIDON_DISTRIBUTED_BLOCK_PARTITION_HPP_
#define POSEIDON_DISTRIBUTED_BLOCK_PARTITION_HPP_

#include <cstddef>
#include <vector>

namespace poseidon {
namespace dist {

constexpr size_t kDefaultBlockBytes = size_t{4} << 20;

struct ParamBlock {
  int blob = 0;       // index into the blob list
  size_t offset = 0;  // first element within the blob
  size_t count = 0;   // elements
  int shard = 0;      // the server shard that owns the block
};

// Which ranks push and pull (workers, in the order a shard adds their
// pushes) and which rank hosts each shard; empty lists: every rank both,
// shard s on rank s. See Note [Roles] in param_server.hpp.
struct PsRoles {
  std::vector<int> workers;  // distinct ranks
  std::vector<int> servers;  // servers[s]: the rank of shard s; distinct
};

class BlockPartition {
 public:
  // blob_counts: elements per parameter blob, in the net's learnable-param
  // order. Throws ConfigError when block_bytes < elem_bytes, elem_bytes is 0
  // or num_shards < 1.
  BlockPartition(const std::vector<size_t>& blob_counts, size_t elem_bytes,
                 size_t block_bytes, int num_shards);

  // Every block, ordered by blob then offset; a block's id is its index.
  const std::vector<ParamBlock>& blocks() const { return blocks_; }
  // Ids of blob b's blocks in offset order.
  const std::vector<int>& blob_blocks(int blob) const;
  // Ids of the blocks shard s owns, in id order.
  const std::vector<int>& shard_blocks(int shard) const;
  size_t shard_bytes(int shard) const;

  int num_blobs() const { return static_cast<int>(blob_blocks_.size()); }
  int num_shards() const { return static_cast<int>(shard_blocks_.size()); }
  size_t elem_bytes() const { return elem_bytes_; }
  size_t block_bytes() const { return block_bytes_; }

 private:
  size_t elem_bytes_;
  size_t block_bytes_;
  std::vector<ParamBlock> blocks_;
  std::vector<std::vector<int>> blob_blocks_;
  std::vector<std::vector<int>> shard_blocks_;
  std::vector<size_t> shard_bytes_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_BLOCK_PARTITION_HPP_
