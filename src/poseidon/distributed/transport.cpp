// The transport table, staging (Fill's bodies), the completion bookkeeping
// shared by the asynchronous transports, dense staging slots, and the ring
// allreduce.
#include "poseidon/distributed/transport.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <utility>

#include "poseidon/distributed/ring_allreduce.hpp"
#include "poseidon/distributed/tags.hpp"
#include "poseidon/net.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/timeline.hpp"
#include "poseidon/util/wait_notes.hpp"

#ifndef CPU_ONLY
#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {
namespace dist {
namespace {

// ALLREDUCE: through shared memory when every rank shares a host and the
// memory can be mapped (on every rank or on none), else the ring.
template <typename Dtype>
std::unique_ptr<Transport<Dtype>> MakeAllreduceTransport(
    const TransportContext& context, std::vector<ExchangeSpec> groups) {
  if (context.shared_memory) {
    std::unique_ptr<Transport<Dtype>> shared =
        MakeSharedMemoryTransport<Dtype>(context, groups);
    if (shared) return shared;
  }
  return MakeRingTransport<Dtype>(context, std::move(groups));
}

}  // namespace

template <typename Dtype>
std::unique_ptr<Transport<Dtype>> Transport<Dtype>::Make(
    CommType type, const TransportContext& context,
    std::vector<ExchangeSpec> groups) {
  using Factory = std::unique_ptr<Transport<Dtype>> (*)(
      const TransportContext&, std::vector<ExchangeSpec>);
  static const std::map<CommType, Factory> table = {
      {CommType::PS, &MakePsTransport<Dtype>},
      {CommType::SFB, &MakeSfbTransport<Dtype>},
      {CommType::ALLREDUCE, &MakeAllreduceTransport<Dtype>},
  };
  const auto found = table.find(type);
  CHECK(found != table.end())
      << "no transport for comm " << CommTypeName(type)
      << " (the plan gives every layer PS, SFB or ALLREDUCE)";
  return found->second(context, std::move(groups));
}

// ---- Staging
// -------------------------------------------------------------------

namespace {

// Copies `count` elements of `mem` into the host buffer `dest`. When the
// newest copy is on the GPU (training in GPU mode) the copy is queued on the
// calling thread's stream, right behind the backward that produced it, and
// the caller waits once for all of a group's copies (WaitForHostCopies);
// the blob's own host copy is left alone.
template <typename Dtype>
void CopyToHost(SyncedMemory* mem, int count, Dtype* dest) {
#ifndef CPU_ONLY
  if (mem->head() == SyncedMemory::HEAD_AT_GPU) {
    POSEIDON_CUDA_CHECK(cudaMemcpyAsync(dest, mem->gpu_data(),
                                        count * sizeof(Dtype),
                                        cudaMemcpyDeviceToHost, gpu::Stream()));
    return;
  }
#endif
  std::memcpy(dest, mem->cpu_data(), count * sizeof(Dtype));
}

void WaitForHostCopies() {
#ifndef CPU_ONLY
  if (Poseidon::mode() == Poseidon::GPU) gpu::Synchronize();
#endif
}

}  // namespace

template <typename Dtype>
void StageGradient(const ExchangeSpec& spec, const Net<Dtype>& net,
                   Dtype* slot) {
  const std::vector<Blob<Dtype>*>& learnable = net.learnable_params();
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const Blob<Dtype>* b = learnable[spec.params[i]];
    SyncedMemory* diff = b->diff().get();
    Dtype* place = slot + spec.offsets[i];
    if (diff->head() == SyncedMemory::HEAD_AT_CPU &&
        diff->cpu_data() == place) {
      continue;  // born there
    }
    CopyToHost(diff, b->count(), place);
  }
  WaitForHostCopies();
}

template <typename Dtype>
void StageFactors(const ExchangeSpec& spec,
                  const std::vector<Net<Dtype>*>& workers, Dtype* slot) {
  const int T = static_cast<int>(workers.size());
  const size_t rows = static_cast<size_t>(spec.rows) / T;
  const size_t u = rows * spec.M;
  const size_t v = rows * spec.N;
  Dtype* U = slot;
  Dtype* V = U + u * T;
  for (int t = 0; t < T; ++t) {
    const Net<Dtype>* worker = workers[t];
    const Blob<Dtype>* top = worker->top_vecs()[spec.layer][0];
    const Blob<Dtype>* bottom = worker->bottom_vecs()[spec.layer][0];
    CHECK_EQ(static_cast<size_t>(top->count()), u) << spec.name;
    CHECK_EQ(static_cast<size_t>(bottom->count()), v) << spec.name;
    CopyToHost(top->diff().get(), static_cast<int>(u), U + t * u);
    CopyToHost(bottom->data().get(), static_cast<int>(v), V + t * v);
  }
  WaitForHostCopies();
  for (int t = 0; t < T; ++t) {
    cpu_scal(static_cast<int>(u), Dtype(1) / T, U + t * u);
  }
}

template <typename Dtype>
void SkipFactoredGradients(const std::vector<ExchangeSpec>& groups,
                           Net<Dtype>* worker) {
  for (const ExchangeSpec& spec : groups) {
    Layer<Dtype>* layer = worker->layers()[spec.layer].get();
    for (size_t i = 0; i < layer->blobs().size(); ++i) {
      layer->set_param_propagate_down(static_cast<int>(i), false);
    }
    worker->KeepDiff(worker->blob_names()[worker->top_ids(spec.layer)[0]]);
  }
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
  const char* route() const override {
    // Made instead of the shared-memory allreduce (MakeAllreduceTransport).
    return context_.shared_memory
               ? "ring over MPI: no shared memory could be mapped"
               : "";
  }
  Dtype* Stage(int g, int64_t iter) override { return slots_.slot(g, iter); }
  void Fill(int g, const std::vector<Net<Dtype>*>& workers,
            Dtype* slot) override {
    StageGradient(groups_[g], *workers[0], slot);
  }

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
#define POSEIDON_INSTANTIATE_TRANSPORT(Dtype)                                  \
  template std::unique_ptr<Transport<Dtype>> MakeRingTransport<Dtype>(         \
      const TransportContext&, std::vector<ExchangeSpec>);                     \
  template void StageGradient<Dtype>(const ExchangeSpec&, const Net<Dtype>&,   \
                                     Dtype*);                                  \
  template void StageFactors<Dtype>(const ExchangeSpec&,                       \
                                    const std::vector<Net<Dtype>*>&, Dtype*);  \
  template void SkipFactoredGradients<Dtype>(const std::vector<ExchangeSpec>&, \
                                             Net<Dtype>*);
POSEIDON_INSTANTIATE_TRANSPORT(float)
POSEIDON_INSTANTIATE_TRANSPORT(double)
#undef POSEIDON_INSTANTIATE_TRANSPORT

}  // namespace dist
}  // namespace poseidon
