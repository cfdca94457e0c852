// Dedicated parameter servers: ranks that train nothing and only host
// shards of the parameter server (PsRoles, Note [Roles] in param_server.hpp).
//
// Note [Dedicated servers]
// A server rank builds no net. At start-up the first worker, the leader,
// sends it a ServerPlan: the parameter shapes, the block size, the roles,
// the exchanges of one iteration (the block ids of each exchange, in the
// order the workers post them, the same every iteration) and, when the
// servers own the model, the update settings (ServerUpdateSettings, with
// the solver's parameters). From then on the server follows the leader's
// commands, taken in order on one tag (kServerTag):
//   iterate t  serve every exchange of iteration t: take the workers'
//              pushes, sum them in the workers' order, apply the update,
//              send the result to every worker (ParamServer::Serve);
//   seed       take the held blocks' parameters, and their history when the
//              message carries it, into the shard's state (ShardState);
//   gather     send the held blocks' history to the leader;
//   serve stale from t
//              under SSP or ASYNC (the plan's consistency): serve the
//              exchanges of every iteration from t on as a StaleShard does
//              (Note [Stale-synchronous serving] in stale_shard.hpp), each
//              worker's push applied on arrival, until every worker has
//              sent its end;
//   weights    send the held blocks' parameters to every worker (the
//              barrier that ends SSP or ASYNC serving: each worker takes
//              the servers' parameters);
//   stop       return.
// Commands queue behind the iterations already posted: a seed or gather
// waits until the shard has served them, so its state is not read or
// written under the server thread. The leader sends "iterate t" before its
// own exchanges of iteration t and never waits for the server to take it,
// so a command costs no round trip. Under SSP and ASYNC there is no
// "iterate": one "serve stale" covers a whole Step, and the other workers'
// pushes wait in the transport until the server, seeded, takes them.
//   Waits: a server waits for its next command without a deadline of its
// own, logging each time the communicator's deadline passes without one
// (a test phase or a snapshot between iterations may take longer than a
// deadline); the leader's death ends it through MPI (mpirun stops the job)
// or through its own deadlines on the pushes it was taking.
//
// Thread safety: ServerControl's calls are made from one thread (the
// synchroniser's); RunDedicatedServer runs on the server rank's main
// thread and starts the ParamServer's threads.
#ifndef POSEIDON_DISTRIBUTED_SERVER_PROCESS_HPP_
#define POSEIDON_DISTRIBUTED_SERVER_PROCESS_HPP_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "poseidon/common.hpp"
#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/communicator.hpp"
#include "poseidon/distributed/param_server.hpp"
#include "poseidon/distributed/shard_state.hpp"

namespace poseidon {
namespace dist {

// What a dedicated server is told at start-up (Note [Dedicated servers]).
struct ServerPlan {
  int dtype_bytes = 4;  // 4: float, 8: double
  size_t block_bytes = kDefaultBlockBytes;
  PsRoles roles;  // both lists given (not the colocated default)
  int push_threads = 1;
  int pull_threads = 1;
  size_t bytes_in_flight = ParamServerOptions().bytes_in_flight;
  int server_lanes = ParamServerOptions().server_lanes;
  std::vector<size_t> blob_counts;  // elements per learnable param
  // One iteration's exchanges: the block ids of each, in posting order.
  std::vector<std::vector<int>> exchanges;
  bool update = false;            // the servers own the model
  ServerUpdateSettings settings;  // when `update`
  // How pulls are answered; SSP and ASYNC need `update`.
  Consistency consistency = Consistency::kBsp;
  int staleness = 0;  // SSP's bound
};

// The plan as bytes, and back. Decode throws DistributedError naming
// `peer_job` (the sender, as the job numbers it) and what is wrong with
// the message.
std::string EncodeServerPlan(const ServerPlan& plan);
ServerPlan DecodeServerPlan(const std::string& bytes, int peer_job);

// The workers' side of the dedicated servers. Every worker builds one;
// only the leader (roles.workers[0]) sends anything, the others' calls
// return OK at once.
template <typename Dtype>
class ServerControl {
 public:
  // `comm` is observed and must outlive this object. Throws ConfigError
  // when the plan's roles are not those of dedicated servers (a server
  // rank that is also a worker) or its dtype is not Dtype's.
  ServerControl(Communicator* comm, ServerPlan plan);
  POSEIDON_DISABLE_COPY_AND_ASSIGN(ServerControl);

  bool leader() const { return comm_->rank() == plan_.roles.workers[0]; }
  const ServerPlan& plan() const { return plan_; }
  const BlockPartition& partition() const { return partition_; }

  // Sends the plan to every server.
  Status Start();
  // Each server serves the exchanges of iteration `iter`; call before
  // posting them.
  Status Iterate(int64_t iter);
  // Sends each server its held blocks' parameters, weights(p) pointing at
  // param p's elements, and unless `history` is empty their history,
  // history(a, p) at param p's history array a or null for zeros.
  Status Seed(const std::function<const Dtype*(int p)>& weights,
              const std::function<const Dtype*(int a, int p)>& history);
  // Receives every server's history of its held blocks into history(a, p)
  // (param p's history array a; null: not wanted).
  Status Gather(const std::function<Dtype*(int a, int p)>& history);
  // Under SSP or ASYNC: the servers serve every iteration from `first` on,
  // until each worker ends its serving (ParamServer::EndStale).
  Status ServeStale(int64_t first);
  // After every worker has ended SSP or ASYNC serving: every server sends
  // its held blocks' parameters to every worker, into(p) pointing at param
  // p's elements (null: not wanted). Unlike the other calls every worker
  // takes part (the leader sends the command; each worker receives).
  Status TakeWeights(const std::function<Dtype*(int p)>& into);
  // The servers return from RunDedicatedServer.
  Status Stop();

 private:
  Status Command(int32_t kind, int64_t iter);
  Status Fail(const std::string& what, int server, const Status& s) const;
  // Receives one array of server number `shard`'s held blocks, packed
  // (Note [Packed transfers] in server_process.cpp), into into(p) (null:
  // not wanted); a failure says `what` ("gathering ... of") and names it.
  Status ReceivePacked(int shard, const std::function<Dtype*(int p)>& into,
                       const char* what);

  Communicator* comm_;
  const ServerPlan plan_;
  const BlockPartition partition_;
};

// Runs a dedicated server on this rank until the leader (`leader`, the
// first worker) says stop: receives the plan, builds the shard and its
// ParamServer, and follows the commands (Note [Dedicated servers]).
// Returns the first failure, naming this rank and what it was doing.
Status RunDedicatedServer(Communicator* comm, int leader);

}  // namespace dist
}  // namespace poseidon

#endif  // POSEIDON_DISTRIBUTED_SERVER_PROCESS_HPP_
