// libFuzzer harness: every message the distributed layer receives from a
// peer, through the decoders of distributed/wire.hpp, and the signal-action
// agreement's whole receive path through an in-process communicator. The
// first byte picks the message family, the next kOptionBytes set up what the
// receiver expects (partition, ranks, block, iteration), the rest is the
// message as received:
//   0 push / 1 sum   a parameter-server block (DecodeBlockMessage)
//   2 action         AgreeOnAction on rank 0 of 3, the two peers' requests
//                    being the message's two halves (DecodeAction)
//   3 action sum     ActionAgreement's allreduce outcome (DecodeActionSum),
//                    or, by the second option byte, the iteration agreed
//                    on under ASYNC (DecodeIteration)
//   4 fingerprints   the start-up agreement (CheckFingerprints)
//   5 host flags / 6 host keys   the host level's agreements
//   7 factors        sufficient factors, rebuilt into a gradient
//   8 exchange       a whole ParamServer exchange on rank 0 of 2, rank 1's
//                    pushes and sums being the message's records
//                    (ExchangeWithScriptedPeer): the push, pull and server
//                    threads' receive paths
//   9 server plan    a dedicated server's start-up plan (DecodeServerPlan);
//                    an accepted plan must survive encoding and decoding
// Seeds: valid messages of every family from the real encoders
// (fuzz_seeds, WriteDistSeeds).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "fuzz_dist.hpp"
#include "poseidon/distributed/action_agreement.hpp"
#include "poseidon/distributed/server_process.hpp"
#include "poseidon/distributed/transport.hpp"
#include "poseidon/distributed/wire.hpp"

namespace {

using namespace poseidon;
using namespace poseidon::dist;

int Job(int r) { return r; }

void FuzzBlock(BlockMessageKind kind, const fuzz::DistOptions& o,
               const uint8_t* msg, size_t size) {
  const BlockPartition partition = fuzz::MakeFuzzPartition(o);
  BlockExpectation want = fuzz::MakeExpectation(o, partition);
  want.kind = kind;
  // The decoder must not read past `size`: copy into a buffer of that size.
  std::vector<char> copy(msg, msg + size);
  const BlockHeader header =
      DecodeBlockMessage(copy.data(), copy.size(), want);
  // Accepted: the payload is exactly the block's elements; copy them out
  // as ParamServer::Pull does (ASan checks the read).
  const ParamBlock& b = partition.blocks()[header.block];
  CHECK_EQ(copy.size(), sizeof(BlockHeader) + b.count * want.dtype_bytes);
  std::vector<char> block(b.count * want.dtype_bytes);
  if (!block.empty()) {
    std::memcpy(block.data(), copy.data() + sizeof(BlockHeader),
                block.size());
  }
}

void FuzzFactors(const fuzz::DistOptions& o, const uint8_t* msg,
                 size_t size) {
  const int ranks = 1 + o.bytes[0] % 3;
  ExchangeSpec spec;
  spec.name = "fc";
  spec.rows = 1 + o.bytes[1] % 3;
  spec.M = 1 + o.bytes[2] % 4;
  spec.N = 1 + o.bytes[3] % 4;
  spec.layout = o.bytes[4] & 1 ? WeightLayout::kInputsByOutputs
                               : WeightLayout::kOutputsByInputs;
  spec.bias = o.bytes[4] & 2;
  spec.count = static_cast<size_t>(spec.M) * spec.N + (spec.bias ? spec.M : 0);
  spec.payload = static_cast<size_t>(spec.rows) * (spec.M + spec.N);
  const size_t per = CheckFactorMessage(size, ranks, spec.rows, spec.M,
                                        spec.N, sizeof(float), spec.name);
  std::vector<float> gathered(per * ranks);
  std::memcpy(gathered.data(), msg, size);
  std::vector<float> sum(spec.count);
  RebuildFromFactors<float>(
      spec, ranks, [&](int r) { return gathered.data() + r * per; },
      sum.data());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Init();
  if (size < 1 + fuzz::kOptionBytes) return 0;
  const int family = data[0] % fuzz::kDistFamilies;
  fuzz::DistOptions o;
  std::memcpy(o.bytes, data + 1, fuzz::kOptionBytes);
  const uint8_t* msg = data + 1 + fuzz::kOptionBytes;
  const size_t n = size - 1 - fuzz::kOptionBytes;
  const std::vector<char> copy(msg, msg + n);
  POSEIDON_FUZZ_EXPECT_ERRORS({
    switch (family) {
      case 0:
        FuzzBlock(BlockMessageKind::kPush, o, msg, n);
        break;
      case 1:
        FuzzBlock(BlockMessageKind::kSum, o, msg, n);
        break;
      case 2:
        fuzz::AgreeWithScriptedPeers(msg, n, o);
        break;
      case 3: {
        if (o.bytes[1] % 2) {
          DecodeIteration(copy.data(), n, Job(1));
          break;
        }
        double sum = 0;
        if (n < sizeof(sum)) break;
        std::memcpy(&sum, msg, sizeof(sum));
        DecodeActionSum(sum, 1 + o.bytes[0] % 8);
        break;
      }
      case 4:
        CheckFingerprints(copy.data(), n, 1 + o.bytes[0] % 4, Job);
        break;
      case 5:
        DecodeHostFlags(copy.data(), n, 1 + o.bytes[0] % 8, Job);
        break;
      case 6: {
        const int ranks = 1 + o.bytes[0] % 8;
        LayoutFromHostKeys(copy.data(), n, ranks, o.bytes[1] % ranks, Job);
        break;
      }
      case 7:
        FuzzFactors(o, msg, n);
        break;
      case 8:
        // A rejected message fails the exchange with a Status; anything
        // else (a crash, a hang, an abort) is the finding.
        fuzz::ExchangeWithScriptedPeer(msg, n, o);
        break;
      default: {
        const ServerPlan plan =
            DecodeServerPlan(std::string(copy.begin(), copy.end()), 1);
        const std::string bytes = EncodeServerPlan(plan);
        CHECK(EncodeServerPlan(DecodeServerPlan(bytes, 1)) == bytes)
            << "a decoded server plan does not survive a round trip";
        break;
      }
    }
  });
  return 0;
}
