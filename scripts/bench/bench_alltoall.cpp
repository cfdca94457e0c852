// bench_alltoall: what MPI alone moves through the links, for the
// parameter server's numbers to be read against (docs/distributed.md,
// "Link use, sampled"). Every rank sends `rounds` rounds of one
// `message`-byte message to every other rank and receives as many, with
// `depth` rounds in flight at once (a round is started once the round
// `depth` before it has completed), and rank 0 prints the seconds and the
// bytes each rank moved each way. No Poseidon code: plain non-blocking
// MPI, waited for with MPI_Waitall on the calling thread.
//
//   mpirun -np N bench_alltoall [--message BYTES] [--rounds R] [--depth D]
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// The value of `--name=V` or `--name V` at argv[*i], advancing *i past it;
// false if argv[*i] is another option.
bool Option(int argc, char** argv, int* i, const char* name, long* value) {
  const std::string arg = argv[*i];
  const std::string flag = std::string("--") + name;
  std::string text;
  if (arg == flag && *i + 1 < argc) {
    text = argv[++*i];
  } else if (arg.compare(0, flag.size() + 1, flag + "=") == 0) {
    text = arg.substr(flag.size() + 1);
  } else {
    return false;
  }
  char* end = nullptr;
  *value = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || *value < 1) {
    std::fprintf(stderr,
                 "bench_alltoall: %s needs a positive integer, got '%s'\n",
                 flag.c_str(), text.c_str());
    std::exit(2);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  long message = 4L << 20, rounds = 33, depth = 4;
  for (int i = 1; i < argc; ++i) {
    if (!Option(argc, argv, &i, "message", &message) &&
        !Option(argc, argv, &i, "rounds", &rounds) &&
        !Option(argc, argv, &i, "depth", &depth)) {
      std::fprintf(stderr,
                   "bench_alltoall: unknown argument '%s' (usage: mpirun -np "
                   "N bench_alltoall [--message BYTES] [--rounds R] "
                   "[--depth D])\n",
                   argv[i]);
      return 2;
    }
  }
  if (message > (1L << 30)) {
    std::fprintf(stderr, "bench_alltoall: --message above 1 GiB\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t bytes = static_cast<size_t>(message);
  const int slots = static_cast<int>(depth);
  // One send buffer (every message carries the same bytes) and, per slot of
  // the depth, a receive buffer per peer.
  std::vector<char> send(bytes, 1);
  std::vector<char> recv(static_cast<size_t>(slots) * size * bytes);
  std::vector<MPI_Request> requests(static_cast<size_t>(slots) * 2 * size,
                                    MPI_REQUEST_NULL);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (long round = 0; round < rounds; ++round) {
    const int slot = static_cast<int>(round % slots);
    MPI_Request* mine = &requests[static_cast<size_t>(slot) * 2 * size];
    MPI_Waitall(2 * size, mine, MPI_STATUSES_IGNORE);
    // Rank r sends to r + k and receives from r - k at step k, so no rank
    // is every sender's first.
    for (int k = 1; k < size; ++k) {
      const int to = (rank + k) % size, from = (rank - k + size) % size;
      char* into = &recv[(static_cast<size_t>(slot) * size + from) * bytes];
      const int tag = static_cast<int>(round % 30000);
      MPI_Irecv(into, message, MPI_BYTE, from, tag, MPI_COMM_WORLD,
                &mine[2 * k]);
      MPI_Isend(send.data(), message, MPI_BYTE, to, tag, MPI_COMM_WORLD,
                &mine[2 * k + 1]);
    }
  }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(),
              MPI_STATUSES_IGNORE);
  const double seconds = MPI_Wtime() - start;
  double slowest = 0;
  MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf(
        "alltoall: %d ranks, %ld rounds of %ld bytes, depth %ld: "
        "%.3f s, %.0f MB each way per rank\n",
        size, rounds, message, depth, slowest,
        static_cast<double>(rounds) * (size - 1) * message / 1e6);
  }
  MPI_Finalize();
  return 0;
}
