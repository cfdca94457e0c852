// Synchronizer: distributed wait-free backpropagation (DWBP) for one rank.
// It attaches to a Solver and its train net through their hooks (layers
// never communicate) and keeps every rank's replica of the weights
// bit-identical under bulk-synchronous training:
//
//   after layer l's backward   its parameter gradients are copied to a
//                              staging buffer and handed to the
//                              communication threads (PS, SFB or
//                              ALLREDUCE, chosen per layer), while backward
//                              goes on into layer l-1;
//   solver update point        the learning rate of the iteration is fixed;
//                              nothing waits;
//   before layer l's forward   (next iteration) waits for layer l's summed
//                              gradients only, applies the update rule to
//                              its parameters (or, where the parameter
//                              server's shards update them, takes their
//                              new values) and goes on.
//
// So the tail of the communication hides behind the next forward. The sum
// over W ranks is divided by W: W ranks with batch K each follow the same
// trajectory, up to float rounding, as one rank with batch W K on the same
// samples (each loss layer normalises by its own batch). See
// Note [Deferred updates] in src/poseidon/distributed/synchronizer_impl.hpp for
// the bookkeeping.
//
// Settings (DistributedParameter, the solver's `distributed` block):
//   comm         AUTO (cost model per layer), PS, SFB or ALLREDUCE; a
//                ParamSpec's `comm` overrides it per layer (sync_policy.hpp)
//   block_size   PS block bytes (4 MB)
//   num_push_threads, num_pull_threads   PS threads (1, 1)
//   bytes_in_flight  PS message bytes each of those threads keeps in
//                flight at once (64 MB; param_server.hpp)
//   server_lanes  PS blocks each shard takes pushes of at once (4; Note
//                [Server lanes] in param_server.cpp)
//   server_update  true: the PS shards hold their blocks' parameters and
//                solver history and apply the update (Note [Server-side
//                update] in shard_state.hpp; with clip_gradients, Note
//                [Clipping on the servers] in server_clip.hpp); not at
//                the host level
//   staleness    s >= 0: the forward of iteration t needs the updates of
//                iterations up to t - 1 - s only (SSP); 0 is BSP
//   wait_free    false: exchange everything after the whole backward and
//                update before the next iteration (the naive scheme, kept
//                for comparison)
//   shared_memory  true: when every rank runs on one host
//                (Communicator::OnOneHost), ALLREDUCE goes through shared
//                memory on the training thread, costs 0 bytes in the model
//                and so is AUTO's choice for every layer
//                (shared_allreduce.hpp)
// clip_gradients needs every gradient before any update: it keeps the
// overlap with backward but updates all layers at the update point, and
// cannot be combined with staleness > 0 (ConfigError).
//
// Start-up (the constructor, collective): the ranks compare fingerprints of
// their train nets and solver settings (a mismatch is a ConfigError naming
// the rank), rank 0's weights are broadcast, the plan is made and logged
// (one line per layer: transport, predicted bytes per iteration, why).
//
// Not synchronised: parameters with lr_mult 0 (e.g. BatchNorm's running
// statistics) stay per rank, as in Caffe's multi-GPU training; rank 0's are
// the ones snapshotted.
//
// Errors: a failed exchange surfaces on the training thread, where it waits,
// as a DistributedError naming the layer, the iteration and the peer.
//
// Threads: the training thread calls the hooks; communication runs on the
// ParamServer's threads and one collective thread, except the
// shared-memory allreduce, which the training thread does itself (see Note
// [Threads of a rank] in src/poseidon/distributed/synchronizer_impl.hpp). Not
// copyable; destroy it before the solver.
#ifndef POSEIDON_DISTRIBUTED_SYNCHRONIZER_HPP_
#define POSEIDON_DISTRIBUTED_SYNCHRONIZER_HPP_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/communicator.hpp"
#include "poseidon/distributed/sync_policy.hpp"
#include "poseidon/solver.hpp"

namespace poseidon {
class Timeline;
namespace dist {

// One layer's (or shared parameter group's) transport decision.
struct PlannedLayer {
  std::string layer;     // the layer whose backward hands the gradients over
  CommType transport = CommType::PS;
  double predicted_bytes = 0;  // per rank per iteration, sent + received
  double predicted_seconds = 0;  // per iteration (Note [Cost model time])
  size_t elements = 0;         // parameter elements exchanged
  std::string reason;          // from the cost model, or why it was forced
  // Measured so far: bytes this rank moved for the layer, its exchanges,
  // and their summed time from posting to the first moment the training
  // thread saw them done (an upper bound: it looks between layers).
  // Of that time, blocked_seconds the training thread spent waiting.
  uint64_t measured_bytes = 0;
  int64_t exchanges = 0;
  double measured_seconds = 0;
  double blocked_seconds = 0;
};

// Dedicated parameter servers (Note [Dedicated servers] in
// server_process.hpp): the job's communicator and the roles in it. The
// synchroniser's own communicator then holds the workers only, rank i
// being roles.workers[i] of `job`; the server ranks run
// RunDedicatedServer. A null `job`: the shards live on the workers.
struct DedicatedServers {
  Communicator* job = nullptr;
  PsRoles roles;
};

template <typename Dtype>
class Synchronizer {
 public:
  // Attaches to `solver` (an SGDSolver or one of its subclasses): subscribes
  // to its observation points and sets its DistributedStrategy (Note [Solver
  // observation points] in solver.hpp). Collective over `comm`. `timeline`
  // may be null.
  // `replicas`: the other device workers' nets of this process
  // (DeviceWorkers::replicas(), constructed before this object), whose
  // activations join this rank's sufficient factors. solver, comm,
  // timeline and replicas are observed and must outlive this object, as
  // must servers.job. With dedicated servers the first worker sends them
  // their plan here and tells them to stop when this object goes.
  Synchronizer(Solver<Dtype>* solver, Communicator* comm,
               const DistributedParameter& param, Timeline* timeline = nullptr,
               std::vector<Net<Dtype>*> replicas = {},
               DedicatedServers servers = {});
  // Waits for the exchanges in flight and detaches from the solver.
  ~Synchronizer();
  POSEIDON_DISABLE_COPY_AND_ASSIGN(Synchronizer);

  const std::vector<PlannedLayer>& plan() const;
  // Predicted bytes per iteration for this rank, over all layers or over
  // the layers of one transport.
  double predicted_bytes_per_iter() const;
  double predicted_bytes_per_iter(CommType transport) const;
  // Bytes this rank sent to and received from others so far, in all or by
  // transport. PS: counted message by message (headers included); ALLREDUCE:
  // what the ring moves; SFB: (W - 1) x this rank's factors each way, what a
  // ring allgather moves (MPI's own allgather may route differently).
  uint64_t bytes_moved() const;
  uint64_t bytes_moved(CommType transport) const;
  // Applies every pending update (what it does at the solver's
  // sync_weights point).
  void Sync();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_SYNCHRONIZER_HPP_
