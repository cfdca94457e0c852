// The shards' agreement on the norm of the whole gradient
// (Note [Clipping on the servers]).
#include "poseidon/distributed/server_clip.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "poseidon/distributed/tags.hpp"
#include "poseidon/solvers/update_rule.hpp"

namespace poseidon {
namespace dist {
namespace {

// A rank's parts of an iteration's sum of squares, on the wire: its
// shard's (zero without one), and the workers' (from the first worker).
struct ClipParts {
  int64_t iter;
  double shard;  // a float's or a double's value, exactly
  double workers;
};
static_assert(sizeof(ClipParts) == 24, "ClipParts is 24 bytes on the wire");

bool Contains(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

}  // namespace

template <typename Dtype>
ServerClip<Dtype>::ServerClip(Communicator* comm, ShardState<Dtype>* state,
                              const SolverParameter& solver, PsRoles roles)
    : comm_(comm), state_(state), solver_(solver), roles_(std::move(roles)) {
  CHECK(!roles_.workers.empty() && !roles_.servers.empty())
      << "ServerClip needs both role lists";
  worker_ = Contains(roles_.workers, comm_->rank());
  CHECK_EQ(state_ != nullptr, Contains(roles_.servers, comm_->rank()))
      << "rank " << comm_->rank() << ": a shard's state where the roles "
      << "name no server, or the other way round";
}

template <typename Dtype>
void ServerClip<Dtype>::BeginLocked(int64_t iter) {
  if (iter == iter_) return;
  CHECK(iter_ < 0 || done_)
      << "clip_gradients on the servers: iteration " << iter
      << " began before the agreement of " << iter_ << " ended";
  iter_ = iter;
  staged_.clear();
  // A rank without a worker takes the workers' part from a message.
  worker_in_ = !worker_;
  worker_part_ = 0;
  done_ = false;
  status_ = Status::OK();
  total_ = 0;
}

template <typename Dtype>
bool ServerClip<Dtype>::CompleteLocked() const {
  const size_t held = state_ ? state_->blocks().size() : 0;
  return worker_in_ && staged_.size() == held;
}

template <typename Dtype>
void ServerClip<Dtype>::BlockStaged(int64_t iter, int block) {
  Dtype worker_part = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    BeginLocked(iter);
    staged_.push_back(block);
    CHECK(state_ && staged_.size() <= state_->blocks().size())
        << "clip_gradients on the servers: more blocks staged than the "
           "shard holds (iteration "
        << iter << ")";
    if (!CompleteLocked()) return;
    worker_part = worker_part_;
  }
  Agree(iter, worker_part);
}

template <typename Dtype>
void ServerClip<Dtype>::Open(int64_t iter) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    BeginLocked(iter);
    // Complete now only when there is nothing to stage (else the last
    // block staged completes it).
    if (!staged_.empty() || !CompleteLocked()) return;
  }
  Agree(iter, 0);
}

template <typename Dtype>
void ServerClip<Dtype>::WorkerPart(int64_t iter, Dtype sumsq) {
  CHECK(worker_) << "ServerClip::WorkerPart on a rank that is no worker";
  {
    std::lock_guard<std::mutex> lock(mu_);
    BeginLocked(iter);
    worker_in_ = true;
    worker_part_ = sumsq;
    if (!CompleteLocked()) return;
  }
  Agree(iter, sumsq);
}

template <typename Dtype>
bool ServerClip<Dtype>::Sends(int from, int to) const {
  if (from == to) return false;
  const bool to_anyone =
      Contains(roles_.workers, to) || Contains(roles_.servers, to);
  if (!to_anyone) return false;
  // A shard's part goes to everyone; the workers' part to the ranks that
  // have no worker of their own.
  return Contains(roles_.servers, from) ||
         (from == roles_.workers[0] && !Contains(roles_.workers, to));
}

template <typename Dtype>
Status ServerClip<Dtype>::AddParts(int64_t iter, Dtype worker_part,
                                   Dtype* total) {
  const int n = comm_->size();
  const int self = comm_->rank();
  ClipParts out{iter, 0, 0};
  if (state_) out.shard = static_cast<double>(state_->StagedSumsq());
  if (worker_) out.workers = static_cast<double>(worker_part);
  std::vector<ClipParts> in(n);
  std::vector<Communicator::SendOp> sends;
  std::vector<Communicator::RecvOp> recvs;
  for (int r = 0; r < n; ++r) {
    if (Sends(self, r)) sends.push_back({&out, sizeof(out), r, kClipTag});
    if (Sends(r, self)) recvs.push_back({&in[r], sizeof(in[r]), r, kClipTag});
  }
  // Both directions in flight at once: a Send may wait for its Recv.
  Status sent;
  std::thread sender([&] { sent = comm_->SendAll(sends); });
  const Status received = comm_->RecvAll(recvs);
  sender.join();
  if (!sent.ok()) return sent;
  if (!received.ok()) return received;
  in[self] = out;
  for (const Communicator::RecvOp& op : recvs) {
    const ClipParts& got = in[op.src];
    if (got.iter != iter) {
      return Status::Failure(StrCat("rank ", comm_->JobRank(op.src),
                                    " sent its part of the gradient's norm "
                                    "for iteration ",
                                    got.iter, ", expected ", iter));
    }
  }
  Dtype sum =
      worker_ ? worker_part : static_cast<Dtype>(in[roles_.workers[0]].workers);
  for (const int r : roles_.servers) sum += static_cast<Dtype>(in[r].shard);
  *total = sum;
  return Status::OK();
}

template <typename Dtype>
void ServerClip<Dtype>::Agree(int64_t iter, Dtype worker_part) {
  Dtype total = 0;
  Status s = AddParts(iter, worker_part, &total);
  std::vector<int> send;
  if (s.ok() && state_) {
    state_->ApplyStaged(iter, ClipScale(solver_, total));
    std::lock_guard<std::mutex> lock(mu_);
    send = staged_;
  }
  if (!s.ok()) {
    s = Status::Failure(
        StrCat("rank ", comm_->JobRank(comm_->rank()),
               ": agreeing on the norm of the gradient of iteration ", iter,
               " (clip_gradients on the parameter servers): ", s.message()));
    // The workers' pulls of this shard's blocks would wait for nothing.
    if (state_) comm_->Abort(s.message());
  }
  // The round ends before the answers go out: once they are in, a worker
  // may push the next iteration, whose blocks another lane may stage
  // (BeginLocked) before this thread would get back here.
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    status_ = s;
    total_ = total;
  }
  agreed_.notify_all();
  // The parameters stay put until every worker has them: the next
  // iteration's update waits for the workers' next pushes.
  for (const int block : send) {
    CHECK(sender_) << "ServerClip without a sender";
    sender_(iter, block, state_->weights() + state_->offset(block));
  }
}

template <typename Dtype>
Status ServerClip<Dtype>::Total(int64_t iter, Dtype* total) {
  std::unique_lock<std::mutex> lock(mu_);
  CHECK_EQ(iter, iter_) << "ServerClip::Total before WorkerPart";
  // The agreement's own messages have the communicator's deadline; this
  // wait adds one for a round that never began (a shard whose pushes
  // never came fails on its own and aborts the job).
  const bool ended =
      agreed_.wait_for(lock, 2 * comm_->timeout(), [&] { return done_; });
  if (!ended) {
    return Status::Failure(
        StrCat("rank ", comm_->JobRank(comm_->rank()),
               ": the parameter-server shard on this rank did not agree on the "
               "norm of the gradient of iteration ",
               iter, " (clip_gradients) within ",
               std::chrono::duration<double>(2 * comm_->timeout()).count(),
               " s: its blocks' pushes did not all arrive"));
  }
  *total = total_;
  return status_;
}

template class ServerClip<float>;
template class ServerClip<double>;

}  // namespace dist
}  // namespace poseidon
