// MpiCommunicator: the collectives, built from point-to-point messages on
// a duplicate communicator (Note [Collectives from messages]): Allgather
// and Barrier every rank to every other, Broadcast down a binomial tree,
// AllreduceSum by allgather.
#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "mpi_communicator_impl.hpp"

namespace poseidon {
namespace dist {

Status MpiCommunicator::AllreduceSum(float* buf, size_t count) {
  return AllreduceSumByAllgather(this, buf, count);
}

Status MpiCommunicator::AllreduceSum(double* buf, size_t count) {
  return AllreduceSumByAllgather(this, buf, count);
}

Status MpiCommunicator::Broadcast(void* buf, size_t bytes, int root) {
  const uint64_t seq = ++impl_->collective_seq;
  const std::string what =
      StrCat("Broadcast #", seq, " of ", bytes, " bytes from root ",
             impl_->Job(root));
  if (root < 0 || root >= impl_->size) {
    return impl_->Fail(what, ": no such rank (job of ", impl_->size, " ranks)");
  }
  Status s = impl_->CheckUsable(what);
  if (!s.ok()) return s;
  return impl_->BroadcastFromMessages(what, seq, static_cast<char*>(buf), bytes,
                                      root);
}

// Note [Collectives from messages]
// Allgather (and so AllreduceSum) and Barrier are point-to-point messages,
// every rank to every other, on a duplicate of the communicator with the
// collective's sequence number as tag, rather than MPI_Iallgather and
// MPI_Ibarrier; Broadcast is messages down a binomial tree rooted at the
// root (log2(n) rounds, each rank receiving once and sending to at most
// log2(n) children, as MPI's own small-message broadcast does), rather
// than MPI_Ibcast, and a rank that times out names the rank it waited for
// ("rank 2 to pass on the root's data"). Two reasons. A collective that times
// out can then name the ranks whose part never came ("waiting for rank 3's
// part"); MPI's request only says that the collective has not finished, which
// in a job of more than two ranks named nobody ("waiting for every rank to
// join"), as the signal agreement's allgather did after a link flap. And a
// receive that has not matched is withdrawn on timeout (Note [Progress
// thread]), so MPI does not write into a gather buffer the caller freed after
// the error (a receive already matched and still in flight is not withdrawn:
// that one marks the communicator unusable, Note [MPI timeouts]). The
// bytes each rank sends and receives are those of MPI's own allgather
// ((n - 1) parts each way), but the messages go out at once instead of in
// log(n) or n - 1 rounds; tested at 2 to 4 ranks and in the 2 x 2 fault
// matrix, not measured against MPI_Iallgather at large n.
Status MpiCommunicator::Allgather(const void* send, size_t bytes, void* recv) {
  const uint64_t seq = ++impl_->collective_seq;
  const std::string what =
      StrCat("Allgather #", seq, " of ", bytes, " bytes per rank");
  if (bytes > kMaxMessageBytes) {
    return impl_->Fail(what, ": more than ", kMaxMessageBytes,
                       " bytes per rank; split it");
  }
  return impl_->GatherFromMessages(what, seq, send, bytes,
                                   static_cast<char*>(recv));
}

Status MpiCommunicator::Barrier() {
  const uint64_t seq = ++impl_->collective_seq;
  return impl_->GatherFromMessages(StrCat("Barrier #", seq), seq, nullptr, 0,
                                   nullptr);
}

Status MpiCommunicator::Impl::GatherFromMessages(const std::string& what,
                                                 uint64_t seq, const void* send,
                                                 size_t bytes, char* recv) {
  Status s = CheckUsable(what);
  if (!s.ok()) return s;
  if (bytes > 0) {
    std::memmove(recv + static_cast<size_t>(rank) * bytes, send, bytes);
  }
  if (size == 1) return Status::OK();
  const int tag =
      static_cast<int>(seq % (static_cast<uint64_t>(kMaxTag) + 1));
  std::vector<MpiOp> in(size - 1), out(size - 1);
  std::vector<MpiOp*> list;
  for (int peer = 0, k = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    MpiOp& op = in[k++];
    op.what = what;
    op.Receive(peer, tag,
               bytes > 0 ? recv + static_cast<size_t>(peer) * bytes : nullptr,
               bytes, /*collective=*/true);
    op.waiting_for = StrCat("rank ", Job(peer), "'s part");
    list.push_back(&op);
  }
  for (int k = 1; k < size; ++k) {
    const int peer = (rank + k) % size;
    MpiOp& op = out[k - 1];
    op.what = what;
    op.waiting_for = StrCat("rank ", Job(peer), " to take this rank's part");
    s = StartCollectiveSend(&op, send, bytes, peer, tag);
    if (!s.ok()) return s;
    list.push_back(&op);
  }
  return Await(list, "");
}

Status MpiCommunicator::Impl::StartCollectiveSend(MpiOp* op, const void* buf,
                                                  size_t bytes, int dest,
                                                  int tag) {
  const int rc = MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, dest, tag,
                           coll_comm, &op->request);
  if (rc == MPI_SUCCESS) return Status::OK();
  return MarkBroken(
      MpiErrorStatus(rc, self(), op->what, "MPI_Isend", __FILE__, __LINE__));
}

Status MpiCommunicator::Impl::BroadcastFromMessages(const std::string& what,
                                                    uint64_t seq, char* data,
                                                    size_t bytes, int root) {
  if (size == 1 || bytes == 0) return Status::OK();
  const int tag =
      static_cast<int>(seq % (static_cast<uint64_t>(kMaxTag) + 1));
  // Ranks relative to the root: r's parent is r without its lowest set
  // bit; its children are r + m for the powers of two m below that bit.
  const int relative = (rank - root + size) % size;
  int parent = -1;
  int low = 1;
  for (; low < size; low <<= 1) {
    if (relative & low) {
      parent = (relative - low + root) % size;
      break;
    }
  }
  std::vector<int> children;
  for (int m = low >> 1; m > 0; m >>= 1) {
    if (relative + m < size) children.push_back((relative + m + root) % size);
  }
  std::deque<MpiOp> sends;  // stable addresses for the progress thread
  std::vector<MpiOp*> pending;
  for (size_t begin = 0; begin < bytes; begin += kMaxMessageBytes) {
    const size_t len = std::min(kMaxMessageBytes, bytes - begin);
    if (parent >= 0) {
      MpiOp in;
      in.what = what;
      in.Receive(parent, tag, data + begin, len, /*collective=*/true);
      in.waiting_for =
          parent == root
              ? StrCat("rank ", Job(root), " (the root)")
              : StrCat("rank ", Job(parent), " to pass on the root's data");
      Status s = Await({&in}, "");
      // Sends of earlier pieces still read the caller's buffer.
      if (!s.ok()) return pending.empty() ? s : MarkBroken(s);
    }
    for (int child : children) {
      sends.emplace_back();
      MpiOp& op = sends.back();
      op.what = what;
      op.waiting_for = StrCat("rank ", Job(child), " to take the data");
      Status s = StartCollectiveSend(&op, data + begin, len, child, tag);
      if (!s.ok()) return s;
      pending.push_back(&op);
    }
  }
  return Await(pending, "");
}

}  // namespace dist
}  // namespace poseidon
