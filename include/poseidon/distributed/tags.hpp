// Every message tag the distributed layer uses, in one table, so no two
// protocols can ever match each other's messages. Tags are 0..kMaxTag
// (communicator.hpp); MPI guarantees at least 32767.
//
//   [kPushTagBase, +kTagSpan)   parameter server: a worker's push of block b
//                               uses kPushTagBase + b % kTagSpan
//   [kPullTagBase, +kTagSpan)   parameter server: the shard's sum of block b
//   kRingTag                    ring allreduce steps (one collective thread)
//   kServerTag                  the leader's commands to dedicated servers
//                               and their replies (server_process.hpp)
//   kHistoryTag                 colocated shards' solver history to the
//                               rank that writes snapshots (shard_state)
//   kClipTag                    colocated shards' parts of the gradient's
//                               norm (server_clip, clip_gradients)
//   kActionTag                  SIGINT/SIGHUP agreement (action_agreement)
//   kAsyncActionTag             when to act on a signal under ASYNC (the
//                               same)
//
// Collectives that the communicator implements itself (AllreduceSum,
// Broadcast, Allgather, Barrier) never match point-to-point messages and
// need no tag here.
#ifndef POSEIDON_DISTRIBUTED_TAGS_HPP_
#define POSEIDON_DISTRIBUTED_TAGS_HPP_

#include "poseidon/distributed/communicator.hpp"

namespace poseidon {
namespace dist {

constexpr int kTagSpan = 8192;
constexpr int kPushTagBase = 1;
constexpr int kPullTagBase = kPushTagBase + kTagSpan;
constexpr int kRingTag = kPullTagBase + kTagSpan;
constexpr int kServerTag = kRingTag + 1;
constexpr int kHistoryTag = kRingTag + 2;
constexpr int kClipTag = kRingTag + 3;
constexpr int kActionTag = 30000;
constexpr int kAsyncActionTag = kActionTag + 1;

// The tags of block `block`'s push and of its sum (or parameters).
inline int PushTag(int block) { return kPushTagBase + block % kTagSpan; }
inline int PullTag(int block) { return kPullTagBase + block % kTagSpan; }

static_assert(kPullTagBase + kTagSpan <= kRingTag && kRingTag < kServerTag &&
                  kServerTag < kHistoryTag && kHistoryTag < kClipTag &&
                  kClipTag < kActionTag && kActionTag < kAsyncActionTag &&
                  kAsyncActionTag <= kMaxTag,
              "message tags overlap or exceed kMaxTag");

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_TAGS_HPP_
