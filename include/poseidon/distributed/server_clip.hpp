// ServerClip: clip_gradients when the servers own the model. The norm that
// clipping divides by is the norm of the whole gradient of an iteration, so
// the shards must agree on it before any of them updates.
//
// Note [Clipping on the servers]
// A worker that updates its own params clips as Caffe does
// (SGDSolver::ClipGradients): the sum of squares of every learnable param's
// gradient, and if its root exceeds clip_gradients every gradient times
// clip / norm. With the update on the servers (Note [Server-side update] in
// shard_state.hpp) the mean gradient of a PS layer exists only on the shard
// that holds each block, and the gradient of an SFB or ALLREDUCE layer only
// on the workers (the same on each). So, per iteration (BSP; clipping is
// refused with staleness):
//   1. each shard takes its blocks' pushes as usual but keeps the mean and
//      its sum of squares instead of updating and sending (the lanes' update
//      function is ShardState::Stage, and the ParamServer holds the block:
//      ParamServerOptions::hold_updates);
//   2. each worker, once its other layers' exchanges are in, adds the sums
//      of squares of the params it updates itself (in param order; the
//      same bits on every worker) and hands that to its ServerClip
//      (WorkerPart);
//   3. when both are in (a rank without a shard has nothing to stage, one
//      without a worker takes the workers' part from the first worker),
//      the ranks trade their parts, one message from a rank to another at
//      most (kClipTag): a shard's rank sends its blocks' sum (added block
//      after block in its order) to every other rank of the job that
//      serves or works, and with dedicated servers the first worker sends
//      the workers' part to each server. Each rank then adds total = the
//      workers' part + the shards' parts in shard order: the same
//      additions of the same values on every rank, so every rank's total
//      has the same bits;
//   4. the shard multiplies its kept means by ClipScale(total) and steps
//      them (ShardState::ApplyStaged), then sends each block's new
//      parameters to every worker (ParamServer::SendHeld), which is what
//      the workers' pulls wait for, in the order the blocks were staged:
//      each lane then sends its blocks in the order the exchanges were
//      posted, as without clipping, which the workers' pulls follow (Note
//      [Server pipeline] in param_server.cpp; in block order, a lane's
//      send of a block of a later exchange waited for a worker whose pull
//      thread waited for one of an earlier exchange behind it);
//   5. the worker takes the total (Total) before it waits for its pulls
//      (so that a server that is gone is named by the agreement, at the
//      first deadline), then clips and updates the params it holds with
//      the same factor.
// The bytes on the wire are those of the update on the servers without
// clipping (a push and a pull of each block) plus a 24-byte message from
// each shard to each other rank, and from the first worker to each
// dedicated server. Against the workers clipping, the weights match
// within float rounding (the norm's additions group by block instead of by
// param) and every replica equals the servers' bit for bit
// (test_server_update.cpp, ServerClipTest).
//
// Thread safety: BlockStaged runs on the shard's lanes' threads,
// WorkerPart and Total on the training thread, Open on a dedicated
// server's command thread; whichever completes an iteration's round runs
// the agreement (steps 3-4) on its own thread. An
// iteration's round begins once the previous one has ended (BSP: no worker
// pushes iteration t + 1 before every shard has sent the parameters of t).
#ifndef POSEIDON_DISTRIBUTED_SERVER_CLIP_HPP_
#define POSEIDON_DISTRIBUTED_SERVER_CLIP_HPP_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/distributed/communicator.hpp"
#include "poseidon/distributed/shard_state.hpp"
#include "poseidon/proto/caffe.pb.h"
#include "poseidon/util/status.hpp"

namespace poseidon {
namespace dist {

template <typename Dtype>
class ServerClip {
 public:
  // Sends held block `block`'s parameters of `iter` (at `params`) to every
  // worker (ParamServer::SendHeld).
  using Sender =
      std::function<void(int64_t iter, int block, const Dtype* params)>;

  // `comm`: the communicator `roles` names ranks of (both lists given:
  // the colocated default is every rank in both); `state`: the shard this
  // rank hosts, or null on a worker without one. Both observed.
  ServerClip(Communicator* comm, ShardState<Dtype>* state,
             const SolverParameter& solver, PsRoles roles);
  POSEIDON_DISABLE_COPY_AND_ASSIGN(ServerClip);

  // Set once, before the first exchange (the transport that owns the
  // shard's ParamServer).
  void set_sender(Sender sender) { sender_ = std::move(sender); }

  // On a lane's thread, after state->Stage(block, ...) for `iter`.
  void BlockStaged(int64_t iter, int block);
  // On a dedicated server, when it is told to serve iteration `iter`: a
  // shard with no blocks to stage then agrees at once.
  void Open(int64_t iter);
  // On the training thread: the workers' part of the sum of squares of
  // `iter` (step 2).
  void WorkerPart(int64_t iter, Dtype sumsq);
  // On the training thread, after WorkerPart: the agreed sum of squares of
  // `iter`'s whole gradient, waiting for the agreement (at most the
  // communicator's deadline); a failure names the shard that did not
  // answer.
  Status Total(int64_t iter, Dtype* total);

 private:
  // Steps 3-4, on the thread that completed the round.
  void Agree(int64_t iter, Dtype worker_part);
  // Trades this rank's parts with the others' and adds the total.
  Status AddParts(int64_t iter, Dtype worker_part, Dtype* total);
  // Whether rank `from` sends its parts to rank `to` (step 3).
  bool Sends(int from, int to) const;
  // Starts iteration `iter`'s round if it is not the current one.
  void BeginLocked(int64_t iter);
  // Whether the round has every part this rank contributes (its blocks
  // staged, the workers' part in), so that the caller should agree.
  bool CompleteLocked() const;

  Communicator* comm_;
  ShardState<Dtype>* state_;
  const SolverParameter solver_;
  const PsRoles roles_;
  bool worker_ = false;  // this rank is one of roles_.workers
  Sender sender_;

  std::mutex mu_;
  std::condition_variable agreed_;
  // The current round, GUARDED_BY(mu_).
  int64_t iter_ = -1;
  std::vector<int> staged_;  // blocks staged, in the order they were
  bool worker_in_ = false;
  Dtype worker_part_ = 0;
  bool done_ = false;  // agreed, or failed
  Status status_;
  Dtype total_ = 0;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_SERVER_CLIP_HPP_
