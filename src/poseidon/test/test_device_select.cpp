// --gpu parsing and the mapping of a host's ranks onto its GPUs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "poseidon/util/device_select.hpp"
#include "poseidon/util/status.hpp"

namespace poseidon {
namespace {

TEST(DeviceSelectTest, ParsesListsAndAll) {
  EXPECT_EQ(ParseGpuList("0", 1), (std::vector<int>{0}));
  EXPECT_EQ(ParseGpuList("3,1", 4), (std::vector<int>{3, 1}));
  EXPECT_EQ(ParseGpuList("all", 3), (std::vector<int>{0, 1, 2}));
}

TEST(DeviceSelectTest, RefusesBadIdsNamingThem) {
  for (const char* bad : {"", "x", "1,", "-1", "0,0", "2", "1.5"}) {
    try {
      ParseGpuList(bad, 2);
      ADD_FAILURE() << "--gpu=" << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("--gpu="), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(ParseGpuList("all", 0), ConfigError);
  EXPECT_THROW(ParseGpuList("0", 0), ConfigError);
}

TEST(DeviceSelectTest, OneProcessTakesItsOneGpu) {
  EXPECT_EQ(GpuForLocalRank({2}, LocalRank{0, 1}), 2);
  try {
    GpuForLocalRank({0, 1}, LocalRank{0, 1});
    FAIL() << "two GPUs for one process were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("mpirun -np 2"), std::string::npos)
        << e.what();
  }
}

TEST(DeviceSelectTest, RanksOfAHostTakeTheListedGpusInTurn) {
  bool shared = true;
  EXPECT_EQ(GpuForLocalRank({0, 1, 2, 3}, LocalRank{2, 4}, &shared), 2);
  EXPECT_FALSE(shared);
  EXPECT_EQ(GpuForLocalRank({5, 7}, LocalRank{3, 4}, &shared), 7);
  EXPECT_TRUE(shared);
  EXPECT_EQ(GpuForLocalRank({0}, LocalRank{1, 2}, &shared), 0);
  EXPECT_TRUE(shared);
}

TEST(DeviceSelectTest, ReadsTheLaunchersLocalRank) {
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
  LocalRank local = LocalRankFromEnvironment();
  EXPECT_EQ(local.rank, 1);
  EXPECT_EQ(local.size, 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "5", 1);  // inconsistent: ignored
  local = LocalRankFromEnvironment();
  EXPECT_EQ(local.rank, 0);
  EXPECT_EQ(local.size, 1);
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

TEST(DeviceSelectTest, ReadsTheLaunchersWorldSize) {
  const char* kNames[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                          "PMIX_RANK", "PMI_RANK", "SLURM_STEP_NUM_TASKS",
                          "SLURM_NTASKS"};
  std::vector<std::pair<const char*, std::string>> saved;
  for (const char* name : kNames) {
    if (const char* value = std::getenv(name)) saved.emplace_back(name, value);
    unsetenv(name);
  }
  EXPECT_EQ(WorldSizeFromEnvironment(), 1);
  // Inside an allocation but not a task of srun --mpi: alone.
  setenv("SLURM_NTASKS", "4", 1);
  EXPECT_EQ(WorldSizeFromEnvironment(), 1);
  // A task of srun --mpi=pmix: its rank, and the step's size from Slurm.
  setenv("PMIX_RANK", "1", 1);
  EXPECT_EQ(WorldSizeFromEnvironment(), 4);
  setenv("SLURM_STEP_NUM_TASKS", "2", 1);
  EXPECT_EQ(WorldSizeFromEnvironment(), 2);
  setenv("PMIX_SIZE", "3", 1);
  EXPECT_EQ(WorldSizeFromEnvironment(), 3);
  setenv("OMPI_COMM_WORLD_SIZE", "5", 1);
  EXPECT_EQ(WorldSizeFromEnvironment(), 5);
  for (const char* name : kNames) unsetenv(name);
  for (const auto& [name, value] : saved) setenv(name, value.c_str(), 1);
}

TEST(DeviceSelectTest, TrainingAloneUsesEveryListedGpu) {
  EXPECT_EQ(GpusForProcess({0, 1, 3}, LocalRank{0, 1}),
            (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(GpusForProcess({2}, LocalRank{0, 1}), (std::vector<int>{2}));
  // Several processes on the host: one GPU each, as GpuForLocalRank.
  bool shared = true;
  EXPECT_EQ(GpusForProcess({0, 1}, LocalRank{1, 2}, &shared),
            (std::vector<int>{1}));
  EXPECT_FALSE(shared);
  EXPECT_EQ(GpusForProcess({0, 1}, LocalRank{2, 3}, &shared),
            (std::vector<int>{0}));
  EXPECT_TRUE(shared);
}

}  // namespace
}  // namespace poseidon
