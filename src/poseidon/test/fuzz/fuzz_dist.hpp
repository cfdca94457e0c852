// Shared by fuzz_dist_messages (the harness) and fuzz_seeds (its seeds):
// how the option bytes of an input set up the receiver, an in-process
// communicator whose peers send the fuzzed bytes, and the seed writer.
//
// Input layout: 1 family byte, kOptionBytes option bytes, the message.
// Thread safety: none needed (libFuzzer's one thread).
#ifndef POSEIDON_TEST_FUZZ_FUZZ_DIST_HPP_
#define POSEIDON_TEST_FUZZ_FUZZ_DIST_HPP_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/wire.hpp"
#include "poseidon/util/status.hpp"

namespace poseidon {
namespace fuzz {

constexpr size_t kOptionBytes = 8;
constexpr int kDistFamilies = 10;

struct DistOptions {
  uint8_t bytes[kOptionBytes] = {};
};

// The block partition a PS input describes: 1 + b0 % 4 ranks (shards),
// 1 + b1 % 3 blobs of 1 + b[2 + i] % 16 elements, blocks of 1 + b5 % 8
// elements of 4 or 8 bytes (b6 & 1).
dist::BlockPartition MakeFuzzPartition(const DistOptions& o);
// What the receiver expects: block (b7 & 15) % blocks of iteration b7 >> 4
// from rank (b6 >> 1) % ranks. The kind is the caller's.
dist::BlockExpectation MakeExpectation(const DistOptions& o,
                                       const dist::BlockPartition& p);

// AgreeOnAction through a communicator of 3 ranks whose peers send the
// message: as rank 0 (b0 even), rank 1's request is the first half and rank
// 2's the rest; as rank 1, the whole message is rank 0's answer. A message
// of the wrong length fails as the real communicators' Recv does.
void AgreeWithScriptedPeers(const uint8_t* msg, size_t size,
                            const DistOptions& o);

// One ParamServer exchange of every block on rank 0 of 2 (partition and
// iteration from the options, ranks forced to 2) whose peer's messages
// (pushes to rank 0's shard, sums of rank 1's shard) are the records of
// `msg` (each a 2-byte little-endian length and that many bytes; block b
// gets record b % records). Returns the exchange's status; rank 0's own
// messages go through unchanged.
Status ExchangeWithScriptedPeer(const uint8_t* msg, size_t size,
                                const DistOptions& o);
// The records of ExchangeWithScriptedPeer's input.
std::string EncodePeerRecords(const std::vector<std::string>& records);

// Writes fuzz_dist_messages' seeds under root/dist_messages: valid messages
// of every family from the real encoders. Returns how many.
int WriteDistSeeds(const std::string& root);

}  // namespace fuzz
}  // namespace poseidon

#endif  // POSEIDON_TEST_FUZZ_FUZZ_DIST_HPP_
