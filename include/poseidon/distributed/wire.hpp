// The layouts of the messages ranks send each other, and the decoders that
// check what a rank received before anything trusts it. Every decoder is a
// pure function of the bytes (no communicator, no MPI), so that unit tests
// and the libFuzzer harness (src/poseidon/test/fuzz/fuzz_dist_messages.cpp)
// reach it directly; the receive paths (param_server.cpp,
// action_agreement.cpp, synchronizer.cpp, communicator.cpp,
// sfb_transport.cpp) call the same functions.
//
// A decoder returns the decoded message or throws DistributedError (a
// corrupt or unexpected message) or ConfigError (ranks started with
// different settings) whose text names the peer rank (as the job numbers
// it), the kind of message and what is wrong. Sizes the communicator
// enforces (Recv's exact length) are checked again here: a decoder may be
// handed any bytes.
//
// Thread safety: every function here may be called from any thread.
#ifndef POSEIDON_DISTRIBUTED_WIRE_HPP_
#define POSEIDON_DISTRIBUTED_WIRE_HPP_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/communicator.hpp"
#include "poseidon/solver.hpp"

namespace poseidon {
namespace dist {

// ---- parameter server (param_server.hpp) ---------------------------------
// A push (worker -> shard) and a sum (shard -> worker) are this header
// followed by the block's partition.blocks()[block].count elements.
struct BlockHeader {
  int64_t iter;
  int32_t block;
  int32_t rank;  // the sender: the pushing worker, or the shard
};
static_assert(sizeof(BlockHeader) == 16, "BlockHeader is 16 bytes on the wire");

enum class BlockMessageKind { kPush, kSum };

// Writes a push or sum into `msg` (sizeof(BlockHeader) + payload_bytes
// bytes): the header, then the payload (skipped when `payload` is msg's own
// payload area, as for a shard's sum accumulated in place).
void EncodeBlockMessage(const BlockHeader& header, const void* payload,
                        size_t payload_bytes, char* msg);

// What the receiver expects of a block message.
struct BlockExpectation {
  BlockMessageKind kind = BlockMessageKind::kPush;
  int peer = 0;       // the rank it was received from (communicator's)
  int peer_job = 0;   // the same rank as the job numbers it, for messages
  int ranks = 1;      // the communicator's size
  int64_t iter = 0;
  int block = 0;
  const BlockPartition* partition = nullptr;
  // servers[s]: the rank hosting shard s (ParamServer's roles); null: shard
  // s is on rank s.
  const std::vector<int>* servers = nullptr;
  size_t dtype_bytes = 4;
};

// Checks a push or sum of `bytes` bytes: the header is whole, names a block
// of the partition and a rank of the job, the length is the header plus
// that block's elements, the sender is `peer` (a push's own rank; a sum's
// shard's rank, whose shard owns the block), and block and iteration are the expected
// ones. Returns the header; the payload starts sizeof(BlockHeader) bytes in.
BlockHeader DecodeBlockMessage(const void* data, size_t bytes,
                               const BlockExpectation& want);
// The same checks of a message of `bytes` bytes whose header was received
// apart from its payload (Communicator::RecvOp's two parts).
void DecodeBlockHeader(const BlockHeader& header, size_t bytes,
                       const BlockExpectation& want);

// ---- signal-action agreement (action_agreement.hpp) ----------------------
// A request or the agreed action: one int32, SolverAction's value.
SolverAction DecodeAction(const void* data, size_t bytes, int peer_job);

// The outcome of ActionAgreement's allreduce over `ranks` ranks (Note
// [Coding actions in a sum] in action_agreement.cpp); throws when the sum
// cannot be one of the codes (a rank contributed a corrupt value).
SolverAction DecodeActionSum(double sum, int ranks);

// The iteration at which the ranks act on a request under ASYNC (Note
// [Acting on a request under ASYNC]): one int64, at least 0.
int64_t DecodeIteration(const void* data, size_t bytes, int peer_job);

// ---- start-up checks (synchronizer.cpp, communicator.cpp) ----------------
// What every rank must agree on before training together.
struct Fingerprint {
  uint64_t net = 0;
  uint64_t solver = 0;
  int64_t num_layers = 0;
  int64_t num_params = 0;
  int64_t param_elements = 0;
  int64_t dtype_bytes = 0;
};

// `gathered` holds every rank's Fingerprint in rank order (an Allgather of
// `ranks` ranks; `job_rank` maps a rank to the job's numbering). Throws
// DistributedError when the length or a value cannot be a fingerprint, and
// ConfigError naming the first rank whose settings differ from rank 0's.
void CheckFingerprints(const void* gathered, size_t bytes, int ranks,
                       const std::function<int(int)>& job_rank);

// The host level's agreement: every rank's int32 flag (0: its transports
// were made, 1: they could not be). Returns whether every rank succeeded;
// throws on another value or length, naming the rank.
bool DecodeHostFlags(const void* gathered, size_t bytes, int ranks,
                     const std::function<int(int)>& job_rank);

// The layout of DiscoverHosts from every rank's int32 HostKey (the lowest
// rank on its host, so 0 <= key <= r and the key's own rank has the same
// key). Throws on another length or an impossible key, naming the rank.
HostLayout LayoutFromHostKeys(const void* gathered, size_t bytes, int ranks,
                              int rank,
                              const std::function<int(int)>& job_rank);

// ---- sufficient factors (sufficient_factor.hpp) --------------------------
// Checks an allgather of `ranks` ranks' factors [U | V] for an InnerProduct
// of M outputs and N inputs, `rows` rows per rank: `bytes` must be
// ranks * rows * (M + N) elements of `dtype_bytes`. Returns the elements per
// rank. `what` names the layer.
size_t CheckFactorMessage(size_t bytes, int ranks, int rows, int M, int N,
                          size_t dtype_bytes, const std::string& what);

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_WIRE_HPP_
