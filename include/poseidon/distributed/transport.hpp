// Transport: one way of summing a group's gradients over the ranks. The
// synchroniser (synchronizer.hpp) drives every transport through the same
// steps, per exchanged group g and iteration j, on the training thread:
//
//   Dtype* buf = t->Stage(g, j);  // after g's push layer's backward: the
//                                 // buffer of what g sends (spec.payload
//                                 // elements); may wait until the buffer
//                                 // of iteration j - slots is free
//   t->Fill(g, workers, buf);     // copies this rank's part into it: the
//                                 // gradient, or for SFB the sufficient
//                                 // factors of every device worker
//   t->Post(g, j);                // starts the exchange and returns
//   ... backward and the next forward go on ...
//   t->Done(g, j);                // whether it ended (never waits)
//   t->Wait(g, j);                // waits; throws DistributedError naming
//                                 // the layer, the iteration and the cause
//   t->Read(g, j, off, n, scale, out);  // out = scale * sum over ranks of
//                                       // elements [off, off + n) of the
//                                       // gradient
//   t->Release(g, j);             // j's buffers may be reused
//
// Before the first exchange the synchroniser lets the transport adapt each
// worker's net to what it carries (Adapt: SFB rebuilds the weight gradient
// from the factors, so the layer need not compute it).
//
// Every rank posts the same groups in the same order, so the messages and
// collectives a transport issues match across ranks. Up to `slots`
// iterations of a group may be in flight (staleness + 1).
//
// The transports, by the CommType a layer is planned to go by (the table in
// transport.cpp):
//   PS          parameter server, blocks over every rank's shard
//               (param_server.hpp)
//   SFB         sufficient factors, allgathered on the collective thread,
//               summed by each rank (sufficient_factor.hpp)
//   ALLREDUCE   when every rank shares a host (context.shared_memory):
//               allreduce through memory every rank maps, on the training
//               thread (shared_allreduce.hpp); otherwise, or when that
//               memory cannot be mapped, a ring allreduce on the collective
//               thread (ring_allreduce.hpp)
// With the host level (host_level.hpp) each of them runs between hosts, and
// shared memory within a host.
//
// Failure: an exchange that fails, or whose communication thread throws,
// fails its Wait; so does a wait during which no exchange of the transport
// made progress for the communicator's timeout (a peer that died without
// closing its connections), naming what was waited for.
//
// Thread safety: Stage, Post, Wait, Read and Release are called by the
// training thread only; the transports run their exchanges on communication
// threads (comm_thread.hpp) that touch only the buffers of posted
// iterations. bytes_moved() may be called from any thread.
#ifndef POSEIDON_DISTRIBUTED_TRANSPORT_HPP_
#define POSEIDON_DISTRIBUTED_TRANSPORT_HPP_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/comm_thread.hpp"
#include "poseidon/distributed/communicator.hpp"
#include "poseidon/distributed/sufficient_factor.hpp"
#include "poseidon/distributed/sync_policy.hpp"
#include "poseidon/proto/caffe.pb.h"

namespace poseidon {
class Timeline;
template <typename Dtype>
class Net;
namespace dist {

// What a transport needs to know about one exchanged group.
struct ExchangeSpec {
  std::string name;    // the push layer, for messages and the timeline
  int layer = -1;      // the push layer's index in the net (for Fill)
  size_t count = 0;    // gradient elements (what Read reads)
  size_t payload = 0;  // elements staged per iteration
  // The group's learnable params (net ids) and where each starts in the
  // gradient; the parameter server cuts them into blocks.
  std::vector<int> params;
  std::vector<size_t> offsets;
  // SFB: input rows of this rank (all its device workers), outputs M and
  // inputs N of the InnerProduct layer, its weight layout, and whether the
  // gradient ends with the bias (M elements after the M x N weights).
  int rows = 0, M = 0, N = 0;
  WeightLayout layout = WeightLayout::kOutputsByInputs;
  bool bias = false;
};

// Everything a transport may use; observed, outliving the transport.
struct TransportContext {
  Communicator* comm = nullptr;
  // The rank's collective thread: ring and SFB exchanges and the action
  // agreement share it, so collectives keep one order on every rank.
  CommThread* collective = nullptr;
  Timeline* timeline = nullptr;  // may be null
  const DistributedParameter* param = nullptr;
  int slots = 1;
  // Without staleness the synchroniser moves the params' diffs into the
  // slot Home gives (Note [Gradients born in shared memory] in
  // synchronizer_exchange.cpp), so a transport with Home keeps one slot
  // more. Set from the same rule the synchroniser moves by.
  bool diffs_born_in_slots = false;
  // ALLREDUCE: every rank runs on one host and the settings allow shared
  // memory (DistributedParameter.shared_memory); Make then tries the
  // shared-memory allreduce first.
  bool shared_memory = false;
  // Elements of every learnable param of the net, by net id (for the
  // parameter server's block partition).
  std::vector<size_t> param_counts;
  // May be empty: called on a communication thread when group g's exchange
  // of `iter` has ended without error (PS, SFB and ring transports; the
  // host level marks its slices' exchange done in shared memory, Note
  // [Deadline ladder] in host_transport.cpp).
  std::function<void(int g, int64_t iter)> on_exchanged;
  // May be empty. PS only: the servers own the model (Note [Server-side
  // update] in shard_state.hpp): called on this rank's shard's server
  // thread with the sum over ranks of a block's pushes of `iter`
  // (Dtype elements), which it replaces by the block's new parameters, so
  // that Read then reads parameters.
  std::function<void(int64_t iter, int block, void* values)> server_update;
  // PS only: with dedicated servers (Note [Dedicated servers] in
  // server_process.hpp), the job's communicator and the roles in it; the
  // PS transport then pushes to and pulls from the server ranks. Null:
  // every rank of `comm` is a worker hosting one shard.
  Communicator* ps_comm = nullptr;
  PsRoles ps_roles;
  // May be empty. PS only, with server_update: the shard holds each block
  // after server_update until the shards agree on the gradient's norm
  // (Note [Clipping on the servers] in server_clip.hpp). The transport
  // calls it once with the function that sends a held block's parameters
  // (`params`, Dtype elements) to every worker.
  std::function<void(
      std::function<void(int64_t iter, int block, const void* params)>)>
      take_sender;
};

template <typename Dtype>
class Transport {
 public:
  virtual ~Transport() = default;
  // "PS", "SFB", "ALLREDUCE (ring)", "ALLREDUCE (shared memory)" (and the
  // host level's names for them).
  virtual const char* name() const = 0;
  // Why the exchanges go the way they do, when the choice was made here
  // and not by the plan (the ALLREDUCE transports: shared memory, or the
  // ring because none could be mapped); empty when the plan says it all.
  // The plan's log adds it to each layer's reason.
  virtual const char* route() const { return ""; }
  virtual Dtype* Stage(int g, int64_t iter) = 0;
  // This rank's buffer for group g's gradient of `iter` when the transport
  // reads it from there: the trainer may point the params' diffs into it
  // before the backward, so that Fill finds the gradient in place (Note
  // [Gradients born in shared memory] in synchronizer_exchange.cpp).
  // nullptr (the default): Fill copies. May wait as Stage does; Stage of
  // `iter` returns the same buffer.
  virtual Dtype* Home(int g, int64_t iter) {
    (void)g;
    (void)iter;
    return nullptr;
  }
  // Copies group g's part of this rank into `slot` (Stage's buffer) from
  // this rank's device workers' nets, workers[0] the rank's own (which
  // holds their summed gradient).
  virtual void Fill(int g, const std::vector<Net<Dtype>*>& workers,
                    Dtype* slot) = 0;
  // Changes a worker's net for what this transport carries, once before
  // the first exchange.
  virtual void Adapt(Net<Dtype>* worker) { (void)worker; }
  virtual void Post(int g, int64_t iter) = 0;
  virtual bool Done(int g, int64_t iter) = 0;
  virtual void Wait(int g, int64_t iter) = 0;
  virtual void Read(int g, int64_t iter, size_t offset, size_t count,
                    Dtype scale, Dtype* out) = 0;
  virtual void Release(int g, int64_t iter) = 0;
  // Bytes this rank sent and received for this transport so far, in all
  // and for group g.
  virtual uint64_t bytes_moved() const = 0;
  virtual uint64_t group_bytes(int g) const = 0;

  // PS under SSP or ASYNC (Note [Stale-synchronous serving] in
  // stale_shard.hpp); other transports are never asked. BeginStale: this
  // rank's shard serves from iteration `first` on the exchanges of
  // `groups` (this transport's group indices, in the order they are
  // posted each iteration). EndStale: once every exchange posted has
  // finished and this worker pushed every iteration before `end`, ends
  // its part on every shard, then waits until this rank's shard has
  // served every worker to its end; the first failure.
  virtual void BeginStale(const std::vector<int>& groups, int64_t first) {
    (void)groups;
    (void)first;
  }
  virtual Status EndStale(int64_t end) {
    (void)end;
    return Status::OK();
  }

  // Makes the transport for groups planned to go by `type` (PS, SFB or
  // ALLREDUCE; indices into `groups` are the g of the calls above), chosen
  // from the table in transport.cpp. Collective: every rank makes the same
  // calls (the shared-memory allreduce maps its memory, or falls back to
  // the ring on every rank).
  static std::unique_ptr<Transport> Make(CommType type,
                                         const TransportContext& context,
                                         std::vector<ExchangeSpec> groups);
};

// The groups' names, for messages.
std::vector<std::string> GroupNames(const std::vector<ExchangeSpec>& groups);

// The parameter server's partition of the net's params
// (context.param_counts) into blocks of context.param->block_size() bytes
// over context.comm->size() shards (or one per dedicated server rank):
// PsTransport's, and the one the synchroniser gives the shards' state
// (ShardState) or the dedicated servers' plan.
std::unique_ptr<BlockPartition> MakePsPartition(
    const TransportContext& context, size_t elem_bytes);

// The transports, each in its own file; the table in transport.cpp maps a
// CommType to one of these. MakeSharedMemoryTransport returns nullptr on
// every rank when the memory cannot be mapped.
template <typename Dtype>
std::unique_ptr<Transport<Dtype>> MakePsTransport(
    const TransportContext& context, std::vector<ExchangeSpec> groups);
template <typename Dtype>
std::unique_ptr<Transport<Dtype>> MakeSfbTransport(
    const TransportContext& context, std::vector<ExchangeSpec> groups);
template <typename Dtype>
std::unique_ptr<Transport<Dtype>> MakeRingTransport(
    const TransportContext& context, std::vector<ExchangeSpec> groups);
template <typename Dtype>
std::unique_ptr<Transport<Dtype>> MakeSharedMemoryTransport(
    const TransportContext& context, std::vector<ExchangeSpec> groups);

// SFB's rebuild: sum = the gradient of spec's InnerProduct from the factors
// [U | V] of `ranks` ranks, factors(r) pointing at rank r's spec.payload
// elements, added in rank order (the same bits wherever they were
// gathered).
template <typename Dtype>
void RebuildFromFactors(const ExchangeSpec& spec, int ranks,
                        const std::function<const Dtype*(int)>& factors,
                        Dtype* sum);

// Fill's two bodies. StageGradient: the diffs of spec's params from `net`,
// each at its offset. StageFactors: [U_0; U_1; ... | V_0; V_1; ...] of the
// push layer over the device workers (U the top's diff scaled by 1 / T for
// T workers, V the bottom's data), whose summed outer products are the
// locally averaged gradient. From the GPU when the newest copy is there.
// StageGradient skips a param whose diff already lives at its place in
// the slot (Transport::Home).
template <typename Dtype>
void StageGradient(const ExchangeSpec& spec, const Net<Dtype>& net,
                   Dtype* slot);
template <typename Dtype>
void StageFactors(const ExchangeSpec& spec,
                  const std::vector<Net<Dtype>*>& workers, Dtype* slot);
// SFB's Adapt: the rebuilt sum over every rank's factors replaces the
// layers' own weight and bias gradients (Read overwrites the diffs), so
// they need not compute them; the top's diff (U) stays out of the net's
// shared-diff pool, as Fill may read it after the whole backward.
template <typename Dtype>
void SkipFactoredGradients(const std::vector<ExchangeSpec>& groups,
                           Net<Dtype>* worker);

// Dense staging slots: slots x count elements per group, for the
// transports that exchange the gradient itself (PS, ring).
template <typename Dtype>
class SlotBuffers {
 public:
  SlotBuffers(const std::vector<ExchangeSpec>& groups, int slots);
  Dtype* slot(int g, int64_t iter) {
    return slots_[g][static_cast<size_t>(iter % num_slots_)].data();
  }
  // out = scale * slot(g, iter)[offset, offset + count)
  void Read(int g, int64_t iter, size_t offset, size_t count, Dtype scale,
            Dtype* out);

 private:
  int num_slots_;
  std::vector<std::vector<std::vector<Dtype>>> slots_;
};

// Bytes moved per group and in all, counted by communication threads.
class ByteCounts {
 public:
  explicit ByteCounts(size_t groups) : groups_(groups) {}
  void Add(int g, uint64_t bytes) {
    all_ += bytes;
    groups_[g] += bytes;
  }
  uint64_t all() const { return all_.load(); }
  uint64_t group(int g) const { return groups_[g].load(); }

 private:
  std::atomic<uint64_t> all_{0};
  std::vector<std::atomic<uint64_t>> groups_;
};

// The completion bookkeeping of transports whose exchanges run on
// communication threads: per group, the last iteration whose exchange ended
// and the first failure. Finish may be called from any thread; Done and Wait
// from the training thread. See Note [Completion deadlines].
class Completions {
 public:
  // Wait's deadline is RelayTimeout(comm), or the communicator's timeout
  // plus `slack` when given, for tasks that end themselves with a
  // better-named error later.
  Completions(Communicator* comm, std::vector<std::string> names,
              std::chrono::milliseconds slack = kDefaultSlack);
  static constexpr std::chrono::milliseconds kDefaultSlack{-1};

  void Finish(int g, int64_t iter, const Status& status);
  // Called by Finish, outside the lock, for every exchange that ended
  // without error (TransportContext::on_exchanged). Set before any Finish.
  void set_on_finish(std::function<void(int, int64_t)> f) {
    on_finish_ = std::move(f);
  }
  // Whether Wait(g, iter) would return or throw at once: the exchange
  // ended, or an exchange of any group failed.
  bool Done(int g, int64_t iter);
  // Waits until the exchange of (g, iter) ended; throws DistributedError on
  // a failure of any group's exchange (the job cannot go on), or when no
  // exchange of this transport ended for the deadline (see the
  // constructor), counted from the later of the last exchange's end and the
  // start of this wait.
  void Wait(int g, int64_t iter, const char* transport);
  // A callback for CommThread::Post's on_failure: the task of `iter` of g
  // failed.
  std::function<void(const Status&)> FailureOf(int g, int64_t iter);

 private:
  Communicator* comm_;
  std::vector<std::string> names_;
  std::chrono::milliseconds timeout_;  // 0: no deadline
  std::function<void(int, int64_t)> on_finish_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int64_t> done_;   // GUARDED_BY(mu_)
  std::vector<Status> error_;   // GUARDED_BY(mu_)
  Status first_error_;          // GUARDED_BY(mu_): of any group
  std::chrono::steady_clock::time_point progress_;  // GUARDED_BY(mu_)
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_TRANSPORT_HPP_
