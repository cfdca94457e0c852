// Ring allreduce over a Communicator's point-to-point operations: the
// ALLREDUCE transport of the distributed trainer. Each of n ranks sends and
// receives 2 (n - 1) / n x the buffer, against (n - 1) x for the reference
// AllreduceSumByAllgather.
//
// Algorithm: the buffer is cut into n chunks of near-equal size (chunk c is
// elements [c * count / n, (c + 1) * count / n)). Reduce-scatter: in step s
// (0 <= s < n - 1) rank r sends chunk (r - s) mod n to rank r + 1 and adds
// the chunk (r - s - 1) mod n it receives from rank r - 1 to its own, so
// chunk c is summed along the ring starting at rank c,
//   (((x_c + x_{c+1}) + x_{c+2}) + ...) + x_{c-1},
// a fixed order whatever the timing; rank r then holds the total of chunk
// r + 1. Allgather: n - 1 more steps pass the totals around the ring, so
// every rank ends with identical bits (see Note [Deterministic allreduce]).
//
// Each step is one Communicator::SendRecv, which cannot deadlock around a
// ring even when a Send waits for its Recv (MPI's rendezvous protocol).
//
// Collective: every rank calls it with the same count and tag, from one
// thread at a time per tag. Errors come back as a Status naming the step
// and the peer; the buffer is then undefined.
#ifndef POSEIDON_DISTRIBUTED_RING_ALLREDUCE_HPP_
#define POSEIDON_DISTRIBUTED_RING_ALLREDUCE_HPP_

#include <cstddef>

#include "poseidon/distributed/communicator.hpp"

namespace poseidon {
namespace dist {

template <typename Dtype>
Status RingAllreduceSum(Communicator* comm, Dtype* buf, size_t count, int tag);

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_RING_ALLREDUCE_HPP_
