// --gpu parsing and local-rank mapping (see the header).
#include "poseidon/util/device_select.hpp"

#include <cstdlib>
#include <set>
#include <sstream>

#include "poseidon/util/status.hpp"

namespace poseidon {

std::vector<int> ParseGpuList(const std::string& flag, int device_count) {
  std::vector<int> ids;
  if (flag == "all") {
    POSEIDON_REQUIRE(device_count > 0, ConfigError,
                     "--gpu=all, but this machine has no usable GPU");
    for (int i = 0; i < device_count; ++i) ids.push_back(i);
    return ids;
  }
  POSEIDON_REQUIRE(flag.empty() || flag.back() != ',', ConfigError, "--gpu=",
                   flag, ": a trailing comma names no device");
  std::stringstream ss(flag);
  std::string item;
  std::set<int> seen;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long id = std::strtol(item.c_str(), &end, 10);
    POSEIDON_REQUIRE(!item.empty() && *end == '\0' && id >= 0 && id < 1024,
                     ConfigError, "--gpu=", flag, ": '", item,
                     "' is not a device id (use ids like 0,1 or 'all')");
    POSEIDON_REQUIRE(id < device_count, ConfigError, "--gpu=", flag,
                     ": there is no GPU ", id, "; this machine has ",
                     device_count, device_count == 1 ? " GPU" : " GPUs");
    POSEIDON_REQUIRE(seen.insert(static_cast<int>(id)).second, ConfigError,
                     "--gpu=", flag, ": GPU ", id, " is listed twice");
    ids.push_back(static_cast<int>(id));
  }
  POSEIDON_REQUIRE(!ids.empty(), ConfigError, "--gpu=", flag,
                   " names no device");
  return ids;
}

namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return *end == '\0' ? static_cast<int>(x) : fallback;
}

}  // namespace

LocalRank LocalRankFromEnvironment() {
  LocalRank local;
  local.rank = EnvInt("OMPI_COMM_WORLD_LOCAL_RANK",
                      EnvInt("MPI_LOCALRANKID", 0));
  local.size = EnvInt("OMPI_COMM_WORLD_LOCAL_SIZE",
                      EnvInt("MPI_LOCALNRANKS", 1));
  if (local.size < 1 || local.rank < 0 || local.rank >= local.size) {
    return LocalRank{};
  }
  return local;
}

int WorldSizeFromEnvironment() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const int size = EnvInt(name, 0);
    if (size > 0) return size;
  }
  // Only a task of a PMI/PMIx launch: a job step's shell or a lone
  // poseidon_train inside an allocation also sees SLURM_NTASKS.
  if (std::getenv("PMIX_RANK") != nullptr ||
      std::getenv("PMI_RANK") != nullptr) {
    for (const char* name : {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}) {
      const int size = EnvInt(name, 0);
      if (size > 0) return size;
    }
  }
  return 1;
}

int GpuForLocalRank(const std::vector<int>& ids, const LocalRank& local,
                    bool* shared) {
  POSEIDON_REQUIRE(!ids.empty(), ConfigError, "no GPU to choose from");
  if (shared != nullptr) *shared = false;
  if (local.size == 1) {
    POSEIDON_REQUIRE(
        ids.size() == 1, ConfigError, "--gpu names ", ids.size(),
        " GPUs, but one process computes on one GPU: start one process per "
        "GPU (mpirun -np ", ids.size(), " poseidon_train ... --gpu=<list>), "
        "and the processes of a host take the listed GPUs in turn");
    return ids[0];
  }
  if (shared != nullptr) *shared = static_cast<int>(ids.size()) < local.size;
  return ids[local.rank % ids.size()];
}

std::vector<int> GpusForProcess(const std::vector<int>& ids,
                                const LocalRank& local, bool* shared) {
  POSEIDON_REQUIRE(!ids.empty(), ConfigError, "no GPU to choose from");
  if (shared != nullptr) *shared = false;
  if (local.size == 1) return ids;
  return {GpuForLocalRank(ids, local, shared)};
}

}  // namespace poseidon
