// Set-up of the distributed-message harness and its seeds (fuzz_dist.hpp).
#include "fuzz_dist.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "poseidon/distributed/action_agreement.hpp"
#include "poseidon/distributed/communicator.hpp"
#include "poseidon/distributed/param_server.hpp"
#include "poseidon/distributed/server_process.hpp"
#include "poseidon/distributed/tags.hpp"

namespace poseidon {
namespace fuzz {
namespace {

using dist::BlockPartition;

// What the scripted communicators below share: the collectives (neither
// AgreeOnAction nor ParamServer uses one) and the delivery of a scripted
// message into a Recv buffer, refused when its size is not the one asked
// for, as the real communicators refuse it.
class ScriptedBase : public dist::Communicator {
 public:
  explicit ScriptedBase(const char* user) : user_(user) {}
  Status AllreduceSum(float*, size_t) override { return Unused(); }
  Status AllreduceSum(double*, size_t) override { return Unused(); }
  Status Broadcast(void*, size_t, int) override { return Unused(); }
  Status Allgather(const void*, size_t, void*) override { return Unused(); }
  Status Barrier() override { return Unused(); }

 protected:
  static Status Deliver(const std::string& what, int src,
                        const std::string& msg, void* buf, size_t bytes) {
    if (msg.size() != bytes) {
      return Status::Failure(StrCat(what, ": rank ", src, " sent ",
                                    msg.size(), " bytes, this rank expected ",
                                    bytes));
    }
    if (bytes > 0) std::memcpy(buf, msg.data(), bytes);
    return Status::OK();
  }

 private:
  Status Unused() const {
    LOG(FATAL) << user_ << " used a collective";
    return Status::OK();
  }
  const char* user_;
};

// Rank `rank` of 3: Recv hands out the scripted messages by source, Send
// succeeds; nothing else is used by AgreeOnAction.
class ScriptedCommunicator final : public ScriptedBase {
 public:
  ScriptedCommunicator(int rank, std::vector<std::string> from)
      : ScriptedBase("AgreeOnAction"), rank_(rank), from_(std::move(from)) {}
  int rank() const override { return rank_; }
  int size() const override { return 3; }
  Status Send(const void*, size_t, int, int) override { return Status::OK(); }
  Status Recv(void* buf, size_t bytes, int src, int tag) override {
    CHECK(src >= 0 && src < 3 && src != rank_);
    const std::string what = StrCat("rank ", rank_, ": Recv of ", bytes,
                                    " bytes from rank ", src, " tag ", tag);
    if (taken_[src]) return Status::Failure(what + ": no more messages");
    taken_[src] = true;
    return Deliver(what, src, from_[src], buf, bytes);
  }
  void Abort(const std::string& why) override {
    LOG(FATAL) << "Abort in the harness: " << why;
  }

 private:
  int rank_;
  std::vector<std::string> from_;
  bool taken_[3] = {false, false, false};
};

// Rank 0 of 2 for ParamServer: what rank 0 sends itself is delivered (in
// order per tag, waiting for it as MPI would), what it sends rank 1 is
// dropped, and rank 1's messages are the scripted records, each tag's
// record taken once. Abort fails every later and pending Recv.
class PeerScriptCommunicator final : public ScriptedBase {
 public:
  explicit PeerScriptCommunicator(std::function<std::string(int tag)> peer)
      : ScriptedBase("ParamServer"), peer_(std::move(peer)) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  Status Send(const void* buf, size_t bytes, int dest, int tag) override {
    CHECK(dest == 0 || dest == 1);
    if (dest == 1) return Status::OK();
    std::lock_guard<std::mutex> lock(mu_);
    self_[tag].emplace_back(static_cast<const char*>(buf), bytes);
    cv_.notify_all();
    return Status::OK();
  }
  Status Recv(void* buf, size_t bytes, int src, int tag) override {
    CHECK(src == 0 || src == 1);
    const std::string what = StrCat("rank 0: Recv of ", bytes,
                                    " bytes from rank ", src, " tag ", tag);
    std::string msg;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (src == 1) {
        if (!taken_.insert(tag).second) {
          return Status::Failure(what + ": rank 1 sent nothing more");
        }
        msg = peer_(tag);
      } else {
        // Generous: a wait this long is a hang, which -timeout reports.
        if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] {
              return aborted_ || !self_[tag].empty();
            })) {
          return Status::Failure(what + ": timed out");
        }
        if (aborted_) return Status::Failure(what + ": aborted");
        msg = std::move(self_[tag].front());
        self_[tag].pop_front();
      }
      if (aborted_) return Status::Failure(what + ": aborted");
    }
    return Deliver(what, src, msg, buf, bytes);
  }
  void Abort(const std::string& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    why_ = why;
    cv_.notify_all();
  }

 private:
  std::function<std::string(int)> peer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, std::deque<std::string>> self_;  // GUARDED_BY(mu_)
  std::set<int> taken_;                          // GUARDED_BY(mu_)
  bool aborted_ = false;                         // GUARDED_BY(mu_)
  std::string why_;                              // GUARDED_BY(mu_)
};

std::vector<std::string> SplitRecords(const uint8_t* data, size_t size) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at + 2 <= size && records.size() < 64) {
    size_t length = data[at] | static_cast<size_t>(data[at + 1]) << 8;
    at += 2;
    length = std::min(length, size - at);
    records.emplace_back(reinterpret_cast<const char*>(data + at), length);
    at += length;
  }
  return records;
}

template <typename Dtype>
Status RunExchange(const BlockPartition& partition, int64_t iter,
                   const std::vector<std::string>& records) {
  const int blocks = static_cast<int>(partition.blocks().size());
  PeerScriptCommunicator comm([&](int tag) {
    // Tags of one exchange are distinct: blocks < kTagSpan.
    const int block = tag >= dist::kPullTagBase ? tag - dist::kPullTagBase
                                                : tag - dist::kPushTagBase;
    CHECK(block >= 0 && block < blocks) << "tag " << tag;
    return records.empty() ? std::string()
                           : records[block % records.size()];
  });
  std::vector<std::vector<Dtype>> data(blocks);
  std::vector<typename dist::ParamServer<Dtype>::BlockRef> refs;
  for (int b = 0; b < blocks; ++b) {
    data[b].assign(partition.blocks()[b].count, Dtype(b + 1));
    refs.push_back({b, data[b].data()});
  }
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status result;
  {
    // Default options: a pull thread takes the sums a window at a time.
    dist::ParamServer<Dtype> server(&comm, &partition,
                                    dist::ParamServerOptions());
    server.Exchange(iter, std::move(refs), [&](Status s) {
      std::lock_guard<std::mutex> lock(mu);
      result = s;
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  return result;
}

std::string Input(int family, const DistOptions& o, const std::string& msg) {
  std::string in(1, static_cast<char>(family));
  in.append(reinterpret_cast<const char*>(o.bytes), kOptionBytes);
  return in + msg;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()),
                     v.size() * sizeof(T));
}

}  // namespace

BlockPartition MakeFuzzPartition(const DistOptions& o) {
  const int ranks = 1 + o.bytes[0] % 4;
  std::vector<size_t> counts(1 + o.bytes[1] % 3);
  for (size_t i = 0; i < counts.size(); ++i) {
    counts[i] = 1 + o.bytes[2 + i] % 16;
  }
  const size_t dtype = o.bytes[6] & 1 ? 8 : 4;
  return BlockPartition(counts, dtype, (1 + o.bytes[5] % 8) * dtype, ranks);
}

dist::BlockExpectation MakeExpectation(const DistOptions& o,
                                       const BlockPartition& p) {
  dist::BlockExpectation want;
  want.ranks = p.num_shards();
  want.peer = (o.bytes[6] >> 1) % want.ranks;
  want.peer_job = want.peer;
  want.block = (o.bytes[7] & 15) % static_cast<int>(p.blocks().size());
  want.iter = o.bytes[7] >> 4;
  want.partition = &p;
  want.dtype_bytes = p.elem_bytes();
  return want;
}

void AgreeWithScriptedPeers(const uint8_t* msg, size_t size,
                            const DistOptions& o) {
  const std::string all(reinterpret_cast<const char*>(msg), size);
  const int rank = o.bytes[0] & 1;
  std::vector<std::string> from(3);
  if (rank == 0) {
    from[1] = all.substr(0, size / 2);
    from[2] = all.substr(size / 2);
  } else {
    from[0] = all;
  }
  ScriptedCommunicator comm(rank, from);
  const auto local = static_cast<SolverAction>(o.bytes[1] % 3);
  dist::AgreeOnAction(&comm, local);
}

std::string EncodePeerRecords(const std::vector<std::string>& records) {
  std::string out;
  for (const std::string& r : records) {
    CHECK_LE(r.size(), 65535u);
    out += static_cast<char>(r.size() & 0xff);
    out += static_cast<char>(r.size() >> 8);
    out += r;
  }
  return out;
}

Status ExchangeWithScriptedPeer(const uint8_t* msg, size_t size,
                                const DistOptions& o) {
  DistOptions two = o;
  two.bytes[0] = 1;  // 2 ranks
  const BlockPartition partition = MakeFuzzPartition(two);
  const std::vector<std::string> records = SplitRecords(msg, size);
  const int64_t iter = o.bytes[7] >> 4;
  return partition.elem_bytes() == 8
             ? RunExchange<double>(partition, iter, records)
             : RunExchange<float>(partition, iter, records);
}

int WriteDistSeeds(const std::string& root) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(root) / "dist_messages";
  fs::create_directories(dir);
  int count = 0;
  auto add = [&](const std::string& bytes) {
    std::ofstream out(dir / StrCat("seed_", count++), std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    CHECK(out.good()) << "cannot write " << dir;
  };
  // Parameter-server pushes and sums, as ParamServer encodes them, over
  // partitions of 1 to 4 shards, 4- and 8-byte elements.
  const uint8_t shapes[][6] = {{1, 0, 7, 0, 0, 3},  {2, 1, 5, 9, 0, 2},
                               {3, 2, 15, 3, 6, 7}, {0, 2, 1, 2, 3, 0}};
  for (const auto& shape : shapes) {
    for (int dtype = 0; dtype < 2; ++dtype) {
      DistOptions o;
      std::memcpy(o.bytes, shape, 6);
      o.bytes[6] = static_cast<uint8_t>(dtype);
      const BlockPartition p = MakeFuzzPartition(o);
      for (size_t b = 0; b < p.blocks().size() && b < 3; ++b) {
        for (int kind = 0; kind < 2; ++kind) {
          const int sender = kind == 0 ? static_cast<int>(b) % p.num_shards()
                                       : p.blocks()[b].shard;
          o.bytes[6] = static_cast<uint8_t>(dtype | sender << 1);
          o.bytes[7] = static_cast<uint8_t>(b | (5 + b) << 4);
          const size_t payload = p.blocks()[b].count * p.elem_bytes();
          std::vector<char> values(payload);
          for (size_t i = 0; i < payload; ++i) values[i] = char(i * 37 + b);
          std::string msg(sizeof(dist::BlockHeader) + payload, '\0');
          dist::EncodeBlockMessage(
              {static_cast<int64_t>(5 + b), static_cast<int32_t>(b), sender},
              values.data(), payload, msg.data());
          add(Input(kind, o, msg));
        }
      }
    }
  }
  // Signal actions: rank 0 receiving two requests, rank 1 the answer.
  for (int32_t a = 0; a < 3; ++a) {
    DistOptions o;
    o.bytes[1] = static_cast<uint8_t>(a);
    add(Input(2, o, Bytes(std::vector<int32_t>{a, (a + 1) % 3})));
    o.bytes[0] = 1;
    add(Input(2, o, Bytes(std::vector<int32_t>{a})));
  }
  // Allreduce outcomes of 3 ranks: none, snapshots, a stop.
  for (double sum : {0.0, 2.0, 5.0, 12.0}) {
    DistOptions o;
    o.bytes[0] = 2;
    add(Input(3, o, Bytes(std::vector<double>{sum})));
  }
  // Start-up fingerprints of 1 to 4 ranks, agreeing and not.
  for (int ranks = 1; ranks <= 4; ++ranks) {
    std::vector<dist::Fingerprint> all(ranks);
    for (int r = 0; r < ranks; ++r) {
      all[r] = {0x9e3779b97f4a7c15ull, 0x5bd1e995ull, 12, 6, 431080, 4};
    }
    if (ranks == 3) all[2].solver ^= 1;
    DistOptions o;
    o.bytes[0] = static_cast<uint8_t>(ranks - 1);
    add(Input(4, o, Bytes(all)));
  }
  // The host level: flags, and host keys of 1, 2 and 4 ranks per host.
  {
    DistOptions o;
    o.bytes[0] = 3;
    add(Input(5, o, Bytes(std::vector<int32_t>{0, 0, 0, 0})));
    add(Input(5, o, Bytes(std::vector<int32_t>{0, 1, 0, 0})));
    o.bytes[1] = 2;
    add(Input(6, o, Bytes(std::vector<int32_t>{0, 1, 2, 3})));
    add(Input(6, o, Bytes(std::vector<int32_t>{0, 0, 2, 2})));
    add(Input(6, o, Bytes(std::vector<int32_t>{0, 0, 0, 0})));
  }
  // Sufficient factors of 1 to 3 ranks.
  const uint8_t layers[][5] = {{0, 0, 0, 0, 0}, {1, 2, 3, 1, 1},
                               {2, 1, 2, 3, 2}, {2, 2, 3, 3, 3}};
  for (const auto& layer : layers) {
    DistOptions o;
    std::memcpy(o.bytes, layer, 5);
    const size_t ranks = 1 + layer[0] % 3;
    const size_t per = (1 + layer[1] % 3) * ((1 + layer[2] % 4) +
                                             (1 + layer[3] % 4));
    std::vector<float> factors(ranks * per);
    for (size_t i = 0; i < factors.size(); ++i) {
      factors[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    }
    add(Input(7, o, Bytes(factors)));
  }
  // Whole exchanges with rank 1: its pushes to rank 0's blocks and its
  // shard's sums, one record per block.
  for (const auto& shape : shapes) {
    DistOptions o;
    std::memcpy(o.bytes, shape, 6);
    o.bytes[0] = 1;
    o.bytes[7] = 3 << 4;
    for (int dtype = 0; dtype < 2; ++dtype) {
      o.bytes[6] = static_cast<uint8_t>(dtype);
      const BlockPartition p = MakeFuzzPartition(o);
      std::vector<std::string> records;
      for (size_t b = 0; b < p.blocks().size(); ++b) {
        const size_t payload = p.blocks()[b].count * p.elem_bytes();
        std::string msg(sizeof(dist::BlockHeader) + payload, '\0');
        std::vector<char> values(payload, static_cast<char>(b));
        dist::EncodeBlockMessage({3, static_cast<int32_t>(b), 1},
                                 values.data(), payload, msg.data());
        records.push_back(msg);
      }
      add(Input(8, o, EncodePeerRecords(records)));
    }
  }
  // Dedicated servers' plans: summing only, with a server-side Adam, and
  // serving SSP(2).
  {
    dist::ServerPlan plan;
    plan.roles = {{0, 1}, {2}};
    plan.blob_counts = {10, 3};
    plan.exchanges = {{1}, {0}};
    add(Input(9, DistOptions(), dist::EncodeServerPlan(plan)));
    plan.update = true;
    plan.settings.solver.set_base_lr(0.01f);
    plan.settings.solver.set_type("Adam");
    plan.settings.rule = UpdateRule::kAdam;
    plan.settings.workers = 2;
    plan.settings.on_server = {true, false};
    plan.settings.lr_mult = {1.f, 2.f};
    plan.settings.decay_mult = {1.f, 0.f};
    add(Input(9, DistOptions(), dist::EncodeServerPlan(plan)));
    plan.settings.pushers = 2;
    plan.consistency = dist::Consistency::kSsp;
    plan.staleness = 2;
    add(Input(9, DistOptions(), dist::EncodeServerPlan(plan)));
  }
  return count;
}

}  // namespace fuzz
}  // namespace poseidon
