// MpiCommunicator: non-blocking MPI calls on a private communicator, polled
// with a deadline. See mpi_communicator.hpp and Note [MPI timeouts]. This
// file: MPI's start-up, the communicator's life (its duplicates, its ranks
// in the job, its host), shared memory, urgency and Abort (Note [Parking
// the pollers before MPI_Abort]). Awaiting operations is
// mpi_communicator_progress.cpp's, messages mpi_communicator_p2p.cpp's,
// collectives mpi_communicator_collectives.cpp's.
#include "poseidon/distributed/mpi_communicator.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "mpi_communicator_impl.hpp"
#include "poseidon/distributed/mpi_check.hpp"
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // MPIX_CUDA_AWARE_SUPPORT (Open MPI)
#endif
#include "poseidon/distributed/sync_policy.hpp"  // FormatBytes
#include "poseidon/util/signal_handler.hpp"

namespace poseidon {
namespace dist {

Status MpiErrorStatus(int code, int rank, const std::string& what,
                      const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) {
    std::snprintf(text, sizeof(text), "MPI error code %d", code);
  }
  const char* base = std::strrchr(file, '/');
  return Status::Failure(StrCat("rank ", rank, ": ", what, ": ", call,
                                " failed: ", text, " (", base ? base + 1 : file,
                                ":", line, ")"));
}

namespace {

// Note [Parking the pollers before MPI_Abort]
// Open MPI's error reporting (orte_show_help and its flex lexer) is not
// safe from two threads at once. When a peer aborts, the TCP transport of
// a rank's progress thread may report the reset connection through it at
// the moment this rank's own MPI_Abort prints "MPI_ABORT was invoked": a
// CI run of the fault matrix (a rank stopped for good, 2 x 2 ranks) had a
// rank crash with SIGSEGV in opal_show_help_yylex under
// mca_btl_tcp_frag_recv, on the progress thread, beside the main thread's
// abort. So Abort first takes every live communicator's progress mutex,
// which its progress thread holds whenever it calls MPI, and keeps them:
// the pollers are parked outside MPI while MPI_Abort runs. (A caller's
// first try of an operation is made without that mutex; that window is
// one call long.) Taking a mutex gives up after a bounded wait, so a
// thread that aborts while holding one cannot deadlock.
std::mutex g_pollers_mu;
std::vector<std::mutex*>& LivePollers() {  // GUARDED_BY(g_pollers_mu)
  static std::vector<std::mutex*> pollers;
  return pollers;
}

void ParkPollers() {
  std::lock_guard<std::mutex> lock(g_pollers_mu);
  for (std::mutex* mu : LivePollers()) {
    for (int tries = 0; tries < 2000 && !mu->try_lock(); ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Held (or given up on) until the process ends.
  }
}

void FinalizeMpiAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

const char* ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "an unknown thread level";
}

// Initialises MPI for concurrent use from several threads, once per process.
void EnsureMpiInitialized() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  int finalized = 0;
  MPI_Finalized(&finalized);
  POSEIDON_REQUIRE(!finalized, DistributedError,
                   "MpiCommunicator: MPI was already finalised in this "
                   "process; it cannot be initialised again");
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    const int rc =
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    POSEIDON_REQUIRE(rc == MPI_SUCCESS, DistributedError,
                     "MpiCommunicator: MPI_Init_thread failed with code ", rc);
    std::atexit(FinalizeMpiAtExit);
  } else {
    MPI_Query_thread(&provided);
  }
  POSEIDON_REQUIRE(provided >= MPI_THREAD_MULTIPLE, DistributedError,
                   "MpiCommunicator: the MPI library provides ",
                   ThreadLevelName(provided),
                   " but Poseidon's communication threads need "
                   "MPI_THREAD_MULTIPLE (rebuild Open MPI with thread "
                   "support, or initialise MPI with MPI_THREAD_MULTIPLE)");
}

}  // namespace

MpiCommunicator::MpiCommunicator(MpiOptions options)
    : impl_(std::make_unique<Impl>()) {
  EnsureMpiInitialized();
  impl_->options = options;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm);
  POSEIDON_REQUIRE(rc == MPI_SUCCESS, DistributedError,
                   "MpiCommunicator: MPI_Comm_dup failed with code ", rc);
  Start();
}

MpiCommunicator::MpiCommunicator(void* comm, MpiOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->comm = *static_cast<MPI_Comm*>(comm);
  Start();
}

std::unique_ptr<Communicator> MpiCommunicator::Split(
    int color, int key, std::chrono::milliseconds timeout) {
  MPI_Comm split = MPI_COMM_NULL;
  const int rc = MPI_Comm_split(impl_->comm, color, key, &split);
  POSEIDON_REQUIRE(rc == MPI_SUCCESS, DistributedError, "rank ",
                   impl_->self(), ": MPI_Comm_split failed with code ", rc);
  MpiOptions options = impl_->options;
  options.timeout = timeout;
  return std::unique_ptr<Communicator>(new MpiCommunicator(&split, options));
}

int MpiCommunicator::JobRank(int r) const { return impl_->Job(r); }

int MpiCommunicator::HostKey() const { return impl_->host_key; }

void MpiCommunicator::Start() {
  int rc = MPI_SUCCESS;
  MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN);
  rc = MPI_Comm_dup(impl_->comm, &impl_->coll_comm);
  POSEIDON_REQUIRE(rc == MPI_SUCCESS, DistributedError,
                   "MpiCommunicator: MPI_Comm_dup failed with code ", rc);
  MPI_Comm_set_errhandler(impl_->coll_comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(impl_->comm, &impl_->rank);
  MPI_Comm_size(impl_->comm, &impl_->size);
  // The job's numbering of this communicator's ranks, for messages.
  MPI_Comm_size(MPI_COMM_WORLD, &impl_->job_size);
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  std::vector<int> mine(impl_->size);
  for (int r = 0; r < impl_->size; ++r) mine[r] = r;
  impl_->job_ranks.assign(impl_->size, MPI_UNDEFINED);
  if (MPI_Comm_group(impl_->comm, &group) == MPI_SUCCESS &&
      MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS) {
    MPI_Group_translate_ranks(group, impl_->size, mine.data(), world,
                              impl_->job_ranks.data());
  }
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
  for (int r = 0; r < impl_->size; ++r) {
    if (impl_->job_ranks[r] == MPI_UNDEFINED) impl_->job_ranks[r] = r;
  }
  // The ranks that share this host's memory, as mpirun placed them.
  MPI_Comm local = MPI_COMM_NULL;
  rc = MPI_Comm_split_type(impl_->comm, MPI_COMM_TYPE_SHARED, impl_->rank,
                           MPI_INFO_NULL, &local);
  POSEIDON_REQUIRE(rc == MPI_SUCCESS, DistributedError,
                   "MpiCommunicator: MPI_Comm_split_type failed with code ",
                   rc);
  int local_size = 0;
  MPI_Comm_size(local, &local_size);
  MPI_Allreduce(&impl_->rank, &impl_->host_key, 1, MPI_INT, MPI_MIN, local);
  MPI_Comm_free(&local);
  impl_->one_host = local_size == impl_->size;
  Impl* impl = impl_.get();
  impl_->progress = std::thread([impl] {
    pthread_setname_np(pthread_self(), "psd progress");
    impl->ProgressLoop();
  });
  std::lock_guard<std::mutex> lock(g_pollers_mu);
  LivePollers().push_back(&impl_->mu);
}

MpiCommunicator::~MpiCommunicator() {
  {
    std::lock_guard<std::mutex> lock(g_pollers_mu);
    std::vector<std::mutex*>& pollers = LivePollers();
    pollers.erase(std::remove(pollers.begin(), pollers.end(), &impl_->mu),
                  pollers.end());
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->work.notify_one();
  impl_->progress.join();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && impl_->coll_comm != MPI_COMM_NULL) {
    MPI_Comm_free(&impl_->coll_comm);
  }
  if (!finalized && impl_->comm != MPI_COMM_NULL) {
    MPI_Comm_free(&impl_->comm);
  }
}

int MpiCommunicator::rank() const { return impl_->rank; }
int MpiCommunicator::size() const { return impl_->size; }
std::chrono::milliseconds MpiCommunicator::timeout() const {
  return impl_->options.timeout;
}

bool MpiCommunicator::OnOneHost() const { return impl_->one_host; }

// Rank 0 creates a POSIX shared-memory file with every page reserved
// (posix_fallocate: a full /dev/shm is an error now, not a SIGBUS later),
// the others open it by the broadcast name, all map it, and once every rank
// has, rank 0 removes the name: nothing is left behind however the job ends
// after that. Any failure on any rank makes every rank return nullptr.
std::unique_ptr<SharedMemory> MpiCommunicator::MapSharedMemory(
    size_t bytes_per_rank) {
  Impl& d = *impl_;
  if (!d.one_host || d.size < 2) return nullptr;
  const size_t stride = SharedMemory::Align(bytes_per_rank);
  const size_t total = stride * d.size;
  char name[64] = {0};
  int fd = -1;
  if (d.rank == 0) {
    // Unique in the process across communicators (a job's world and its
    // hosts' sub-communicators may both map memory).
    static std::atomic<unsigned long long> seq{0};
    std::snprintf(name, sizeof(name), "/poseidon-%d-%llu",
                  static_cast<int>(getpid()), ++seq);
    std::string error;
    struct statvfs fs;
    if (statvfs("/dev/shm", &fs) == 0 &&
        total > static_cast<double>(fs.f_bavail) * fs.f_frsize / 2) {
      error = StrCat("it would take more than half of the ",
                     FormatBytes(static_cast<double>(fs.f_bavail) *
                                 fs.f_frsize),
                     " free in /dev/shm");
    } else {
      fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
      if (fd < 0) {
        error = StrCat("shm_open: ", std::strerror(errno));
      } else {
        const int rc = posix_fallocate(fd, 0, static_cast<off_t>(total));
        if (rc != 0) error = StrCat("posix_fallocate: ", std::strerror(rc));
      }
    }
    if (!error.empty()) {
      LOG(WARNING) << "No shared memory for the " << d.size
                   << " ranks on this host (" << FormatBytes(total)
                   << "): " << error << "; exchanging messages instead";
      if (fd >= 0) {
        close(fd);
        shm_unlink(name);
        fd = -1;
      }
      name[0] = 0;
    }
  }
  Status s = Broadcast(name, sizeof(name), 0);
  if (!s.ok() || name[0] == 0) return nullptr;
  if (d.rank != 0) fd = shm_open(name, O_RDWR, 0);
  void* base = MAP_FAILED;
  if (fd >= 0) {
    base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  }
  int mapped = base != MAP_FAILED ? 1 : 0;
  if (!mapped) {
    LOG(WARNING) << "rank " << d.self() << ": mapping shared memory " << name
                 << ": " << std::strerror(errno);
  }
  std::vector<int> all(d.size, 0);
  s = Allgather(&mapped, sizeof(mapped), all.data());
  if (d.rank == 0) shm_unlink(name);
  const bool everyone =
      s.ok() && std::count(all.begin(), all.end(), 1) == d.size;
  if (!everyone) {
    if (mapped) munmap(base, total);
    return nullptr;
  }
  return std::make_unique<SharedMemory>(
      static_cast<char*>(base), stride, d.size, d.options.timeout,
      [base, total] { munmap(base, total); });
}

void MpiCommunicator::BeginUrgent() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    ++impl_->urgent;
  }
  impl_->work.notify_one();
}

void MpiCommunicator::EndUrgent() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  --impl_->urgent;
}

void MpiCommunicator::Abort(const std::string& why) {
  // One line per rank, whichever thread aborts first (the training thread's
  // error, a parameter-server shard's), in the job's numbering as mpirun's
  // messages; a second thread waits for the first to end the process.
  static std::atomic<bool> aborting{false};
  if (aborting.exchange(true)) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::fprintf(stderr, "Error: rank %d of %d: %s\n", impl_->self(),
               impl_->job_size, why.c_str());
  std::fflush(stderr);
  google::FlushLogFiles(google::GLOG_INFO);
  NoteAbortingAfterError();  // Note [Crashes while ending]
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    ParkPollers();  // Note [Parking the pollers before MPI_Abort]
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::abort();
}

bool MpiCudaAware(std::string* how) {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  const bool yes = MPIX_Query_cuda_support() == 1;
  *how = yes ? "yes (MPIX_Query_cuda_support)"
             : "no (this Open MPI has CUDA support built in, but it is off "
               "at run time)";
  return yes;
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
  *how = "no (this Open MPI was built without CUDA support)";
  return false;
#else
  *how = "unknown MPI: not assumed";
  return false;
#endif
}

}  // namespace dist
}  // namespace poseidon
