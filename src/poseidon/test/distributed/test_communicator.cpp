// LoopbackCommunicator: every operation with 1 to 4 ranks as threads, the
// deterministic allreduce, MPI-style matching, and the error paths (sizes,
// timeouts naming the missing rank, mismatched collectives, abort).
//
// Threads: each test starts one thread per rank (RunRanks); ConcurrentTags
// adds a sender and a receiver thread per tag inside every rank.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "distributed/run_ranks.hpp"
#include "test_util.hpp"
#include "poseidon/distributed/loopback_communicator.hpp"

namespace poseidon {
namespace dist {
namespace {

using std::chrono::milliseconds;

LoopbackOptions ShortTimeout(int ms = 100) {
  LoopbackOptions options;
  options.timeout = milliseconds(ms);
  return options;
}

using test::Contains;

// Values whose float sum depends on the order of the additions.
template <typename Dtype>
Dtype Term(int rank, size_t i) {
  const double big = (rank % 2 == 0 ? 1 : -1) * 1e7 * (1 + (i + rank) % 5);
  return static_cast<Dtype>(big + 0.001 * ((i * 7919 + rank * 31) % 1000));
}

class LoopbackTest : public ::testing::TestWithParam<int> {
 protected:
  int n() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Ranks, LoopbackTest, ::testing::Values(1, 2, 3, 4),
                         ::testing::PrintToStringParamName());

TEST_P(LoopbackTest, RankAndSize) {
  LoopbackWorld world(n());
  EXPECT_EQ(world.size(), n());
  for (int r = 0; r < n(); ++r) {
    EXPECT_EQ(world.rank(r)->rank(), r);
    EXPECT_EQ(world.rank(r)->size(), n());
  }
}

TEST_P(LoopbackTest, SendRecvRing) {
  LoopbackWorld world(n());
  RunRanks(&world, [](Communicator* c) {
    const int next = (c->rank() + 1) % c->size();
    const int prev = (c->rank() + c->size() - 1) % c->size();
    std::vector<int> out(1000, c->rank()), in(1000, -1);
    ASSERT_TRUE(c->Send(out.data(), 4000, next, 3).ok());
    Status s = c->Recv(in.data(), 4000, prev, 3);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(in, std::vector<int>(1000, prev));
    EXPECT_TRUE(c->Send(nullptr, 0, next, 4).ok());
    EXPECT_TRUE(c->Recv(nullptr, 0, prev, 4).ok());
  });
}

// The default SendRecv (even ranks send first) around a ring of synchronous
// sends, which deadlocks if every rank sends first.
TEST_P(LoopbackTest, SendRecvCannotDeadlockAroundARing) {
  if (n() < 2) GTEST_SKIP() << "a synchronous send to oneself never returns";
  LoopbackOptions options;
  options.synchronous_send = true;
  options.timeout = std::chrono::seconds(10);
  LoopbackWorld world(n(), options);
  RunRanks(&world, [](Communicator* c) {
    const int next = (c->rank() + 1) % c->size();
    const int prev = (c->rank() + c->size() - 1) % c->size();
    std::vector<int> out(100, c->rank()), in(100, -1);
    Status s = c->SendRecv(out.data(), 400, next, in.data(), 400, prev, 3);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(in, std::vector<int>(100, prev));
  });
}

// RecvAll and SendAll: every rank sends a message to every rank with
// SendAll and takes every rank's with RecvAll; a failed op's error comes
// back naming its peer.
TEST_P(LoopbackTest, RecvAllAndSendAll) {
  LoopbackWorld world(n(), ShortTimeout());
  RunRanks(&world, [](Communicator* c) {
    const int n = c->size(), me = c->rank();
    std::vector<std::vector<int>> out(n), in(n);
    std::vector<Communicator::SendOp> sends;
    std::vector<Communicator::RecvOp> recvs;
    for (int r = 0; r < n; ++r) {
      out[r].assign(50 + r, 100 * me + r);
      in[r].assign(50 + me, -1);
      sends.push_back({out[r].data(), out[r].size() * 4, r, 7});
      recvs.push_back({in[r].data(), in[r].size() * 4, r, 7});
    }
    Status s = c->SendAll(sends);
    ASSERT_TRUE(s.ok()) << s.message();
    s = c->RecvAll(recvs);
    ASSERT_TRUE(s.ok()) << s.message();
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(in[r], std::vector<int>(50 + me, 100 * r + me))
          << "rank " << me << " from rank " << r;
    }
    int x = 0;
    s = c->RecvAll({{&x, 4, n - 1, 8}});
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(Contains(s.message(),
                         StrCat("Recv of 4 bytes from rank ", n - 1, " tag 8")))
        << s.message();
    EXPECT_TRUE(Contains(s.message(), "timed out")) << s.message();
  });
}

// Forwards to a loopback rank, except RecvAll and SendAll, which are
// Communicator's defaults (one op after another over Recv and Send).
class SendRecvOnly final : public ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  Status RecvAll(const std::vector<RecvOp>& ops) override {
    return Communicator::RecvAll(ops);
  }
  Status SendAll(const std::vector<SendOp>& ops) override {
    return Communicator::SendAll(ops);
  }
};

// Two-part messages (a header beside a payload) through loopback's own
// RecvAll / SendAll and through the defaults: sent in two parts and taken
// in one, sent in one and taken in two, and in two both ways; a message
// of another total size is refused naming both sizes.
TEST(LoopbackTwoPartsTest, PartsMakeOneMessage) {
  for (const bool defaults : {false, true}) {
    SCOPED_TRACE(defaults ? "Communicator's defaults" : "loopback's own");
    LoopbackWorld world(2, ShortTimeout(2000));
    RunRanks(&world, [defaults](Communicator* loopback) {
      SendRecvOnly plain(loopback);
      Communicator* c = defaults ? static_cast<Communicator*>(&plain)
                                 : loopback;
      const int peer = 1 - c->rank();
      const int32_t head = 1000 + c->rank();
      std::vector<float> body(300, 0.5f + c->rank());
      Status s = c->SendAll({{&head, 4, peer, 1, body.data(), 1200},
                             {&head, 4, peer, 2, body.data(), 1200},
                             {&head, 4, peer, 3}});
      ASSERT_TRUE(s.ok()) << s.message();
      std::vector<char> whole(1204);
      int32_t got_head = 0, short_head = 0;
      std::vector<float> got_body(300);
      s = c->RecvAll({{whole.data(), whole.size(), peer, 1},
                      {&got_head, 4, peer, 2, got_body.data(), 1200}});
      ASSERT_TRUE(s.ok()) << s.message();
      int32_t whole_head = 0;
      std::memcpy(&whole_head, whole.data(), 4);
      EXPECT_EQ(whole_head, 1000 + peer);
      EXPECT_EQ(got_head, 1000 + peer);
      EXPECT_EQ(got_body, std::vector<float>(300, 0.5f + peer));
      float first = 0;
      std::memcpy(&first, whole.data() + 4, 4);
      EXPECT_EQ(first, 0.5f + peer);
      // 4 bytes sent, 4 + 8 expected.
      float tail[2];
      s = c->RecvAll({{&short_head, 4, peer, 3, tail, 8}});
      ASSERT_FALSE(s.ok());
      EXPECT_TRUE(Contains(s.message(), StrCat("Recv of 12 bytes from rank ",
                                               peer, " tag 3")))
          << s.message();
      EXPECT_TRUE(Contains(s.message(), "sent 4 bytes, this rank expected 12"))
          << s.message();
    });
  }
}

// Loopback's RecvAll takes its messages in whatever order they come and
// its SendAll posts every message before waiting, as MPI's do: with
// synchronous sends, plain sends of b then a meet a RecvAll of a then b,
// and a SendAll of a then b meets plain receives of b then a (one op after
// another, both would wait for each other until the timeout).
TEST(LoopbackTwoPartsTest, BatchesAreInFlightAtOnce) {
  LoopbackOptions options = ShortTimeout(2000);
  options.synchronous_send = true;
  LoopbackWorld world(2, options);
  RunRanks(&world, [](Communicator* c) {
    const int a = 10, b = 20;
    int got_a = 0, got_b = 0;
    Status s;
    if (c->rank() == 0) {
      s = c->Send(&b, 4, 1, 2);
      if (s.ok()) s = c->Send(&a, 4, 1, 1);
      ASSERT_TRUE(s.ok()) << s.message();
      s = c->SendAll({{&a, 4, 1, 3}, {&b, 4, 1, 4}});
      ASSERT_TRUE(s.ok()) << s.message();
    } else {
      s = c->RecvAll({{&got_a, 4, 0, 1}, {&got_b, 4, 0, 2}});
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(got_a, a);
      EXPECT_EQ(got_b, b);
      s = c->Recv(&got_b, 4, 0, 4);
      if (s.ok()) s = c->Recv(&got_a, 4, 0, 3);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(got_a, a);
      EXPECT_EQ(got_b, b);
    }
  });
}

TEST_P(LoopbackTest, SharedMemoryIsOneBlockForAllRanks) {
  LoopbackWorld apart(n());
  EXPECT_FALSE(apart.rank(0)->OnOneHost());
  EXPECT_EQ(apart.rank(0)->MapSharedMemory(8), nullptr);
  LoopbackOptions options;
  options.shared_memory = true;
  LoopbackWorld world(n(), options);
  std::vector<std::unique_ptr<SharedMemory>> maps(n());
  RunRanks(&world, [&maps](Communicator* c) {
    EXPECT_TRUE(c->OnOneHost());
    maps[c->rank()] = c->MapSharedMemory(100);
  });
  for (int r = 0; r < n(); ++r) {
    ASSERT_NE(maps[r], nullptr) << "rank " << r;
    EXPECT_EQ(maps[r]->bytes_per_rank(), 128u);
    EXPECT_EQ(maps[r]->part(r), maps[0]->part(r)) << "rank " << r;
    EXPECT_EQ(maps[r]->part(0)[127], 0);
  }
  if (n() < 2) return;
  maps[0].reset();  // the others keep it mapped
  maps[n() - 1]->part(0)[5] = 7;
  EXPECT_EQ(maps[n() - 1]->part(0)[5], 7);
}

TEST_P(LoopbackTest, TagAndSourceMatchingIsFifo) {
  if (n() < 2) GTEST_SKIP() << "needs two ranks";
  LoopbackWorld world(n());
  RunRanks(&world, [](Communicator* c) {
    const int last = c->size() - 1;
    if (c->rank() == 0) {
      for (int v : {11, 33}) {
        ASSERT_TRUE(c->Send(&v, 4, 1, 5).ok());
        const int w = v + 11;
        ASSERT_TRUE(c->Send(&w, 4, 1, 6).ok());
      }
    } else if (c->rank() == last && last != 1) {
      const int v = 99;
      ASSERT_TRUE(c->Send(&v, 4, 1, 5).ok());
    }
    if (c->rank() != 1) return;
    // Tag 6 before tag 5, and the last rank before rank 0: matching is by
    // (source, tag), FIFO within each.
    int got[5] = {0, 0, 0, 0, 0};
    ASSERT_TRUE(c->Recv(&got[0], 4, 0, 6).ok());
    if (last != 1) {
      ASSERT_TRUE(c->Recv(&got[4], 4, last, 5).ok());
      EXPECT_EQ(got[4], 99);
    }
    ASSERT_TRUE(c->Recv(&got[1], 4, 0, 5).ok());
    ASSERT_TRUE(c->Recv(&got[2], 4, 0, 5).ok());
    ASSERT_TRUE(c->Recv(&got[3], 4, 0, 6).ok());
    EXPECT_EQ(got[0], 22);
    EXPECT_EQ(got[1], 11);
    EXPECT_EQ(got[2], 33);
    EXPECT_EQ(got[3], 44);
  });
}

TEST_P(LoopbackTest, ConcurrentTags) {
  LoopbackWorld world(n());
  RunRanks(&world, [](Communicator* c) {
    const int next = (c->rank() + 1) % c->size();
    const int prev = (c->rank() + c->size() - 1) % c->size();
    constexpr int kTags = 4, kMessages = 50;
    std::vector<std::thread> threads;
    for (int t = 0; t < kTags; ++t) {
      threads.emplace_back([c, t, next] {
        for (int i = 0; i < kMessages; ++i) {
          std::vector<int> msg(1 + i % 7, c->rank() * 100 + t);
          msg[0] = i;
          ASSERT_TRUE(c->Send(msg.data(), msg.size() * 4, next, t).ok());
        }
      });
      threads.emplace_back([c, t, prev] {
        for (int i = 0; i < kMessages; ++i) {
          std::vector<int> msg(1 + i % 7, -1);
          Status s = c->Recv(msg.data(), msg.size() * 4, prev, t);
          ASSERT_TRUE(s.ok()) << s.message();
          EXPECT_EQ(msg[0], i) << "tag " << t << " out of order";
          if (msg.size() > 1) EXPECT_EQ(msg[1], prev * 100 + t);
        }
      });
    }
    for (auto& th : threads) th.join();
  });
}

TEST_P(LoopbackTest, BroadcastFromEveryRoot) {
  LoopbackWorld world(n());
  RunRanks(&world, [](Communicator* c) {
    for (int root = 0; root < c->size(); ++root) {
      std::vector<double> buf(100, c->rank() == root ? root + 0.5 : -1);
      Status s = c->Broadcast(buf.data(), buf.size() * 8, root);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(buf, std::vector<double>(100, root + 0.5));
    }
  });
}

TEST_P(LoopbackTest, Allgather) {
  LoopbackWorld world(n());
  RunRanks(&world, [](Communicator* c) {
    const int mine[2] = {c->rank(), -c->rank()};
    std::vector<int> all(2 * c->size(), 7);
    ASSERT_TRUE(c->Allgather(mine, sizeof(mine), all.data()).ok());
    for (int r = 0; r < c->size(); ++r) {
      EXPECT_EQ(all[2 * r], r);
      EXPECT_EQ(all[2 * r + 1], -r);
    }
  });
}

TEST_P(LoopbackTest, BarrierWaitsForEveryRank) {
  LoopbackWorld world(n());
  std::atomic<int> arrived{0};
  RunRanks(&world, [&arrived](Communicator* c) {
    for (int round = 1; round <= 3; ++round) {
      std::this_thread::sleep_for(milliseconds(c->rank()));
      ++arrived;
      ASSERT_TRUE(c->Barrier().ok());
      EXPECT_GE(arrived.load(), round * c->size());
      ASSERT_TRUE(c->Barrier().ok());
    }
  });
}

template <typename Dtype>
void CheckDeterministicAllreduce(int n, size_t count) {
  std::vector<std::vector<Dtype>> results(n);
  for (int trial = 0; trial < 2; ++trial) {
    LoopbackWorld world(n);
    RunRanks(&world, [&](Communicator* c) {
      // Ranks arrive in a different order in each trial.
      std::this_thread::sleep_for(
          milliseconds(trial == 0 ? c->rank() : c->size() - c->rank()));
      std::vector<Dtype> buf(count);
      for (size_t i = 0; i < count; ++i) buf[i] = Term<Dtype>(c->rank(), i);
      Status s = c->AllreduceSum(buf.data(), count);
      ASSERT_TRUE(s.ok()) << s.message();
      if (trial == 0) {
        results[c->rank()] = std::move(buf);
      } else {
        EXPECT_EQ(std::memcmp(buf.data(), results[c->rank()].data(),
                              count * sizeof(Dtype)),
                  0)
            << "rank " << c->rank() << " got other bits in trial 2";
      }
    });
  }
  for (size_t i = 0; i < count; ++i) {
    Dtype want = Term<Dtype>(0, i);
    for (int r = 1; r < n; ++r) want += Term<Dtype>(r, i);
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(std::memcmp(&results[r][i], &want, sizeof(Dtype)), 0)
          << "rank " << r << " element " << i << ": " << results[r][i]
          << " vs the rank-order sum " << want;
    }
  }
}

TEST_P(LoopbackTest, AllreduceSumIsRankOrderAndBitIdentical) {
  CheckDeterministicAllreduce<float>(n(), 1000);
  CheckDeterministicAllreduce<double>(n(), 1000);
}

TEST_P(LoopbackTest, AllreduceSumAcrossChunks) {
  CheckDeterministicAllreduce<float>(n(), kAllreduceChunkElements + 3);
}

TEST(LoopbackErrorTest, RecvOfWrongSizeNamesBothSizesAndThePeer) {
  LoopbackWorld world(2);
  RunRanks(&world, [](Communicator* c) {
    double v[2] = {1, 2};
    if (c->rank() == 0) {
      ASSERT_TRUE(c->Send(v, 8, 1, 0).ok());
      ASSERT_TRUE(c->Send(v, 16, 1, 0).ok());
      return;
    }
    Status s = c->Recv(v, 16, 0, 0);
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(Contains(s.message(), "rank 1: Recv of 16 bytes from rank 0"))
        << s.message();
    EXPECT_TRUE(Contains(s.message(), "rank 0 sent 8 bytes")) << s.message();
    EXPECT_TRUE(Contains(s.message(), "expected 16")) << s.message();
    // The bad message was consumed; the next one matches.
    EXPECT_TRUE(c->Recv(v, 16, 0, 0).ok());
  });
}

TEST(LoopbackErrorTest, BadRankOrTag) {
  LoopbackWorld world(2);
  Communicator* c = world.rank(0);
  int v = 0;
  Status s = c->Send(&v, 4, 2, 0);
  EXPECT_TRUE(Contains(s.message(), "no such rank (world of 2)"))
      << s.message();
  s = c->Recv(&v, 4, -1, 0);
  EXPECT_TRUE(Contains(s.message(), "no such rank")) << s.message();
  s = c->Send(&v, 4, 1, kMaxTag + 1);
  EXPECT_TRUE(Contains(s.message(), "tag is outside 0..32767")) << s.message();
  s = c->Broadcast(&v, 4, 5);
  EXPECT_TRUE(Contains(s.message(), "no such rank")) << s.message();
  EXPECT_THROW(LoopbackWorld(0), ConfigError);
  EXPECT_THROW(LoopbackWorld(2, ShortTimeout(0)), ConfigError);
}

TEST(LoopbackErrorTest, RecvTimeoutNamesTheMissingRank) {
  LoopbackWorld world(2, ShortTimeout(100));
  int v = 0;
  const auto start = std::chrono::steady_clock::now();
  Status s = world.rank(1)->Recv(&v, 4, 0, 9);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "rank 1: Recv of 4 bytes from rank 0 tag 9: timed out after "
            "0.1 s waiting for rank 0");
  EXPECT_GE(waited, milliseconds(90));
  EXPECT_LT(waited, milliseconds(5000));
}

TEST(LoopbackErrorTest, CollectiveTimeoutNamesTheMissingRank) {
  LoopbackWorld world(3, ShortTimeout(100));
  std::vector<std::string> errors(3);
  RunRanks(&world, [&errors](Communicator* c) {
    if (c->rank() == 2) return;  // never joins
    Status s = c->Barrier();
    errors[c->rank()] = s.message();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(Contains(errors[r], "Barrier #1")) << errors[r];
    EXPECT_TRUE(Contains(errors[r], "waiting for rank 2")) << errors[r];
  }
  Status s = world.rank(1)->Broadcast(nullptr, 0, 0);
  EXPECT_TRUE(Contains(s.message(), "waiting for rank 0")) << s.message();
}

TEST(LoopbackErrorTest, MismatchedCollectivesNameBoth) {
  LoopbackWorld world(2, ShortTimeout(200));
  std::vector<std::string> errors(2);
  RunRanks(&world, [&errors](Communicator* c) {
    int send = 1, recv[2] = {0, 0};
    Status s = c->rank() == 0 ? c->Barrier() : c->Allgather(&send, 4, recv);
    errors[c->rank()] = s.message();
  });
  EXPECT_EQ(errors[0],
            "rank 0: Barrier #1: rank 1 issued Allgather #1 instead; every "
            "rank must issue the same collectives in the same order");
  EXPECT_TRUE(Contains(errors[1], "rank 1: Allgather #1 of 4 bytes per rank"))
      << errors[1];
  EXPECT_TRUE(Contains(errors[1], "rank 0 issued Barrier #1 instead"))
      << errors[1];
}

TEST(LoopbackErrorTest, AllgatherSizesMustAgree) {
  LoopbackWorld world(2, ShortTimeout(200));
  std::vector<std::string> errors(2);
  RunRanks(&world, [&errors](Communicator* c) {
    double send[2] = {1, 2}, recv[4];
    errors[c->rank()] =
        c->Allgather(send, c->rank() == 0 ? 8 : 16, recv).message();
  });
  EXPECT_TRUE(Contains(errors[0], "rank 1 contributed 16 bytes, this rank 8"))
      << errors[0];
  EXPECT_TRUE(Contains(errors[1], "rank 0 contributed 8 bytes, this rank 16"))
      << errors[1];
}

TEST(LoopbackErrorTest, SynchronousSendWaitsAndTimesOut) {
  LoopbackOptions options = ShortTimeout(100);
  options.synchronous_send = true;
  LoopbackWorld world(2, options);
  int v = 5;
  Status s = world.rank(0)->Send(&v, 4, 1, 2);
  EXPECT_EQ(s.message(),
            "rank 0: Send of 4 bytes to rank 1 tag 2: timed out after 0.1 s "
            "waiting for rank 1");
  // The failed send was withdrawn.
  s = world.rank(1)->Recv(&v, 4, 0, 2);
  EXPECT_TRUE(Contains(s.message(), "timed out")) << s.message();
  // A matched synchronous send completes.
  RunRanks(&world, [](Communicator* c) {
    int x = 8;
    if (c->rank() == 0) {
      EXPECT_TRUE(c->Send(&x, 4, 1, 3).ok());
    } else {
      std::this_thread::sleep_for(milliseconds(20));
      EXPECT_TRUE(c->Recv(&x, 4, 0, 3).ok());
    }
  });
}

TEST(LoopbackErrorTest, AbortWakesEveryRankWithTheReason) {
  LoopbackWorld world(3);  // default 60 s deadline: abort must not wait it
  std::vector<std::string> errors(3);
  const auto start = std::chrono::steady_clock::now();
  RunRanks(&world, [&errors](Communicator* c) {
    int v = 0;
    if (c->rank() == 0) {
      std::this_thread::sleep_for(milliseconds(20));
      c->Abort("disk full");
      return;
    }
    errors[c->rank()] = c->rank() == 1 ? c->Recv(&v, 4, 0, 1).message()
                                       : c->Barrier().message();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
  EXPECT_EQ(world.abort_reason(), "rank 0 aborted: disk full");
  for (int r = 1; r < 3; ++r) {
    EXPECT_TRUE(
        Contains(errors[r], "world aborted (rank 0 aborted: disk full)"))
        << errors[r];
  }
  int v = 0;
  EXPECT_FALSE(world.rank(1)->Send(&v, 4, 2, 0).ok());
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
