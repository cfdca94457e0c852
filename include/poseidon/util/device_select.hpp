// Which GPU a process computes on: parsing `--gpu` ("0", "2,3", "all") and
// mapping ranks that share a host onto the listed devices. Plain logic, no
// CUDA: unit-tested on the CPU (test_device_select.cpp).
//
// One process drives one GPU (issue 12); several GPUs inside one process are
// the next level of the hierarchy (distributed/device_workers.hpp leaves the seam).
// Under mpirun, the ranks of a host take the listed GPUs in local-rank order:
// `mpirun -np 4 poseidon_train train --gpu=all ...` on a 4-GPU host gives
// rank k GPU k.
#ifndef POSEIDON_UTIL_DEVICE_SELECT_HPP_
#define POSEIDON_UTIL_DEVICE_SELECT_HPP_

#include <string>
#include <vector>

namespace poseidon {

// Device ids named by `flag`: a comma-separated list of distinct ids in
// [0, device_count), or "all" for every device. Throws ConfigError naming
// the flag for an empty list, a malformed or out-of-range id, a repeated
// id, or "all" on a machine without devices.
std::vector<int> ParseGpuList(const std::string& flag, int device_count);

// The process's place among the processes of its host, from the launcher's
// environment (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK/_SIZE, MPICH's
// MPI_LOCALRANKID/MPI_LOCALNRANKS); {0, 1} when run alone.
struct LocalRank {
  int rank = 0;
  int size = 1;
};
LocalRank LocalRankFromEnvironment();

// The number of processes the launcher started, read before MPI starts, to
// decide whether to start it: mpirun's OMPI_COMM_WORLD_SIZE, a PMI or PMIx
// launcher's PMI_SIZE / PMIX_SIZE, and for `srun --mpi=pmix` (which gives a
// task PMIX_RANK but no size) Slurm's SLURM_STEP_NUM_TASKS or SLURM_NTASKS;
// 1 when run alone.
int WorldSizeFromEnvironment();

// The id, from `ids`, that the process `local` uses. With one process on
// the host, `ids` must name one GPU (ConfigError otherwise, saying how to use
// several). With several, process k takes ids[k % ids.size()]; `shared` is
// set when processes share a GPU (fewer ids than processes).
int GpuForLocalRank(const std::vector<int>& ids, const LocalRank& local,
                    bool* shared = nullptr);

// For training: the GPUs process `local` trains on, one device worker on
// each. Alone on its host, every listed GPU (NCCL between them,
// distributed/nccl_reducer.hpp); with several processes on the host, the one GPU
// of GpuForLocalRank.
std::vector<int> GpusForProcess(const std::vector<int>& ids,
                                const LocalRank& local,
                                bool* shared = nullptr);

}  // namespace poseidon

#endif  // POSEIDON_UTIL_DEVICE_SELECT_HPP_
