// The host level of the hierarchy (docs/distributed.md: device -> node ->
// cluster): in a job with several ranks on each of several hosts, a host's
// ranks combine their gradients through shared memory, and only the combined
// gradient crosses the network, once per host instead of once per rank.
//
// Note [Host level]
// With H hosts of L ranks each, rank (h, l) is the l-th rank of host h. Two
// communicators are split off the job's (HostComms): `local`, the L ranks of
// a host, which map shared memory, and `cross`, the H ranks with the same
// local rank l, one per host, which talk over the network. For a group of n
// gradient elements, iteration j:
//   dense transports (PS, ALLREDUCE): local rank l owns slice l of the n
//     elements (L nearly equal contiguous slices). Every rank copies its
//     gradient into its slot in shared memory and publishes it (training
//     thread). Each rank's host thread then waits for all of the host's
//     ranks, sums its slice over them in local-rank order, and exchanges the
//     slice sum with the other hosts through the inner transport (PS or ring
//     over `cross`), writing the sum over all ranks of its slice into shared
//     memory. A rank's Wait waits for all L slices; Read copies them. So the
//     network carries each slice once per host: the host's traffic is that
//     of one rank of an H-rank job, instead of L such ranks.
//   SFB: the factors cannot be summed first; rank (h, l) allgathers its own
//     factors over `cross` (the factors of (0, l), ..., (H - 1, l)) into
//     shared memory, and each rank then rebuilds the gradient from all H L
//     ranks' factors, in rank order: the same bits as without the host
//     level, with 1 / L of its inter-host traffic.
// Every rank of a host reads the same shared sums, so replicas stay
// bit-identical. Dense sums are added in another order than without the
// host level (within a host first), so they agree with one rank's run up to
// float rounding, as before. Slots of shared memory are reused in the
// synchroniser's slot order (staleness + 1); a rank stages iteration j only
// after every rank of its host has finished with j - slots (Stage may wait).
// The host thread ("host") runs the steps after publishing, so the training
// thread never waits for the network outside Wait.
//
// Note [Shards at the host level]
// With the update on the servers (Note [Server-side update] in
// shard_state.hpp) the parameter server between hosts is the one that owns
// the model: rank (h, l) hosts shard h of the PS over `cross` l, which
// holds blocks of local rank l's slices. A slice may begin or end inside a
// param and span several, so the inner PS does not cut the slices as they
// are: it cuts their pieces (HostPieces), each the part of one param in
// one slice, so that every block lies in one param and the shard steps it
// with that param's lr_mult and decay_mult, as a colocated shard steps its
// blocks. The sum the shard takes is over every rank of every host (the
// host's sum of each of H hosts), so it divides by W = H L as before and
// answers with the new parameters, which the rank writes over its slice in
// shared memory for the host's ranks to read. The shard's weights and
// history are seeded from the rank's solver at the pieces' places; before
// a snapshot every cross communicator gathers its shards' history at the
// host of rank 0, whose ranks pass their slices' history on to rank 0
// over `local` (Synchronizer's SyncHistory). With clip_gradients every
// rank's shard stages its pieces and the ranks agree on the norm over the
// job's communicator, as colocated shards do (Note [Clipping on the
// servers]). Under SSP and ASYNC, see Note [Stale serving at the host
// level].
//
// Note [Host level with dedicated servers]
// Dedicated servers (Note [Dedicated servers] in server_process.hpp) hold
// the blocks of the net's params, and take each block's pushes from every
// worker in roles.workers. At the host level the servers' workers are the
// hosts' first ranks (local rank 0) only: the first rank's host thread
// sums the whole of each PS group over the host's ranks (in local-rank
// order) and pushes it to the servers, pulls the answer (the sum, or the
// new parameters) into its own slot in shared memory, and every rank of
// the host reads it there; the other ranks only publish and read. A
// host's link carries the host's gradient once each way, as with slices,
// and the servers' plan is the flat one with H workers instead of W (the
// sums are still divided by W). The first rank makes the host's whole sum
// (L S additions instead of S); the others exchange nothing. The sums are
// added as with colocated shards at the host level (within a host in
// local-rank order, then over hosts in host order), so the two give the
// same bits. With clip_gradients on the servers the first ranks are the
// workers that agree on the norm with the servers (Note [Clipping on the
// servers]) and broadcast it to their hosts' ranks over `local`, which
// clip the layers they update themselves by it.
//
// Note [Stale serving at the host level]
// Under SSP and ASYNC (Note [Stale-synchronous serving] in stale_shard.hpp)
// the hosts, not the ranks, are the workers the shards wait for: a host's
// ranks still meet every iteration in shared memory (each exchange waits
// for all of the host's ranks to publish, and every rank reads the same
// answer), and the inner parameter server between the hosts serves
// stale-synchronously: shard h over `cross` l (or a dedicated server,
// whose workers are the hosts' first ranks) applies each host's push of a
// block on arrival and answers a host's pull once the consistency model
// lets it. So a fast host runs up to s iterations ahead of the slowest,
// and a slow rank holds back its own host only. Each push is the sum of L
// ranks' gradients and the shard still divides by W = H L, so an
// iteration's H pushes step the block as far as one BSP sum; its weight
// decay is divided by the H pushers (ServerUpdateSettings::pushers), not
// by W. At the end of a Step (StaleBarrier) every rank takes the servers'
// parameters: each cross communicator broadcasts its shards' blocks to its
// ranks, and each rank then broadcasts its slices' pieces to the host's
// others over `local` (with dedicated servers the first rank takes them
// from the servers and broadcasts them to its host).
#ifndef POSEIDON_DISTRIBUTED_HOST_LEVEL_HPP_
#define POSEIDON_DISTRIBUTED_HOST_LEVEL_HPP_

#include <memory>
#include <string>
#include <vector>

#include "poseidon/distributed/communicator.hpp"
#include "poseidon/distributed/transport.hpp"

namespace poseidon {
namespace dist {

struct HostComms {
  HostLayout layout;
  std::unique_ptr<Communicator> local;  // this host's ranks, by local rank
  std::unique_ptr<Communicator> cross;  // local rank l of every host, by host
};

// Collective over `comm`: the host level's communicators, or nullptr when
// the job has no use for it (one host, one rank per host) or cannot have it
// (hosts with different numbers of ranks: the reason goes to *why_not).
std::unique_ptr<HostComms> SplitByHost(Communicator* comm,
                                       std::string* why_not);

// [begin, end) of local rank l's slice of n elements over L ranks.
inline void HostSlice(size_t n, int L, int l, size_t* begin, size_t* end) {
  const size_t base = n / L, extra = n % L;
  *begin = l * base + std::min<size_t>(l, extra);
  *end = *begin + base + (static_cast<size_t>(l) < extra ? 1 : 0);
}

// Part of learnable param `param`: elements [offset, offset + count).
struct SlicePiece {
  int param = 0;
  size_t offset = 0;
  size_t count = 0;
};

// Local rank l's pieces of `groups` (of L ranks per host): each group's
// slice l (HostSlice) cut where its params meet, group after group, in the
// order of the slice's elements (Note [Shards at the host level]). Params
// are the groups' (ExchangeSpec::params and offsets), counted by
// param_counts (by net id).
std::vector<SlicePiece> HostPieces(const std::vector<ExchangeSpec>& groups,
                                   const std::vector<size_t>& param_counts,
                                   int L, int l);

// The host-level transport for groups planned to go by `inner` (PS, SFB,
// or ALLREDUCE, which goes by the ring between hosts); nullptr on every
// rank when the host's shared memory cannot be mapped (the caller then goes
// without the host level). Collective over the job's and the host comms.
template <typename Dtype>
std::unique_ptr<Transport<Dtype>> MakeHostTransport(
    CommType inner, const TransportContext& context, HostComms* hosts,
    std::vector<ExchangeSpec> groups);

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_HOST_LEVEL_HPP_
