// MpiCommunicator: non-blocking MPI calls on a private communicator, polled
// with a deadline. See mpi_communicator.hpp and Note [MPI timeouts].
#include "poseidon/dist/mpi_communicator.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "poseidon/dist/mpi_check.hpp"

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

constexpr size_t kMaxMessageBytes = INT_MAX;

}  // namespace

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  MpiOptions options;
  std::mutex broken_mu;
  std::string broken;           // guarded by broken_mu; see Note [MPI timeouts]
  uint64_t collective_seq = 0;  // touched by the collective thread only

  template <typename... Args>
  Status Fail(const std::string& what, Args&&... args) const {
    return Status::Failure(
        StrCat("rank ", rank, ": ", what, std::forward<Args>(args)...));
  }

  Status CheckUsable(const std::string& what) {
    std::lock_guard<std::mutex> lock(broken_mu);
    if (broken.empty()) return Status::OK();
    return Fail(what, ": communicator unusable after an earlier timeout (",
                broken, ")");
  }

  Status CheckPeer(const std::string& what, int peer, int tag, size_t bytes) {
    if (peer < 0 || peer >= size) {
      return Fail(what, ": no such rank (job of ", size, " ranks)");
    }
    if (tag < 0 || tag > kMaxTag) {
      return Fail(what, ": tag is outside 0..", kMaxTag);
    }
    if (bytes > kMaxMessageBytes) {
      return Fail(what, ": more than ", kMaxMessageBytes,
                  " bytes in one message; split it");
    }
    return CheckUsable(what);
  }

  bool Expired(std::chrono::steady_clock::time_point start) const {
    return options.timeout.count() > 0 &&
           std::chrono::steady_clock::now() - start > options.timeout;
  }

  // Sleeps a little longer each call, up to 200 us.
  static void Backoff(int* round) {
    if (*round < 64) {
      std::this_thread::yield();
    } else {
      const int us = std::min(200, 1 << std::min(8, (*round - 64) / 16));
      std::this_thread::sleep_for(std::chrono::microseconds(us));
    }
    ++*round;
  }

  // Polls `request` to completion; on timeout the request stays with MPI and
  // the communicator is marked unusable (Note [MPI timeouts]).
  Status Wait(const std::string& what, const std::string& waiting_for,
              MPI_Request* request) {
    const auto start = std::chrono::steady_clock::now();
    for (int round = 0;; Backoff(&round)) {
      int done = 0;
      POSEIDON_MPI_CHECK(rank, what,
                         MPI_Test(request, &done, MPI_STATUS_IGNORE));
      if (done) return Status::OK();
      if (Expired(start)) {
        Status s =
            Fail(what, ": timed out after ", FormatSeconds(options.timeout),
                 " waiting for ", waiting_for);
        std::lock_guard<std::mutex> lock(broken_mu);
        if (broken.empty()) broken = s.message();
        return s;
      }
    }
  }

  Status Collective(const std::string& what, MPI_Request* request) {
    return Wait(what, "every rank to join", request);
  }
};

MpiCommunicator::MpiCommunicator(MpiOptions options)
    : impl_(std::make_unique<Impl>()) {
  EnsureMpiInitialized();
  impl_->options = options;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm);
  POSEIDON_REQUIRE(rc == MPI_SUCCESS, DistributedError,
                   "MpiCommunicator: MPI_Comm_dup failed with code ", rc);
  MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(impl_->comm, &impl_->rank);
  MPI_Comm_size(impl_->comm, &impl_->size);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && impl_->comm != MPI_COMM_NULL) {
    MPI_Comm_free(&impl_->comm);
  }
}

int MpiCommunicator::rank() const { return impl_->rank; }
int MpiCommunicator::size() const { return impl_->size; }

Status MpiCommunicator::Send(const void* buf, size_t bytes, int dest, int tag) {
  const std::string what =
      StrCat("Send of ", bytes, " bytes to rank ", dest, " tag ", tag);
  Status s = impl_->CheckPeer(what, dest, tag, bytes);
  if (!s.ok()) return s;
  MPI_Request request;
  POSEIDON_MPI_CHECK(impl_->rank, what,
                     MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, dest,
                               tag, impl_->comm, &request));
  return impl_->Wait(what, StrCat("rank ", dest, " to receive"), &request);
}

Status MpiCommunicator::Recv(void* buf, size_t bytes, int src, int tag) {
  const std::string what =
      StrCat("Recv of ", bytes, " bytes from rank ", src, " tag ", tag);
  Status s = impl_->CheckPeer(what, src, tag, bytes);
  if (!s.ok()) return s;
  // A matched probe reserves the message for this thread, so concurrent
  // receivers never steal each other's messages, and nothing stays pending
  // if the deadline passes.
  MPI_Message message;
  MPI_Status status;
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0;; Impl::Backoff(&round)) {
    int found = 0;
    POSEIDON_MPI_CHECK(
        impl_->rank, what,
        MPI_Improbe(src, tag, impl_->comm, &found, &message, &status));
    if (found) break;
    if (impl_->Expired(start)) {
      return impl_->Fail(what, ": timed out after ",
                         FormatSeconds(impl_->options.timeout),
                         " waiting for rank ", src);
    }
  }
  int count = 0;
  POSEIDON_MPI_CHECK(impl_->rank, what,
                     MPI_Get_count(&status, MPI_BYTE, &count));
  if (static_cast<size_t>(count) != bytes) {
    std::vector<char> sink(std::max(count, 1));
    POSEIDON_MPI_CHECK(
        impl_->rank, what,
        MPI_Mrecv(sink.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE));
    return impl_->Fail(what, ": rank ", src, " sent ", count,
                       " bytes, this rank expected ", bytes);
  }
  POSEIDON_MPI_CHECK(
      impl_->rank, what,
      MPI_Mrecv(buf, count, MPI_BYTE, &message, MPI_STATUS_IGNORE));
  return Status::OK();
}

Status MpiCommunicator::AllreduceSum(float* buf, size_t count) {
  return AllreduceSumByAllgather(this, buf, count);
}

Status MpiCommunicator::AllreduceSum(double* buf, size_t count) {
  return AllreduceSumByAllgather(this, buf, count);
}

Status MpiCommunicator::Broadcast(void* buf, size_t bytes, int root) {
  const uint64_t seq = ++impl_->collective_seq;
  const std::string what =
      StrCat("Broadcast #", seq, " of ", bytes, " bytes from root ", root);
  if (root < 0 || root >= impl_->size) {
    return impl_->Fail(what, ": no such rank (job of ", impl_->size, " ranks)");
  }
  Status s = impl_->CheckUsable(what);
  if (!s.ok()) return s;
  char* data = static_cast<char*>(buf);
  for (size_t begin = 0; begin < bytes; begin += kMaxMessageBytes) {
    const int len = static_cast<int>(std::min(kMaxMessageBytes, bytes - begin));
    MPI_Request request;
    POSEIDON_MPI_CHECK(
        impl_->rank, what,
        MPI_Ibcast(data + begin, len, MPI_BYTE, root, impl_->comm, &request));
    s = impl_->Collective(what, &request);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status MpiCommunicator::Allgather(const void* send, size_t bytes, void* recv) {
  const uint64_t seq = ++impl_->collective_seq;
  const std::string what =
      StrCat("Allgather #", seq, " of ", bytes, " bytes per rank");
  if (bytes > kMaxMessageBytes) {
    return impl_->Fail(what, ": more than ", kMaxMessageBytes,
                       " bytes per rank; split it");
  }
  Status s = impl_->CheckUsable(what);
  if (!s.ok()) return s;
  MPI_Request request;
  POSEIDON_MPI_CHECK(
      impl_->rank, what,
      MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv,
                     static_cast<int>(bytes), MPI_BYTE, impl_->comm, &request));
  return impl_->Collective(what, &request);
}

Status MpiCommunicator::Barrier() {
  const uint64_t seq = ++impl_->collective_seq;
  const std::string what = StrCat("Barrier #", seq);
  Status s = impl_->CheckUsable(what);
  if (!s.ok()) return s;
  MPI_Request request;
  POSEIDON_MPI_CHECK(impl_->rank, what, MPI_Ibarrier(impl_->comm, &request));
  return impl_->Collective(what, &request);
}

void MpiCommunicator::Abort(const std::string& why) {
  LOG(ERROR) << "rank " << impl_->rank << " of " << impl_->size
             << " aborting the job: " << why;
  google::FlushLogFiles(google::GLOG_INFO);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

}  // namespace dist
}  // namespace poseidon
