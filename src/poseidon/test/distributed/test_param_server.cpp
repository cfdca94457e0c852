// ParamServer: the staggered push/pull order (rounds, each rank starting at
// its own shard, the ranks on different shards at every step), the windows
// of blocks a push or pull thread keeps in flight, and exchanges over
// loopback ranks giving every rank the rank-order sum, bit for bit, with
// several threads, windows of several sizes, synchronous sends and
// exchanges back to back.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "distributed/run_ranks.hpp"
#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/param_server.hpp"
#include "poseidon/distributed/tags.hpp"
#include "poseidon/distributed/wire.hpp"
#include "poseidon/util/timeline.hpp"
#include "test_util.hpp"

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

size_t MessageBytes(const BlockPartition& part, int id) {
  return sizeof(BlockHeader) + part.blocks()[id].count * sizeof(float);
}

// A communicator that records the ops of each SendAll and RecvAll call,
// to watch the default windowed runs (Communicator::SendWindowed /
// RecvWindowed) cut their groups.
class GroupRecorder : public ForwardingCommunicator {
 public:
  using ForwardingCommunicator::ForwardingCommunicator;
  struct Op {
    size_t bytes;
    int peer, tag;
  };
  Status RecvAll(const std::vector<RecvOp>& ops) override {
    groups.emplace_back();
    for (const RecvOp& op : ops) {
      groups.back().push_back({op.bytes + op.bytes2, op.src, op.tag});
    }
    return ForwardingCommunicator::RecvAll(ops);
  }
  Status SendAll(const std::vector<SendOp>& ops) override {
    groups.emplace_back();
    for (const SendOp& op : ops) {
      groups.back().push_back({op.bytes + op.bytes2, op.dest, op.tag});
    }
    return ForwardingCommunicator::SendAll(ops);
  }
  std::vector<std::vector<Op>> groups;
};

// The groups of a default windowed run: consecutive, covering the ops in
// order, each within `limit` bytes or a single op, never two ops of one
// (peer, tag), each as long as it can be; done(k) after each group.
void CheckGroups(const std::vector<std::vector<GroupRecorder::Op>>& groups,
                 const std::vector<size_t>& sizes, const std::vector<int>& tags,
                 size_t limit, const std::vector<size_t>& done) {
  size_t at = 0;
  ASSERT_EQ(done.size(), groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    SCOPED_TRACE(::testing::Message() << "group " << g << ", limit " << limit);
    ASSERT_FALSE(groups[g].empty());
    size_t bytes = 0;
    std::set<std::pair<int, int>> keys;
    for (const GroupRecorder::Op& op : groups[g]) {
      ASSERT_LT(at, sizes.size());
      EXPECT_EQ(op.bytes, sizes[at]) << "op " << at;
      EXPECT_EQ(op.tag, tags[at]) << "op " << at;
      EXPECT_TRUE(keys.insert({op.peer, op.tag}).second)
          << "two ops with tag " << op.tag << " in one group";
      bytes += op.bytes;
      ++at;
    }
    if (groups[g].size() > 1) EXPECT_LE(bytes, limit);
    EXPECT_EQ(done[g], at) << "done(k) after the group";
    if (at < sizes.size()) {
      EXPECT_TRUE(bytes + sizes[at] > limit || keys.count({1, tags[at]}) > 0 ||
                  keys.count({0, tags[at]}) > 0)
          << "the group ends before op " << at << ", which would fit";
    }
  }
  EXPECT_EQ(at, sizes.size());
}

TEST(CommunicatorWindowsTest, DefaultRunsGroupsThatFitAndNeverRepeatATag) {
  // Two-part messages of these element counts; tags 7, 8, 7, 9, ...
  const std::vector<size_t> counts = {500, 20, 3000, 1, 1, 900, 40, 2500, 8};
  std::vector<int> tags;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < counts.size(); ++i) {
    tags.push_back(i % 2 == 0 ? 7 : 8 + static_cast<int>(i) / 2);
    sizes.push_back(8 + counts[i] * 4);
  }
  for (size_t limit :
       {size_t{1}, size_t{4000}, size_t{13000}, size_t{1} << 30}) {
    LoopbackWorld world(2);
    std::vector<size_t> sent_done, got_done;
    std::vector<std::vector<GroupRecorder::Op>> send_groups, recv_groups;
    std::vector<std::vector<float>> got(counts.size());
    RunRanks(&world, [&](Communicator* inner) {
      GroupRecorder c(inner);
      std::vector<int64_t> heads(counts.size());
      std::vector<std::vector<float>> bodies(counts.size());
      if (c.rank() == 0) {
        std::vector<Communicator::SendOp> ops;
        for (size_t i = 0; i < counts.size(); ++i) {
          heads[i] = static_cast<int64_t>(i);
          bodies[i].assign(counts[i], static_cast<float>(i) + 0.5f);
          ops.push_back(
              {&heads[i], 8, 1, tags[i], bodies[i].data(), counts[i] * 4});
        }
        EXPECT_TRUE(c.SendWindowed(ops, limit, [&](size_t k) {
                       sent_done.push_back(k);
                       return Status::OK();
                     }).ok());
        send_groups = c.groups;
      } else {
        std::vector<Communicator::RecvOp> ops;
        for (size_t i = 0; i < counts.size(); ++i) {
          got[i].assign(counts[i], -1.0f);
          ops.push_back(
              {&heads[i], 8, 0, tags[i], got[i].data(), counts[i] * 4});
        }
        EXPECT_TRUE(c.RecvWindowed(ops, limit, [&](size_t k) {
                       got_done.push_back(k);
                       return Status::OK();
                     }).ok());
        for (size_t i = 0; i < counts.size(); ++i) {
          EXPECT_EQ(heads[i], static_cast<int64_t>(i));
        }
        recv_groups = c.groups;
      }
    });
    CheckGroups(send_groups, sizes, tags, limit, sent_done);
    CheckGroups(recv_groups, sizes, tags, limit, got_done);
    for (size_t i = 0; i < counts.size(); ++i) {
      EXPECT_EQ(got[i], std::vector<float>(counts[i], i + 0.5f)) << "op " << i;
    }
    if (limit == 1) EXPECT_EQ(send_groups.size(), counts.size());
  }
}

TEST(CommunicatorWindowsTest, DefaultStopsAtAFailingDone) {
  // done(k) failing after the first group: no more groups start, and its
  // failure is the result.
  LoopbackWorld world(1);
  GroupRecorder c(world.rank(0));
  std::vector<int32_t> payload(4, 1);
  std::vector<Communicator::SendOp> ops;
  for (int i = 0; i < 4; ++i) ops.push_back({&payload[i], 4, 0, 30 + i});
  int calls = 0;
  const Status s = c.SendWindowed(ops, 8, [&](size_t k) {
    ++calls;
    return k >= 2 ? Status::Failure("stop here") : Status::OK();
  });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "stop here");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(c.groups.size(), 1u);
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
  size_t bytes_in_flight = ParamServerOptions().bytes_in_flight;
  int lanes = ParamServerOptions().server_lanes;
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
    ParamServerOptions options;
    options.push_threads = c.threads;
    options.pull_threads = c.threads;
    options.bytes_in_flight = c.bytes_in_flight;
    options.server_lanes = c.lanes;
    ParamServer<float> server(comm, &part, options);
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
                info.param.synchronous ? "_synchronous" : "", "_window",
                info.param.bytes_in_flight, "_", info.param.lanes, "lanes");
}

// Windows: one block (1 byte), about three of the 8192-byte blocks of 4
// shards, and the default (every block of a thread at once). Lanes: one
// (a shard takes one block at a time), two, and more than a shard has
// blocks in an exchange; with synchronous sends a message waits for its
// receiver, as MPI's large messages do.
INSTANTIATE_TEST_SUITE_P(
    Cases, ParamServerExchangeTest,
    ::testing::Values(ExchangeCase{1, 1, false}, ExchangeCase{2, 1, true},
                      ExchangeCase{3, 1, false}, ExchangeCase{3, 2, true},
                      ExchangeCase{5, 3, false}, ExchangeCase{5, 1, true},
                      ExchangeCase{2, 1, true, 1},
                      ExchangeCase{4, 1, true, 3 * 8192 + 100},
                      ExchangeCase{4, 2, false, 3 * 8192 + 100},
                      ExchangeCase{5, 1, true, 1},
                      ExchangeCase{3, 1, true, 1, 1},
                      ExchangeCase{4, 2, true, 3 * 8192 + 100, 2},
                      ExchangeCase{2, 1, false, 3 * 8192 + 100, 1},
                      ExchangeCase{3, 2, true, size_t{64} << 20, 7},
                      ExchangeCase{5, 1, true, 1, 3}),
    CaseName);

// Note [Server lanes]: a shard deals its blocks to the lanes in turn (in
// the partition's order), so exchanges of one block each (a net's small
// layers) are taken side by side rather than all on the first lane.
// Three lanes, six one-block exchanges: every lane's take and send
// threads record two blocks.
TEST(ParamServerLanesTest, OneBlockExchangesGoToTheLanesInTurn) {
  LoopbackWorld world(2);
  const std::vector<size_t> blobs(6, 100);
  RunRanks(&world, [&](Communicator* comm) {
    // One shard: rank 0 serves every block.
    const BlockPartition part(blobs, sizeof(float), 1 << 20, 1);
    ParamServerOptions options;
    options.roles = {{0, 1}, {0}};
    options.server_lanes = 3;
    Timeline timeline(comm->rank(), StrCat("rank ", comm->rank()));
    {
      ParamServer<float> server(comm, &part, options, &timeline);
      std::vector<float> grad(600, 1.0f);
      std::vector<std::future<Status>> done;
      for (int blob = 0; blob < 6; ++blob) {
        const int id = part.blob_blocks(blob)[0];
        auto promise = std::make_shared<std::promise<Status>>();
        done.push_back(promise->get_future());
        server.Exchange(0, {{id, grad.data() + 100 * blob}},
                        [promise](Status s) { promise->set_value(s); });
      }
      for (auto& f : done) {
        const Status s = f.get();
        ASSERT_TRUE(s.ok()) << s.message();
      }
      for (float v : grad) ASSERT_EQ(v, 2.0f);
    }
    if (comm->rank() != 0) return;
    for (int lane = 0; lane < 3; ++lane) {
      EXPECT_EQ(
          test::CountTimelineEvents(&timeline, StrCat("server ", lane), "sum"),
          2)
          << "lane " << lane << ": " << timeline.ToJson();
      EXPECT_EQ(test::CountTimelineEvents(&timeline,
                                          StrCat("server send ", lane), "send"),
                2)
          << "lane " << lane << ": " << timeline.ToJson();
    }
  });
}

TEST(ParamServerLanesTest, NoLanesIsAConfigError) {
  LoopbackWorld world(1);
  const BlockPartition part({1000}, sizeof(float), 1024, 1);
  ParamServerOptions options;
  options.server_lanes = 0;
  const std::string error = test::ErrorOf<ConfigError>(
      [&] { ParamServer<float> server(world.rank(0), &part, options); });
  EXPECT_TRUE(test::Contains(error, "server_lanes must be >= 1, got 0"));
}

// A value whose float sum over three or more ranks depends on their order
// in every element: one rank adds 1e8, one -1e8 and one a small number,
// which an earlier 1e8 rounds away.
float OrderTerm(int rank, size_t i) {
  switch ((rank + i) % 3) {
    case 0: return 1e8f;
    case 1: return -1e8f;
    default: return 1.0f + 0.001f * static_cast<float>(i % 1000);
  }
}

struct RolesCase {
  std::string name;
  int ranks;
  PsRoles roles;
  bool update;  // the shards apply v -> 0.5 v + iter before sending
};

class ParamServerRolesTest : public ::testing::TestWithParam<RolesCase> {};

// Workers post exchanges, dedicated server ranks serve them (Serve), and
// colocated ones serve within Exchange: every worker ends with the sum in
// the roles' worker order (then the update, if any), the same bits on
// every worker, for two iterations of two exchanges each. A dedicated
// server moves bytes; a rank that is neither worker nor server is idle.
TEST_P(ParamServerRolesTest, WorkersGetTheWorkerOrderSum) {
  const RolesCase c = GetParam();
  LoopbackOptions loopback;
  loopback.timeout = std::chrono::seconds(20);
  LoopbackWorld world(c.ranks, loopback);
  const std::vector<size_t> blobs = {30000, 777, 12000};
  const size_t total = 30000 + 777 + 12000;
  const std::vector<size_t> start = {0, 30000, 30777};
  const std::vector<std::vector<int>> groups = {{0}, {1, 2}};
  RunRanks(&world, [&](Communicator* comm) {
    const BlockPartition part(blobs, sizeof(float), 8192,
                              static_cast<int>(c.roles.servers.size()));
    ParamServerOptions options;
    options.roles = c.roles;
    ParamServer<float>::Update update;
    if (c.update) {
      update = [&part](int64_t iter, int block, float* v) {
        for (size_t i = 0; i < part.blocks()[block].count; ++i) {
          v[i] = 0.5f * v[i] + static_cast<float>(iter);
        }
      };
    }
    ParamServer<float> server(comm, &part, options, nullptr, update);
    const bool worker =
        std::count(c.roles.workers.begin(), c.roles.workers.end(),
                   comm->rank()) > 0;
    const bool hosts =
        std::count(c.roles.servers.begin(), c.roles.servers.end(),
                   comm->rank()) > 0;
    EXPECT_EQ(server.is_worker(), worker);
    EXPECT_EQ(server.shard() >= 0, hosts);
    for (int64_t iter = 0; iter < 2; ++iter) {
      std::vector<float> grad(total);
      for (size_t i = 0; i < total; ++i) {
        grad[i] = OrderTerm(comm->rank(), i + iter);
      }
      std::vector<std::future<Status>> done;
      for (const auto& group : groups) {
        std::vector<ParamServer<float>::BlockRef> refs;
        std::vector<int> ids;
        for (int blob : group) {
          for (int id : part.blob_blocks(blob)) {
            refs.push_back(
                {id, grad.data() + start[blob] + part.blocks()[id].offset});
            ids.push_back(id);
          }
        }
        auto promise = std::make_shared<std::promise<Status>>();
        done.push_back(promise->get_future());
        auto report = [promise](Status s) { promise->set_value(s); };
        if (worker) {
          server.Exchange(iter, refs, report);
        } else if (hosts) {
          server.Serve(iter, ids, report);
        } else {
          report(Status::OK());
        }
      }
      for (auto& f : done) {
        const Status s = f.get();
        ASSERT_TRUE(s.ok()) << s.message();
      }
      if (!worker) continue;
      for (size_t i = 0; i < total; ++i) {
        float want = OrderTerm(c.roles.workers[0], i + iter);
        for (size_t w = 1; w < c.roles.workers.size(); ++w) {
          want = want + OrderTerm(c.roles.workers[w], i + iter);
        }
        if (c.update) want = 0.5f * want + static_cast<float>(iter);
        ASSERT_EQ(std::memcmp(&want, &grad[i], sizeof(float)), 0)
            << "rank " << comm->rank() << " element " << i << ": " << grad[i]
            << ", want " << want;
      }
    }
    if (hosts) {
      EXPECT_GT(server.bytes_moved(), 0u) << "rank " << comm->rank();
    } else if (!worker) {
      EXPECT_EQ(server.bytes_moved(), 0u) << "rank " << comm->rank();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Roles, ParamServerRolesTest,
    ::testing::Values(
        RolesCase{"one_worker_one_server", 2, {{0}, {1}}, false},
        RolesCase{"two_workers_one_server", 3, {{0, 1}, {2}}, false},
        RolesCase{"two_workers_two_servers_update", 4, {{0, 1}, {2, 3}},
                  true},
        RolesCase{"colocated_subset_reversed", 3, {{0, 1, 2}, {2, 1}}, true},
        RolesCase{"workers_out_of_rank_order", 5, {{4, 2, 3}, {0, 1}}, false},
        RolesCase{"an_idle_rank", 4, {{1, 2}, {3}}, true}),
    [](const ::testing::TestParamInfo<RolesCase>& info) {
      return info.param.name;
    });

// Roles that are not ranks of the job, repeat a rank, or disagree with the
// partition's shards are configuration errors that say which.
TEST(ParamServerRolesTest, BadRolesAreConfigErrors) {
  LoopbackWorld world(3);
  Communicator* comm = world.rank(0);
  const BlockPartition two({1000}, sizeof(float), 1024, 2);
  const struct {
    PsRoles roles;
    std::string message;
  } cases[] = {
      {{{0, 3}, {1, 2}}, "parameter server worker rank 3 is not a rank of "
                         "the job's 3"},
      {{{0, 1}, {2, 2}}, "parameter server server rank 2 is named twice"},
      {{{0, 1}, {-1, 2}}, "parameter server server rank -1 is not a rank"},
      {{{0, 1}, {2}}, "the parameter partition has 2 shards for 1 server "
                      "ranks"},
      {{{0}, {}}, "the parameter partition has 2 shards for 3 server ranks"},
  };
  for (const auto& bad : cases) {
    ParamServerOptions options;
    options.roles = bad.roles;
    try {
      ParamServer<float> server(comm, &two, options);
      ADD_FAILURE() << "no error for " << bad.message;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(bad.message), std::string::npos)
          << e.what();
    }
  }
}

// Forwards to a loopback rank and records the largest batch of pushes
// (SendAll) and of sums received (RecvAll) that this rank put in flight;
// with `fail_pulls`, fails every batch of sums received instead.
class BatchRecorder final : public ForwardingCommunicator {
 public:
  explicit BatchRecorder(Communicator* inner, bool fail_pulls = false)
      : ForwardingCommunicator(inner), fail_pulls_(fail_pulls) {}
  Status RecvAll(const std::vector<RecvOp>& ops) override {
    if (!ops.empty() && ops[0].tag >= kPullTagBase) {
      Note(&max_pulls_, ops);
      if (fail_pulls_) return Status::Failure("injected failure");
    }
    return ForwardingCommunicator::RecvAll(ops);
  }
  Status SendAll(const std::vector<SendOp>& ops) override {
    if (!ops.empty() && ops[0].tag < kPullTagBase) Note(&max_pushes_, ops);
    return ForwardingCommunicator::SendAll(ops);
  }

  size_t max_pushes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_pushes_;
  }
  size_t max_pulls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_pulls_;
  }

 private:
  template <typename Op>
  void Note(size_t* max, const std::vector<Op>& ops) {
    std::lock_guard<std::mutex> lock(mu_);
    *max = std::max(*max, ops.size());
  }
  const bool fail_pulls_;
  mutable std::mutex mu_;
  size_t max_pushes_ = 0;  // GUARDED_BY(mu_)
  size_t max_pulls_ = 0;   // GUARDED_BY(mu_)
};

// With room for three blocks' messages, a thread's pushes and pulls go out
// three at a time (the first windows of 12 blocks); with room for one, one
// at a time. The sums are right either way.
TEST(ParamServerWindowTest, ThreadsKeepAWindowOfBlocksInFlight) {
  for (const size_t blocks_per_window : {1, 3}) {
    SCOPED_TRACE(::testing::Message() << blocks_per_window << " per window");
    LoopbackOptions loopback;
    loopback.synchronous_send = true;
    loopback.timeout = std::chrono::seconds(20);
    LoopbackWorld world(2, loopback);
    RunRanks(&world, [&](Communicator* inner) {
      BatchRecorder comm(inner);
      // 12 blocks of 1000 floats, 6 per shard.
      const BlockPartition part({12000}, sizeof(float), 4000, 2);
      ASSERT_EQ(part.blocks().size(), 12u);
      ParamServerOptions options;
      options.bytes_in_flight = blocks_per_window * MessageBytes(part, 0);
      std::vector<float> grad(12000, 1.0f + comm.rank());
      {
        ParamServer<float> server(&comm, &part, options);
        std::vector<Ref> refs;
        for (size_t b = 0; b < 12; ++b) {
          refs.push_back({static_cast<int>(b),
                          grad.data() + part.blocks()[b].offset});
        }
        std::promise<Status> done;
        server.Exchange(0, refs, [&done](Status s) { done.set_value(s); });
        const Status s = done.get_future().get();
        ASSERT_TRUE(s.ok()) << s.message();
      }
      EXPECT_EQ(comm.max_pushes(), blocks_per_window);
      EXPECT_EQ(comm.max_pulls(), blocks_per_window);
      for (size_t i = 0; i < grad.size(); ++i) {
        ASSERT_EQ(grad[i], 3.0f) << "rank " << comm.rank() << " element " << i;
      }
    });
  }
}

// Note [Windows across exchanges]: exchanges of one iteration queued while
// a thread is busy share its windows. Rank 1 posts late, so rank 0's pull
// thread waits on the first of three one-block exchanges while the other
// two queue behind it, then pulls both in one window; with
// POSEIDON_PS_WINDOWS=exchange each exchange has its own windows.
TEST(ParamServerWindowTest, ExchangesQueuedBehindABusyThreadShareWindows) {
  for (const bool per_exchange : {false, true}) {
    SCOPED_TRACE(per_exchange ? "windows per exchange" : "shared windows");
    if (per_exchange) {
      ::setenv("POSEIDON_PS_WINDOWS", "exchange", 1);
    } else {
      ::unsetenv("POSEIDON_PS_WINDOWS");
    }
    LoopbackWorld world(2);
    RunRanks(&world, [&](Communicator* inner) {
      BatchRecorder comm(inner);
      const BlockPartition part(std::vector<size_t>(3, 100), sizeof(float),
                                1 << 20, 2);
      std::vector<float> grad(300, 1.0f + comm.rank());
      {
        ParamServer<float> server(&comm, &part, ParamServerOptions());
        if (comm.rank() == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
        std::vector<std::future<Status>> done;
        for (int blob = 0; blob < 3; ++blob) {
          auto promise = std::make_shared<std::promise<Status>>();
          done.push_back(promise->get_future());
          server.Exchange(0, {{part.blob_blocks(blob)[0],
                               grad.data() + 100 * blob}},
                          [promise](Status s) { promise->set_value(s); });
        }
        for (auto& f : done) {
          const Status s = f.get();
          ASSERT_TRUE(s.ok()) << s.message();
        }
      }
      for (const float v : grad) ASSERT_EQ(v, 3.0f);
      if (comm.rank() == 0) {
        if (per_exchange) {
          EXPECT_EQ(comm.max_pulls(), 1u);
        } else {
          EXPECT_GE(comm.max_pulls(), 2u);
        }
      }
    });
  }
  ::unsetenv("POSEIDON_PS_WINDOWS");
}

// A failed pull names the blocks of its window, the iteration and their
// shards, then what failed: one block (this rank's own shard first in the
// staggered order), or three blocks of two shards.
TEST(ParamServerWindowTest, AFailedWindowNamesItsBlocksAndShards) {
  for (const size_t blocks_per_window : {1, 3}) {
    SCOPED_TRACE(::testing::Message() << blocks_per_window << " per window");
    LoopbackOptions loopback;
    loopback.timeout = std::chrono::seconds(20);
    LoopbackWorld world(2, loopback);
    RunRanks(&world, [&](Communicator* inner) {
      BatchRecorder comm(inner, /*fail_pulls=*/true);
      const BlockPartition part({12000}, sizeof(float), 4000, 2);
      ParamServerOptions options;
      options.bytes_in_flight = blocks_per_window * MessageBytes(part, 0);
      std::vector<float> grad(12000, 1.0f);
      std::vector<Ref> refs;
      for (size_t b = 0; b < 12; ++b) {
        refs.push_back(
            {static_cast<int>(b), grad.data() + part.blocks()[b].offset});
      }
      const std::vector<Ref> order =
          ParamServer<float>::StaggeredOrder(part, refs, comm.rank());
      Status s;
      {
        ParamServer<float> server(&comm, &part, options);
        std::promise<Status> done;
        server.Exchange(4, refs, [&done](Status st) { done.set_value(st); });
        s = done.get_future().get();
      }
      ASSERT_FALSE(s.ok());
      std::string want;
      if (blocks_per_window == 1) {
        want = StrCat("pull of block ", order[0].id,
                      " (iteration 4) from the shard of rank ", comm.rank(),
                      ": injected failure");
      } else {
        want = StrCat("pull of blocks ", order[0].id, ", ", order[1].id,
                      " and ", order[2].id,
                      " (iteration 4) from the shards of ranks ",
                      part.blocks()[order[0].id].shard, " and ",
                      part.blocks()[order[1].id].shard, ": injected failure");
      }
      EXPECT_EQ(s.message(), want);
    });
  }
}

// Note [Own worker's windows]: worker 0 hosts shard 0, rank 1 serves shard
// 1. Worker 0's pull of its shard-1 block is held past the deadline (as
// behind a cut link), so its own shard cannot hand it the next block's sum.
// The shard's error names the rank behind the stall, not only "rank 0 to
// receive". Rank 1's sums are held back as long, so that rank 0's shard,
// whose send starts at once, is the first to give up.
class HeldMessages final : public ForwardingCommunicator {
 public:
  HeldMessages(Communicator* inner, std::chrono::milliseconds hold)
      : ForwardingCommunicator(inner), hold_(hold) {}
  Status RecvAll(const std::vector<RecvOp>& ops) override {
    for (const RecvOp& op : ops) {
      if (op.tag >= kPullTagBase && op.src != rank()) {
        std::this_thread::sleep_for(hold_);
        break;
      }
    }
    return ForwardingCommunicator::RecvAll(ops);
  }
  Status SendAll(const std::vector<SendOp>& ops) override {
    for (const SendOp& op : ops) {
      if (op.tag >= kPullTagBase && op.dest != rank()) {
        std::this_thread::sleep_for(hold_);
        break;
      }
    }
    return ForwardingCommunicator::SendAll(ops);
  }
  void Abort(const std::string& why) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (first_abort_.empty()) first_abort_ = why;
    }
    ForwardingCommunicator::Abort(why);
  }
  std::string first_abort() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_abort_;
  }

 private:
  const std::chrono::milliseconds hold_;
  mutable std::mutex mu_;
  std::string first_abort_;  // GUARDED_BY(mu_)
};

TEST(ParamServerWindowTest, AShardStuckOnItsOwnRankNamesWhatThatRankWaitsOn) {
  LoopbackOptions loopback;
  loopback.synchronous_send = true;
  loopback.timeout = std::chrono::milliseconds(500);
  LoopbackWorld world(2, loopback);
  std::string abort0;
  RunRanks(&world, [&](Communicator* inner) {
    const bool worker = inner->rank() == 0;
    HeldMessages comm(inner, std::chrono::milliseconds(1200));
    // 4 blocks of 1000 floats, 2 per shard: worker 0 pulls shard 0's first
    // block, then shard 1's (held), then shard 0's second.
    const BlockPartition part({4000}, sizeof(float), 4000, 2);
    ParamServerOptions options;
    options.roles = PsRoles{{0}, {0, 1}};
    options.bytes_in_flight = MessageBytes(part, 0);
    std::vector<float> grad(4000, 1.0f);
    std::vector<Ref> refs;
    for (size_t b = 0; b < 4; ++b) {
      refs.push_back(
          {static_cast<int>(b), grad.data() + part.blocks()[b].offset});
    }
    {
      ParamServer<float> server(&comm, &part, options);
      std::promise<Status> done;
      auto report = [&done](Status st) { done.set_value(st); };
      if (worker) {
        server.Exchange(7, refs, report);
      } else {
        server.Serve(7, {0, 1, 2, 3}, report);
      }
      // Rank 1's Serve reports once its sums are handed to its send thread.
      const Status s = done.get_future().get();
      if (worker) EXPECT_FALSE(s.ok());
    }
    if (worker) abort0 = comm.first_abort();
  });
  EXPECT_NE(abort0.find("parameter server shard of rank 0: sending the sum"),
            std::string::npos)
      << abort0;
  EXPECT_NE(abort0.find("timed out after 0.5 s waiting for rank 0"),
            std::string::npos)
      << abort0;
  EXPECT_NE(abort0.find("; this rank's own pull of block "), std::string::npos)
      << abort0;
  EXPECT_NE(abort0.find("(iteration 7) from the shard of rank 1 was in flight"),
            std::string::npos)
      << abort0;
}

}  // namespace
}  // namespace dist
}  // namespace poseidon
