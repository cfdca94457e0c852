// The transport table, the completion bookkeeping shared by the
// asynchronous transports, dense staging slots, and the ring allreduce.
#include "poseidon/distributed/transport.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <utility>

#include "poseidon/distributed/ring_allreduce.hpp"
#include "poseidon/distributed/tags.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/timeline.hpp"
#include "poseidon/util/wait_notes.hpp"

namespace poseidon {
namespace dist {

template <typename Dtype>
std::unique_ptr<Transport<Dtype>> Transport<Dtype>::Make(
    Kind kind, const TransportContext& context,
    std::vector<ExchangeSpec> groups) {
  using Factory = std::unique_ptr<Transport<Dtype>> (*)(
      const TransportContext&, std::vector<ExchangeSpec>);
  static const std::map<Kind, Factory> table = {
      {Kind::kPs, &MakePsTransport<Dtype>},
      {Kind::kSfb, &MakeSfbTransport<Dtype>},
      {Kind::kRing, &MakeRingTransport<Dtype>},
      {Kind::kSharedMemory, &MakeSharedMemoryTransport<Dtype>},
  };
  return table.at(kind)(context, std::move(groups));
}

std::vector<std::string> GroupNames(const std::vector<ExchangeSpec>& groups) {
  std::vector<std::string> names;
  for (const ExchangeSpec& g : groups) names.push_back(g.name);
  return names;
}

// ---- Completions ------------------------------------------------------------

// Note [Completion deadlines]
// The training thread waits for an exchange through Completions::Wait; the
// communication threads that run the exchange wait inside the communicator,
// each operation with its own deadline (--comm_timeout) and an error naming
// the peer it waited for. Three rules keep the training thread's wait short
// and its error named:
//
// - A failure of any group ends every wait. The communication threads run
//   their tasks in order, so after one exchange failed (say the pull of
//   conv2's sum from a dead rank, after a whole timeout) the next task (the
//   pull of conv1's) would wait a whole timeout more before it failed in
//   turn, while the training thread waited for conv1: found on link faults
//   between hosts (docs/reliability.md), where the job ended after twice
//   the timeout with a message that named no rank. Now the first failure,
//   with its peer, ends the job.
// - Wait's own deadline is a fallback for a task stuck outside the
//   communicator; it runs a quarter beyond the timeout (RelayTimeout), so
//   that the communicator's errors, which name the peer, come first.
// - That deadline counts from the later of the last exchange's end and the
//   start of the wait: a wait that follows a long stretch without exchanges
//   (a test phase, a snapshot) must not fail at once because the last
//   exchange ended long ago.

Completions::Completions(Communicator* comm, std::vector<std::string> names,
                         std::chrono::milliseconds slack)
    : comm_(comm),
      names_(std::move(names)),
      timeout_(slack == kDefaultSlack || comm->timeout().count() <= 0
                   ? RelayTimeout(comm)
                   : comm->timeout() + slack),
      done_(names_.size(), -1),
      error_(names_.size()),
      progress_(std::chrono::steady_clock::now()) {}

void Completions::Finish(int g, int64_t iter, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!status.ok() && error_[g].ok()) {
      error_[g] = Status::Failure(StrCat("layer '", names_[g],
                                         "', iteration ", iter, ": ",
                                         status.message()));
      if (first_error_.ok()) first_error_ = error_[g];
    }
    done_[g] = std::max(done_[g], iter);
    progress_ = std::chrono::steady_clock::now();
  }
  cv_.notify_all();
  if (status.ok() && on_finish_) on_finish_(g, iter);
}

bool Completions::Done(int g, int64_t iter) {
  std::lock_guard<std::mutex> lock(mu_);
  return done_[g] >= iter || !first_error_.ok();
}

void Completions::Wait(int g, int64_t iter, const char* transport) {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] { return done_[g] >= iter || !first_error_.ok(); };
  if (!ready()) {
    const WaitNote note(StrCat("the ", transport, " exchange of layer '",
                               names_[g], "', iteration ", iter));
    // See Note [Polling on a shared core] in mpi_communicator.hpp.
    UrgentScope urgent(comm_);
    if (timeout_.count() <= 0) cv_.wait(lock, ready);  // no deadline
    const auto timeout = timeout_;
    const auto start = std::chrono::steady_clock::now();
    // A wait ends in failure only when no exchange of this transport ended
    // for a whole timeout: a slow but moving exchange is not a dead peer.
    // See Note [Completion deadlines].
    while (!ready()) {
      const auto deadline = std::max(progress_, start) + timeout;
      if (cv_.wait_until(lock, deadline, ready)) break;
      if (std::chrono::steady_clock::now() >=
          std::max(progress_, start) + timeout) {
        lock.unlock();  // StoppedNote may sleep
        POSEIDON_THROW(DistributedError, "rank ",
                       comm_->JobRank(comm_->rank()),
                       ": gradient exchange (", transport, ") of layer '",
                       names_[g], "', iteration ", iter,
                       ": no exchange finished for ",
                       FormatSeconds(timeout),
                       "; a peer may have died (--comm_timeout)",
                       StoppedNote(start, timeout));
      }
    }
  }
  const Status& error = error_[g].ok() ? first_error_ : error_[g];
  if (!error.ok()) {
    POSEIDON_THROW(DistributedError, "rank ", comm_->JobRank(comm_->rank()),
                   ": gradient exchange failed (", transport, "): ",
                   error.message());
  }
}

std::function<void(const Status&)> Completions::FailureOf(int g,
                                                          int64_t iter) {
  return [this, g, iter](const Status& s) { Finish(g, iter, s); };
}

// ---- SlotBuffers ------------------------------------------------------------

template <typename Dtype>
SlotBuffers<Dtype>::SlotBuffers(const std::vector<ExchangeSpec>& groups,
                                int slots)
    : num_slots_(slots) {
  CHECK_GE(slots, 1);
  for (const ExchangeSpec& g : groups) {
    slots_.emplace_back(slots, std::vector<Dtype>(g.payload));
  }
}

template <typename Dtype>
void SlotBuffers<Dtype>::Read(int g, int64_t iter, size_t offset, size_t count,
                              Dtype scale, Dtype* out) {
  cpu_scale(static_cast<int>(count), scale, slot(g, iter) + offset, out);
}

// ---- the ring allreduce -------------------------------------------------------

namespace {

template <typename Dtype>
class RingTransport final : public Transport<Dtype> {
 public:
  RingTransport(const TransportContext& context,
                std::vector<ExchangeSpec> groups)
      : context_(context),
        groups_(std::move(groups)),
        slots_(groups_, context.slots),
        completions_(context.comm, GroupNames(groups_)),
        bytes_(groups_.size()) {
    completions_.set_on_finish(context.on_exchanged);
  }

  const char* name() const override { return "ALLREDUCE (ring)"; }
  Dtype* Stage(int g, int64_t iter) override { return slots_.slot(g, iter); }

  void Post(int g, int64_t iter) override {
    Dtype* buf = slots_.slot(g, iter);
    context_.collective->Post(
        [this, g, iter, buf] {
          Timeline* timeline = context_.timeline;
          const int64_t begin = timeline ? timeline->NowMicros() : 0;
          Communicator* comm = context_.comm;
          const size_t count = groups_[g].count;
          const Status s = RingAllreduceSum(comm, buf, count, kRingTag);
          const int W = comm->size();
          bytes_.Add(g, static_cast<uint64_t>(4.0 * (W - 1) / W * count *
                                              sizeof(Dtype)));
          if (timeline) {
            timeline->Complete(timeline->Lane("collective"), groups_[g].name,
                               "ALLREDUCE", begin, timeline->NowMicros(),
                               {{"iter", iter}});
          }
          completions_.Finish(g, iter, s);
        },
        completions_.FailureOf(g, iter));
  }

  bool Done(int g, int64_t iter) override {
    return completions_.Done(g, iter);
  }
  void Wait(int g, int64_t iter) override {
    completions_.Wait(g, iter, name());
  }
  void Read(int g, int64_t iter, size_t offset, size_t count, Dtype scale,
            Dtype* out) override {
    slots_.Read(g, iter, offset, count, scale, out);
  }
  void Release(int, int64_t) override {}
  uint64_t bytes_moved() const override { return bytes_.all(); }
  uint64_t group_bytes(int g) const override { return bytes_.group(g); }

 private:
  TransportContext context_;
  std::vector<ExchangeSpec> groups_;
  SlotBuffers<Dtype> slots_;
  Completions completions_;
  ByteCounts bytes_;
};

}  // namespace

template <typename Dtype>
std::unique_ptr<Transport<Dtype>> MakeRingTransport(
    const TransportContext& context, std::vector<ExchangeSpec> groups) {
  return std::make_unique<RingTransport<Dtype>>(context, std::move(groups));
}

template class Transport<float>;
template class Transport<double>;
template class SlotBuffers<float>;
template class SlotBuffers<double>;
template std::unique_ptr<Transport<float>> MakeRingTransport<float>(
    const TransportContext&, std::vector<ExchangeSpec>);
template std::unique_ptr<Transport<double>> MakeRingTransport<double>(
    const TransportContext&, std::vector<ExchangeSpec>);

}  // namespace dist
}  // namespace poseidon
