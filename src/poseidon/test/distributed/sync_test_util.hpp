// Shared by the synchroniser's tests (test_synchronizer.cpp,
// test_host_level.cpp): a small LMDB, a net over it, solvers, and training
// on several ranks of a LoopbackWorld (one thread per rank) against one
// rank with the whole batch.
#ifndef POSEIDON_TEST_DIST_SYNC_TEST_UTIL_HPP_
#define POSEIDON_TEST_DIST_SYNC_TEST_UTIL_HPP_

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "poseidon/distributed/loopback_communicator.hpp"
#include "poseidon/distributed/synchronizer.hpp"
#include "poseidon/solver_factory.hpp"
#include "poseidon/util/db.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace dist {
namespace sync_test {

constexpr int kRecords = 64;
constexpr int kClasses = 4;

// 64 records of 1 x 4 x 4 float data, labels cycling through 4 classes.
inline const std::string& TestLmdb() {
  static const std::string path = [] {
    const std::string p = test::MakeTempDir() + "/sync_lmdb";
    db::Writer writer("lmdb", p);
    std::mt19937 gen(99);
    std::normal_distribution<float> noise(0.f, 1.f);
    for (int i = 0; i < kRecords; ++i) {
      Datum d;
      d.set_channels(1);
      d.set_height(4);
      d.set_width(4);
      d.set_label(i % kClasses);
      for (int k = 0; k < 16; ++k) {
        d.add_float_data(noise(gen) + 0.5f * (i % kClasses) * (k % 3));
      }
      char key[16];
      std::snprintf(key, sizeof(key), "%08d", i);
      writer.Put(key, d.SerializeAsString());
    }
    writer.Finish();
    return p;
  }();
  return path;
}

inline std::string TrainNet(int batch, int ip1_outputs = 6) {
  return StrCat(
      "name: 'sync_net' "
      "layer { name: 'data' type: 'Data' top: 'data' top: 'label' "
      "  data_param { source: '", TestLmdb(), "' batch_size: ", batch,
      " } } "
      "layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv' "
      "  convolution_param { num_output: 3 kernel_size: 3 "
      "    weight_filler { type: 'gaussian' std: 0.3 } "
      "    bias_filler { type: 'constant' value: 0.1 } } } "
      "layer { name: 'relu' type: 'ReLU' bottom: 'conv' top: 'conv' } "
      "layer { name: 'ip1' type: 'InnerProduct' bottom: 'conv' top: 'ip1' "
      "  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }"
      "  inner_product_param { num_output: ", ip1_outputs,
      "    weight_filler { type: 'gaussian' std: 0.3 } "
      "    bias_filler { type: 'constant' value: 0.1 } } } "
      "layer { name: 'tanh' type: 'TanH' bottom: 'ip1' top: 'ip1' } "
      "layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2' "
      "  param { lr_mult: 0.5 decay_mult: 2 } "
      "  inner_product_param { num_output: ", kClasses,
      "    weight_filler { type: 'gaussian' std: 0.3 } "
      "    bias_filler { type: 'constant' value: 0.1 } } } "
      "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' "
      "  bottom: 'label' top: 'loss' } "
      "layer { name: 'acc' type: 'Accuracy' bottom: 'ip2' bottom: 'label' "
      "  top: 'acc' include { phase: TEST } } ");
}

inline std::string SolverExtras(const std::string& type) {
  std::string s = StrCat("type: '", type, "' ");
  if (type == "SGD" || type == "Nesterov") s += "momentum: 0.9 ";
  if (type == "RMSProp") s += "rms_decay: 0.98 ";
  if (type == "AdaDelta") s += "momentum: 0.95 delta: 1e-6 ";
  if (type == "Adam") s += "momentum: 0.9 momentum2: 0.999 delta: 1e-8 ";
  return s;
}

inline SolverParameter MakeSolver(const std::string& type, int batch,
                           const std::string& extra = "",
                           int ip1_outputs = 6) {
  SolverParameter param;
  ReadProtoFromTextString(
      StrCat("net_param { ", TrainNet(batch, ip1_outputs), " } ",
             SolverExtras(type),
             "base_lr: 0.05 lr_policy: 'step' gamma: 0.5 stepsize: 2 "
             "weight_decay: 0.01 max_iter: 100 random_seed: 7 display: 0 "
             "snapshot_after_train: false ",
             extra),
      "synchronizer test", &param);
  return param;
}

template <typename Dtype>
using Weights = std::vector<std::vector<Dtype>>;

template <typename Dtype>
Weights<Dtype> ReadWeights(const Solver<Dtype>& solver) {
  Weights<Dtype> out;
  for (Blob<Dtype>* b : solver.net()->learnable_params()) {
    out.emplace_back(b->cpu_data(), b->cpu_data() + b->count());
  }
  return out;
}

template <typename Dtype>
Weights<Dtype> TrainAlone(const SolverParameter& param, int iters) {
  std::unique_ptr<Solver<Dtype>> solver = CreateSolver<Dtype>(param);
  solver->Step(iters);
  return ReadWeights(*solver);
}

// Runs `fn(rank, comm)` on `ranks` threads; rethrows the first failure.
inline void RunRanks(int ranks,
                     const std::function<void(int, Communicator*)>& fn,
                     LoopbackOptions options = {}) {
  LoopbackWorld world(ranks, options);
  std::vector<std::thread> threads;
  std::mutex mu;
  std::exception_ptr failure;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r, world.rank(r));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
        world.rank(r)->Abort("a rank failed");
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

// Trains `ranks` replicas with batch `batch` each; returns every rank's
// weights.
template <typename Dtype>
std::vector<Weights<Dtype>> TrainTogether(
    const SolverParameter& param, const DistributedParameter& dist, int ranks,
    int iters, LoopbackOptions options = {}) {
  std::vector<Weights<Dtype>> out(ranks);
  RunRanks(
      ranks,
      [&](int r, Communicator* comm) {
        Poseidon::set_data_shard({r, ranks, false});
        std::unique_ptr<Solver<Dtype>> solver = CreateSolver<Dtype>(param);
        Synchronizer<Dtype> sync(solver.get(), comm, dist);
        solver->Step(iters);
        out[r] = ReadWeights(*solver);
      },
      options);
  return out;
}

// Ranks emulated on hosts of `ranks_per_host` ranks each (the host level,
// Note [Host level]).
inline LoopbackOptions Hosts(int ranks_per_host) {
  LoopbackOptions options;
  options.ranks_per_host = ranks_per_host;
  return options;
}

inline LoopbackOptions OneHost() {
  LoopbackOptions options;
  options.shared_memory = true;
  return options;
}

template <typename Dtype>
void ExpectReplicasIdentical(const std::vector<Weights<Dtype>>& ranks) {
  for (size_t r = 1; r < ranks.size(); ++r) {
    for (size_t p = 0; p < ranks[0].size(); ++p) {
      for (size_t i = 0; i < ranks[0][p].size(); ++i) {
        ASSERT_EQ(ranks[0][p][i], ranks[r][p][i])
            << "rank " << r << " differs from rank 0 in param " << p
            << " element " << i;
      }
    }
  }
}

template <typename Dtype>
void ExpectClose(const Weights<Dtype>& alone, const Weights<Dtype>& together,
                 double rel, const std::string& what) {
  ASSERT_EQ(alone.size(), together.size());
  double worst = 0;
  for (size_t p = 0; p < alone.size(); ++p) {
    for (size_t i = 0; i < alone[p].size(); ++i) {
      const double a = alone[p][i];
      const double b = together[p][i];
      const double err = std::fabs(a - b) / (1.0 + std::fabs(a));
      worst = std::max(worst, err);
      ASSERT_LE(err, rel) << what << ": param " << p << " element " << i
                          << ": one rank " << a << ", distributed " << b;
    }
  }
  // The runs must not be identical by accident of nothing moving.
  EXPECT_GT(alone.size(), 0u) << what;
}

inline DistributedParameter Dist(DistributedParameter::CommType comm,
                          const std::string& extra = "") {
  DistributedParameter d;
  ReadProtoFromTextString(extra, "distributed test", &d);
  d.set_comm(comm);
  return d;
}

}  // namespace sync_test
}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_TEST_DIST_SYNC_TEST_UTIL_HPP_
