// The per-layer choice of transport (parameter server, sufficient factor
// broadcasting or allreduce) from a model of the time each transport takes
// per iteration, evaluated once at start-up. Pure functions of their
// arguments: every rank computes the same choice, and any thread may call
// them.
//
// Notation (Poseidon, USENIX ATC'17): a layer's weights form an M x N matrix
// (M outputs, N inputs; InnerProduct stores them N_out x K_in, i.e. M x N);
// K rows of input per worker per iteration (the batch, times the dims before
// InnerProduct's `axis`); P1 workers, P2 server shards; S = (M N + bias)
// parameter elements x dtype bytes; d = dtype bytes. Network bytes per node
// per iteration, sent plus received (see Note [Counting both directions]):
//   PS, worker node             2 S
//   PS, server node             2 P1 S / P2
//   PS, worker + server on one node   2 S (P1 + P2 - 2) / P2
//   SFB                         2 K (P1 - 1) (M + N) d
//   ALLREDUCE (ring, n = P1)    4 (n - 1) / n x S
// Without colocation a PS node is either kind; the model charges the busier.
// When every rank runs on one host and shares memory (ClusterShape::
// shared_memory), ALLREDUCE sends no messages at all (Note [Shared memory
// allreduce], shared_allreduce.cpp).
// With the host level (ClusterShape::hosts H of ranks_per_host L ranks; Note
// [Host level] in host_level.hpp), a node is a rank, and what it sends over
// the network is its share of the host's:
//   PS          2 (S / L) (2 H - 2) / H  (a colocated PS of H nodes on a
//               slice of S / L); with P2 dedicated servers
//               max(2 S, 2 H S / P2) / L (each host's first rank pushes
//               and pulls the host's sum)
//   ALLREDUCE   4 (H - 1) / H x S / L
//   SFB         2 K (H - 1) (M + N) d    (its own factors, to H - 1 hosts)
// The ALLREDUCE figure is a ring's; the reference AllreduceSumByAllgather
// moves n / 2 times more (Note [Deterministic allreduce], communicator.hpp).
// The bias costs nothing extra under SFB: its gradient is the column sums of
// U (K x M numbers already sent); PS and allreduce move its M numbers.
//
// Note [Cost model time]
// Predicted seconds per iteration = network + latency + memory + compute:
//   network   the bytes of the host's ranks (L x a rank's) over the host
//             link, network_bandwidth bytes/s each way (full duplex: both
//             directions counted, so divided by 2 x bandwidth); with every
//             rank on one host, messages are copies through memory (2 x
//             bytes at memory_bandwidth);
//   memory    bytes a rank copies and sums through memory (the shared-memory
//             allreduce reads every rank's slot: P1 S; the host level stages
//             S, sums S and reads S back) at shared_memory_bandwidth;
//   latency   message_latency per round of messages: PS 2 (push, pull),
//             SFB P1 - 1 (an allgather), ALLREDUCE 2 (P1 - 1) (a ring), with
//             H for P1 under the host level; the shared-memory allreduce
//             sends none, so it wins the small layers on one host;
//   compute   what the transport adds at `flops`: SFB rebuilds the weight
//             gradient from every rank's factors, 2 M N K (P1 - 1) FLOPs
//             more than the layer's own backward (which SFB skips); the
//             reductions of PS and ALLREDUCE cost memory time, not FLOPs.
// The three are added, not overlapped: the exchange of one layer also
// overlaps the others' backward, which the model does not see.
//
// Choice: a forced transport wins (a param's ParamSpec.comm over the net's
// DistributedParameter.comm); AUTO takes the fastest, preferring PS, then
// ALLREDUCE, then SFB on ties. SFB applies only to InnerProduct layers:
// forcing it on another layer through ParamSpec.comm is a ConfigError naming
// the layer; a net-wide SFB default falls back to AUTO for such layers.
#ifndef POSEIDON_DISTRIBUTED_SYNC_POLICY_HPP_
#define POSEIDON_DISTRIBUTED_SYNC_POLICY_HPP_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "poseidon/proto/caffe.pb.h"
#include "poseidon/util/status.hpp"

namespace poseidon {
namespace dist {

// Note [Counting both directions]
// Every figure counts bytes sent plus bytes received, as the paper's PS and
// SFB costs do (a PS worker pushes S and pulls S: 2 S). A ring allreduce
// sends 2 (n - 1) / n x S and receives as much, so it is charged
// 4 (n - 1) / n x S: exactly the cost of a colocated PS with P1 = P2 = n,
// which it then loses to on the PS-first tie rule.

// The values match DistributedParameter::CommType.
enum class CommType { AUTO = 0, PS = 1, SFB = 2, ALLREDUCE = 3 };

CommType CommTypeFromProto(DistributedParameter::CommType type);
DistributedParameter::CommType CommTypeToProto(CommType type);
// "AUTO", "PS", "SFB", "ALLREDUCE".
const char* CommTypeName(CommType type);

// What the cost model needs to know about one layer's parameters.
struct LayerCommShape {
  std::string name;  // for messages
  std::string type;  // the prototxt type; SFB needs "InnerProduct"
  int64_t M = 0;     // weight rows (outputs)
  int64_t N = 0;     // weight columns (inputs per output)
  int64_t K = 0;     // input rows per worker per iteration
  int64_t bias = 0;  // further parameter elements (InnerProduct's bias: M)
};

struct ClusterShape {
  int num_workers = 1;     // P1
  int num_servers = 1;     // P2
  bool colocated = true;   // every node hosts a worker and a server shard
  size_t dtype_bytes = 4;  // bytes per parameter element
  // Every rank on one host, ALLREDUCE through shared memory.
  bool shared_memory = false;
  // The host level (Note [Host level] in host_level.hpp): `hosts` hosts of
  // `ranks_per_host` ranks each; 1 and 1 without it.
  int hosts = 1;
  int ranks_per_host = 1;
  // Rates for Note [Cost model time]: a host's network link, each way, in
  // bytes/s (10 Gbit/s); a rank's copies and sums through memory, bytes/s;
  // a rank's floating-point rate, FLOP/s. The synchroniser configures the
  // first (DistributedParameter.network_gbits) and measures the others.
  double network_bandwidth = 1.25e9;
  double memory_bandwidth = 5e9;
  double flops = 20e9;
  // Seconds per round of messages (a PS push or pull, a step of a ring or
  // of an allgather): TCP between hosts; a tenth of it when every rank is on
  // one host (Open MPI's shared-memory transport).
  double message_latency = 50e-6;
};

// One transport's predicted cost for one layer per iteration (per rank;
// Note [Cost model time]).
struct CommCost {
  double bytes = 0;         // over the network, sent + received
  double memory_bytes = 0;  // copied and summed through memory
  double flops = 0;         // added arithmetic
  double seconds = 0;       // the sum of the three at the cluster's rates
};

// Describes a layer from its parameter and its parameter blobs' shapes
// (weights first). InnerProduct: M = num_output, N = inputs, whatever the
// `transpose` layout; other layers: M = the weights' first dim, N = the rest.
// Every blob after the first counts as bias. `rows` is K.
LayerCommShape DescribeLayer(const LayerParameter& param,
                             const std::vector<std::vector<int>>& param_shapes,
                             int64_t rows);

// True for layers whose gradient is a sum of outer products (InnerProduct).
bool SfbEligible(const LayerCommShape& layer);

// Predicted network bytes sent plus received per node per iteration under
// `transport` (PS, SFB or ALLREDUCE; not AUTO). SFB on an ineligible layer
// costs +infinity. Throws ConfigError on a bad cluster shape.
double PredictBytes(const LayerCommShape& layer, const ClusterShape& cluster,
                    CommType transport);
// The whole cost: bytes (as PredictBytes), memory, compute and seconds.
CommCost PredictCost(const LayerCommShape& layer, const ClusterShape& cluster,
                     CommType transport);

// The transport a layer's params force, from their ParamSpec.comm; nullopt
// when none sets it. Throws ConfigError naming the layer when its params ask
// for different transports (a layer's params travel together).
std::optional<CommType> LayerCommOverride(const LayerParameter& param);

struct TransportChoice {
  CommType type = CommType::PS;
  double bytes = 0;     // predicted network bytes for `type`
  double seconds = 0;   // predicted time for `type`
  bool forced = false;  // set by comm, not by the cost model
  // "fc6: SFB 2.1 MB 3.2 ms vs PS 302 MB 121 ms vs ALLREDUCE 302 MB 121 ms
  // per node per iteration", with the reason when forced.
  std::string reason;
};

// Chooses the layer's transport; see the top of this file for the rules.
// `layer_override` comes from LayerCommOverride; an explicit AUTO there
// overrides a forced net default.
TransportChoice ChooseTransport(
    const LayerCommShape& layer, const ClusterShape& cluster,
    CommType net_default = CommType::AUTO,
    std::optional<CommType> layer_override = std::nullopt);

// "2.1 MB", "302 MB", "512 B" (decimal units).
std::string FormatBytes(double bytes);
// "35 us", "3.2 ms", "121 ms", "1.4 s".
std::string FormatDuration(double seconds);

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_SYNC_POLICY_HPP_
