// Dedicated parameter servers: the plan, the leader's commands, and the
// server's loop (Note [Dedicated servers] in server_process.hpp).
#include "poseidon/distributed/server_process.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <utility>

#include "poseidon/distributed/server_clip.hpp"
#include "poseidon/distributed/tags.hpp"

namespace poseidon {
namespace dist {
namespace {

constexpr uint32_t kPlanMagic = 0x4c505350;  // "PSPL"
// Version 2 added the consistency and per-push steps, 3 the lanes, 4 the
// number of pushers.
constexpr uint32_t kPlanVersion = 4;
// Far above any real plan (a few bytes per block and param): a larger size
// is a corrupt message, not a net.
constexpr uint64_t kMaxPlanBytes = uint64_t{1} << 30;

// Note [Packed transfers]
// A shard's seed (weights, history) and its history gathered for a
// snapshot travel packed, the held blocks' elements block after block (the
// layout of ShardState's storage), in messages of at most the plan's
// bytes_in_flight (at least one element). The leader packs or unpacks one
// message at a time, and the server receives into, or sends from, its
// state in place, so neither holds a second copy of a shard: for VGG-16
// with Adam on one server that copy was 1.7 GB on the server and 0.6 GB on
// the leading worker.
template <typename Dtype>
size_t ChunkElements(const ServerPlan& plan) {
  return std::max<size_t>(1, plan.bytes_in_flight / sizeof(Dtype));
}

// `count` elements to `peer`, or from it, a chunk per message.
template <typename Dtype>
Status SendChunks(Communicator* comm, const Dtype* data, size_t count,
                  size_t chunk, int peer) {
  for (size_t at = 0; at < count; at += chunk) {
    const size_t n = std::min(chunk, count - at);
    const Status s = comm->Send(data + at, n * sizeof(Dtype), peer, kServerTag);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

template <typename Dtype>
Status RecvChunks(Communicator* comm, Dtype* data, size_t count, size_t chunk,
                  int peer) {
  for (size_t at = 0; at < count; at += chunk) {
    const size_t n = std::min(chunk, count - at);
    const Status s = comm->Recv(data + at, n * sizeof(Dtype), peer, kServerTag);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

enum CommandKind : int32_t {
  kIterate = 1,
  kSeed = 2,
  kGather = 3,
  kStop = 4,
  kServeStale = 5,
  kWeights = 6
};

struct CommandMessage {
  int32_t kind;
  int32_t flags;  // kSeed: 1 when the history follows
  int64_t iter;
};
static_assert(sizeof(CommandMessage) == 16, "a command is 16 bytes");

const char* CommandName(int32_t kind) {
  switch (kind) {
    case kIterate:
      return "iterate";
    case kSeed:
      return "seed";
    case kGather:
      return "gather";
    case kStop:
      return "stop";
    case kServeStale:
      return "serve stale";
    case kWeights:
      return "weights";
    default:
      return "unknown";
  }
}

// Appends plain values and arrays to a byte string.
class PlanWriter {
 public:
  template <typename T>
  void Put(T value) {
    out_.append(reinterpret_cast<const char*>(&value), sizeof(value));
  }
  template <typename T, typename U>
  void PutAll(const std::vector<U>& values) {
    Put<uint64_t>(values.size());
    for (const U& v : values) Put<T>(static_cast<T>(v));
  }
  void PutBytes(const std::string& bytes) {
    Put<uint64_t>(bytes.size());
    out_ += bytes;
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads what PlanWriter wrote; a message too short, or a count larger than
// what is left, throws DistributedError naming the field.
class PlanReader {
 public:
  PlanReader(const std::string& in, int peer_job)
      : in_(in), peer_job_(peer_job) {}

  template <typename T>
  T Get(const char* field) {
    Need(sizeof(T), field);
    T value;
    std::memcpy(&value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  template <typename T, typename U>
  std::vector<U> GetAll(const char* field) {
    const uint64_t n = Get<uint64_t>(field);
    POSEIDON_REQUIRE(n <= (in_.size() - at_) / sizeof(T), DistributedError,
                     Where(), ": ", field, " counts ", n,
                     " values, more than the message holds");
    std::vector<U> values;
    values.reserve(n);
    for (uint64_t i = 0; i < n; ++i) values.push_back(U(Get<T>(field)));
    return values;
  }
  std::string GetBytes(const char* field) {
    const uint64_t n = Get<uint64_t>(field);
    Need(n, field);
    std::string bytes = in_.substr(at_, n);
    at_ += n;
    return bytes;
  }
  bool done() const { return at_ == in_.size(); }
  std::string Where() const {
    return StrCat("the server plan from rank ", peer_job_, " (", in_.size(),
                  " bytes)");
  }

 private:
  void Need(uint64_t bytes, const char* field) const {
    POSEIDON_REQUIRE(bytes <= in_.size() - at_, DistributedError, Where(),
                     ": truncated at byte ", at_, ", reading ", field);
  }
  const std::string& in_;
  const int peer_job_;
  size_t at_ = 0;
};

// The blocks a server's shard holds state for: those of on-server params,
// or none when the servers only sum.
std::vector<int> Held(const ServerPlan& plan, const BlockPartition& partition,
                      int shard) {
  if (!plan.update) return {};
  return ShardState<float>::HeldBlocks(partition, shard,
                                       plan.settings.on_server);
}

}  // namespace

std::string EncodeServerPlan(const ServerPlan& plan) {
  PlanWriter w;
  w.Put<uint32_t>(kPlanMagic);
  w.Put<uint32_t>(kPlanVersion);
  w.Put<int32_t>(plan.dtype_bytes);
  w.Put<uint64_t>(plan.block_bytes);
  w.Put<int32_t>(plan.push_threads);
  w.Put<int32_t>(plan.pull_threads);
  w.Put<uint64_t>(plan.bytes_in_flight);
  w.Put<int32_t>(plan.server_lanes);
  w.PutAll<int32_t>(plan.roles.workers);
  w.PutAll<int32_t>(plan.roles.servers);
  w.PutAll<uint64_t>(plan.blob_counts);
  w.Put<uint64_t>(plan.exchanges.size());
  for (const std::vector<int>& exchange : plan.exchanges) {
    w.PutAll<int32_t>(exchange);
  }
  w.Put<uint8_t>(plan.update ? 1 : 0);
  if (plan.update) {
    const ServerUpdateSettings& s = plan.settings;
    w.PutBytes(s.solver.SerializeAsString());
    w.Put<int32_t>(static_cast<int32_t>(s.rule));
    w.Put<int32_t>(s.workers);
    w.PutAll<uint8_t>(s.on_server);
    w.PutAll<float>(s.lr_mult);
    w.PutAll<float>(s.decay_mult);
    w.Put<int32_t>(s.pushers);
  }
  w.Put<int32_t>(static_cast<int32_t>(plan.consistency));
  w.Put<int32_t>(plan.staleness);
  return w.Take();
}

ServerPlan DecodeServerPlan(const std::string& bytes, int peer_job) {
  PlanReader r(bytes, peer_job);
  const uint32_t magic = r.Get<uint32_t>("the magic number");
  const uint32_t version = r.Get<uint32_t>("the version");
  POSEIDON_REQUIRE(
      magic == kPlanMagic && version == kPlanVersion, DistributedError,
      r.Where(), ": not a server plan of this version (magic ", magic,
      ", version ", version, "; this build reads version ", kPlanVersion, ")");
  ServerPlan plan;
  plan.dtype_bytes = r.Get<int32_t>("the element size");
  plan.block_bytes = r.Get<uint64_t>("block_size");
  plan.push_threads = r.Get<int32_t>("num_push_threads");
  plan.pull_threads = r.Get<int32_t>("num_pull_threads");
  plan.bytes_in_flight = r.Get<uint64_t>("bytes_in_flight");
  plan.server_lanes = r.Get<int32_t>("server_lanes");
  plan.roles.workers = r.GetAll<int32_t, int>("the worker ranks");
  plan.roles.servers = r.GetAll<int32_t, int>("the server ranks");
  plan.blob_counts = r.GetAll<uint64_t, size_t>("the parameter sizes");
  const uint64_t exchanges = r.Get<uint64_t>("the number of exchanges");
  for (uint64_t i = 0; i < exchanges; ++i) {
    plan.exchanges.push_back(r.GetAll<int32_t, int>("an exchange's blocks"));
  }
  plan.update = r.Get<uint8_t>("the update flag") != 0;
  if (plan.update) {
    ServerUpdateSettings& s = plan.settings;
    POSEIDON_REQUIRE(
        s.solver.ParseFromString(r.GetBytes("the solver parameters")),
        DistributedError, r.Where(),
        ": its solver parameters do not parse as a SolverParameter");
    const int32_t rule = r.Get<int32_t>("the update rule");
    POSEIDON_REQUIRE(rule >= static_cast<int32_t>(UpdateRule::kSGD) &&
                         rule <= static_cast<int32_t>(UpdateRule::kAdam),
                     DistributedError, r.Where(), ": update rule ", rule,
                     " is not one of the six solvers'");
    s.rule = static_cast<UpdateRule>(rule);
    s.workers = r.Get<int32_t>("the number of workers");
    s.on_server = r.GetAll<uint8_t, bool>("the on-server flags");
    s.lr_mult = r.GetAll<float, float>("lr_mult");
    s.decay_mult = r.GetAll<float, float>("decay_mult");
    s.pushers = r.Get<int32_t>("the number of pushers");
    POSEIDON_REQUIRE(s.pushers >= 0 && s.pushers <= s.workers, DistributedError,
                     r.Where(), ": ", s.pushers, " pushers for ", s.workers,
                     " workers");
  }
  const int32_t consistency = r.Get<int32_t>("the consistency");
  POSEIDON_REQUIRE(consistency >= static_cast<int32_t>(Consistency::kBsp) &&
                       consistency <= static_cast<int32_t>(Consistency::kAsync),
                   DistributedError, r.Where(), ": consistency ", consistency,
                   " is none of BSP, SSP and ASYNC");
  plan.consistency = static_cast<Consistency>(consistency);
  plan.staleness = r.Get<int32_t>("the staleness");
  POSEIDON_REQUIRE(plan.staleness >= 0, DistributedError, r.Where(),
                   ": staleness ", plan.staleness, " is negative");
  POSEIDON_REQUIRE(plan.consistency == Consistency::kBsp || plan.update,
                   DistributedError, r.Where(), ": ",
                   ConsistencyName(plan.consistency, plan.staleness),
                   " serving without the update on the servers");
  POSEIDON_REQUIRE(!plan.update || (plan.consistency == Consistency::kBsp) ==
                                       (plan.settings.pushers == 0),
                   DistributedError, r.Where(), ": ", plan.settings.pushers,
                   " pushers under ",
                   ConsistencyName(plan.consistency, plan.staleness));
  POSEIDON_REQUIRE(r.done(), DistributedError, r.Where(),
                   ": bytes left after the last field");
  POSEIDON_REQUIRE(plan.dtype_bytes == 4 || plan.dtype_bytes == 8,
                   DistributedError, r.Where(), ": element size ",
                   plan.dtype_bytes, " is neither float's nor double's");
  POSEIDON_REQUIRE(!plan.roles.workers.empty() && !plan.roles.servers.empty(),
                   DistributedError, r.Where(),
                   ": it names no worker or no server rank");
  return plan;
}

// ---- the leader's side -----------------------------------------------------

template <typename Dtype>
ServerControl<Dtype>::ServerControl(Communicator* comm, ServerPlan plan)
    : comm_(comm),
      plan_(std::move(plan)),
      partition_(plan_.blob_counts, sizeof(Dtype), plan_.block_bytes,
                 static_cast<int>(plan_.roles.servers.size())) {
  POSEIDON_REQUIRE(plan_.dtype_bytes == static_cast<int>(sizeof(Dtype)),
                   ConfigError, "server plan for ", plan_.dtype_bytes,
                   "-byte elements given to a control of ", sizeof(Dtype));
  POSEIDON_REQUIRE(!plan_.roles.workers.empty() && !plan_.roles.servers.empty(),
                   ConfigError,
                   "dedicated servers need worker and server ranks named");
  for (int s : plan_.roles.servers) {
    POSEIDON_REQUIRE(std::count(plan_.roles.workers.begin(),
                                plan_.roles.workers.end(), s) == 0,
                     ConfigError, "rank ", comm_->JobRank(s),
                     " is named both a worker and a dedicated server");
  }
}

template <typename Dtype>
Status ServerControl<Dtype>::Fail(const std::string& what, int server,
                                  const Status& s) const {
  return Status::Failure(StrCat(what, " dedicated server rank ",
                                comm_->JobRank(server), ": ", s.message()));
}

template <typename Dtype>
Status ServerControl<Dtype>::Command(int32_t kind, int64_t iter) {
  if (!leader()) return Status::OK();
  const CommandMessage message{kind, 0, iter};
  for (int server : plan_.roles.servers) {
    const Status s = comm_->Send(&message, sizeof(message), server, kServerTag);
    if (!s.ok()) {
      return Fail(StrCat("sending '", CommandName(kind), "' to"), server, s);
    }
  }
  return Status::OK();
}

template <typename Dtype>
Status ServerControl<Dtype>::Start() {
  if (!leader()) return Status::OK();
  const std::string bytes = EncodeServerPlan(plan_);
  const uint64_t size = bytes.size();
  for (int server : plan_.roles.servers) {
    Status s = comm_->Send(&size, sizeof(size), server, kServerTag);
    if (s.ok()) s = comm_->Send(bytes.data(), size, server, kServerTag);
    if (!s.ok()) return Fail("sending the plan to", server, s);
  }
  return Status::OK();
}

template <typename Dtype>
Status ServerControl<Dtype>::Iterate(int64_t iter) {
  return Command(kIterate, iter);
}

template <typename Dtype>
Status ServerControl<Dtype>::Stop() {
  return Command(kStop, 0);
}

template <typename Dtype>
Status ServerControl<Dtype>::Seed(
    const std::function<const Dtype*(int p)>& weights,
    const std::function<const Dtype*(int a, int p)>& history) {
  if (!leader() || !plan_.update) return Status::OK();
  const int arrays = history ? HistoryArrays(plan_.settings.rule) : 0;
  const size_t chunk = ChunkElements<Dtype>(plan_);
  std::vector<Dtype> packed;
  // Sends the held blocks' elements of whole params from `from` (null:
  // zeros), packed, a chunk per message (Note [Packed transfers]).
  auto send = [&](const std::vector<int>& held, int server,
                  const std::function<const Dtype*(int p)>& from) {
    const size_t total = BlockElements(partition_, held);
    for (size_t begin = 0; begin < total; begin += chunk) {
      const size_t end = std::min(total, begin + chunk);
      packed.resize(end - begin);
      ForPackedRange(partition_, held, begin, end,
                     [&](int p, size_t param_offset, size_t packed_offset,
                         size_t count) {
                       const Dtype* base = from(p);
                       Dtype* to = packed.data() + (packed_offset - begin);
                       if (base == nullptr) {
                         std::fill_n(to, count, Dtype(0));
                       } else {
                         std::copy_n(base + param_offset, count, to);
                       }
                     });
      const Status s = comm_->Send(packed.data(), packed.size() * sizeof(Dtype),
                                   server, kServerTag);
      if (!s.ok()) return s;
    }
    return Status::OK();
  };
  for (size_t shard = 0; shard < plan_.roles.servers.size(); ++shard) {
    const int server = plan_.roles.servers[shard];
    const std::vector<int> held =
        Held(plan_, partition_, static_cast<int>(shard));
    const CommandMessage message{kSeed, arrays > 0 ? 1 : 0, 0};
    Status s = comm_->Send(&message, sizeof(message), server, kServerTag);
    if (held.empty() && s.ok()) continue;
    if (s.ok()) s = send(held, server, weights);
    for (int a = 0; a < arrays && s.ok(); ++a) {
      s = send(held, server, [&](int p) { return history(a, p); });
    }
    if (!s.ok()) return Fail("seeding", server, s);
  }
  return Status::OK();
}

template <typename Dtype>
Status ServerControl<Dtype>::Gather(
    const std::function<Dtype*(int a, int p)>& history) {
  if (!leader() || !plan_.update) return Status::OK();
  Status s = Command(kGather, 0);
  if (!s.ok()) return s;
  const int arrays = HistoryArrays(plan_.settings.rule);
  for (size_t shard = 0; shard < plan_.roles.servers.size(); ++shard) {
    for (int a = 0; a < arrays && s.ok(); ++a) {
      s = ReceivePacked(static_cast<int>(shard),
                        [&](int p) { return history(a, p); },
                        "gathering the solver history of");
    }
  }
  return s;
}

template <typename Dtype>
Status ServerControl<Dtype>::ReceivePacked(
    int shard, const std::function<Dtype*(int p)>& into, const char* what) {
  const int server = plan_.roles.servers[shard];
  const std::vector<int> held = Held(plan_, partition_, shard);
  const size_t total = BlockElements(partition_, held);
  const size_t chunk = ChunkElements<Dtype>(plan_);
  std::vector<Dtype> packed;
  // A chunk per message (Note [Packed transfers]).
  for (size_t begin = 0; begin < total; begin += chunk) {
    const size_t end = std::min(total, begin + chunk);
    packed.resize(end - begin);
    const Status s = comm_->Recv(packed.data(), packed.size() * sizeof(Dtype),
                                 server, kServerTag);
    if (!s.ok()) return Fail(what, server, s);
    ForPackedRange(partition_, held, begin, end,
                   [&](int p, size_t param_offset, size_t packed_offset,
                       size_t count) {
                     Dtype* to = into(p);
                     if (to == nullptr) return;
                     std::copy_n(packed.data() + (packed_offset - begin),
                                 count, to + param_offset);
                   });
  }
  return Status::OK();
}

template <typename Dtype>
Status ServerControl<Dtype>::ServeStale(int64_t first) {
  return Command(kServeStale, first);
}

template <typename Dtype>
Status ServerControl<Dtype>::TakeWeights(
    const std::function<Dtype*(int p)>& into) {
  if (!plan_.update) return Status::OK();
  Status s = Command(kWeights, 0);
  for (size_t shard = 0; shard < plan_.roles.servers.size() && s.ok();
       ++shard) {
    s = ReceivePacked(static_cast<int>(shard), into,
                      "taking the parameters of");
  }
  return s;
}

template class ServerControl<float>;
template class ServerControl<double>;

// ---- the server's side -----------------------------------------------------

namespace {

// The iterations a server has posted and not yet served.
class Outstanding {
 public:
  std::function<void(Status)> Add() {
    std::lock_guard<std::mutex> lock(mu_);
    ++pending_;
    return [this](Status s) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!s.ok() && first_.ok()) first_ = s;
        --pending_;
      }
      drained_.notify_all();
    };
  }
  // Waits for every exchange posted; the first failure among them.
  Status Drain() {
    std::unique_lock<std::mutex> lock(mu_);
    drained_.wait(lock, [this] { return pending_ == 0; });
    return first_;
  }

 private:
  std::mutex mu_;
  std::condition_variable drained_;
  int pending_ = 0;  // GUARDED_BY(mu_)
  Status first_;     // GUARDED_BY(mu_)
};

// Receives the leader's next message of `bytes` bytes, waiting past the
// communicator's deadline (Note [Dedicated servers]): a receive that fails
// after a whole deadline is a wait that timed out, and is tried again.
Status AwaitLeader(Communicator* comm, int leader, void* into, size_t bytes,
                   const char* what) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = comm->timeout();
  const auto began = Clock::now();
  for (;;) {
    const auto start = Clock::now();
    const Status s = comm->Recv(into, bytes, leader, kServerTag);
    if (s.ok()) return s;
    if (deadline.count() <= 0 || Clock::now() - start < deadline) return s;
    LOG(INFO) << "Dedicated server rank " << comm->JobRank(comm->rank())
              << ": no " << what << " from worker rank "
              << comm->JobRank(leader) << " for "
              << std::chrono::duration_cast<std::chrono::seconds>(Clock::now() -
                                                                  began)
                     .count()
              << " s; still waiting";
  }
}

template <typename Dtype>
Status ServePlan(Communicator* comm, int leader, const ServerPlan& plan) {
  const BlockPartition partition(plan.blob_counts, sizeof(Dtype),
                                 plan.block_bytes,
                                 static_cast<int>(plan.roles.servers.size()));
  for (const std::vector<int>& exchange : plan.exchanges) {
    for (int id : exchange) {
      POSEIDON_REQUIRE(
          id >= 0 && static_cast<size_t>(id) < partition.blocks().size(),
          DistributedError, "the server plan from rank ", comm->JobRank(leader),
          " names block ", id, " of a partition of ",
          partition.blocks().size());
    }
  }
  const auto me = std::find(plan.roles.servers.begin(),
                            plan.roles.servers.end(), comm->rank());
  POSEIDON_REQUIRE(me != plan.roles.servers.end(), ConfigError, "rank ",
                   comm->JobRank(comm->rank()),
                   " runs a dedicated server but the plan of rank ",
                   comm->JobRank(leader), " names it no shard");
  const int shard = static_cast<int>(me - plan.roles.servers.begin());
  std::unique_ptr<ShardState<Dtype>> state;
  std::unique_ptr<ServerClip<Dtype>> clip;
  typename ParamServer<Dtype>::Update update;
  if (plan.update) {
    state =
        std::make_unique<ShardState<Dtype>>(&partition, shard, plan.settings);
    // Blocks of params the servers only sum pass unchanged.
    update = [s = state.get()](int64_t iter, int block, Dtype* values) {
      if (s->holds(block)) s->Apply(iter, block, values);
    };
  }
  if (plan.update && plan.settings.solver.clip_gradients() >= 0 &&
      plan.consistency == Consistency::kBsp) {
    // Note [Clipping on the servers]: stage, agree, then update. Every
    // block the workers exchange is of a param the servers update.
    clip = std::make_unique<ServerClip<Dtype>>(
        comm, state.get(), plan.settings.solver, plan.roles);
    update = [s = state.get(), c = clip.get()](int64_t iter, int block,
                                               Dtype* values) {
      CHECK(s->holds(block)) << "clip_gradients on the servers: block " << block
                             << " of a param they do not update";
      s->Stage(block, values);
      c->BlockStaged(iter, block);
    };
  }
  ParamServerOptions options;
  options.roles = plan.roles;
  options.push_threads = plan.push_threads;
  options.pull_threads = plan.pull_threads;
  options.bytes_in_flight = plan.bytes_in_flight;
  options.server_lanes = plan.server_lanes;
  options.consistency = plan.consistency;
  options.staleness = plan.staleness;
  options.hold_updates = clip != nullptr;
  Outstanding outstanding;
  Status result;
  {
    ParamServer<Dtype> server(comm, &partition, options, nullptr, update);
    if (clip) {
      clip->set_sender([&server](int64_t iter, int block, const Dtype* params) {
        server.SendHeld(iter, block, params);
      });
    }
    const size_t held = state ? state->elements() : 0;
    const int arrays = state ? HistoryArrays(plan.settings.rule) : 0;
    const size_t chunk = ChunkElements<Dtype>(plan);
    bool seeded = false;
    for (bool running = true; running && result.ok();) {
      CommandMessage command;
      result = AwaitLeader(comm, leader, &command, sizeof(command), "command");
      if (!result.ok()) break;
      // Anything but "iterate" waits for the serving posted before it.
      if (command.kind != kIterate) result = outstanding.Drain();
      if (!result.ok()) break;
      switch (command.kind) {
        case kIterate:
          for (const std::vector<int>& exchange : plan.exchanges) {
            server.Serve(command.iter, exchange, outstanding.Add());
          }
          if (clip) clip->Open(command.iter);
          break;
        case kSeed: {
          if (held == 0) break;
          if (command.flags == 0 && !seeded) {
            result = Status::Failure(
                "the first seed carries no history (the leader's bug)");
            break;
          }
          seeded = true;
          // Into the state in place (Note [Packed transfers]).
          result = RecvChunks(comm, state->mutable_weights(), held, chunk,
                              leader);
          for (int a = 0; a < arrays && command.flags != 0 && result.ok();
               ++a) {
            result = RecvChunks(comm, state->mutable_history(a), held, chunk,
                                leader);
          }
          if (result.ok()) state->MarkSeeded();
          break;
        }
        case kGather:
          for (int a = 0; a < arrays && held > 0 && result.ok(); ++a) {
            result = SendChunks(comm, state->history(a), held, chunk, leader);
          }
          break;
        case kServeStale:
          if (plan.consistency == Consistency::kBsp) {
            result = Status::Failure("the plan's consistency is BSP");
            break;
          }
          server.ServeStale(plan.exchanges, command.iter, outstanding.Add());
          break;
        case kWeights:
          // To every worker in turn; each takes the servers in shard order,
          // so the sends run as a wavefront and none waits on a cycle.
          for (size_t w = 0; w < plan.roles.workers.size() && held > 0 &&
                             result.ok();
               ++w) {
            result = SendChunks(comm, state->weights(), held, chunk,
                                plan.roles.workers[w]);
          }
          break;
        case kStop:
          running = false;
          break;
        default:
          result = Status::Failure(
              StrCat("command ", command.kind, " from worker rank ",
                     comm->JobRank(leader), " is none this server knows"));
      }
      if (!result.ok()) {
        result = Status::Failure(StrCat("'", CommandName(command.kind),
                                        "' (iteration ", command.iter,
                                        "): ", result.message()));
      }
    }
    if (result.ok()) result = outstanding.Drain();
  }  // the server's threads finish the sends posted, then stop
  return result;
}

}  // namespace

Status RunDedicatedServer(Communicator* comm, int leader) {
  auto named = [comm](const std::string& message) {
    return Status::Failure(StrCat("dedicated server rank ",
                                  comm->JobRank(comm->rank()), ": ", message));
  };
  try {
    uint64_t size = 0;
    Status s = AwaitLeader(comm, leader, &size, sizeof(size), "plan");
    if (s.ok() && size > kMaxPlanBytes) {
      return named(StrCat("the plan from rank ", comm->JobRank(leader),
                          " would be ", size, " bytes, more than the ",
                          kMaxPlanBytes, " a plan may take"));
    }
    std::string bytes(s.ok() ? size : 0, '\0');
    if (s.ok()) s = comm->Recv(bytes.data(), size, leader, kServerTag);
    if (!s.ok()) return named(StrCat("receiving the plan: ", s.message()));
    const ServerPlan plan = DecodeServerPlan(bytes, comm->JobRank(leader));
    s = plan.dtype_bytes == 4 ? ServePlan<float>(comm, leader, plan)
                              : ServePlan<double>(comm, leader, plan);
    return s.ok() ? s : named(s.message());
  } catch (const Error& e) {
    return named(e.what());
  } catch (const std::bad_alloc&) {
    // A plan whose shapes this machine cannot hold (or a corrupt one).
    return named("out of memory building the shard the plan describes");
  }
}

}  // namespace dist
}  // namespace poseidon
