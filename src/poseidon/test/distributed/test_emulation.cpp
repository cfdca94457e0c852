// The emulated-cluster support (util/emulation.hpp): time dilation, shared-
// memory regions, and a Trainer whose parameters live in shared memory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>

#include "poseidon/distributed/trainer.hpp"
#include "poseidon/solvers/sgd_solver.hpp"
#include "poseidon/util/emulation.hpp"
#include "poseidon/util/io.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

double Wall() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double ThreadCpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Spins for about `seconds` of this thread's CPU time.
void Spin(double seconds) {
  const double end = ThreadCpu() + seconds;
  volatile double x = 0;
  while (ThreadCpu() < end) {
    for (int i = 0; i < 1000; ++i) x = x + 1e-9;
  }
}

// Restores the process-wide dilation when a test ends.
class DilationGuard {
 public:
  ~DilationGuard() { emulation::SetDilation(1); }
};

TEST(EmulationTest, DilationStretchesComputeToKTimesItsCpuTime) {
  DilationGuard guard;
  EXPECT_EQ(emulation::Dilation(), 1.0);
  EXPECT_THROW(emulation::SetDilation(0.5), ConfigError);
  EXPECT_THROW(emulation::SetDilation(2000), ConfigError);
  emulation::SetDilation(4);
  double cpu = 0, wall = 0;
  {
    const double w0 = Wall(), c0 = ThreadCpu();
    {
      emulation::DilatedCompute dilated;
      Spin(0.02);
    }
    cpu = ThreadCpu() - c0;
    wall = Wall() - w0;
  }
  // k times the CPU time, less the millisecond that may stay owed.
  EXPECT_GE(wall, 4 * cpu - 3e-3) << "cpu " << cpu << " s";
}

TEST(EmulationTest, SectionsOweKTimesTheirCpuTimeLessTheirWallTime) {
  double debt = 0, overrun = 0;
  // No dilation: never a sleep, whatever the section took.
  EXPECT_EQ(emulation::SleepAfterSection(1, 0.5, 0.1, &debt, &overrun), 0);
  EXPECT_EQ(emulation::SleepAfterSection(1, 0.1, 5.0, &debt, &overrun), 0);
  EXPECT_EQ(debt, 0);
  EXPECT_EQ(overrun, 0);
  // k = 4: 10 ms of CPU in 10 ms of wall time owes 30 ms.
  EXPECT_NEAR(emulation::SleepAfterSection(4, 0.01, 0.01, &debt, &overrun),
              0.03, 1e-12);
  debt = 0;
  // Under a millisecond is owed, then paid with the next section.
  EXPECT_EQ(emulation::SleepAfterSection(4, 1e-4, 1e-4, &debt, &overrun), 0);
  EXPECT_NEAR(debt, 3e-4, 1e-12);
  EXPECT_NEAR(emulation::SleepAfterSection(4, 3e-4, 3e-4, &debt, &overrun),
              1.2e-3, 1e-12);
  debt = 0;
  // Slower than k times its CPU time (contention): nothing owed, overrun.
  EXPECT_EQ(emulation::SleepAfterSection(4, 0.01, 0.05, &debt, &overrun), 0);
  EXPECT_NEAR(overrun, 0.01, 1e-12);
  EXPECT_EQ(debt, 0);
}

std::string UniqueName(const char* what) {
  return "/poseidon-test-" + std::to_string(getpid()) + "-" + what;
}

TEST(EmulationTest, SharedRegionsOfOneNameShareTheirBytes) {
  const std::string name = UniqueName("region");
  emulation::SharedRegion a(name, 4096);
  emulation::SharedRegion b(name, 8192);  // grows the object
  emulation::SharedRegion c(name, 100);   // never shrinks it
  a.data()[4000] = 42;
  EXPECT_EQ(b.data()[4000], 42);
  b.data()[8000] = 7;
  emulation::SharedRegion d(name, 8192);
  EXPECT_EQ(d.data()[8000], 7);
  EXPECT_EQ(c.data()[99], 0);
  a.Unlink();
  emulation::SharedRegion fresh(name, 8192);  // a new object after Unlink
  EXPECT_EQ(fresh.data()[4000], 0);
  EXPECT_EQ(a.data()[4000], 42);  // old mappings stay valid
  fresh.Unlink();
  EXPECT_THROW(emulation::SharedRegion("no-slash", 10), ConfigError);
  EXPECT_THROW(emulation::SharedRegion("/a/b", 10), ConfigError);
}

const char* kEmulatedSolver = R"(
base_lr: 0.01
momentum: 0.9
lr_policy: "fixed"
max_iter: 2
display: 0
snapshot_after_train: false
net_param {
  name: "emulated"
  layer { name: "data" type: "DummyData" top: "data" top: "target"
    dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 2 }
      data_filler { type: "gaussian" std: 1 }
      data_filler { type: "gaussian" std: 1 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
    inner_product_param { num_output: 2
      weight_filler { type: "gaussian" std: 0.5 } } }
  layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target"
    top: "loss" }
}
)";

std::string WriteProfile(const char* what) {
  const std::string path =
      testing::TempDir() + "/emulation_" + what + "_" +
      std::to_string(getpid()) + ".profile";
  std::ofstream out(path);
  out << "# layer forward_ms backward_ms\ndata 0 0\nip 1 2\nloss 0 0\n";
  return path;
}

TEST(EmulationTest, TrainersWithSharedParamsUseOneCopy) {
  SolverParameter param;
  ReadProtoFromTextString(kEmulatedSolver, "<test solver>", &param);
  dist::TrainerOptions options;
  options.emulate_compute = WriteProfile("shared");
  options.emulate_shared_params = true;
  dist::Trainer<float> a(param, nullptr, options);
  dist::Trainer<float> b(param, nullptr, options);
  Blob<float>* wa = a.solver()->net()->learnable_params()[0];
  Blob<float>* wb = b.solver()->net()->learnable_params()[0];
  ASSERT_NE(wa, wb);
  wa->mutable_cpu_data()[3] = 12.5f;
  EXPECT_EQ(wb->cpu_data()[3], 12.5f);
  wb->mutable_cpu_diff()[1] = -3.f;
  EXPECT_EQ(wa->cpu_diff()[1], -3.f);
  auto* sgd = dynamic_cast<SGDSolver<float>*>(a.solver());
  ASSERT_NE(sgd, nullptr);
  // The emulated layers compute nothing; the update runs on shared memory.
  a.solver()->Solve();
  EXPECT_EQ(a.solver()->iter(), 2);
  std::remove(options.emulate_compute.c_str());
}

TEST(EmulationTest, WithoutSharedParamsTrainersKeepTheirOwn) {
  SolverParameter param;
  ReadProtoFromTextString(kEmulatedSolver, "<test solver>", &param);
  dist::TrainerOptions options;
  options.emulate_compute = WriteProfile("own");
  dist::Trainer<float> a(param, nullptr, options);
  dist::Trainer<float> b(param, nullptr, options);
  a.solver()->net()->learnable_params()[0]->mutable_cpu_data()[3] = 12.5f;
  EXPECT_NE(b.solver()->net()->learnable_params()[0]->cpu_data()[3], 12.5f);
  std::remove(options.emulate_compute.c_str());
}

TEST(EmulationTest, EmulationOptionsNeedEmulatedCompute) {
  SolverParameter param;
  ReadProtoFromTextString(kEmulatedSolver, "<test solver>", &param);
  dist::TrainerOptions options;
  options.emulate_shared_params = true;
  EXPECT_THROW(dist::Trainer<float>(param, nullptr, options), ConfigError);
  options.emulate_shared_params = false;
  options.emulate_dilation = 3;
  EXPECT_THROW(dist::Trainer<float>(param, nullptr, options), ConfigError);
}

}  // namespace
}  // namespace poseidon
