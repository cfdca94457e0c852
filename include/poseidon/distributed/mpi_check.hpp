// POSEIDON_MPI_CHECK: turns a failed MPI call into a returned Status that
// names the rank, the operation, the call, MPI's error string and file:line.
// Only for distributed/ sources built with USE_MPI (it includes mpi.h); the
// communicator must have MPI_ERRORS_RETURN set for errors to come back.
#ifndef POSEIDON_DISTRIBUTED_MPI_CHECK_HPP_
#define POSEIDON_DISTRIBUTED_MPI_CHECK_HPP_

#include <mpi.h>

#include <string>

#include "poseidon/util/status.hpp"

namespace poseidon {
namespace dist {

// "rank 2: Send of 8 bytes to rank 5 tag 1: MPI_Isend(...) failed:
// MPI_ERR_RANK: invalid rank (mpi_communicator.cpp:120)".
Status MpiErrorStatus(int code, int rank, const std::string& what,
                      const char* call, const char* file, int line);

}  // namespace dist
}  // namespace poseidon

// Evaluates `call`; unless it returns MPI_SUCCESS, returns from the enclosing
// function (which must return Status) the error. `what` describes the
// operation and is evaluated only on failure.
#define POSEIDON_MPI_CHECK(rank, what, call)                             \
  do {                                                                   \
    const int poseidon_mpi_err_ = (call);                                \
    if (poseidon_mpi_err_ != MPI_SUCCESS) {                              \
      return ::poseidon::dist::MpiErrorStatus(                           \
          poseidon_mpi_err_, (rank), (what), #call, __FILE__, __LINE__); \
    }                                                                    \
  } while (0)

#endif  // POSEIDON_DISTRIBUTED_MPI_CHECK_HPP_
