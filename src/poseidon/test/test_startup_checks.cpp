// The solver's start-up checks of the snapshot folder (Note [Start-up
// checks] in solver.cpp, util/snapshot_checks.hpp): a folder that snapshots
// cannot go to stops Solve before its first iteration, stale temporary files
// of killed runs are removed while a live process's stay, and the low-disk
// warning fires exactly when one snapshot does not fit.
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "poseidon/solvers/adam_solver.hpp"
#include "poseidon/solvers/sgd_solver.hpp"
#include "poseidon/util/snapshot_checks.hpp"
#include "poseidon/util/status.hpp"
#include "solver_test_util.hpp"
#include "test_util.hpp"

namespace poseidon {
namespace {

using test::MakeTempDir;
using test::SolverTestParam;

void Touch(const std::string& path) {
  std::ofstream out(path);
  out << "x";
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// A pid no process has: a child that has exited and been reaped.
pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

// Solve on a 5-iteration solver writing snapshots to `prefix` (`extra`:
// more solver fields); expects an IOError before the first iteration whose
// message names `folder` and snapshot_prefix.
void ExpectSolveStopsAtOnce(const std::string& prefix,
                            const std::string& folder,
                            const std::string& extra = "snapshot: 0") {
  SGDSolver<float> solver(SolverTestParam(
      StrCat("max_iter: 5 snapshot_prefix: '", prefix, "' ", extra)));
  try {
    solver.Solve();
    ADD_FAILURE() << "Solve trained " << solver.iter()
                  << " iterations and returned; wanted an IOError naming '"
                  << folder << "'";
  } catch (const IOError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(StrCat("snapshot folder '", folder, "'")),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("snapshot_prefix"), std::string::npos) << what;
    EXPECT_EQ(solver.iter(), 0)
        << "the error came after " << solver.iter() << " iterations: " << what;
  }
}

TEST(StartupChecksTest, MissingFolderStopsSolveBeforeIterationOne) {
  const std::string dir = MakeTempDir();
  ExpectSolveStopsAtOnce(dir + "/missing/snap", dir + "/missing");
}

TEST(StartupChecksTest, FolderThatIsAFileStopsSolveBeforeIterationOne) {
  const std::string dir = MakeTempDir();
  Touch(dir + "/file");
  ExpectSolveStopsAtOnce(dir + "/file/snap", dir + "/file");
}

TEST(StartupChecksTest, ReadOnlyFolderStopsSolveBeforeIterationOne) {
  const std::string dir = MakeTempDir();
  const std::string ro = dir + "/ro";
  ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
  ASSERT_EQ(::chmod(ro.c_str(), 0555), 0);  // whatever the umask
  if (::geteuid() != 0) {
    ExpectSolveStopsAtOnce(ro + "/snap", ro);
    ExpectSolveStopsAtOnce(ro + "/snap", ro, "snapshot: 2");
  } else {
    // Root writes into a 0555 folder (and so would its snapshots); the
    // check, run as the unprivileged user nobody in a child, must refuse.
    ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);  // nobody may enter it
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(77);
      try {
        CheckSnapshotFolderWritable(ro + "/snap");
      } catch (const IOError& e) {
        const std::string what = e.what();
        ::_exit(what.find(StrCat("snapshot folder '", ro, "'")) !=
                            std::string::npos &&
                        what.find("not writable") != std::string::npos
                    ? 0
                    : 2);
      }
      ::_exit(1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) {
      GTEST_SKIP() << "root, and cannot become nobody to test permissions";
    }
    EXPECT_EQ(WEXITSTATUS(status), 0)
        << "as nobody: 1 = no error for a 0555 folder, 2 = an error that "
           "does not name the folder";
  }
  ::chmod(ro.c_str(), 0755);
  EXPECT_FALSE(Exists(ro + "/snap_iter_startup_check.tmp." +
                      std::to_string(::getpid())));
}

// snapshot > 0 was already refused when the solver was made (as in Caffe);
// the error now names the folder too.
TEST(StartupChecksTest, MissingFolderWithSnapshotIsRefusedAtConstruction) {
  const std::string dir = MakeTempDir();
  try {
    SGDSolver<float> solver(SolverTestParam(StrCat(
        "max_iter: 5 snapshot: 2 snapshot_prefix: '", dir, "/missing/snap'")));
    ADD_FAILURE() << "the solver was made";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  StrCat("snapshot folder '", dir, "/missing'")),
              std::string::npos)
        << e.what();
  }
}

// Runs that write no snapshots, and workers that do not write them, train
// as before whatever the prefix says.
TEST(StartupChecksTest, NoChecksWithoutSnapshots) {
  const std::string prefix = MakeTempDir() + "/missing/snap";
  SGDSolver<float> quiet(SolverTestParam(StrCat(
      "max_iter: 3 snapshot: 0 snapshot_after_train: false snapshot_prefix: '",
      prefix, "'")));
  EXPECT_NO_THROW(quiet.Solve());
  EXPECT_EQ(quiet.iter(), 3);

  SGDSolver<float> worker(SolverTestParam(
      StrCat("max_iter: 3 snapshot: 0 snapshot_prefix: '", prefix, "'")));
  Solver<float>::DistributedStrategy strategy;
  strategy.writes_snapshots = false;
  worker.SetDistributedStrategy(strategy);
  EXPECT_NO_THROW(worker.Solve());
  EXPECT_EQ(worker.iter(), 3);
}

TEST(StartupChecksTest, SolveRemovesStaleTemporariesAndKeepsLiveOnes) {
  const std::string dir = MakeTempDir();
  const pid_t dead = DeadPid();
  const pid_t live = ::getpid();
  const std::string stale = StrCat(dir, "/snap_iter_20.caffemodel.tmp.", dead);
  const std::string stale_h5 =
      StrCat(dir, "/snap_iter_20.solverstate.h5.tmp.", dead);
  const std::string own = StrCat(dir, "/snap_iter_20.solverstate.tmp.", live);
  const std::string other_prefix =
      StrCat(dir, "/other_iter_20.caffemodel.tmp.", dead);
  const std::string not_temporary = dir + "/snap_iter_20.caffemodel";
  const std::string not_a_pid = dir + "/snap_iter_20.caffemodel.tmp.12ab";
  for (const std::string& f :
       {stale, stale_h5, own, other_prefix, not_temporary, not_a_pid}) {
    Touch(f);
  }
  SGDSolver<float> solver(SolverTestParam(StrCat(
      "max_iter: 1 snapshot: 0 snapshot_after_train: true snapshot_prefix: '",
      dir, "/snap'")));
  solver.Solve();
  EXPECT_FALSE(Exists(stale)) << "the file of dead pid " << dead << " stayed";
  EXPECT_FALSE(Exists(stale_h5))
      << "the file of dead pid " << dead << " stayed";
  EXPECT_TRUE(Exists(own)) << "the file of this live process was removed";
  EXPECT_TRUE(Exists(other_prefix)) << "another prefix's file was removed";
  EXPECT_TRUE(Exists(not_temporary));
  EXPECT_TRUE(Exists(not_a_pid));
  EXPECT_TRUE(Exists(dir + "/snap_iter_1.caffemodel"));
}

TEST(StartupChecksTest, RemoveStaleSnapshotTemporariesReturnsWhatItRemoved) {
  const std::string dir = MakeTempDir();
  const std::string stale =
      StrCat(dir, "/run_iter_5.caffemodel.tmp.", DeadPid());
  Touch(stale);
  Touch(StrCat(dir, "/run_iter_5.caffemodel.tmp.", ::getpid()));
  EXPECT_EQ(RemoveStaleSnapshotTemporaries(dir + "/run"),
            std::vector<std::string>{stale});
  EXPECT_TRUE(RemoveStaleSnapshotTemporaries(dir + "/run").empty());
}

TEST(StartupChecksTest, StaleTemporaryPidParsesOnlyTemporaryNames) {
  EXPECT_EQ(StaleTemporaryPid("out/snap", "snap_iter_5.caffemodel.tmp.123"),
            std::optional<pid_t>(123));
  EXPECT_EQ(StaleTemporaryPid("snap", "snap_iter_5.solverstate.h5.tmp.7"),
            std::optional<pid_t>(7));
  EXPECT_EQ(StaleTemporaryPid("dir/", "_iter_5.caffemodel.tmp.7"),
            std::optional<pid_t>(7));
  for (const char* name :
       {"snap_iter_5.caffemodel", "snap_iter_5.caffemodel.tmp.",
        "snap_iter_5.caffemodel.tmp.12a", "snap_iter_5.caffemodel.tmp.0",
        "snap_iter_5.caffemodel.tmp.-3",
        "snap_iter_5.caffemodel.tmp.99999999999",
        "snapx_iter_5.caffemodel.tmp.12", "xsnap_iter_5.caffemodel.tmp.12",
        "snap.tmp.12"}) {
    EXPECT_EQ(StaleTemporaryPid("snap", name), std::nullopt) << name;
  }
}

TEST(StartupChecksTest, ProcessExists) {
  EXPECT_TRUE(ProcessExists(::getpid()));
  EXPECT_FALSE(ProcessExists(DeadPid()));
  EXPECT_FALSE(ProcessExists(0));
  EXPECT_FALSE(ProcessExists(-1));
}

TEST(StartupChecksTest, SnapshotFolder) {
  EXPECT_EQ(SnapshotFolder("snap"), ".");
  EXPECT_EQ(SnapshotFolder("out/snap"), "out");
  EXPECT_EQ(SnapshotFolder("/a/b/snap"), "/a/b");
  EXPECT_EQ(SnapshotFolder("/snap"), "/");
  EXPECT_EQ(SnapshotFolder("out/"), "out");
}

TEST(StartupChecksTest, LowDiskWarningOnlyWhenOneSnapshotDoesNotFit) {
  const std::string warning = LowDiskWarning("/data/snaps", 1000, 4096);
  EXPECT_NE(warning.find("'/data/snaps'"), std::string::npos) << warning;
  EXPECT_NE(warning.find("1000 bytes free"), std::string::npos) << warning;
  EXPECT_NE(warning.find("4096 bytes"), std::string::npos) << warning;
  EXPECT_EQ(LowDiskWarning("/data/snaps", 4096, 4096), "");
  EXPECT_EQ(LowDiskWarning("/data/snaps", 1ull << 40, 4096), "");
  EXPECT_NE(LowDiskWarning("/d", 0, 1), "");
}

TEST(StartupChecksTest, FreeBytesOfAFolderAndOfNothing) {
  const std::optional<uint64_t> free_bytes = FreeBytes(MakeTempDir());
  ASSERT_TRUE(free_bytes.has_value());
  EXPECT_GT(*free_bytes, 0u);
  EXPECT_EQ(FreeBytes("/no/such/folder/at/all"), std::nullopt);
}

// The estimate the warning compares with: every parameter once, plus one
// history array per learnable parameter for SGD and two for Adam.
TEST(StartupChecksTest, SnapshotBytesEstimateCountsWeightsAndHistory) {
  // ip1: 3x4 + 4, ip2: 4x2 + 2 = 26 floats.
  const uint64_t weights = 26 * sizeof(float);
  SGDSolver<float> sgd(SolverTestParam(""));
  EXPECT_EQ(sgd.SnapshotBytesEstimate(), 2 * weights);
  AdamSolver<float> adam(SolverTestParam("type: 'Adam'"));
  EXPECT_EQ(adam.SnapshotBytesEstimate(), 3 * weights);
  SGDSolver<float> diff(SolverTestParam("snapshot_diff: true"));
  EXPECT_EQ(diff.SnapshotBytesEstimate(), 3 * weights);
}

}  // namespace
}  // namespace poseidon
