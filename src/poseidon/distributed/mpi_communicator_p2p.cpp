// MpiCommunicator: point-to-point messages (Send, Recv, SendRecv, and the
// batches RecvAll and SendAll that start every operation at once), each
// awaited through the progress thread.
#include <functional>
#include <string>
#include <vector>

#include "mpi_communicator_impl.hpp"

namespace poseidon {
namespace dist {

Status MpiCommunicator::Send(const void* buf, size_t bytes, int dest, int tag) {
  const std::string what = StrCat("Send of ", bytes, " bytes to rank ",
                                  impl_->Job(dest), " tag ", tag);
  Status s = impl_->CheckPeer(what, dest, tag, bytes);
  if (!s.ok()) return s;
  MpiOp op;
  op.what = what;
  op.peer = dest;
  POSEIDON_MPI_CHECK(impl_->self(), what,
                     MPI_Isend(buf, static_cast<int>(bytes), MPI_BYTE, dest,
                               tag, impl_->comm, &op.request));
  return impl_->Await({&op}, StrCat("rank ", impl_->Job(dest), " to receive"));
}

Status MpiCommunicator::Recv(void* buf, size_t bytes, int src, int tag) {
  const std::string what = StrCat("Recv of ", bytes, " bytes from rank ",
                                  impl_->Job(src), " tag ", tag);
  Status s = impl_->CheckPeer(what, src, tag, bytes);
  if (!s.ok()) return s;
  // See Note [Progress thread] for why a receive starts as a probe.
  MpiOp op;
  op.what = what;
  op.Receive(src, tag, buf, bytes, /*collective=*/false);
  return impl_->Await({&op}, StrCat("rank ", impl_->Job(src)));
}

Status MpiCommunicator::SendRecv(const void* send, size_t send_bytes,
                                 int dest, void* recv, size_t recv_bytes,
                                 int src, int tag) {
  MpiOp out;
  out.what = StrCat("Send of ", send_bytes, " bytes to rank ",
                    impl_->Job(dest), " tag ", tag);
  out.peer = dest;
  MpiOp in;
  in.what = StrCat("Recv of ", recv_bytes, " bytes from rank ",
                   impl_->Job(src), " tag ", tag);
  Status s = impl_->CheckPeer(out.what, dest, tag, send_bytes);
  if (s.ok()) s = impl_->CheckPeer(in.what, src, tag, recv_bytes);
  if (!s.ok()) return s;
  in.Receive(src, tag, recv, recv_bytes, /*collective=*/false);
  POSEIDON_MPI_CHECK(impl_->self(), out.what,
                     MPI_Isend(send, static_cast<int>(send_bytes), MPI_BYTE,
                               dest, tag, impl_->comm, &out.request));
  return impl_->Await({&out, &in}, StrCat("rank ", impl_->Job(dest),
                                          " and rank ", impl_->Job(src)));
}

Status MpiCommunicator::Impl::ReceiveOps(const std::vector<RecvOp>& ops,
                                         std::vector<MpiOp>* in) {
  for (size_t i = 0; i < ops.size(); ++i) {
    const RecvOp& r = ops[i];
    MpiOp& op = (*in)[i];
    op.what = StrCat("Recv of ", r.bytes + r.bytes2, " bytes from rank ",
                     Job(r.src), " tag ", r.tag);
    Status s = CheckPeer(op.what, r.src, r.tag, r.bytes + r.bytes2);
    if (!s.ok()) return s;
    op.Receive(r.src, r.tag, r.buf, r.bytes, /*collective=*/false);
    op.buf2 = r.buf2;
    op.bytes2 = r.bytes2;
    op.waiting_for = StrCat("rank ", Job(r.src));
  }
  return Status::OK();
}

Status MpiCommunicator::Impl::SendOps(const std::vector<SendOp>& ops,
                                      std::vector<MpiOp>* out) {
  for (size_t i = 0; i < ops.size(); ++i) {
    const SendOp& w = ops[i];
    MpiOp& op = (*out)[i];
    op.what = StrCat("Send of ", w.bytes + w.bytes2, " bytes to rank ",
                     Job(w.dest), " tag ", w.tag);
    op.waiting_for = StrCat("rank ", Job(w.dest), " to receive");
    op.peer = w.dest;
    op.tag = w.tag;  // for a window's (peer, tag); a send never probes
    op.bytes = w.bytes;
    op.bytes2 = w.bytes2;
    Status s = CheckPeer(op.what, w.dest, w.tag, w.bytes + w.bytes2);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

Status MpiCommunicator::Impl::StartSend(const SendOp& w, MpiOp* op) {
  auto isend = [&](const void* at, int n, MPI_Datatype type) {
    return MPI_Isend(at, n, type, w.dest, w.tag, comm, &op->request);
  };
  const int rc = w.bytes2 == 0
                     ? isend(w.buf, static_cast<int>(w.bytes), MPI_BYTE)
                     : StartTwoParts(w.buf, w.bytes, w.buf2, w.bytes2, isend);
  if (rc == MPI_SUCCESS) return Status::OK();
  return MpiErrorStatus(rc, self(), op->what, "MPI_Isend", __FILE__, __LINE__);
}

Status MpiCommunicator::RecvAll(const std::vector<RecvOp>& ops) {
  std::vector<MpiOp> in(ops.size());
  Status s = impl_->ReceiveOps(ops, &in);
  if (!s.ok()) return s;
  std::vector<MpiOp*> list;
  for (MpiOp& op : in) list.push_back(&op);
  return impl_->Await(list, "");
}

Status MpiCommunicator::SendAll(const std::vector<SendOp>& ops) {
  std::vector<MpiOp> out(ops.size());
  Status s = impl_->SendOps(ops, &out);
  if (!s.ok()) return s;
  std::vector<MpiOp*> list;
  for (size_t i = 0; i < ops.size(); ++i) {
    s = impl_->StartSend(ops[i], &out[i]);
    if (!s.ok()) {
      // The sends already started still read their buffers (Note [MPI
      // timeouts]).
      return list.empty() ? s : impl_->MarkBroken(s);
    }
    list.push_back(&out[i]);
  }
  return impl_->Await(list, "");
}

Status MpiCommunicator::RecvWindowed(
    const std::vector<RecvOp>& ops, size_t window_bytes,
    const std::function<Status(size_t)>& done) {
  // See Note [Sliding windows]; a receive starts as a probe, by itself.
  std::vector<MpiOp> in(ops.size());
  Status s = impl_->ReceiveOps(ops, &in);
  if (!s.ok()) return s;
  return impl_->AwaitWindowed(
      &in, window_bytes, [](MpiOp*) { return Status::OK(); }, done);
}

Status MpiCommunicator::SendWindowed(
    const std::vector<SendOp>& ops, size_t window_bytes,
    const std::function<Status(size_t)>& done) {
  // See Note [Sliding windows].
  std::vector<MpiOp> out(ops.size());
  Status s = impl_->SendOps(ops, &out);
  if (!s.ok()) return s;
  return impl_->AwaitWindowed(
      &out, window_bytes,
      [&](MpiOp* op) { return impl_->StartSend(ops[op - out.data()], op); },
      done);
}

}  // namespace dist
}  // namespace poseidon
