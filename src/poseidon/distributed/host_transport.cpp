// The host level (Note [Host level] in host_level.hpp): the host's ranks
// meet in shared memory, and only slices of their sum (dense transports) or
// their own factors (SFB) cross the network, over the `cross` communicator.
#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "poseidon/distributed/host_level.hpp"
#include "poseidon/distributed/shared_flags.hpp"
#include "poseidon/util/emulation.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/timeline.hpp"

namespace poseidon {
namespace dist {

// Note [Deadline ladder]
// With the host level a rank waits on the ranks of its host, through flags
// in shared memory, and on the ranks of other hosts, over the network (the
// cross communicator). When a rank stops, every rank that depends on it,
// directly or through another, times out in the end; the first error
// printed ends the job (MPI_Abort), so it should be the one closest to the
// cause. The deadlines therefore climb by one step (a tenth of
// --comm_timeout, at least 2 s: more than the skew between the starts of
// the waits, about an iteration):
//
//   a rank of this host, for its own work           --comm_timeout
//   a rank of another host (cross communicator)     + 1 step
//   a rank of this host that is in its exchange
//   between hosts (it has handed its slice over,
//   and the exchange has not ended)                 + 2 steps
//
// The third kind is told from the first by two more counters in shared
// memory: every rank marks its slice's (its factors') exchange between
// hosts as started and as ended (TransportContext::on_exchanged), so a
// waiting rank knows whether a late one is stuck in its own work (named at
// --comm_timeout) or waits for another host (whose error, naming a rank
// there, comes a step earlier than this rank's). Found with
// scripts/fault_matrix.py on 2 hosts x 2 ranks: with one deadline for all,
// a stopped rank's partner was named first by a rank of the other host;
// with the first two rungs only, a cut link made a rank name its partner,
// which was only waiting for the other host, and nobody named a rank
// behind the cut before the job ended.
// A rank's exchange may end without its training thread going on (it
// stopped right after handing its slice over): the rank is then no longer
// in its exchange, and the waiting rank names it a timeout after the
// exchange ended, not two steps after its wait began. Seen as a flaky
// HostLevelTest.TheFirstErrorNamesTheStoppedRank under load (1 run in 12):
// with the extension decided once, rank 2 kept waiting 5 s for a partner
// that had long finished its exchange, and a rank of the other host, on
// the rung between, named rank 2 first.
namespace {

std::chrono::milliseconds LadderStep(std::chrono::milliseconds timeout) {
  return std::max(std::chrono::milliseconds(2000), timeout / 10);
}

}  // namespace

std::vector<SlicePiece> HostPieces(const std::vector<ExchangeSpec>& groups,
                                   const std::vector<size_t>& param_counts,
                                   int L, int l) {
  std::vector<SlicePiece> pieces;
  for (const ExchangeSpec& g : groups) {
    size_t begin, end;
    HostSlice(g.count, L, l, &begin, &end);
    for (size_t i = 0; i < g.params.size(); ++i) {
      const size_t first = g.offsets[i];
      const size_t last = first + param_counts.at(g.params[i]);
      const size_t from = std::max(begin, first), to = std::min(end, last);
      if (from < to) pieces.push_back({g.params[i], from - first, to - from});
    }
  }
  return pieces;
}

std::unique_ptr<HostComms> SplitByHost(Communicator* comm,
                                       std::string* why_not) {
  HostLayout layout = DiscoverHosts(comm);
  if (layout.hosts == 1 || layout.hosts == comm->size()) return nullptr;
  if (!layout.uniform) {
    *why_not = StrCat("the hosts run different numbers of ranks (this one ",
                      layout.local_size, ")");
    return nullptr;
  }
  auto hosts = std::make_unique<HostComms>();
  // Both splits on every rank, in this order: each is collective.
  // See Note [Deadline ladder].
  const std::chrono::milliseconds t = comm->timeout();
  hosts->local = comm->Split(layout.host, layout.local_rank, t);
  hosts->cross = comm->Split(layout.local_rank, layout.host,
                             t.count() > 0 ? t + LadderStep(t) : t);
  CHECK_EQ(hosts->local->rank(), layout.local_rank);
  CHECK_EQ(hosts->cross->rank(), layout.host);
  hosts->layout = std::move(layout);
  return hosts;
}

namespace {

// The counters of a group's control line in a rank's part of the host's
// shared memory (an iteration + 1; 0 = none yet). kCrossing and kCrossed
// bracket the rank's exchange between hosts (Note [Deadline ladder]).
enum Counter {
  kPublished = 0,
  kSummed = 1,
  kReleased = 2,
  kCrossing = 3,
  kCrossed = 4
};
constexpr size_t kLine = SharedMemory::kAlignment;

// Shared between both kinds: the host's memory, laid out per group as
// {control line, `slots` slots of `slot_elements`} in every rank's part.
template <typename Dtype>
class HostMemory {
 public:
  HostMemory(const HostComms* hosts, std::unique_ptr<SharedMemory> memory,
             std::vector<size_t> slot_elements, std::vector<size_t> offsets,
             int slots, std::vector<std::string> names)
      : local_(hosts->local.get()),
        memory_(std::move(memory)),
        slot_elements_(std::move(slot_elements)),
        offsets_(std::move(offsets)),
        slots_(slots),
        names_(std::move(names)) {
    // The job's rank of each of this host's ranks, for messages.
    const HostLayout& layout = hosts->layout;
    job_ranks_.resize(local_->size());
    for (size_t r = 0; r < layout.host_of.size(); ++r) {
      if (layout.host_of[r] == layout.host) {
        job_ranks_[layout.local_rank_of[r]] = static_cast<int>(r);
      }
    }
  }

  // Collective over the host's ranks: nullptr on every rank when the memory
  // cannot be mapped.
  static std::unique_ptr<HostMemory> Map(const HostComms* hosts,
                                         std::vector<size_t> slot_elements,
                                         int slots,
                                         std::vector<std::string> names) {
    std::vector<size_t> offsets;
    size_t bytes = 0;
    for (size_t n : slot_elements) {
      offsets.push_back(bytes);
      bytes += kLine + SharedMemory::Align(slots * n * sizeof(Dtype));
    }
    std::unique_ptr<SharedMemory> memory =
        hosts->local->MapSharedMemory(bytes);
    if (!memory) return nullptr;
    return std::make_unique<HostMemory>(hosts, std::move(memory),
                                        std::move(slot_elements),
                                        std::move(offsets), slots,
                                        std::move(names));
  }

  int slots() const { return slots_; }
  Dtype* Slot(int g, int rank, int64_t iter) const {
    return reinterpret_cast<Dtype*>(memory_->part(rank) + offsets_[g] +
                                    kLine) +
           (iter % slots_) * slot_elements_[g];
  }
  std::atomic<int64_t>* Flag(int g, int rank, Counter c) const {
    return SharedFlag(memory_->part(rank) + offsets_[g], c);
  }
  bool Below(int g, int rank, Counter c, int64_t iter) const {
    return Flag(g, rank, c)->load(std::memory_order_acquire) < iter + 1;
  }
  std::string What(int g, int64_t iter) const {
    return StrCat("host level, layer '", names_[g], "', iteration ", iter);
  }
  void Raise(int g, Counter c, int64_t iter) {
    Flag(g, local_->rank(), c)->store(iter + 1, std::memory_order_release);
  }
  bool All(int g, Counter c, int64_t iter) const {
    for (int r = 0; r < local_->size(); ++r) {
      if (Flag(g, r, c)->load(std::memory_order_acquire) < iter + 1) {
        return false;
      }
    }
    return true;
  }
  // Waits until every rank of the host raised counter c to iter.
  void WaitAll(int g, Counter c, int64_t iter, const char* doing) const {
    WaitForRanks(
        local_->size(),
        [&](int r) { return Below(g, r, c, iter); }, memory_->timeout(),
        job_ranks_[local_->rank()], What(g, iter), doing, &job_ranks_);
  }
  // The same for a counter that the ranks raise after their exchange
  // between hosts: a late rank still in that exchange (kCrossing raised,
  // kCrossed not) gets two steps more (Note [Deadline ladder]); one that is
  // not is named at the timeout as `stuck`, counted from when the wait
  // began or, for a rank that was in its exchange then, from when it left
  // it (its training thread may have stopped right after).
  void WaitAllAfterCross(int g, Counter c, int64_t iter, const char* stuck,
                         const char* crossing) const {
    const std::chrono::milliseconds t = memory_->timeout();
    if (t.count() <= 0) {
      WaitAll(g, c, iter, crossing);
      return;
    }
    auto in_cross = [&](int r) {
      return !Below(g, r, kCrossing, iter) && Below(g, r, kCrossed, iter);
    };
    const auto start = std::chrono::steady_clock::now();
    // At most two rounds: the counters only grow, so a rank that left
    // its exchange never enters it again for this iteration.
    for (;;) {
      // Until every rank is done or in its exchange; `stuck` at t.
      WaitForRanks(
          local_->size(),
          [&](int r) { return Below(g, r, c, iter) && !in_cross(r); }, t,
          job_ranks_[local_->rank()], What(g, iter), stuck, &job_ranks_);
      if (All(g, c, iter)) return;
      // Until nobody is in an exchange between hosts; `crossing` at two
      // steps past t from the start.
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(
              t + 2 * LadderStep(t) -
              (std::chrono::steady_clock::now() - start));
      WaitForRanks(
          local_->size(),
          [&](int r) { return Below(g, r, c, iter) && in_cross(r); },
          std::max(left, std::chrono::milliseconds(1)),
          job_ranks_[local_->rank()], What(g, iter), crossing, &job_ranks_);
      if (All(g, c, iter)) return;
    }
  }

 private:
  Communicator* local_;
  std::unique_ptr<SharedMemory> memory_;
  std::vector<size_t> slot_elements_;
  std::vector<size_t> offsets_;
  int slots_;
  std::vector<std::string> names_;
  std::vector<int> job_ranks_;  // by local rank
};

// Dense groups (PS or ring between hosts). See Note [Host level].
template <typename Dtype>
class HostDenseTransport final : public Transport<Dtype> {
 public:
  HostDenseTransport(const TransportContext& context, HostComms* hosts,
                     std::vector<ExchangeSpec> groups,
                     std::unique_ptr<HostMemory<Dtype>> memory,
                     CommType inner_type)
      : context_(context),
        hosts_(hosts),
        groups_(std::move(groups)),
        memory_(std::move(memory)),
        // The host thread's own waits end at the timeout, naming the rank.
        posted_(context.comm, GroupNames(groups_), context.comm->timeout()),
        first_iter_(groups_.size(), -1),
        finalized_(groups_.size(), -1),
        inner_index_(groups_.size(), -1) {
    const int L = hosts_->local->size();
    const int l = hosts_->local->rank();
    // With dedicated servers the host's first rank exchanges the host's
    // whole sum with them (Note [Host level with dedicated servers]).
    leader_mode_ = inner_type == CommType::PS && context.ps_comm != nullptr;
    // The inner transport exchanges this rank's slices between the hosts:
    // one "param" per slice, or, where the shards update, per piece of a
    // slice, so that no block spans two params (Note [Shards at the host
    // level]).
    const bool pieces = inner_type == CommType::PS && context.server_update;
    TransportContext inner = context;
    cross_thread_ = std::make_unique<CommThread>("cross");
    inner.comm = hosts_->cross.get();
    inner.collective = cross_thread_.get();
    inner.slots = memory_->slots();
    inner.param_counts.clear();
    // See Note [Deadline ladder]: the slice of group outer_[i] crossed.
    inner.on_exchanged = [this](int i, int64_t iter) {
      memory_->Raise(outer_[i], kCrossed, iter);
    };
    std::vector<ExchangeSpec> slices;
    for (size_t g = 0; g < groups_.size(); ++g) {
      size_t begin, end;
      SliceOf(g, l, &begin, &end);
      begin_.push_back(begin);
      end_.push_back(end);
      if (end == begin) continue;
      if (leader_mode_) {
        // The group as it is, cut by the servers' partition of the net.
        inner_index_[g] = static_cast<int>(slices.size());
        outer_.push_back(static_cast<int>(g));
        slices.push_back(groups_[g]);
        continue;
      }
      ExchangeSpec s;
      s.name = groups_[g].name;
      s.count = s.payload = end - begin;
      const std::vector<SlicePiece> cut =
          pieces ? HostPieces({groups_[g]}, context.param_counts, L, l)
                 : std::vector<SlicePiece>{{-1, 0, s.count}};
      size_t at = 0;  // the group's params lie end to end
      for (const SlicePiece& piece : cut) {
        s.params.push_back(static_cast<int>(inner.param_counts.size()));
        s.offsets.push_back(at);
        inner.param_counts.push_back(piece.count);
        at += piece.count;
      }
      CHECK_EQ(at, s.count)
          << "the params of layer " << s.name << " do not fill its gradient";
      inner_index_[g] = static_cast<int>(slices.size());
      outer_.push_back(static_cast<int>(g));
      slices.push_back(std::move(s));
    }
    inner.shared_memory = false;  // between hosts
    if (leader_mode_) {
      inner.param_counts = context.param_counts;
      name_ = "PS through each host's first rank, shared memory within";
    }
    // With a leader, only the first rank has a part in the exchanges.
    if (!leader_mode_ || !slices.empty()) {
      inner_ = Transport<Dtype>::Make(inner_type, inner, std::move(slices));
      CHECK(inner_ != nullptr);
    }
    if (!leader_mode_) {
      name_ = StrCat(inner_->name(), " between hosts, shared memory within");
    }
    host_thread_ = std::make_unique<CommThread>("host");
  }

  ~HostDenseTransport() override {
    host_thread_.reset();   // posts nothing more to the inner transport
    cross_thread_.reset();  // finishes the ring exchanges posted
  }

  const char* name() const override { return name_.c_str(); }
  const char* route() const override {
    return leader_mode_ ? "each host's first rank pushes and pulls the "
                          "host's sum"
                        : "";
  }

  Dtype* Stage(int g, int64_t iter) override {
    if (first_iter_[g] < 0) first_iter_[g] = iter;
    // The slot held iter - slots: every rank of the host must have read it.
    const int64_t previous = iter - memory_->slots();
    if (previous >= first_iter_[g]) {
      memory_->WaitAll(g, kReleased, previous,
                       "read the previous sum in shared memory");
    }
    return memory_->Slot(g, hosts_->local->rank(), iter);
  }
  void Fill(int g, const std::vector<Net<Dtype>*>& workers,
            Dtype* slot) override {
    StageGradient(groups_[g], *workers[0], slot);
  }

  void Post(int g, int64_t iter) override {
    memory_->Raise(g, kPublished, iter);
    host_thread_->Post([this, g, iter] { SumAndSend(g, iter); },
                       posted_.FailureOf(g, iter));
  }

  bool Done(int g, int64_t iter) override {
    if (finalized_[g] < iter) {
      if (!posted_.Done(g, iter)) return false;
      const int i = inner_index_[g];
      if (i >= 0 && !inner_->Done(i, iter)) return false;
      Finalize(g, iter);
    }
    return memory_->All(g, kSummed, iter);
  }

  void Wait(int g, int64_t iter) override {
    if (finalized_[g] < iter) {
      posted_.Wait(g, iter, name());
      Finalize(g, iter);
    }
    memory_->WaitAllAfterCross(
        g, kSummed, iter,
        "sum their slices (they are not in an exchange between hosts)",
        "finish their slices' exchange between hosts");
  }

  void Read(int g, int64_t iter, size_t offset, size_t count, Dtype scale,
            Dtype* out) override {
    const int L = hosts_->local->size();
    const size_t stop = offset + count;
    for (int k = 0; k < L; ++k) {
      size_t begin, end;
      SliceOf(g, k, &begin, &end);
      begin = std::max(begin, offset);
      end = std::min(end, stop);
      if (begin >= end) continue;
      cpu_scale(static_cast<int>(end - begin), scale,
                memory_->Slot(g, k, iter) + begin, out + (begin - offset));
    }
  }

  void Release(int g, int64_t iter) override {
    memory_->Raise(g, kReleased, iter);
  }

  // See Note [Stale serving at the host level]: the inner parameter
  // server serves this rank's slices (or, with a leader, the whole groups)
  // between the hosts.
  void BeginStale(const std::vector<int>& groups, int64_t first) override {
    if (!inner_) return;
    std::vector<int> inner_groups;
    for (int g : groups) {
      if (inner_index_[g] >= 0) inner_groups.push_back(inner_index_[g]);
    }
    inner_->BeginStale(inner_groups, first);
  }
  Status EndStale(int64_t end) override {
    return inner_ ? inner_->EndStale(end) : Status::OK();
  }

  uint64_t bytes_moved() const override {
    return inner_ ? inner_->bytes_moved() : 0;
  }
  uint64_t group_bytes(int g) const override {
    return inner_index_[g] < 0 ? 0 : inner_->group_bytes(inner_index_[g]);
  }

 private:
  // [begin, end) of group g that local rank k sums and exchanges: its
  // slice, or with a leader everything for local rank 0 and nothing for
  // the others.
  void SliceOf(size_t g, int k, size_t* begin, size_t* end) const {
    if (leader_mode_) {
      *begin = 0;
      *end = k == 0 ? groups_[g].count : 0;
      return;
    }
    HostSlice(groups_[g].count, hosts_->local->size(), k, begin, end);
  }

  // On the host thread: once every rank of the host published `iter`, sums
  // this rank's slice over them in local-rank order and hands it to the
  // inner transport.
  void SumAndSend(int g, int64_t iter) {
    memory_->WaitAll(g, kPublished, iter, "publish their gradients");
    const int i = inner_index_[g];
    if (i >= 0) {
      Timeline* timeline = context_.timeline;
      const int64_t t0 = timeline ? timeline->NowMicros() : 0;
      const int L = hosts_->local->size();
      std::vector<const Dtype*> parts;
      for (int k = 0; k < L; ++k) {
        parts.push_back(memory_->Slot(g, k, iter) + begin_[g]);
      }
      {
        emulation::DilatedCompute dilated;  // Note [Time dilation]
        SumInOrder(parts, end_[g] - begin_[g], Dtype(1),
                   inner_->Stage(i, iter));
      }
      memory_->Raise(g, kCrossing, iter);
      if (timeline) {
        timeline->Complete(timeline->Lane("host"), groups_[g].name,
                           "host sum", t0, timeline->NowMicros(),
                           {{"iter", iter}});
      }
      inner_->Post(i, iter);
    } else {  // nothing to exchange
      memory_->Raise(g, kCrossing, iter);
      memory_->Raise(g, kCrossed, iter);
    }
    posted_.Finish(g, iter, Status::OK());
  }

  // On the training thread: writes the sum over all ranks of this rank's
  // slice over the slice in its own slot (no rank reads it there before),
  // and tells the host.
  void Finalize(int g, int64_t iter) {
    const int i = inner_index_[g];
    if (i >= 0) {
      inner_->Wait(i, iter);
      inner_->Read(i, iter, 0, end_[g] - begin_[g], Dtype(1),
                   memory_->Slot(g, hosts_->local->rank(), iter) + begin_[g]);
      inner_->Release(i, iter);
    }
    finalized_[g] = iter;
    memory_->Raise(g, kSummed, iter);
  }

  TransportContext context_;
  HostComms* hosts_;
  std::vector<ExchangeSpec> groups_;
  std::unique_ptr<HostMemory<Dtype>> memory_;
  Completions posted_;  // the host thread's tasks
  std::vector<int64_t> first_iter_, finalized_;
  std::vector<size_t> begin_, end_;  // this rank's slice of each group
  std::vector<int> inner_index_;     // -1: empty slice
  std::vector<int> outer_;           // the group of each inner index
  bool leader_mode_ = false;
  std::string name_;
  // Destroyed in reverse: the host thread, then the cross thread, then the
  // inner transport their tasks use.
  std::unique_ptr<Transport<Dtype>> inner_;
  std::unique_ptr<CommThread> cross_thread_;
  std::unique_ptr<CommThread> host_thread_;
};

// SFB groups: each rank allgathers its own factors between the hosts into
// its part of the host's memory, and rebuilds the sum from all of them.
template <typename Dtype>
class HostSfbTransport final : public Transport<Dtype> {
 public:
  HostSfbTransport(const TransportContext& context, HostComms* hosts,
                   std::vector<ExchangeSpec> groups,
                   std::unique_ptr<HostMemory<Dtype>> memory)
      : context_(context),
        hosts_(hosts),
        groups_(std::move(groups)),
        memory_(std::move(memory)),
        done_(context.comm, GroupNames(groups_), context.comm->timeout()),
        first_iter_(groups_.size(), -1),
        bytes_(groups_.size()) {
    for (const ExchangeSpec& g : groups_) {
      CHECK_EQ(g.payload, static_cast<size_t>(g.rows) * (g.M + g.N))
          << "SFB group '" << g.name << "'";
      factors_.emplace_back(context.slots, std::vector<Dtype>(g.payload));
      sums_.emplace_back(context.slots, std::vector<Dtype>(g.count));
    }
    host_thread_ = std::make_unique<CommThread>("host");
  }

  ~HostSfbTransport() override { host_thread_.reset(); }

  const char* name() const override {
    return "SFB between hosts, shared memory within";
  }
  Dtype* Stage(int g, int64_t iter) override {
    return factors_[g][Slot(iter)].data();
  }
  void Fill(int g, const std::vector<Net<Dtype>*>& workers,
            Dtype* slot) override {
    StageFactors(groups_[g], workers, slot);
  }
  void Adapt(Net<Dtype>* worker) override {
    SkipFactoredGradients(groups_, worker);
  }
  void Post(int g, int64_t iter) override {
    host_thread_->Post([this, g, iter] { Exchange(g, iter); },
                       done_.FailureOf(g, iter));
  }
  bool Done(int g, int64_t iter) override { return done_.Done(g, iter); }
  void Wait(int g, int64_t iter) override { done_.Wait(g, iter, name()); }
  void Read(int g, int64_t iter, size_t offset, size_t count, Dtype scale,
            Dtype* out) override {
    cpu_scale(static_cast<int>(count), scale,
              sums_[g][Slot(iter)].data() + offset, out);
  }
  void Release(int, int64_t) override {}
  uint64_t bytes_moved() const override { return bytes_.all(); }
  uint64_t group_bytes(int g) const override { return bytes_.group(g); }

 private:
  size_t Slot(int64_t iter) const {
    return static_cast<size_t>(iter % context_.slots);
  }

  // On the host thread.
  void Exchange(int g, int64_t iter) {
    Timeline* timeline = context_.timeline;
    const int64_t t0 = timeline ? timeline->NowMicros() : 0;
    const ExchangeSpec& spec = groups_[g];
    const HostLayout& layout = hosts_->layout;
    if (first_iter_[g] < 0) first_iter_[g] = iter;
    const int64_t previous = iter - memory_->slots();
    if (previous >= first_iter_[g]) {
      memory_->WaitAll(g, kReleased, previous,
                       "rebuild the previous gradient from shared memory");
    }
    const size_t per = spec.payload;
    const int l = hosts_->local->rank();
    Communicator* cross = hosts_->cross.get();
    memory_->Raise(g, kCrossing, iter);  // Note [Deadline ladder]
    const Status st = cross->Allgather(factors_[g][Slot(iter)].data(),
                                       per * sizeof(Dtype),
                                       memory_->Slot(g, l, iter));
    bytes_.Add(g, static_cast<uint64_t>(2) * (cross->size() - 1) * per *
                      sizeof(Dtype));
    if (!st.ok()) {
      done_.Finish(g, iter, st);
      return;
    }
    memory_->Raise(g, kCrossed, iter);
    memory_->Raise(g, kPublished, iter);
    memory_->WaitAllAfterCross(
        g, kPublished, iter,
        "gather their factors (they are not in an exchange between hosts)",
        "gather their factors from the other hosts");
    // Every rank's factors, in the job's rank order: the bits of the flat
    // transport.
    RebuildFromFactors<Dtype>(
        spec, static_cast<int>(layout.host_of.size()),
        [&](int r) {
          return memory_->Slot(g, layout.local_rank_of[r], iter) +
                 layout.host_of[r] * per;
        },
        sums_[g][Slot(iter)].data());
    memory_->Raise(g, kReleased, iter);
    if (timeline) {
      timeline->Complete(timeline->Lane("host"), spec.name, "SFB (hosts)", t0,
                         timeline->NowMicros(), {{"iter", iter}});
    }
    done_.Finish(g, iter, Status::OK());
  }

  TransportContext context_;
  HostComms* hosts_;
  std::vector<ExchangeSpec> groups_;
  std::unique_ptr<HostMemory<Dtype>> memory_;
  Completions done_;
  std::vector<int64_t> first_iter_;  // touched by the host thread only
  // [group][slot]: this rank's factors, and the rebuilt sum.
  std::vector<std::vector<std::vector<Dtype>>> factors_, sums_;
  ByteCounts bytes_;
  std::unique_ptr<CommThread> host_thread_;  // destroyed first
};

}  // namespace

template <typename Dtype>
std::unique_ptr<Transport<Dtype>> MakeHostTransport(
    CommType inner, const TransportContext& context, HostComms* hosts,
    std::vector<ExchangeSpec> groups) {
  CHECK(inner == CommType::PS || inner == CommType::ALLREDUCE ||
        inner == CommType::SFB)
      << CommTypeName(inner);
  const int H = hosts->cross->size();
  std::vector<size_t> slot_elements;
  for (const ExchangeSpec& g : groups) {
    slot_elements.push_back(inner == CommType::SFB ? H * g.payload : g.count);
  }
  // Dense: a slot is staged again only after every rank of the host released
  // it, one more than the synchroniser's slots (as the shared-memory
  // allreduce). SFB: the host thread waits for the release instead.
  const int slots = inner == CommType::SFB ? context.slots : context.slots + 1;
  std::unique_ptr<HostMemory<Dtype>> memory = HostMemory<Dtype>::Map(
      hosts, std::move(slot_elements), slots, GroupNames(groups));
  if (!memory) return nullptr;
  if (inner == CommType::SFB) {
    return std::make_unique<HostSfbTransport<Dtype>>(
        context, hosts, std::move(groups), std::move(memory));
  }
  return std::make_unique<HostDenseTransport<Dtype>>(
      context, hosts, std::move(groups), std::move(memory), inner);
}

template std::unique_ptr<Transport<float>> MakeHostTransport<float>(
    CommType, const TransportContext&, HostComms*, std::vector<ExchangeSpec>);
template std::unique_ptr<Transport<double>> MakeHostTransport<double>(
    CommType, const TransportContext&, HostComms*, std::vector<ExchangeSpec>);

}  // namespace dist
}  // namespace poseidon
