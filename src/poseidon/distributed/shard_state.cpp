// A parameter-server shard's parameters and solver history, and the
// solver's update applied to them (Note [Server-side update]).
#include "poseidon/distributed/shard_state.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "poseidon/distributed/tags.hpp"
#include "poseidon/util/emulation.hpp"
#include "poseidon/util/math_functions.hpp"

namespace poseidon {
namespace dist {

size_t BlockElements(const BlockPartition& partition,
                     const std::vector<int>& blocks) {
  size_t total = 0;
  for (int b : blocks) total += partition.blocks()[b].count;
  return total;
}

void ForPackedRange(
    const BlockPartition& partition, const std::vector<int>& blocks,
    size_t begin, size_t end,
    const std::function<void(int p, size_t param_offset, size_t packed_offset,
                             size_t count)>& fn) {
  size_t at = 0;  // the packed offset of the block's first element
  for (int b : blocks) {
    if (at >= end) break;
    const ParamBlock& block = partition.blocks()[b];
    const size_t from = std::max(at, begin);
    const size_t to = std::min(at + block.count, end);
    if (from < to) fn(block.blob, block.offset + (from - at), from, to - from);
    at += block.count;
  }
}

template <typename Dtype>
void UnpackBlocks(const BlockPartition& partition,
                  const std::vector<int>& blocks, const Dtype* packed,
                  const std::function<Dtype*(int p)>& into) {
  ForPackedRange(partition, blocks, 0, BlockElements(partition, blocks),
                 [&](int p, size_t param_offset, size_t packed_offset,
                     size_t count) {
                   Dtype* param = into(p);
                   if (param == nullptr) return;
                   std::memcpy(param + param_offset, packed + packed_offset,
                               count * sizeof(Dtype));
                 });
}

template void UnpackBlocks<float>(const BlockPartition&,
                                  const std::vector<int>&, const float*,
                                  const std::function<float*(int)>&);
template void UnpackBlocks<double>(const BlockPartition&,
                                   const std::vector<int>&, const double*,
                                   const std::function<double*(int)>&);

template <typename Dtype>
std::vector<int> ShardState<Dtype>::HeldBlocks(
    const BlockPartition& partition, int shard,
    const std::vector<bool>& on_server) {
  std::vector<int> held;
  for (int b : partition.shard_blocks(shard)) {
    const int blob = partition.blocks()[b].blob;
    if (blob < static_cast<int>(on_server.size()) && on_server[blob]) {
      held.push_back(b);
    }
  }
  return held;
}

template <typename Dtype>
ShardState<Dtype>::ShardState(const BlockPartition* partition, int shard,
                              ServerUpdateSettings settings)
    : partition_(partition), settings_(std::move(settings)), shard_(shard) {
  const size_t params = settings_.on_server.size();
  POSEIDON_REQUIRE(static_cast<int>(params) == partition_->num_blobs() &&
                       settings_.lr_mult.size() == params &&
                       settings_.decay_mult.size() == params,
                   ConfigError, "server update: settings for ", params,
                   " params (", settings_.lr_mult.size(), " lr_mult, ",
                   settings_.decay_mult.size(),
                   " decay_mult) but the "
                   "block partition has ",
                   partition_->num_blobs());
  POSEIDON_REQUIRE(settings_.workers >= 1, ConfigError,
                   "server update: ", settings_.workers, " workers");
  CheckUpdateSettings(settings_.solver, settings_.rule);
  blocks_ = HeldBlocks(*partition_, shard, settings_.on_server);
  at_.assign(partition_->blocks().size(), kNotHeld);
  place_.assign(partition_->blocks().size(), -1);
  size_t total = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    at_[blocks_[i]] = total;
    place_[blocks_[i]] = static_cast<int>(i);
    total += partition_->blocks()[blocks_[i]].count;
  }
  if (settings_.solver.clip_gradients() >= 0) {
    staged_.assign(total, Dtype(0));
    staged_sumsq_.assign(blocks_.size(), Dtype(0));
  }
  weights_.assign(total, Dtype(0));
  for (int a = 0; a < HistoryArrays(settings_.rule); ++a) {
    history_[a].assign(total, Dtype(0));
  }
}

template <typename Dtype>
void ShardState<Dtype>::Seed(
    const std::function<const Dtype*(int p)>& weights,
    const std::function<const Dtype*(int a, int p)>& history) {
  CHECK(seeded_ || history) << "a shard's first seed needs the history";
  const int arrays = history ? HistoryArrays(settings_.rule) : 0;
  for (int b : blocks_) {
    const ParamBlock& block = partition_->blocks()[b];
    const size_t bytes = block.count * sizeof(Dtype);
    std::memcpy(weights_.data() + at_[b], weights(block.blob) + block.offset,
                bytes);
    for (int a = 0; a < arrays; ++a) {
      const Dtype* from = history(a, block.blob);
      if (from == nullptr) {
        std::fill_n(history_[a].data() + at_[b], block.count, Dtype(0));
      } else {
        std::memcpy(history_[a].data() + at_[b], from + block.offset, bytes);
      }
    }
  }
  seeded_ = true;
}

template <typename Dtype>
void ShardState<Dtype>::Apply(int64_t iter, int block, Dtype* values) {
  CHECK(seeded_) << "server update of block " << block << " (iteration " << iter
                 << ") before the shard was seeded";
  CHECK(holds(block))
      << "server update of block " << block << ", which this shard does "
      << "not hold";
  emulation::DilatedCompute dilated;  // Note [Time dilation]
  const ParamBlock& b = partition_->blocks()[block];
  // The steps of SGDSolver::ApplyUpdateToParam, on this block's elements:
  // the mean over workers (the synchroniser's Read), ComputeStep, and
  // Blob::Update's w -= step.
  cpu_scale(static_cast<int>(b.count), Dtype(1) / settings_.workers, values,
            values);
  Step(iter, block, values);
  std::memcpy(values, weights_.data() + at_[block], b.count * sizeof(Dtype));
}

template <typename Dtype>
void ShardState<Dtype>::Step(int64_t iter, int block, Dtype* grad) {
  const ParamBlock& b = partition_->blocks()[block];
  const int count = static_cast<int>(b.count);
  Dtype* w = weights_.data() + at_[block];
  const SolverParameter& sp = settings_.solver;
  const int it = static_cast<int>(iter);
  const Dtype rate =
      static_cast<Dtype>(ScheduledRate(sp, it, MultistepStepAt(sp, it)));
  ParamRun<Dtype> run;
  run.count = count;
  run.data = w;
  run.diff = grad;
  for (int a = 0; a < HistoryArrays(settings_.rule); ++a) {
    run.history[a] = history_[a].data() + at_[block];
  }
  run.lr_mult = settings_.lr_mult[b.blob];
  run.decay_mult = settings_.decay_mult[b.blob];
  if (settings_.pushers > 0) run.decay_mult /= settings_.pushers;
  ComputeStep(Poseidon::CPU, sp, settings_.rule, rate, it, run);
  cpu_axpy(count, Dtype(-1), grad, w);
}

template <typename Dtype>
void ShardState<Dtype>::Stage(int block, const Dtype* values) {
  CHECK(!staged_sumsq_.empty() || blocks_.empty())
      << "ShardState::Stage without clip_gradients";
  CHECK(holds(block)) << "staging block " << block
                      << ", which this shard does not hold";
  emulation::DilatedCompute dilated;  // Note [Time dilation]
  const int count = static_cast<int>(partition_->blocks()[block].count);
  Dtype* mean = staged_.data() + at_[block];
  // The mean as Apply takes it, and its sum of squares as Blob::sumsq_diff
  // adds a param's (cpu_dot).
  cpu_scale(count, Dtype(1) / settings_.workers, values, mean);
  staged_sumsq_[place_[block]] = cpu_dot(count, mean, mean);
}

template <typename Dtype>
Dtype ShardState<Dtype>::StagedSumsq() const {
  Dtype sum = 0;
  for (const Dtype s : staged_sumsq_) sum += s;
  return sum;
}

template <typename Dtype>
void ShardState<Dtype>::ApplyStaged(int64_t iter, Dtype scale) {
  CHECK(seeded_ || blocks_.empty())
      << "server update (iteration " << iter << ") before the shard was seeded";
  emulation::DilatedCompute dilated;  // Note [Time dilation]
  for (int block : blocks_) {
    Dtype* grad = staged_.data() + at_[block];
    const int count = static_cast<int>(partition_->blocks()[block].count);
    // Blob::scale_diff's multiplication, where the workers clip theirs.
    if (scale != Dtype(1)) cpu_scal(count, scale, grad);
    Step(iter, block, grad);
  }
}

template <typename Dtype>
Status ShardState<Dtype>::Gather(
    Communicator* comm, int root,
    const std::function<Dtype*(int a, int p)>& history) const {
  const int arrays = HistoryArrays(settings_.rule);
  const bool at_root = comm->rank() == root;
  if (!at_root) {
    // Only the root keeps the history: send this shard's, array by array.
    for (int a = 0; a < arrays && !blocks_.empty(); ++a) {
      const Status st = comm->Send(history_[a].data(),
                                   history_[a].size() * sizeof(Dtype), root,
                                   kHistoryTag);
      if (!st.ok()) {
        return Status::Failure(StrCat("sending the solver history of the "
                                      "parameter-server shard of rank ",
                                      comm->JobRank(comm->rank()),
                                      " to rank ", comm->JobRank(root), ": ",
                                      st.message()));
      }
    }
    return Status::OK();
  }
  std::vector<Dtype> buffer;
  for (int s = 0; s < partition_->num_shards(); ++s) {
    const std::vector<int> held =
        s == shard_ ? blocks_ : HeldBlocks(*partition_, s, settings_.on_server);
    const size_t total = BlockElements(*partition_, held);
    if (total == 0) continue;
    for (int a = 0; a < arrays; ++a) {
      const Dtype* from = history_[a].data();
      if (s != shard_) {
        buffer.resize(total);
        const Status st =
            comm->Recv(buffer.data(), total * sizeof(Dtype), s, kHistoryTag);
        if (!st.ok()) {
          return Status::Failure(
              StrCat("gathering the solver history of the "
                     "parameter-server shard of rank ",
                     comm->JobRank(s), ": ", st.message()));
        }
        from = buffer.data();
      }
      UnpackBlocks<Dtype>(*partition_, held, from,
                          [&](int p) { return history(a, p); });
    }
  }
  return Status::OK();
}

template class ShardState<float>;
template class ShardState<double>;

}  // namespace dist
}  // namespace poseidon
