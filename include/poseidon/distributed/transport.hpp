// Transport: one way of summing a group's gradients over the ranks. The
// synchroniser (synchronizer.hpp) drives every transport through the same
// steps, per exchanged group g and iteration j, on the training thread:
//
//   Dtype* buf = t->Stage(g, j);  // after g's push layer's backward: where
//                                 // to copy what g sends (spec.payload
//                                 // elements: the gradient, or for SFB the
//                                 // sufficient factors); may wait until the
//                                 // buffer of iteration j - slots is free
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
// Every rank posts the same groups in the same order, so the messages and
// collectives a transport issues match across ranks. Up to `slots`
// iterations of a group may be in flight (staleness + 1).
//
// The transports (the table in transport.cpp; Kind names them):
//   kPs             parameter server, blocks over every rank's shard
//                   (param_server.hpp)
//   kSfb            sufficient factors, allgathered on the collective
//                   thread, summed by each rank (sufficient_factor.hpp)
//   kRing           ring allreduce on the collective thread
//                   (ring_allreduce.hpp)
//   kSharedMemory   allreduce through memory every rank maps, on the
//                   training thread, when all ranks share a host
//                   (shared_allreduce.hpp)
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
#include "poseidon/proto/caffe.pb.h"

namespace poseidon {
class Timeline;
namespace dist {

// What a transport needs to know about one exchanged group.
struct ExchangeSpec {
  std::string name;    // the push layer, for messages and the timeline
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
};

template <typename Dtype>
class Transport {
 public:
  enum class Kind { kPs, kSfb, kRing, kSharedMemory };

  virtual ~Transport() = default;
  // "PS", "SFB", "ALLREDUCE (ring)", "ALLREDUCE (shared memory)".
  virtual const char* name() const = 0;
  virtual Dtype* Stage(int g, int64_t iter) = 0;
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

  // Makes the transport of `kind` for `groups` (indices into `groups` are
  // the g of the calls above). Collective when the transport needs it (the
  // shared-memory allreduce maps its memory; it returns nullptr on every
  // rank when that is not possible, and the caller falls back). Chosen from
  // the table in transport.cpp.
  static std::unique_ptr<Transport> Make(Kind kind,
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
// Kind to one of these.
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
