// The reference deterministic allreduce shared by every Communicator.
#include "poseidon/distributed/communicator.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "poseidon/distributed/wire.hpp"
#include "poseidon/util/signal_handler.hpp"

namespace poseidon {
namespace dist {

Status Communicator::SendRecv(const void* send, size_t send_bytes, int dest,
                              void* recv, size_t recv_bytes, int src,
                              int tag) {
  if (rank() % 2 == 0) {
    Status s = Send(send, send_bytes, dest, tag);
    if (!s.ok()) return s;
    return Recv(recv, recv_bytes, src, tag);
  }
  Status s = Recv(recv, recv_bytes, src, tag);
  if (!s.ok()) return s;
  return Send(send, send_bytes, dest, tag);
}

void Communicator::RecvOp::SplitFrom(const char* whole) const {
  if (bytes > 0) std::memcpy(buf, whole, bytes);
  if (bytes2 > 0) std::memcpy(buf2, whole + bytes, bytes2);
}

void Communicator::SendOp::JoinInto(std::vector<char>* whole) const {
  whole->resize(bytes + bytes2);
  if (bytes > 0) std::memcpy(whole->data(), buf, bytes);
  if (bytes2 > 0) std::memcpy(whole->data() + bytes, buf2, bytes2);
}

// The defaults take a two-part message through one buffer of both parts.
Status Communicator::RecvAll(const std::vector<RecvOp>& ops) {
  std::vector<char> whole;
  for (const RecvOp& op : ops) {
    if (op.bytes2 == 0) {
      Status s = Recv(op.buf, op.bytes, op.src, op.tag);
      if (!s.ok()) return s;
      continue;
    }
    whole.resize(op.bytes + op.bytes2);
    Status s = Recv(whole.data(), whole.size(), op.src, op.tag);
    if (!s.ok()) return s;
    op.SplitFrom(whole.data());
  }
  return Status::OK();
}

Status Communicator::SendAll(const std::vector<SendOp>& ops) {
  std::vector<char> whole;
  for (const SendOp& op : ops) {
    const void* buf = op.buf;
    if (op.bytes2 > 0) {
      op.JoinInto(&whole);
      buf = whole.data();
    }
    Status s = Send(buf, op.bytes + op.bytes2, op.dest, op.tag);
    if (!s.ok()) return s;
  }
  return Status::OK();
}

namespace {

// The default windowed run: consecutive groups of `ops` that fit in
// `window_bytes` (one op at least) with distinct (peer, tag), each through
// `all` and awaited whole.
template <typename Op, typename All, typename PeerOf>
Status RunGroups(const std::vector<Op>& ops, size_t window_bytes,
                 const std::function<Status(size_t)>& done, All all,
                 PeerOf peer_of) {
  size_t begin = 0;
  while (begin < ops.size()) {
    const size_t end = WindowEnd(
        begin, ops.size(), window_bytes,
        [&ops](size_t i) { return ops[i].bytes + ops[i].bytes2; },
        [&](size_t i) { return std::make_pair(peer_of(ops[i]), ops[i].tag); });
    Status s = all(std::vector<Op>(ops.begin() + begin, ops.begin() + end));
    if (s.ok()) s = done(end);
    if (!s.ok()) return s;
    begin = end;
  }
  return Status::OK();
}

}  // namespace

size_t WindowEnd(size_t begin, size_t count, size_t window_bytes,
                 const std::function<size_t(size_t)>& bytes,
                 const std::function<std::pair<int, int>(size_t)>& key) {
  size_t end = begin, held = 0;
  std::set<std::pair<int, int>> keys;
  for (; end < count; ++end) {
    const size_t b = bytes(end);
    const std::pair<int, int> k = key(end);
    if (end > begin && (held + b > window_bytes || keys.count(k) > 0)) break;
    held += b;
    keys.insert(k);
  }
  return end;
}

Status Communicator::SendWindowed(const std::vector<SendOp>& ops,
                                  size_t window_bytes,
                                  const std::function<Status(size_t)>& done) {
  return RunGroups(
      ops, window_bytes, done,
      [this](const std::vector<SendOp>& group) { return SendAll(group); },
      [](const SendOp& op) { return op.dest; });
}

Status Communicator::RecvWindowed(const std::vector<RecvOp>& ops,
                                  size_t window_bytes,
                                  const std::function<Status(size_t)>& done) {
  return RunGroups(
      ops, window_bytes, done,
      [this](const std::vector<RecvOp>& group) { return RecvAll(group); },
      [](const RecvOp& op) { return op.src; });
}

template <typename Dtype>
Status AllreduceSumByAllgather(Communicator* comm, Dtype* buf, size_t count) {
  const int n = comm->size();
  if (n == 1 || count == 0) return Status::OK();
  std::vector<Dtype> gathered(static_cast<size_t>(n) *
                              std::min(count, kAllreduceChunkElements));
  for (size_t begin = 0; begin < count; begin += kAllreduceChunkElements) {
    const size_t len = std::min(kAllreduceChunkElements, count - begin);
    Status s =
        comm->Allgather(buf + begin, len * sizeof(Dtype), gathered.data());
    if (!s.ok()) {
      return Status::Failure(
          StrCat("AllreduceSum of ", count, " elements: ", s.message()));
    }
    // See Note [Deterministic allreduce]: rank 0's value, then + rank 1's,
    // + rank 2's, ... for every element.
    Dtype* out = buf + begin;
    std::copy(gathered.data(), gathered.data() + len, out);
    for (int r = 1; r < n; ++r) {
      const Dtype* x = gathered.data() + static_cast<size_t>(r) * len;
      for (size_t i = 0; i < len; ++i) out[i] += x[i];
    }
  }
  return Status::OK();
}

template Status AllreduceSumByAllgather<float>(Communicator*, float*, size_t);
template Status AllreduceSumByAllgather<double>(Communicator*, double*, size_t);

HostLayout DiscoverHosts(Communicator* comm) {
  const int n = comm->size();
  const int32_t mine = comm->HostKey();
  std::vector<int32_t> keys(n);
  const Status s = comm->Allgather(&mine, sizeof(mine), keys.data());
  POSEIDON_REQUIRE(s.ok(), DistributedError, "rank ", comm->rank(),
                   ": finding which ranks share a host: ", s.message());
  return LayoutFromHostKeys(keys.data(), keys.size() * sizeof(int32_t), n,
                            comm->rank(),
                            [comm](int r) { return comm->JobRank(r); });
}

// Note [Stopped ranks]
// A rank stopped with SIGSTOP (or by a debugger, or the machine suspending
// it) runs no thread; its peers time out waiting for it and name it. When
// it is continued (mpirun sends SIGCONT before the SIGTERM that ends it),
// every deadline of its own waits has passed, and it would report that it
// waited for its peers in vain, naming them: found with
// scripts/fault_matrix.py, where the stopped rank's "Error:" line blamed the
// rank that had named it. poseidon_train records SIGCONT
// (RecordContinues in util/signal_handler.hpp), and every timeout message
// of the distributed layer appends StoppedNote: that this rank itself was
// stopped during the wait. Every thread resumes at once, and the SIGCONT
// handler runs on one of them when the kernel gets to it, possibly after
// the thread whose wait ran out has looked (and the heartbeat that also
// notes the stop, Note [Telling a stop from a SIGCONT], beats every 100
// ms); so a timeout that finds no continuation recorded gives them 250 ms
// before it concludes (the job is failing then, and the wait was long
// already). The grace used to
// be kept for waits that ended over 200 ms after their deadline, but a
// rank stopped just after it joined a collective is continued (by mpirun,
// ending the job when another rank's wait for the same collective ran
// out) about when its own deadline passes: in one run of
// scripts/fault_matrix.py its error came out without this note.
std::string StoppedNote(std::chrono::steady_clock::time_point wait_start,
                        std::chrono::milliseconds /*timeout*/) {
  auto continued = LastContinued();
  if (continued <= wait_start) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    continued = LastContinued();
  }
  if (continued <= wait_start) return "";
  const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - continued);
  return StrCat("; but this rank was itself stopped (SIGSTOP) and "
                "continued ", FormatSeconds(ago), " ago, during this wait: "
                "it is more likely that the others waited for this rank");
}

std::chrono::milliseconds RelayTimeout(const Communicator* comm) {
  const std::chrono::milliseconds t = comm->timeout();
  if (t.count() <= 0) return std::chrono::milliseconds(0);
  return t + std::max(std::chrono::milliseconds(1000), t / 4);
}

std::string FormatSeconds(std::chrono::milliseconds d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", d.count() / 1000.0);
  return text;
}

std::string ListForMessage(const std::vector<std::string>& items,
                           size_t shown) {
  std::vector<const std::string*> unique;
  for (const std::string& item : items) {
    bool seen = false;
    for (const std::string* u : unique) seen = seen || *u == item;
    if (!seen) unique.push_back(&item);
  }
  const size_t listed = std::min(unique.size(), std::max<size_t>(shown, 1));
  std::string text;
  for (size_t i = 0; i < listed; ++i) {
    if (i > 0) text += i + 1 == unique.size() ? " and " : ", ";
    text += *unique[i];
  }
  if (unique.size() > listed) {
    text += StrCat(" and ", unique.size() - listed, " more");
  }
  return text;
}

}  // namespace dist
}  // namespace poseidon
