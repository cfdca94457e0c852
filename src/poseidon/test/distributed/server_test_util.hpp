// What the tests of the servers' update share (test_server_update.cpp,
// test_server_clip.cpp): training a loopback job of workers, colocated or
// with dedicated servers, and comparing what it ends with.
#ifndef POSEIDON_TEST_DISTRIBUTED_SERVER_TEST_UTIL_HPP_
#define POSEIDON_TEST_DISTRIBUTED_SERVER_TEST_UTIL_HPP_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "poseidon/distributed/server_process.hpp"
#include "poseidon/distributed/tags.hpp"
#include "poseidon/solvers/sgd_solver.hpp"
#include "sync_test_util.hpp"

namespace poseidon {
namespace dist {
namespace server_test {

using namespace sync_test;  // NOLINT(build/namespaces)

template <typename Dtype>
struct Outcome {
  std::vector<Weights<Dtype>> weights;  // per rank
  Weights<Dtype> history;               // rank 0's, gathered
  // Per rank: the history blobs that hold memory (a worker never allocates
  // the history of the params the servers update, rank 0 only gathers it
  // for a snapshot).
  std::vector<int> allocated_history;
  std::vector<std::string> reasons;  // rank 0's plan
};

// Runs fn(r, comm, dedicated) on each of `workers` worker ranks of a
// loopback job; with `servers` > 0 the job has that many dedicated server
// ranks after the workers (Note [Dedicated servers]), `comm` holds the
// workers only and `dedicated` names the job and the roles; otherwise
// every worker hosts a shard and `dedicated` is empty.
inline void RunWorkers(
    int workers, int servers,
    const std::function<void(int, Communicator*, DedicatedServers)>& fn,
    LoopbackOptions options = {}) {
  PsRoles roles;
  for (int r = 0; r < workers; ++r) roles.workers.push_back(r);
  for (int s = 0; s < servers; ++s) roles.servers.push_back(workers + s);
  RunRanks(
      workers + servers,
      [&](int r, Communicator* job) {
        if (servers == 0) {
          fn(r, job, {});
          return;
        }
        std::unique_ptr<Communicator> comm =
            job->Split(r < workers ? 0 : 1, r, job->timeout());
        if (r >= workers) {
          const Status s = RunDedicatedServer(job, 0);
          ASSERT_TRUE(s.ok()) << s.message();
          return;
        }
        fn(r, comm.get(), {job, roles});
      },
      options);
}

// Trains `ranks` worker ranks; each worker's weights and worker 0's solver
// history at the end (gathered from the servers, as before a snapshot).
// `between`, if set, runs on every worker after the first half of the
// iterations, before the second Step. With `servers` > 0 the job has that
// many dedicated server ranks after the workers (Note [Dedicated
// servers]); otherwise every worker hosts a shard.
template <typename Dtype>
Outcome<Dtype> Train(const SolverParameter& param,
                     const DistributedParameter& dist, int ranks, int iters,
                     std::function<void(Solver<Dtype>*)> between = {},
                     int servers = 0, LoopbackOptions options = {}) {
  Outcome<Dtype> out;
  out.weights.resize(ranks);
  out.allocated_history.resize(ranks);
  RunWorkers(
      ranks, servers,
      [&](int r, Communicator* comm, DedicatedServers dedicated) {
        Poseidon::set_data_shard({r, ranks, false});
        std::unique_ptr<Solver<Dtype>> solver = CreateSolver<Dtype>(param);
        Synchronizer<Dtype> sync(solver.get(), comm, dist, nullptr, {},
                                 dedicated);
        if (between) {
          solver->Step(iters / 2);
          between(solver.get());
          solver->Step(iters - iters / 2);
        } else {
          solver->Step(iters);
        }
        solver->SyncState();
        out.weights[r] = ReadWeights(*solver);
        for (const auto& h :
             dynamic_cast<SGDSolver<Dtype>&>(*solver).history()) {
          if (h->data()->head() != SyncedMemory::UNINITIALIZED) {
            ++out.allocated_history[r];
          }
          if (r == 0) {
            out.history.emplace_back(h->cpu_data(), h->cpu_data() + h->count());
          }
        }
        if (r == 0) {
          for (const PlannedLayer& p : sync.plan())
            out.reasons.push_back(p.reason);
        }
      },
      options);
  return out;
}

template <typename Dtype>
void ExpectIdentical(const Weights<Dtype>& a, const Weights<Dtype>& b,
                     const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t p = 0; p < a.size(); ++p) {
    ASSERT_EQ(a[p].size(), b[p].size()) << what << " " << p;
    for (size_t i = 0; i < a[p].size(); ++i) {
      ASSERT_EQ(a[p][i], b[p][i]) << what << " " << p << " element " << i;
    }
  }
}

// The largest difference between two ranks' weights, element for element.
template <typename Dtype>
double LargestDifference(const Weights<Dtype>& a, const Weights<Dtype>& b) {
  double largest = 0;
  for (size_t p = 0; p < a.size() && p < b.size(); ++p) {
    for (size_t i = 0; i < a[p].size() && i < b[p].size(); ++i) {
      largest =
          std::max(largest, static_cast<double>(std::fabs(a[p][i] - b[p][i])));
    }
  }
  return largest;
}

// Two snapshots' solver histories are equal element for element, and not
// all zero.
inline void ExpectSameHistory(const SolverState& a, const SolverState& b) {
  ASSERT_EQ(a.history_size(), b.history_size());
  ASSERT_GT(a.history_size(), 0);
  double largest = 0;
  for (int i = 0; i < a.history_size(); ++i) {
    ASSERT_EQ(a.history(i).double_data_size(), b.history(i).double_data_size());
    for (int k = 0; k < a.history(i).double_data_size(); ++k) {
      ASSERT_EQ(a.history(i).double_data(k), b.history(i).double_data(k))
          << "history blob " << i << " element " << k;
      largest = std::max(largest, std::fabs(a.history(i).double_data(k)));
    }
  }
  EXPECT_GT(largest, 0) << "the snapshot's history is all zero";
}

inline DistributedParameter PsDist(bool server_update, const std::string& extra = "") {
  DistributedParameter d =
      Dist(DistributedParameter::PS,
           "block_size: 64 num_push_threads: 2 num_pull_threads: 2 " + extra);
  d.set_server_update(server_update);
  return d;
}

inline void ExpectServersMatchWorkers(
    const SolverParameter& param, int ranks, int iters,
    const std::string& extra, const std::string& what,
    std::function<void(Solver<double>*)> between = {},
    LoopbackOptions options = {}) {
  const Outcome<double> servers = Train<double>(
      param, PsDist(true, extra), ranks, iters, between, 0, options);
  const Outcome<double> workers = Train<double>(
      param, PsDist(false, extra), ranks, iters, between, 0, options);
  ExpectReplicasIdentical(servers.weights);
  ExpectIdentical(servers.weights[0], workers.weights[0], what + " weights");
  ExpectIdentical(servers.history, workers.history, what + " history");
  for (const std::string& reason : servers.reasons) {
    EXPECT_NE(reason.find("(updated on the servers)"), std::string::npos)
        << what << ": " << reason;
  }
  for (const std::string& reason : workers.reasons) {
    EXPECT_EQ(reason.find("(updated on the servers)"), std::string::npos)
        << what << ": " << reason;
  }
  // Training moved the weights: the servers updated them, the workers did
  // not (they skip the update of server-owned params).
  EXPECT_GT(LargestDifference(TrainAlone<double>(param, 0), servers.weights[0]),
            1e-4)
      << what;
}

// `workers` workers (2 by default; on emulated hosts of `ranks_per_host`
// ranks, when set) and a dedicated server, the last rank, that takes the
// plan and is gone: each worker's error, and the seconds the job took.
inline std::pair<std::vector<std::string>, double> TrainWithASilentServer(
    const SolverParameter& param, int workers = 2, int ranks_per_host = 0) {
  LoopbackOptions options;
  options.timeout = std::chrono::seconds(5);
  options.ranks_per_host = ranks_per_host;
  LoopbackWorld world(workers + 1, options);
  PsRoles roles;
  for (int r = 0; r < workers; ++r) roles.workers.push_back(r);
  roles.servers = {workers};
  std::vector<std::string> errors(workers);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r <= workers; ++r) {
    threads.emplace_back([&, r] {
      Communicator* job = world.rank(r);
      std::unique_ptr<Communicator> comm =
          job->Split(r < workers ? 0 : 1, r, job->timeout());
      if (r == workers) {
        // Takes the plan (however long the workers' set-up takes, as a
        // server does), then is gone.
        uint64_t size = 0;
        bool got = false;
        for (int tries = 0; tries < 12 && !got; ++tries) {
          got = job->Recv(&size, sizeof(size), 0, kServerTag).ok();
        }
        ASSERT_TRUE(got);
        std::string plan(size, '\0');
        ASSERT_TRUE(job->Recv(plan.data(), size, 0, kServerTag).ok());
        return;
      }
      Poseidon::set_data_shard({r, workers, false});
      auto solver = CreateSolver<double>(param);
      try {
        Synchronizer<double> sync(solver.get(), comm.get(), PsDist(true),
                                  nullptr, {}, {job, roles});
        solver->Step(2);
      } catch (const DistributedError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return {errors, std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - start)
                      .count()};
}

}  // namespace server_test
}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_TEST_DISTRIBUTED_SERVER_TEST_UTIL_HPP_
