// ShardState: what a parameter-server shard holds when the servers own the
// model (DistributedParameter.server_update): the parameters of its blocks
// and the solver's history for them, and the solver's update, applied by the
// shard to each block's summed gradient before the block goes back to the
// workers as parameters.
//
// Note [Server-side update]
// Workers push gradient blocks; the owning shard sums the pushes of every
// worker in rank order (param_server.hpp), divides the sum by the number of
// workers W, and steps the block with the solver's update body
// (ComputeStep, solvers/update_rule.hpp: iter_size normalisation, weight
// decay with the param's decay_mult, the rule with its history at the rate
// of the iteration times lr_mult), then w -= step. The workers pull the
// block's new parameters instead of the sum. Every operation is the one a
// worker's SGDSolver::ApplyUpdateToParam runs on the whole param, on the
// same elements in the same order (Note [One update body]): a run with the
// update on the servers gives the weights of a run with the update on every
// worker bit for bit, and every worker's copy equals the servers'.
//   The learning rate comes from the solver's settings and the iteration
// (ScheduledRate, MultistepStepAt), so a shard needs no worker's solver.
//   The state is seeded from the workers' solver (the same on every rank)
// before the first exchange of each Step: the weights always (fine-tuning
// weights, weights set from Python between steps), the history when the
// synchroniser is new or a solver state was restored. The history goes
// back to the workers (Gather) before a snapshot.
//
// Thread safety: Seed and history() are called while no exchange of the
// shard's blocks is under way (the synchroniser's training or collective
// thread); Apply runs on the shard's lanes' threads, for different blocks
// at once (disjoint elements; Note [Server lanes] in param_server.cpp);
// the messages of the exchanges order them.
#ifndef POSEIDON_DISTRIBUTED_SHARD_STATE_HPP_
#define POSEIDON_DISTRIBUTED_SHARD_STATE_HPP_

#include <cstdint>
#include <functional>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/communicator.hpp"
#include "poseidon/proto/caffe.pb.h"
#include "poseidon/solvers/update_rule.hpp"

namespace poseidon {
namespace dist {

// The update settings of the params a shard may hold, by net id.
struct ServerUpdateSettings {
  SolverParameter solver;  // the fields ComputeStep and the rate read
  UpdateRule rule = UpdateRule::kSGD;
  int workers = 1;  // W: the sum of the pushes is divided by it
  // 0 under BSP, where each Apply gets the sum of every worker's push.
  // Under SSP and ASYNC (Note [Stale-synchronous serving]) each Apply gets
  // one push, and `pushers` push each block once an iteration: the W
  // workers, or at the host level the H hosts, each push holding the sum
  // of its host's L ranks (Note [Stale serving at the host level] in
  // host_level.hpp). The weight decay of each push is divided by it, so
  // that an iteration's pushes decay the weights as one step of the sum
  // does; the gradient is divided by W as always.
  int pushers = 0;
  // Per learnable param (net id): whether its blocks are updated on the
  // servers, and its multipliers (Net::params_lr, params_weight_decay).
  std::vector<bool> on_server;
  std::vector<float> lr_mult;
  std::vector<float> decay_mult;
};

// Elements of `blocks` (ids of `partition`) together.
size_t BlockElements(const BlockPartition& partition,
                     const std::vector<int>& blocks);

// For the elements [begin, end) of `blocks` packed block after block:
// fn(param, offset in that param, offset in the packed elements, count),
// once per block that holds some of them, in order.
void ForPackedRange(
    const BlockPartition& partition, const std::vector<int>& blocks,
    size_t begin, size_t end,
    const std::function<void(int p, size_t param_offset, size_t packed_offset,
                             size_t count)>& fn);

// Copies `packed`, the elements of `blocks` block after block, into whole
// params: block b's into into(b's param) + b's offset, skipping params for
// which `into` is null (history a rank does not keep).
template <typename Dtype>
void UnpackBlocks(const BlockPartition& partition,
                  const std::vector<int>& blocks, const Dtype* packed,
                  const std::function<Dtype*(int p)>& into);

template <typename Dtype>
class ShardState {
 public:
  // The blocks of `partition` (observed, outliving this object) that shard
  // `shard` owns and whose param is updated on the servers.
  ShardState(const BlockPartition* partition, int shard,
             ServerUpdateSettings settings);
  POSEIDON_DISABLE_COPY_AND_ASSIGN(ShardState);

  // The blocks shard `shard` holds under `settings`, in id order; every
  // rank computes every shard's list alike.
  static std::vector<int> HeldBlocks(const BlockPartition& partition, int shard,
                                     const std::vector<bool>& on_server);

  // Copies the held blocks' parameters and, unless `history` is empty
  // (then the shard must have been seeded with history before), their
  // history from whole params: weights(p) points at param p's elements,
  // history(a, p) at those of its history array a (a < HistoryArrays), or
  // is null for a history of zeros (a solver's fresh history, which a
  // worker then never allocates).
  void Seed(const std::function<const Dtype*(int p)>& weights,
            const std::function<const Dtype*(int a, int p)>& history);

  // A dedicated server's seed is received in place (Note [Packed
  // transfers] in server_process.cpp): the held blocks' parameters and
  // history array `a`, packed block after block in blocks() order; then
  // MarkSeeded (the first seed must have written the history).
  Dtype* mutable_weights() { return weights_.data(); }
  Dtype* mutable_history(int a) { return history_[a].data(); }
  void MarkSeeded() { seeded_ = true; }

  // `values`: the sum over the W workers of held block `block`'s gradient
  // of iteration `iter`; replaced by the block's parameters after that
  // iteration's update (Note [Server-side update]).
  void Apply(int64_t iter, int block, Dtype* values);

  // With clip_gradients the update waits for the norm of the whole
  // gradient (Note [Clipping on the servers] in server_clip.hpp), in three
  // steps. Stage: `values` (the sum over the workers of held block
  // `block`'s gradient) becomes the mean, kept with its sum of squares;
  // called on the lanes' threads, for different blocks at once. Then, once
  // every held block is staged: StagedSumsq, the sum of squares of them
  // all (added block after block in blocks() order, so the same bits
  // whatever the order they came in), and ApplyStaged, which multiplies
  // each kept mean by `scale` and steps its block as Apply does; the new
  // parameters are then at weights() + offset(block).
  void Stage(int block, const Dtype* values);
  Dtype StagedSumsq() const;
  void ApplyStaged(int64_t iter, Dtype scale);
  size_t offset(int block) const { return at_[block]; }

  // Collective over `comm` (whose rank r holds shard r): every shard's
  // history goes to rank `root` (point to point; the others keep theirs),
  // each element into history(a, p) + its offset in param p (the root's
  // solver history), or nowhere where history(a, p) is null. `history` is
  // called on the root only. A failed send or receive, naming the shard.
  Status Gather(Communicator* comm, int root,
                const std::function<Dtype*(int a, int p)>& history) const;

  // The held blocks (HeldBlocks), and history array `a` of all of them,
  // block after block in that order.
  const std::vector<int>& blocks() const { return blocks_; }
  bool holds(int block) const {
    return block >= 0 && static_cast<size_t>(block) < at_.size() &&
           at_[block] != kNotHeld;
  }
  const Dtype* history(int a) const { return history_[a].data(); }
  const Dtype* weights() const { return weights_.data(); }
  size_t elements() const { return weights_.size(); }

 private:
  static constexpr size_t kNotHeld = static_cast<size_t>(-1);  // in at_

  const BlockPartition* partition_;
  const ServerUpdateSettings settings_;
  const int shard_;
  std::vector<int> blocks_;
  std::vector<size_t> at_;  // by block id: offset in weights_, or npos
  std::vector<Dtype> weights_;
  std::vector<Dtype> history_[2];
  bool seeded_ = false;
  // Stage's means (allocated with the first) and sums of squares (by
  // place in blocks_).
  std::vector<Dtype> staged_;
  std::vector<Dtype> staged_sumsq_;
  std::vector<int> place_;  // by block id: its place in blocks_

  // Steps held block `block` with `grad`, the workers' mean gradient,
  // which becomes the step (Apply's and ApplyStaged's common part).
  void Step(int64_t iter, int block, Dtype* grad);
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_SHARD_STATE_HPP_
