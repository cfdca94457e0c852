// The shared-memory allreduce: slots and flags in memory every rank maps.
#include "poseidon/dist/shared_allreduce.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

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
// before the layer's next forward, with slots = staleness + 2. Neither wait
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

static_assert(std::atomic<int64_t>::is_always_lock_free,
              "flags in shared memory must be lock-free atomics");
constexpr size_t kLine = SharedMemory::kAlignment;  // the control line

std::atomic<int64_t>* Flag(char* line, bool published) {
  return reinterpret_cast<std::atomic<int64_t>*>(
      line + (published ? 0 : sizeof(int64_t)));
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
  const int W = comm_->size();
  constexpr size_t kBlock = 2048;  // stays in L1 across the ranks' slots
  for (size_t begin = 0; begin < count; begin += kBlock) {
    const size_t end = std::min(count, begin + kBlock);
    const Dtype* first = RankSlot(g, 0, iter) + offset;
    for (size_t i = begin; i < end; ++i) out[i] = first[i];
    for (int r = 1; r < W; ++r) {
      const Dtype* x = RankSlot(g, r, iter) + offset;
      for (size_t i = begin; i < end; ++i) out[i] += x[i];
    }
    for (size_t i = begin; i < end; ++i) out[i] *= scale;
  }
}

template <typename Dtype>
void SharedAllreduce<Dtype>::Release(int g, int64_t iter) {
  Flag(Line(g, comm_->rank()), false)
      ->store(iter + 1, std::memory_order_release);
}

template <typename Dtype>
void SharedAllreduce<Dtype>::WaitForFlag(int g, int64_t iter,
                                         bool published) const {
  const int W = comm_->size();
  auto behind = [&](int r) {
    return Flag(Line(g, r), published)->load(std::memory_order_acquire) <
           iter + 1;
  };
  auto anyone_behind = [&] {
    for (int r = 0; r < W; ++r) {
      if (behind(r)) return true;
    }
    return false;
  };
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const std::chrono::milliseconds timeout = memory_->timeout();
  for (int round = 1; anyone_behind(); ++round) {
    if (round < 2000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if (round % 256 != 0 || timeout.count() <= 0 ||
        Clock::now() - start < timeout) {
      continue;
    }
    std::vector<int> late;
    for (int r = 0; r < W; ++r) {
      if (behind(r)) late.push_back(r);
    }
    std::string who = late.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < late.size(); ++i) {
      who += StrCat(i == 0 ? "" : ", ", late[i]);
    }
    POSEIDON_THROW(DistributedError, "rank ", comm_->rank(), ": layer '",
                   groups_[g].name, "', iteration ", iter,
                   ": timed out after ", FormatSeconds(timeout),
                   " waiting for ", who, " to ",
                   published ? "publish the gradient"
                             : "read the previous gradient",
                   " in shared memory");
  }
}

template class SharedAllreduce<float>;
template class SharedAllreduce<double>;

}  // namespace dist
}  // namespace poseidon
