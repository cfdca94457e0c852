// Decoders of the messages ranks send each other (wire.hpp).
#include "poseidon/distributed/wire.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace poseidon {
namespace dist {

void EncodeBlockMessage(const BlockHeader& header, const void* payload,
                        size_t payload_bytes, char* msg) {
  std::memcpy(msg, &header, sizeof(header));
  char* at = msg + sizeof(header);
  if (payload != at && payload_bytes > 0) {
    std::memcpy(at, payload, payload_bytes);
  }
}

namespace {

// "rank 3's push of block 7 (iteration 2)", "the sum of block 7 ...", for
// messages.
std::string BlockMessageName(const BlockExpectation& want) {
  return want.kind == BlockMessageKind::kPush
             ? StrCat("rank ", want.peer_job, "'s push of block ", want.block,
                      " (iteration ", want.iter, ")")
             : StrCat("the sum of block ", want.block, " (iteration ",
                      want.iter, ") from the shard of rank ", want.peer_job);
}

}  // namespace

BlockHeader DecodeBlockMessage(const void* data, size_t bytes,
                               const BlockExpectation& want) {
  POSEIDON_REQUIRE(bytes >= sizeof(BlockHeader), DistributedError,
                   BlockMessageName(want), ": truncated message of ", bytes,
                   " bytes, shorter than its ", sizeof(BlockHeader),
                   "-byte header");
  BlockHeader header;
  std::memcpy(&header, data, sizeof(header));
  DecodeBlockHeader(header, bytes, want);
  return header;
}

void DecodeBlockHeader(const BlockHeader& header, size_t bytes,
                       const BlockExpectation& want) {
  CHECK(want.partition != nullptr);
  CHECK_GE(bytes, sizeof(BlockHeader));
  const bool push = want.kind == BlockMessageKind::kPush;
  // Built only for an error: this runs for every block a rank receives.
  auto what = [&] { return BlockMessageName(want); };
  const std::vector<ParamBlock>& blocks = want.partition->blocks();
  POSEIDON_REQUIRE(header.block >= 0 &&
                       static_cast<size_t>(header.block) < blocks.size(),
                   DistributedError, what(), ": its header names block ",
                   header.block, ", but the partition has ", blocks.size(),
                   " blocks");
  POSEIDON_REQUIRE(header.rank >= 0 && header.rank < want.ranks,
                   DistributedError, what(), ": its header names sender rank ",
                   header.rank, ", but the job has ", want.ranks, " ranks");
  const ParamBlock& named = blocks[header.block];
  // Division, not multiplication: no count can overflow the comparison.
  const size_t payload = bytes - sizeof(BlockHeader);
  POSEIDON_REQUIRE(payload % want.dtype_bytes == 0 &&
                       payload / want.dtype_bytes == named.count,
                   DistributedError, what(), ": ", bytes,
                   " bytes disagree with its header, whose block ",
                   header.block, " needs ", sizeof(BlockHeader), " + ",
                   named.count, " x ", want.dtype_bytes, " bytes");
  if (push) {
    POSEIDON_REQUIRE(header.rank == want.peer, DistributedError, what(),
                     ": its header says rank ", header.rank,
                     " pushed it (a message of another kind or sender)");
  } else {
    const int owner = want.servers == nullptr
                          ? named.shard
                          : (*want.servers)[named.shard];
    POSEIDON_REQUIRE(header.rank == want.peer && owner == want.peer,
                     DistributedError, what(), ": its header says the shard "
                     "of rank ", header.rank, " summed block ", header.block,
                     ", which the shard of rank ", owner,
                     " owns (a message of another kind or sender)");
  }
  POSEIDON_REQUIRE(header.block == want.block && header.iter == want.iter,
                   DistributedError, what(), ": it carries block ",
                   header.block, " of iteration ", header.iter, ", expected ",
                   "block ", want.block, " of iteration ", want.iter,
                   push ? " (did the ranks start from different solver "
                          "states?)"
                        : "");
}

namespace {

// The one number a message of `bytes` bytes from `what` holds; throws naming
// `what` when the length is another.
template <typename Number>
Number ReadNumber(const void* data, size_t bytes, const std::string& what) {
  POSEIDON_REQUIRE(bytes == sizeof(Number), DistributedError, what, ": ", bytes,
                   " bytes, expected ", sizeof(Number));
  Number value{};
  std::memcpy(&value, data, sizeof(value));
  return value;
}

}  // namespace

SolverAction DecodeAction(const void* data, size_t bytes, int peer_job) {
  const int32_t code = ReadNumber<int32_t>(
      data, bytes, StrCat("the signal action from rank ", peer_job));
  POSEIDON_REQUIRE(code == static_cast<int32_t>(SolverAction::NONE) ||
                       code == static_cast<int32_t>(SolverAction::STOP) ||
                       code == static_cast<int32_t>(SolverAction::SNAPSHOT),
                   DistributedError, "the signal action from rank ", peer_job,
                   ": unknown action code ", code,
                   " (0 none, 1 stop, 2 snapshot)");
  return static_cast<SolverAction>(code);
}

SolverAction DecodeActionSum(double sum, int ranks) {
  CHECK_GE(ranks, 1);
  // Each rank adds 0, 1 or ranks + 1: an integer in [0, ranks (ranks + 1)].
  const double most = static_cast<double>(ranks) * (ranks + 1);
  POSEIDON_REQUIRE(std::isfinite(sum) && sum >= 0 && sum <= most &&
                       sum == std::floor(sum),
                   DistributedError, "agreeing on the signal action: the ",
                   ranks, " ranks' coded requests sum to ", sum,
                   ", which no requests give (0 to ", most,
                   "); a rank sent a corrupt value");
  if (sum > ranks) return SolverAction::STOP;
  if (sum > 0) return SolverAction::SNAPSHOT;
  return SolverAction::NONE;
}

int64_t DecodeIteration(const void* data, size_t bytes, int peer_job) {
  const int64_t iteration = ReadNumber<int64_t>(
      data, bytes, StrCat("the iteration from rank ", peer_job));
  POSEIDON_REQUIRE(iteration >= 0, DistributedError, "the iteration from rank ",
                   peer_job, ": ", iteration, ", below 0");
  return iteration;
}

namespace {

void RequireGathered(size_t bytes, size_t each, int ranks, const char* what) {
  CHECK_GE(ranks, 1);
  POSEIDON_REQUIRE(bytes == each * static_cast<size_t>(ranks),
                   DistributedError, what, ": ", bytes, " bytes gathered, ",
                   "expected ", ranks, " ranks x ", each);
}

}  // namespace

void CheckFingerprints(const void* gathered, size_t bytes, int ranks,
                       const std::function<int(int)>& job_rank) {
  const char* what = "comparing start-up settings with the other ranks";
  RequireGathered(bytes, sizeof(Fingerprint), ranks, what);
  std::vector<Fingerprint> all(ranks);
  std::memcpy(all.data(), gathered, bytes);
  for (int r = 0; r < ranks; ++r) {
    const Fingerprint& f = all[r];
    POSEIDON_REQUIRE(
        f.num_layers >= 0 && f.num_params >= 0 && f.param_elements >= 0 &&
            (f.dtype_bytes == 4 || f.dtype_bytes == 8),
        DistributedError, what, ": rank ", job_rank(r),
        " sent a corrupt fingerprint (", f.num_layers, " layers, ",
        f.num_params, " learnable blobs, ", f.param_elements,
        " parameters, ", f.dtype_bytes, "-byte floats)");
  }
  const Fingerprint& a = all[0];
  for (int r = 1; r < ranks; ++r) {
    const Fingerprint& b = all[r];
    POSEIDON_REQUIRE(
        a.net == b.net && a.num_layers == b.num_layers &&
            a.num_params == b.num_params &&
            a.param_elements == b.param_elements,
        ConfigError, "rank ", job_rank(r),
        " was started with a different train net than rank ", job_rank(0),
        " (", b.num_layers, " layers, ", b.num_params, " learnable blobs, ",
        b.param_elements, " parameters vs ", a.num_layers, ", ",
        a.num_params, ", ", a.param_elements,
        "); every rank must load the same net and solver files");
    POSEIDON_REQUIRE(a.solver == b.solver, ConfigError, "rank ", job_rank(r),
                     " was started with different solver settings than rank ",
                     job_rank(0), "; every rank must load the same solver ",
                     "file");
    POSEIDON_REQUIRE(a.dtype_bytes == b.dtype_bytes, ConfigError, "rank ",
                     job_rank(r), " trains in ", b.dtype_bytes * 8,
                     "-bit floats, rank ", job_rank(0), " in ",
                     a.dtype_bytes * 8);
  }
}

bool DecodeHostFlags(const void* gathered, size_t bytes, int ranks,
                     const std::function<int(int)>& job_rank) {
  const char* what = "agreeing on the host level";
  RequireGathered(bytes, sizeof(int32_t), ranks, what);
  std::vector<int32_t> flags(ranks);
  std::memcpy(flags.data(), gathered, bytes);
  bool all_made = true;
  for (int r = 0; r < ranks; ++r) {
    POSEIDON_REQUIRE(flags[r] == 0 || flags[r] == 1, DistributedError, what,
                     ": rank ", job_rank(r), " sent ", flags[r],
                     ", expected 0 (made) or 1 (failed)");
    all_made = all_made && flags[r] == 0;
  }
  return all_made;
}

HostLayout LayoutFromHostKeys(const void* gathered, size_t bytes, int ranks,
                              int rank,
                              const std::function<int(int)>& job_rank) {
  const char* what = "finding which ranks share a host";
  RequireGathered(bytes, sizeof(int32_t), ranks, what);
  CHECK(rank >= 0 && rank < ranks);
  std::vector<int32_t> keys(ranks);
  std::memcpy(keys.data(), gathered, bytes);
  for (int r = 0; r < ranks; ++r) {
    POSEIDON_REQUIRE(keys[r] >= 0 && keys[r] <= r && keys[keys[r]] == keys[r],
                     DistributedError, what, ": rank ", job_rank(r),
                     " sent host key ", keys[r],
                     ", which is not the lowest rank of a host");
  }
  HostLayout layout;
  layout.host_of.assign(ranks, -1);
  layout.local_rank_of.assign(ranks, 0);
  std::vector<int32_t> host_keys;  // in order of first appearance
  std::vector<int> sizes;
  for (int r = 0; r < ranks; ++r) {
    auto it = std::find(host_keys.begin(), host_keys.end(), keys[r]);
    const int h = static_cast<int>(it - host_keys.begin());
    if (it == host_keys.end()) {
      host_keys.push_back(keys[r]);
      sizes.push_back(0);
    }
    layout.host_of[r] = h;
    layout.local_rank_of[r] = sizes[h]++;
  }
  layout.hosts = static_cast<int>(host_keys.size());
  layout.host = layout.host_of[rank];
  layout.local_rank = layout.local_rank_of[rank];
  layout.local_size = sizes[layout.host];
  layout.uniform = std::all_of(sizes.begin(), sizes.end(),
                               [&](int k) { return k == sizes[0]; });
  return layout;
}

size_t CheckFactorMessage(size_t bytes, int ranks, int rows, int M, int N,
                          size_t dtype_bytes, const std::string& what) {
  CHECK(ranks >= 1 && rows >= 0 && M >= 0 && N >= 0 && dtype_bytes > 0);
  const size_t per = static_cast<size_t>(rows) * (static_cast<size_t>(M) + N);
  POSEIDON_REQUIRE(bytes % dtype_bytes == 0 &&
                       bytes / dtype_bytes == per * static_cast<size_t>(ranks),
                   DistributedError, "sufficient factors of '", what, "': ",
                   bytes, " bytes gathered, expected ", ranks, " ranks x ",
                   rows, " rows x (", M, " + ", N, ") x ", dtype_bytes);
  return per;
}

}  // namespace dist
}  // namespace poseidon
