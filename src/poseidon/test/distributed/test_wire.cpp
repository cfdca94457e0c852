// The decoders of what ranks send each other (distributed/wire.hpp): valid
// messages from the real encoders decode unchanged; a truncated message, a
// length that disagrees with its header, a message of another kind or
// sender, an out-of-range block or rank and an unknown code each give an
// error naming the peer. Plus the regression of the fuzzing findings
// (docs/reliability.md), through a LoopbackWorld.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "distributed/run_ranks.hpp"
#include "test_util.hpp"
#include "poseidon/distributed/action_agreement.hpp"
#include "poseidon/distributed/loopback_communicator.hpp"
#include "poseidon/distributed/tags.hpp"
#include "poseidon/distributed/wire.hpp"

namespace poseidon {
namespace dist {
namespace {

using test::ErrorOf;

::testing::AssertionResult Names(const std::string& text,
                                 const std::string& part) {
  if (text.find(part) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "'" << text << "' does not contain '" << part << "'";
}

int Job(int r) { return r + 10; }  // a Split communicator's numbering

// Three blocks of 3, 3 and 2 floats over 2 shards.
class BlockMessageTest : public ::testing::Test {
 protected:
  BlockMessageTest() : partition_({8}, 4, 12, 2) {}

  // The message rank `sender` sends for block `block` of iteration `iter`.
  std::vector<char> Encode(int64_t iter, int block, int sender) {
    const size_t n = partition_.blocks()[block].count;
    std::vector<float> payload(n, 1.5f);
    std::vector<char> msg(sizeof(BlockHeader) + n * sizeof(float));
    EncodeBlockMessage({iter, block, sender}, payload.data(),
                       n * sizeof(float), msg.data());
    return msg;
  }

  BlockExpectation Want(BlockMessageKind kind, int peer, int64_t iter,
                        int block) {
    BlockExpectation want;
    want.kind = kind;
    want.peer = peer;
    want.peer_job = Job(peer);
    want.ranks = 2;
    want.iter = iter;
    want.block = block;
    want.partition = &partition_;
    want.dtype_bytes = sizeof(float);
    return want;
  }

  std::string Error(const std::vector<char>& msg, size_t bytes,
                    const BlockExpectation& want) {
    return ErrorOf<DistributedError>(
        [&] { DecodeBlockMessage(msg.data(), bytes, want); });
  }

  BlockPartition partition_;
};

TEST_F(BlockMessageTest, ValidPushAndSumDecode) {
  ASSERT_EQ(partition_.blocks().size(), 3u);
  const int shard = partition_.blocks()[1].shard;
  std::vector<char> push = Encode(7, 1, 1);
  BlockHeader h = DecodeBlockMessage(
      push.data(), push.size(), Want(BlockMessageKind::kPush, 1, 7, 1));
  EXPECT_EQ(h.iter, 7);
  EXPECT_EQ(h.block, 1);
  EXPECT_EQ(h.rank, 1);
  std::vector<char> sum = Encode(7, 1, shard);
  h = DecodeBlockMessage(sum.data(), sum.size(),
                         Want(BlockMessageKind::kSum, shard, 7, 1));
  EXPECT_EQ(h.rank, shard);
  float first = 0;
  std::memcpy(&first, sum.data() + sizeof(BlockHeader), sizeof(first));
  EXPECT_EQ(first, 1.5f);
}

TEST_F(BlockMessageTest, TruncatedMessageNamesThePeer) {
  std::vector<char> msg = Encode(3, 0, 1);
  const std::string e =
      Error(msg, sizeof(BlockHeader) - 1,
            Want(BlockMessageKind::kPush, 1, 3, 0));
  EXPECT_TRUE(Names(e, "rank 11's push of block 0 (iteration 3)"));
  EXPECT_TRUE(Names(e, "truncated message of 15 bytes"));
}

TEST_F(BlockMessageTest, LengthThatDisagreesWithTheHeader) {
  // Block 2 holds 2 floats; a message one float longer (or a byte shorter)
  // disagrees with the header's block.
  std::vector<char> msg = Encode(3, 2, 1);
  msg.resize(msg.size() + sizeof(float));
  std::string e =
      Error(msg, msg.size(), Want(BlockMessageKind::kPush, 1, 3, 2));
  EXPECT_TRUE(Names(e, "rank 11's push"));
  EXPECT_TRUE(Names(e, "28 bytes disagree with its header, whose block 2 "
                       "needs 16 + 2 x 4 bytes"));
  e = Error(msg, msg.size() - 5, Want(BlockMessageKind::kPush, 1, 3, 2));
  EXPECT_TRUE(Names(e, "23 bytes disagree"));
  // A header naming block 0 (3 floats) on a message the size of block 2.
  msg = Encode(3, 2, 1);
  BlockHeader header{3, 0, 1};
  std::memcpy(msg.data(), &header, sizeof(header));
  e = Error(msg, msg.size(), Want(BlockMessageKind::kPush, 1, 3, 2));
  EXPECT_TRUE(Names(e, "whose block 0 needs 16 + 3 x 4"));
}

TEST_F(BlockMessageTest, OutOfRangeBlockAndRank) {
  std::vector<char> msg = Encode(3, 0, 1);
  for (int32_t bad : {3, -1, std::numeric_limits<int32_t>::max()}) {
    BlockHeader header{3, bad, 1};
    std::memcpy(msg.data(), &header, sizeof(header));
    const std::string e =
        Error(msg, msg.size(), Want(BlockMessageKind::kPush, 1, 3, 0));
    EXPECT_TRUE(Names(e, "rank 11's push"));
    EXPECT_TRUE(Names(e, StrCat("names block ", bad,
                                ", but the partition has 3 blocks")));
  }
  BlockHeader header{3, 0, 2};
  std::memcpy(msg.data(), &header, sizeof(header));
  const std::string e =
      Error(msg, msg.size(), Want(BlockMessageKind::kPush, 1, 3, 0));
  EXPECT_TRUE(Names(e, "names sender rank 2, but the job has 2 ranks"));
}

TEST_F(BlockMessageTest, MessageOfAnotherKindOrSender) {
  const int shard = partition_.blocks()[0].shard;
  const int other = 1 - shard;
  // A message from `other` where the sum of block 0 was expected: `other`
  // does not own block 0, so it cannot be a sum of it.
  std::vector<char> msg = Encode(3, 0, other);
  std::string e =
      Error(msg, msg.size(), Want(BlockMessageKind::kSum, other, 3, 0));
  EXPECT_TRUE(Names(e, StrCat("from the shard of rank ", Job(other))));
  EXPECT_TRUE(Names(e, "another kind or sender"));
  // A push whose header names another rank than the one it came from.
  msg = Encode(3, 0, 0);
  e = Error(msg, msg.size(), Want(BlockMessageKind::kPush, 1, 3, 0));
  EXPECT_TRUE(Names(e, "rank 11's push"));
  EXPECT_TRUE(Names(e, "says rank 0 pushed it"));
}

TEST_F(BlockMessageTest, WrongBlockOrIteration) {
  // Blocks 0 and 1 have the same size: only the header tells them apart.
  std::vector<char> msg = Encode(4, 1, 1);
  std::string e =
      Error(msg, msg.size(), Want(BlockMessageKind::kPush, 1, 4, 0));
  EXPECT_TRUE(Names(e, "rank 11's push of block 0 (iteration 4): it "
                       "carries block 1 of iteration 4"));
  msg = Encode(5, 0, 1);
  e = Error(msg, msg.size(), Want(BlockMessageKind::kPush, 1, 4, 0));
  EXPECT_TRUE(Names(e, "block 0 of iteration 5, expected block 0 of "
                       "iteration 4 (did the ranks start"));
}

TEST(ActionMessageTest, CodesDecodeAndUnknownOnesNameThePeer) {
  for (SolverAction a : {SolverAction::NONE, SolverAction::STOP,
                         SolverAction::SNAPSHOT}) {
    const int32_t code = static_cast<int32_t>(a);
    EXPECT_EQ(DecodeAction(&code, sizeof(code), 3), a);
  }
  for (int32_t code : {3, -1, 1 << 30}) {
    const std::string e = ErrorOf<DistributedError>(
        [&] { DecodeAction(&code, sizeof(code), 3); });
    EXPECT_TRUE(Names(e, StrCat("the signal action from rank 3: unknown "
                                "action code ", code)));
  }
  const int64_t wide = 1;
  EXPECT_TRUE(Names(ErrorOf<DistributedError>(
                        [&] { DecodeAction(&wide, sizeof(wide), 3); }),
                    "from rank 3: 8 bytes, expected 4"));
}

TEST(ActionMessageTest, SumsThatNoRequestsGiveAreRejected) {
  // 3 ranks: NONE 0, SNAPSHOT 1, STOP 4 each.
  EXPECT_EQ(DecodeActionSum(0, 3), SolverAction::NONE);
  EXPECT_EQ(DecodeActionSum(2, 3), SolverAction::SNAPSHOT);
  EXPECT_EQ(DecodeActionSum(5, 3), SolverAction::STOP);
  EXPECT_EQ(DecodeActionSum(12, 3), SolverAction::STOP);
  for (double bad : {-1.0, 0.5, 13.0, std::nan(""), HUGE_VAL}) {
    const std::string e =
        ErrorOf<DistributedError>([&] { DecodeActionSum(bad, 3); });
    EXPECT_TRUE(Names(e, "a rank sent a corrupt value")) << bad;
  }
}

TEST(ActionMessageTest, IterationsDecodeAndBadOnesNameThePeer) {
  for (int64_t it : {int64_t{0}, int64_t{7}, int64_t{1} << 40}) {
    EXPECT_EQ(DecodeIteration(&it, sizeof(it), 2), it);
  }
  const int64_t below = -3;
  EXPECT_TRUE(Names(ErrorOf<DistributedError>(
                        [&] { DecodeIteration(&below, sizeof(below), 2); }),
                    "the iteration from rank 2: -3, below 0"));
  const int32_t narrow = 1;
  EXPECT_TRUE(Names(ErrorOf<DistributedError>(
                        [&] { DecodeIteration(&narrow, sizeof(narrow), 2); }),
                    "from rank 2: 4 bytes, expected 8"));
}

Fingerprint Print(int64_t layers, int64_t dtype_bytes = 4) {
  Fingerprint f;
  f.net = 42;
  f.solver = 7;
  f.num_layers = layers;
  f.num_params = 2;
  f.param_elements = 100;
  f.dtype_bytes = dtype_bytes;
  return f;
}

TEST(StartUpMessageTest, FingerprintsAgreeOrNameTheRank) {
  std::vector<Fingerprint> all = {Print(5), Print(5), Print(5)};
  CheckFingerprints(all.data(), all.size() * sizeof(Fingerprint), 3, Job);
  all[2] = Print(6);
  EXPECT_TRUE(Names(ErrorOf<ConfigError>([&] {
                      CheckFingerprints(all.data(),
                                        all.size() * sizeof(Fingerprint), 3,
                                        Job);
                    }),
                    "rank 12 was started with a different train net than "
                    "rank 10"));
  all[2] = Print(5, 8);
  EXPECT_TRUE(Names(ErrorOf<ConfigError>([&] {
                      CheckFingerprints(all.data(),
                                        all.size() * sizeof(Fingerprint), 3,
                                        Job);
                    }),
                    "rank 12 trains in 64-bit floats, rank 10 in 32"));
  all[1] = Print(-4);
  EXPECT_TRUE(Names(ErrorOf<DistributedError>([&] {
                      CheckFingerprints(all.data(),
                                        all.size() * sizeof(Fingerprint), 3,
                                        Job);
                    }),
                    "rank 11 sent a corrupt fingerprint (-4 layers"));
  all[1] = Print(5, 3);
  EXPECT_TRUE(Names(ErrorOf<DistributedError>([&] {
                      CheckFingerprints(all.data(),
                                        all.size() * sizeof(Fingerprint), 3,
                                        Job);
                    }),
                    "3-byte floats"));
  EXPECT_TRUE(Names(ErrorOf<DistributedError>([&] {
                      CheckFingerprints(all.data(),
                                        2 * sizeof(Fingerprint) + 1, 3, Job);
                    }),
                    "97 bytes gathered, expected 3 ranks x 48"));
}

TEST(StartUpMessageTest, HostFlagsAndKeys) {
  std::vector<int32_t> flags = {0, 0, 1};
  EXPECT_FALSE(DecodeHostFlags(flags.data(), 12, 3, Job));
  flags[2] = 0;
  EXPECT_TRUE(DecodeHostFlags(flags.data(), 12, 3, Job));
  flags[1] = 7;
  EXPECT_TRUE(Names(ErrorOf<DistributedError>(
                        [&] { DecodeHostFlags(flags.data(), 12, 3, Job); }),
                    "rank 11 sent 7, expected 0 (made) or 1 (failed)"));

  // Two hosts of two ranks: keys 0, 0, 2, 2.
  std::vector<int32_t> keys = {0, 0, 2, 2};
  const HostLayout layout = LayoutFromHostKeys(keys.data(), 16, 4, 3, Job);
  EXPECT_EQ(layout.hosts, 2);
  EXPECT_EQ(layout.host, 1);
  EXPECT_EQ(layout.local_rank, 1);
  EXPECT_EQ(layout.local_size, 2);
  EXPECT_TRUE(layout.uniform);
  EXPECT_EQ(layout.host_of, (std::vector<int>{0, 0, 1, 1}));
  for (int32_t bad : {3, -1, 1}) {  // above the rank, negative, not a host
    keys = {0, 0, bad, 2};
    EXPECT_TRUE(Names(ErrorOf<DistributedError>([&] {
                        LayoutFromHostKeys(keys.data(), 16, 4, 0, Job);
                      }),
                      StrCat("rank 12 sent host key ", bad)));
  }
  EXPECT_TRUE(Names(ErrorOf<DistributedError>([&] {
                      LayoutFromHostKeys(keys.data(), 15, 4, 0, Job);
                    }),
                    "15 bytes gathered, expected 4 ranks x 4"));
}

TEST(FactorMessageTest, LengthMustMatchTheLayer) {
  // 2 ranks x 3 rows x (4 + 5) floats.
  EXPECT_EQ(CheckFactorMessage(216, 2, 3, 4, 5, 4, "fc"), 27u);
  const std::string e = ErrorOf<DistributedError>(
      [] { CheckFactorMessage(212, 2, 3, 4, 5, 4, "fc"); });
  EXPECT_TRUE(Names(e, "sufficient factors of 'fc': 212 bytes gathered, "
                       "expected 2 ranks x 3 rows x (4 + 5) x 4"));
}

// Regression (docs/reliability.md): rank 0 took any int32 a peer sent as
// the agreed signal action and handed every rank SolverAction(9).
TEST(ActionMessageTest, AgreementRejectsAnUnknownCodeFromAPeer) {
  LoopbackOptions options;
  options.timeout = std::chrono::milliseconds(2000);
  LoopbackWorld world(2, options);
  std::string error;
  RunRanks(&world, [&](Communicator* comm) {
    if (comm->rank() == 1) {
      const int32_t corrupt = 9;
      ASSERT_TRUE(comm->Send(&corrupt, sizeof(corrupt), 0, kActionTag).ok());
      return;
    }
    error = ErrorOf<DistributedError>(
        [&] { AgreeOnAction(comm, SolverAction::NONE); });
  });
  EXPECT_TRUE(Names(error, "the signal action from rank 1: unknown action "
                           "code 9"));
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
