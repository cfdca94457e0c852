// The shared-memory allreduce: slots and flags in memory every rank maps.
#include "poseidon/distributed/shared_allreduce.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "poseidon/distributed/shared_flags.hpp"
#include "poseidon/util/emulation.hpp"
#include "poseidon/util/wait_notes.hpp"

namespace poseidon {
namespace dist {

// Note [Shared memory allreduce]
// Each rank's part of one SharedMemory holds, per group, a 64-byte control
// line {published, released} (an iteration + 1; 0 = none yet) and `slots`
// slots of the group's gradient. For group g and iteration j:
//   Slot + Publish: wait until every rank's released >= j + 1 - slots (all
//       have read what the slot held; skipped while the slot is unused),
//       copy the gradient into this rank's slot, then published = j + 1
//       (release order);
//   Wait + Sum + Release: wait until every rank's published >= j + 1
//       (acquire order), sum x_0 + x_1 + ... + x_{W-1} over the ranks'
//       slots in rank order (the same operations, so the same bits, on
//       every rank), then released = j + 1.
// The distributed trainer publishes after a layer's backward and sums
// before the layer's next forward, with slots = staleness + 2 (3 without
// staleness: Note [Gradients born in shared memory]). Neither wait
// can deadlock there: a rank publishing j has applied j - 1 - s, which
// needed every rank to publish it, and a rank that published j - 1 - s can
// reach its forward of iteration j - 1, and so release j - 2 - s, without
// waiting for anyone. Waits yield the core at first (a peer a few hundred
// microseconds behind) and then sleep 50 us, so a long stall does not burn
// the core, and give up after the communicator's timeout naming the ranks
// that are behind. On LeNet over two ranks with one core each, this took
// the scaling efficiency from 0.84 (messages through Open MPI's
// shared-memory transport, a progress thread and communication threads) to
// 0.92 (docs/distributed.md).

namespace {

constexpr size_t kLine = SharedMemory::kAlignment;  // the control line

std::atomic<int64_t>* Flag(char* line, bool published) {
  return SharedFlag(line, published ? 0 : 1);
}

}  // namespace

template <typename Dtype>
std::unique_ptr<SharedAllreduce<Dtype>> SharedAllreduce<Dtype>::Create(
    Communicator* comm, std::vector<Group> groups, int slots) {
  CHECK_GE(slots, 1);
  std::vector<size_t> offsets;
  size_t bytes = 0;
  for (const Group& g : groups) {
    offsets.push_back(bytes);
    bytes += kLine + SharedMemory::Align(slots * g.count * sizeof(Dtype));
  }
  if (groups.empty()) return nullptr;
  std::unique_ptr<SharedMemory> memory = comm->MapSharedMemory(bytes);
  if (!memory) return nullptr;
  return std::unique_ptr<SharedAllreduce>(
      new SharedAllreduce(comm, std::move(groups), slots, std::move(offsets),
                          std::move(memory)));
}

template <typename Dtype>
SharedAllreduce<Dtype>::SharedAllreduce(Communicator* comm,
                                        std::vector<Group> groups, int slots,
                                        std::vector<size_t> offsets,
                                        std::unique_ptr<SharedMemory> memory)
    : comm_(comm),
      groups_(std::move(groups)),
      slots_(slots),
      offsets_(std::move(offsets)),
      first_iter_(groups_.size(), -1),
      memory_(std::move(memory)) {}

template <typename Dtype>
SharedAllreduce<Dtype>::~SharedAllreduce() = default;

template <typename Dtype>
char* SharedAllreduce<Dtype>::Line(int g, int rank) const {
  return memory_->part(rank) + offsets_[g];
}

template <typename Dtype>
Dtype* SharedAllreduce<Dtype>::RankSlot(int g, int rank, int64_t iter) const {
  return reinterpret_cast<Dtype*>(Line(g, rank) + kLine) +
         (iter % slots_) * groups_[g].count;
}

template <typename Dtype>
Dtype* SharedAllreduce<Dtype>::Slot(int g, int64_t iter) {
  if (first_iter_[g] < 0) first_iter_[g] = iter;
  const int64_t previous = iter - slots_;
  if (previous >= first_iter_[g]) WaitForFlag(g, previous, false);
  return RankSlot(g, comm_->rank(), iter);
}

template <typename Dtype>
void SharedAllreduce<Dtype>::Publish(int g, int64_t iter) {
  Flag(Line(g, comm_->rank()), true)
      ->store(iter + 1, std::memory_order_release);
}

template <typename Dtype>
bool SharedAllreduce<Dtype>::Ready(int g, int64_t iter) const {
  for (int r = 0; r < comm_->size(); ++r) {
    if (Flag(Line(g, r), true)->load(std::memory_order_acquire) < iter + 1) {
      return false;
    }
  }
  return true;
}

template <typename Dtype>
void SharedAllreduce<Dtype>::Wait(int g, int64_t iter) {
  WaitForFlag(g, iter, true);
}

template <typename Dtype>
void SharedAllreduce<Dtype>::Sum(int g, int64_t iter, size_t offset,
                                 size_t count, Dtype scale, Dtype* out) const {
  CHECK_LE(offset + count, groups_[g].count) << groups_[g].name;
  std::vector<const Dtype*> parts;
  for (int r = 0; r < comm_->size(); ++r) {
    parts.push_back(RankSlot(g, r, iter) + offset);
  }
  emulation::DilatedCompute dilated;  // Note [Time dilation]
  SumInOrder(parts, count, scale, out);
}

template <typename Dtype>
void SharedAllreduce<Dtype>::Release(int g, int64_t iter) {
  Flag(Line(g, comm_->rank()), false)
      ->store(iter + 1, std::memory_order_release);
}

template <typename Dtype>
void SharedAllreduce<Dtype>::WaitForFlag(int g, int64_t iter,
                                         bool published) const {
  const auto behind = [&](int r) {
    return Flag(Line(g, r), published)->load(std::memory_order_acquire) <
           iter + 1;
  };
  // The common case, without building the messages.
  if (!AnyRankBehind(comm_->size(), behind)) return;
  WaitForRanks(comm_->size(), behind, memory_->timeout(), comm_->rank(),
               StrCat("layer '", groups_[g].name, "', iteration ", iter),
               published ? "publish the gradient in shared memory"
                         : "read the previous gradient in shared memory");
}

void WaitForRanks(int ranks, const std::function<bool(int)>& behind,
                  std::chrono::milliseconds timeout, int self,
                  const std::string& what, const std::string& doing,
                  const std::vector<int>* job_ranks) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::optional<WaitNote> wait_note;  // Note [Wait notes]
  for (int round = 1; AnyRankBehind(ranks, behind); ++round) {
    if (round < 2000) {
      std::this_thread::yield();
    } else {
      if (round == 2000) {
        wait_note.emplace(StrCat("rank ", self, ": ", what,
                                 ", waiting for the ranks of this host to ",
                                 doing));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (round % 256 != 0 || timeout.count() <= 0 ||
        Clock::now() - start < timeout) {
      continue;
    }
    std::vector<int> late;
    for (int r = 0; r < ranks; ++r) {
      if (behind(r)) late.push_back(job_ranks ? job_ranks->at(r) : r);
    }
    std::string who = late.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < late.size(); ++i) {
      who += StrCat(i == 0 ? "" : ", ", late[i]);
    }
    POSEIDON_THROW(DistributedError, "rank ", self, ": ", what,
                   ": timed out after ", FormatSeconds(timeout),
                   " waiting for ", who, " to ", doing,
                   StoppedNote(start, timeout));
  }
}

template <typename Dtype>
void SumInOrder(const std::vector<const Dtype*>& parts, size_t count,
                Dtype scale, Dtype* out) {
  CHECK(!parts.empty());
  constexpr size_t kBlock = 2048;
  for (size_t begin = 0; begin < count; begin += kBlock) {
    const size_t end = std::min(count, begin + kBlock);
    const Dtype* first = parts[0];
    for (size_t i = begin; i < end; ++i) out[i] = first[i];
    for (size_t r = 1; r < parts.size(); ++r) {
      const Dtype* x = parts[r];
      for (size_t i = begin; i < end; ++i) out[i] += x[i];
    }
    for (size_t i = begin; i < end; ++i) out[i] *= scale;
  }
}

template void SumInOrder<float>(const std::vector<const float*>&, size_t,
                                float, float*);
template void SumInOrder<double>(const std::vector<const double*>&, size_t,
                                 double, double*);
template class SharedAllreduce<float>;
template class SharedAllreduce<double>;

}  // namespace dist
}  // namespace poseidon
