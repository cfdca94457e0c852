// mpi_selftest: MpiCommunicator under a real mpirun (CTest runs it with 2 and
// 4 ranks on this host with --hosts=one; the multi-host test on network
// namespaces with --hosts=several). Every rank runs the same checks; rank 0
// prints which failed on which rank and "N passed, M failed"; the exit
// status is non-zero when any check failed on any rank.
//
// Threads: the main thread runs the checks; ConcurrentTags starts a sender
// and a receiver thread per tag to exercise Send/Recv from several threads.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/mpi_communicator.hpp"
#include "poseidon/distributed/param_server.hpp"
#include "poseidon/distributed/ring_allreduce.hpp"

namespace poseidon {
namespace dist {
namespace {

// A check returns "" on success, else what went wrong on this rank.
using Check = std::function<std::string(Communicator*)>;

std::string Expect(const Status& s, const std::string& what) {
  return s.ok() ? "" : StrCat(what, ": ", s.message());
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A value for (rank, i) whose sum over ranks depends on the addition order
// in float: large terms of alternating sign plus small ones.
template <typename Dtype>
Dtype Term(int rank, size_t i) {
  const uint64_t h =
      (i * 2654435761u + static_cast<uint64_t>(rank) * 97) % 1000003;
  const double big = (rank % 2 == 0 ? 1 : -1) * 1e7 * ((h % 7) + 1);
  return static_cast<Dtype>(big + (h % 1000) * 0.001 + rank * 0.1);
}

std::string SendRecvRing(Communicator* c) {
  const int n = c->size(), r = c->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  // Large enough to need the rendezvous protocol.
  std::vector<int32_t> out(1 << 18, r), in(1 << 18, -1);
  Status sent;
  std::thread sender([&] {
    sent = c->Send(out.data(), out.size() * sizeof(int32_t), next, 1);
  });
  Status got = c->Recv(in.data(), in.size() * sizeof(int32_t), prev, 1);
  sender.join();
  if (!sent.ok()) return sent.message();
  if (!got.ok()) return got.message();
  for (int32_t v : in) {
    if (v != prev) return StrCat("received ", v, " instead of ", prev);
  }
  return "";
}

// SendRecv around the ring, both directions at once: a small (eager) and a
// rendezvous-sized message, then a size mismatch named on the receiver.
std::string SendRecvBothWays(Communicator* c) {
  const int n = c->size(), r = c->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (size_t count : {size_t{3}, size_t{1} << 18}) {
    std::vector<int32_t> out(count, r), in(count, -1);
    std::string e = Expect(
        c->SendRecv(out.data(), count * 4, next, in.data(), count * 4, prev, 2),
        StrCat("SendRecv of ", count, " ints"));
    if (!e.empty()) return e;
    for (int32_t v : in) {
      if (v != prev) return StrCat("received ", v, " instead of ", prev);
    }
  }
  int32_t one = r;
  int64_t two = 0;
  Status s = c->SendRecv(&one, 4, next, &two, 8, prev, 3);
  if (s.ok()) return "a 4-byte message received as 8 bytes succeeded";
  if (!Contains(s.message(), StrCat("rank ", prev, " sent 4 bytes"))) {
    return StrCat("mismatch message does not name the sizes: ", s.message());
  }
  return "";
}

// RingAllreduceSum over MPI (the ALLREDUCE transport): each chunk is summed
// along the ring from its own rank, so compare with that order exactly.
std::string RingAllreduce(Communicator* c) {
  const int n = c->size();
  const size_t count = 100003;
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = Term<float>(c->rank(), i);
  std::string e = Expect(RingAllreduceSum(c, buf.data(), count, 9), "");
  if (!e.empty()) return e;
  for (size_t i = 0; i < count; ++i) {
    // Element i lies in chunk k; the ring adds ranks k, k + 1, ..., k - 1.
    int k = 0;
    while (count * (k + 1) / n <= i) ++k;
    float want = Term<float>(k, i);
    for (int q = 1; q < n; ++q) want = Term<float>((k + q) % n, i) + want;
    if (std::memcmp(&want, &buf[i], sizeof(float)) != 0) {
      return StrCat("element ", i, " is ", buf[i], ", the ring-order sum is ",
                    want);
    }
  }
  return "";
}

// What --hosts=one|several says about where mpirun put the ranks.
enum class Hosts { kUnknown, kOne, kSeveral };
Hosts g_hosts = Hosts::kUnknown;

// Ranks on one host share memory: each writes its part, and after a barrier
// every rank reads every part; a request larger than /dev/shm falls back
// (nullptr) on every rank. Ranks on several hosts get none.
std::string SharedMemoryParts(Communicator* c) {
  if (g_hosts != Hosts::kUnknown &&
      c->OnOneHost() != (g_hosts == Hosts::kOne)) {
    return StrCat("OnOneHost() is ", c->OnOneHost(), " for ranks on ",
                  g_hosts == Hosts::kOne ? "one host" : "several hosts");
  }
  std::unique_ptr<SharedMemory> shared = c->MapSharedMemory(1000);
  if (!c->OnOneHost()) {
    return shared ? "MapSharedMemory mapped memory across hosts" : "";
  }
  if (!shared) return "MapSharedMemory returned nullptr";
  if (shared->bytes_per_rank() != 1024) {
    return StrCat("bytes_per_rank ", shared->bytes_per_rank(),
                  ", expected 1000 rounded up to 1024");
  }
  int32_t* mine = reinterpret_cast<int32_t*>(shared->part(c->rank()));
  for (int i = 0; i < 250; ++i) {
    if (mine[i] != 0) return StrCat("part not zero-filled at ", i);
    mine[i] = c->rank() * 1000 + i;
  }
  std::string e = Expect(c->Barrier(), "barrier");
  if (!e.empty()) return e;
  for (int r = 0; r < c->size(); ++r) {
    const int32_t* part = reinterpret_cast<int32_t*>(shared->part(r));
    for (int i = 0; i < 250; ++i) {
      if (part[i] != r * 1000 + i) {
        return StrCat("rank ", r, "'s part holds ", part[i], " at ", i);
      }
    }
  }
  e = Expect(c->Barrier(), "barrier after reading");
  if (!e.empty()) return e;
  // More than /dev/shm can hold: every rank falls back (nullptr), none dies.
  if (c->MapSharedMemory(size_t{1} << 50) != nullptr) {
    return "MapSharedMemory of 1 PB per rank succeeded";
  }
  return "";
}

std::string TagMatching(Communicator* c) {
  if (c->size() < 2) return "";
  if (c->rank() == 0) {
    const int64_t a = 11, b = 22, d = 33;
    std::string e = Expect(c->Send(&a, 8, 1, 5), "send a");
    if (e.empty()) e = Expect(c->Send(&b, 8, 1, 6), "send b");
    if (e.empty()) e = Expect(c->Send(&d, 8, 1, 5), "send d");
    return e;
  }
  if (c->rank() != 1) return "";
  int64_t x = 0, y = 0, z = 0;
  std::string e = Expect(c->Recv(&x, 8, 0, 6), "recv tag 6");
  if (e.empty()) e = Expect(c->Recv(&y, 8, 0, 5), "recv tag 5");
  if (e.empty()) e = Expect(c->Recv(&z, 8, 0, 5), "recv tag 5 again");
  if (!e.empty()) return e;
  if (x != 22 || y != 11 || z != 33) {
    return StrCat("got ", x, ", ", y, ", ", z, " instead of 22, 11, 33");
  }
  return "";
}

std::string ConcurrentTags(Communicator* c) {
  const int n = c->size(), r = c->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  constexpr int kTags = 4, kMessages = 20;
  std::vector<std::string> errors(2 * kTags);
  std::vector<std::thread> threads;
  for (int t = 0; t < kTags; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kMessages && errors[2 * t].empty(); ++i) {
        std::vector<int32_t> msg(1 + (i * 4099) % 70000, r * 1000 + t);
        msg[0] = i;
        errors[2 * t] = Expect(c->Send(msg.data(), msg.size() * 4, next, t),
                               StrCat("sender tag ", t));
      }
    });
    threads.emplace_back([&, t] {
      for (int i = 0; i < kMessages && errors[2 * t + 1].empty(); ++i) {
        std::vector<int32_t> msg(1 + (i * 4099) % 70000, -1);
        Status s = c->Recv(msg.data(), msg.size() * 4, prev, t);
        if (!s.ok()) {
          errors[2 * t + 1] = StrCat("receiver tag ", t, ": ", s.message());
        } else if (msg[0] != i ||
                   (msg.size() > 1 && msg[1] != prev * 1000 + t)) {
          errors[2 * t + 1] =
              StrCat("receiver tag ", t, ": message ", i, " arrived as ",
                     msg[0], "/", msg.size() > 1 ? msg[1] : 0);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& e : errors) {
    if (!e.empty()) return e;
  }
  return "";
}

std::string SizeMismatch(Communicator* c) {
  if (c->size() < 2) return "";
  if (c->rank() == 0) {
    const double v[1] = {1.5};
    return Expect(c->Send(v, 8, 1, 7), "send");
  }
  if (c->rank() != 1) return "";
  double v[2];
  Status s = c->Recv(v, 16, 0, 7);
  if (s.ok()) return "a 16-byte Recv of an 8-byte message succeeded";
  if (!Contains(s.message(), "sent 8 bytes") ||
      !Contains(s.message(), "expected 16") ||
      !Contains(s.message(), "rank 0")) {
    return StrCat("unclear message: ", s.message());
  }
  return "";
}

std::string BadArguments(Communicator* c) {
  int v = 0;
  Status s = c->Send(&v, 4, c->size(), 0);
  if (s.ok() || !Contains(s.message(), "no such rank")) {
    return StrCat("Send to rank ", c->size(), ": ", s.message());
  }
  s = c->Recv(&v, 4, 0, -1);
  if (s.ok() || !Contains(s.message(), "tag")) {
    return StrCat("Recv with tag -1: ", s.message());
  }
  s = c->Broadcast(&v, 4, -2);
  if (s.ok()) return "Broadcast from root -2 succeeded";
  return "";
}

std::string BroadcastAllRoots(Communicator* c) {
  for (int root = 0; root < c->size(); ++root) {
    std::vector<double> buf(1000, c->rank() == root ? root + 0.25 : -1.0);
    std::string e = Expect(c->Broadcast(buf.data(), buf.size() * 8, root),
                           StrCat("root ", root));
    if (!e.empty()) return e;
    for (double v : buf) {
      if (v != root + 0.25) return StrCat("root ", root, ": got ", v);
    }
    e = Expect(c->Broadcast(nullptr, 0, root), "empty broadcast");
    if (!e.empty()) return e;
  }
  return "";
}

std::string AllgatherInts(Communicator* c) {
  const int n = c->size(), r = c->rank();
  const int32_t mine[3] = {r, 10 * r, 100 * r};
  std::vector<int32_t> all(3 * n, -1);
  std::string e = Expect(c->Allgather(mine, sizeof(mine), all.data()), "");
  if (!e.empty()) return e;
  for (int q = 0; q < n; ++q) {
    if (all[3 * q] != q || all[3 * q + 1] != 10 * q ||
        all[3 * q + 2] != 100 * q) {
      return StrCat("rank ", q, "'s slot holds ", all[3 * q], " ",
                    all[3 * q + 1], " ", all[3 * q + 2]);
    }
  }
  return "";
}

std::string Barriers(Communicator* c) {
  for (int i = 0; i < 10; ++i) {
    std::string e = Expect(c->Barrier(), StrCat("barrier ", i));
    if (!e.empty()) return e;
  }
  return "";
}

// Rank-order sum, identical bits on every rank; crosses an allgather chunk.
template <typename Dtype>
std::string DeterministicAllreduce(Communicator* c) {
  const size_t count = kAllreduceChunkElements + 4097;
  std::vector<Dtype> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = Term<Dtype>(c->rank(), i);
  std::string e = Expect(c->AllreduceSum(buf.data(), count), "");
  if (!e.empty()) return e;
  for (size_t i = 0; i < count; ++i) {
    Dtype want = Term<Dtype>(0, i);
    for (int q = 1; q < c->size(); ++q) want += Term<Dtype>(q, i);
    if (std::memcmp(&want, &buf[i], sizeof(Dtype)) != 0) {
      return StrCat("element ", i, " is ", buf[i], ", the rank-order sum is ",
                    want);
    }
  }
  // Same bits everywhere: compare a checksum of the raw bytes.
  uint64_t sum = 0;
  const unsigned char* bytes =
      reinterpret_cast<const unsigned char*>(buf.data());
  for (size_t i = 0; i < count * sizeof(Dtype); ++i) {
    sum = sum * 1099511628211ull + bytes[i];
  }
  std::vector<uint64_t> sums(c->size());
  e = Expect(c->Allgather(&sum, 8, sums.data()), "checksum allgather");
  if (!e.empty()) return e;
  for (int q = 0; q < c->size(); ++q) {
    if (sums[q] != sum) return StrCat("rank ", q, " has different bits");
  }
  return "";
}

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// A long urgent wait must not keep a core (Note [Polling on a shared core]):
// rank 0 waits under UrgentScope for a message rank 1 sends 0.4 s late; the
// caller sleeps, so rank 0's CPU time over the wait is its poller's, which
// naps once a millisecond of yields brought nothing. (A poller that yielded
// throughout used a whole core; on a busy 2-core machine two such pollers
// kept every other process off both cores for 25 s.)
std::string UrgentWaitLeavesTheCore(Communicator* c) {
  if (c->rank() > 1) return "";
  int32_t value = 0;
  if (c->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    value = 7;
    return Expect(c->Send(&value, sizeof(value), 0, 9), "late send");
  }
  UrgentScope urgent(c);
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = ProcessCpuSeconds();
  Status s = c->Recv(&value, sizeof(value), 1, 9);
  const double cpu = ProcessCpuSeconds() - cpu_start;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!s.ok()) return s.message();
  if (value != 7) return StrCat("received ", value, " instead of 7");
  if (cpu > 0.5 * wall) {
    return StrCat("rank 0 used ", cpu, " s of CPU in an urgent wait of ", wall,
                  " s: its poller kept the core");
  }
  return "";
}

// A Recv nobody answers times out naming the peer, and leaves the
// communicator usable.
std::string RecvTimeout(Communicator* main_comm) {
  MpiOptions options;
  options.timeout = std::chrono::milliseconds(200);
  MpiCommunicator c(options);
  if (c.size() < 2) return "";
  std::string result;
  if (c.rank() == 1) {
    int v = 0;
    const auto start = std::chrono::steady_clock::now();
    Status s = c.Recv(&v, 4, 0, 3);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (s.ok()) {
      result = "a Recv nobody sent to succeeded";
    } else if (!Contains(s.message(), "timed out") ||
               !Contains(s.message(), "waiting for rank 0")) {
      result = StrCat("unclear message: ", s.message());
    } else if (waited < 0.15 || waited > 5) {
      result = StrCat("gave up after ", waited, " s, not about 0.2 s");
    }
  }
  std::string e = Expect(main_comm->Barrier(), "barrier");
  if (!e.empty()) return e;
  int v = 42;
  if (c.rank() == 0) e = Expect(c.Send(&v, 4, 1, 4), "send after timeout");
  if (c.rank() == 1) {
    v = 0;
    e = Expect(c.Recv(&v, 4, 0, 4), "recv after timeout");
    if (e.empty() && v != 42) e = StrCat("got ", v, " after timeout");
  }
  if (!e.empty()) return e;
  return result;
}

// RecvAll and SendAll start every op at once. Each rank sends two
// rendezvous-sized messages to the next rank and takes two from the
// previous one, the plain side in the opposite order to the batch: a
// RecvAll that waited for its first op before starting the second would
// wait for a sender blocked on the second (and SendAll likewise), so done
// one by one this times out; at once it completes. A RecvAll with a message
// nobody sends names the rank it waits for.
std::string BatchesRunAtOnce(Communicator* main_comm) {
  MpiOptions options;
  options.timeout = std::chrono::seconds(2);
  MpiCommunicator c(options);
  const int n = c.size(), r = c.rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t count = size_t{1} << 18;  // 1 MB: above any eager limit
  std::vector<int32_t> a(count, r), b(count, -r), got_a(count), got_b(count);
  auto check = [&](const char* what) -> std::string {
    for (size_t i = 0; i < count; i += 4099) {
      if (got_a[i] != prev || got_b[i] != -prev) {
        return StrCat(what, ": element ", i, " is ", got_a[i], " / ", got_b[i],
                      ", want ", prev, " / ", -prev);
      }
    }
    return "";
  };
  // Plain sends of b (tag 12) then a (tag 11); RecvAll asks for a first.
  Status sent;
  std::thread sender([&] {
    sent = c.Send(b.data(), count * 4, next, 12);
    if (sent.ok()) sent = c.Send(a.data(), count * 4, next, 11);
  });
  Status got = c.RecvAll({{got_a.data(), count * 4, prev, 11},
                          {got_b.data(), count * 4, prev, 12}});
  sender.join();
  std::string e = Expect(got, "RecvAll");
  if (e.empty()) e = Expect(sent, "plain sends to RecvAll");
  if (e.empty()) e = check("RecvAll");
  if (!e.empty()) return e;
  // SendAll of a then b; plain receives take b first.
  std::fill(got_a.begin(), got_a.end(), 0);
  std::fill(got_b.begin(), got_b.end(), 0);
  Status taken;
  std::thread receiver([&] {
    taken = c.Recv(got_b.data(), count * 4, prev, 14);
    if (taken.ok()) taken = c.Recv(got_a.data(), count * 4, prev, 13);
  });
  sent = c.SendAll(
      {{a.data(), count * 4, next, 13}, {b.data(), count * 4, next, 14}});
  receiver.join();
  e = Expect(sent, "SendAll");
  if (e.empty()) e = Expect(taken, "plain receives from SendAll");
  if (e.empty()) e = check("SendAll");
  if (!e.empty()) return e;
  e = Expect(main_comm->Barrier(), "barrier");
  if (!e.empty()) return e;
  // Only the message with tag 15 comes; the one with tag 16 never does.
  std::thread small([&] { sent = c.Send(&r, 4, next, 15); });
  int32_t x = -1, y = -1;
  got = c.RecvAll({{&x, 4, prev, 15}, {&y, 4, prev, 16}});
  small.join();
  e = Expect(sent, "the small send");
  if (!e.empty()) return e;
  if (got.ok()) return "a RecvAll with a message nobody sent succeeded";
  if (!Contains(got.message(), StrCat("Recv of 4 bytes from rank ", prev,
                                      " tag 16: timed out")) ||
      !Contains(got.message(), StrCat("waiting for rank ", prev))) {
    return StrCat("unclear message: ", got.message());
  }
  if (x != prev) return StrCat("the message that came holds ", x);
  return Expect(main_comm->Barrier(), "barrier after");
}

// A communicator made by Split numbers its ranks anew, but its messages
// name ranks as the job does (JobRank), and its waits end at the timeout
// given to Split. Ranks in reverse order: split rank 0 is the job's last.
std::string SplitNamesJobRanks(Communicator* c) {
  const int n = c->size();
  std::unique_ptr<Communicator> split =
      c->Split(0, n - 1 - c->rank(), std::chrono::milliseconds(300));
  if (split->rank() != n - 1 - c->rank()) {
    return StrCat("split rank ", split->rank(), ", expected ",
                  n - 1 - c->rank());
  }
  for (int r = 0; r < n; ++r) {
    if (split->JobRank(r) != n - 1 - r) {
      return StrCat("JobRank(", r, ") = ", split->JobRank(r), ", expected ",
                    n - 1 - r);
    }
  }
  if (split->timeout() != std::chrono::milliseconds(300)) {
    return "the split communicator did not take the timeout given to Split";
  }
  std::string result;
  if (n >= 2 && c->rank() == 0) {
    // Job rank 1 is split rank n - 2; nobody sends.
    int v = 0;
    Status s = split->Recv(&v, 4, n - 2, 5);
    if (s.ok()) {
      result = "a Recv nobody sent to succeeded";
    } else if (!Contains(s.message(), StrCat("rank 0: Recv of 4 bytes from "
                                             "rank 1 tag 5: timed out after "
                                             "0.3 s waiting for rank 1"))) {
      result = StrCat("message does not name the job's ranks: ",
                      s.message());
    }
  }
  std::string e = Expect(c->Barrier(), "barrier after the split's timeout");
  return e.empty() ? result : e;
}

// A collective that times out names the rank whose part never came (Note
// [Collectives from messages]), however many ranks there are.
std::string CollectiveTimeout(Communicator* main_comm) {
  MpiOptions options;
  options.timeout = std::chrono::milliseconds(200);
  MpiCommunicator c(options);
  const int n = c.size();
  std::string result;
  if (c.rank() != 0) {  // rank 0 joins only after the others gave up
    Status s = c.Barrier();
    const std::string want =
        "Barrier #1: timed out after 0.2 s waiting for rank 0's part";
    if (s.ok()) {
      result = "a Barrier without rank 0 succeeded";
    } else if (!Contains(s.message(), want)) {
      result = StrCat("unclear message: ", s.message());
    }
  }
  std::string e = Expect(main_comm->Barrier(), "barrier");
  if (!e.empty()) return e;
  // Rank 0's late barrier finds the others' parts (their receives were
  // withdrawn on timeout, their sends were eager).
  if (c.rank() == 0) e = Expect(c.Barrier(), "late barrier of rank 0");
  std::string f = Expect(main_comm->Barrier(), "barrier after");
  return !result.empty() ? result : !e.empty() ? e : f;
}

// An Allgather that times out names every rank whose part is missing, and
// only those (here the last two ranks, or the last of two).
std::string AllgatherTimeoutNamesTheMissing(Communicator* main_comm) {
  MpiOptions options;
  options.timeout = std::chrono::milliseconds(200);
  MpiCommunicator c(options);
  const int n = c.size();
  const int first_missing = n == 2 ? 1 : n - 2;
  std::string result;
  int mine = c.rank();
  std::vector<int> all(n, -1);
  if (c.rank() < first_missing) {
    Status s = c.Allgather(&mine, sizeof(mine), all.data());
    const std::string want =
        n == 2 ? "Allgather #1 of 4 bytes per rank: timed out after 0.2 s "
                 "waiting for rank 1's part"
               : StrCat("Allgather #1 of 4 bytes per rank: timed out after "
                        "0.2 s waiting for rank ", n - 2, "'s part and rank ",
                        n - 1, "'s part");
    if (s.ok()) {
      result = "an Allgather without the last ranks succeeded";
    } else if (!Contains(s.message(), want)) {
      result = StrCat("unclear message: ", s.message(), " (want: ", want, ")");
    }
  }
  std::string e = Expect(main_comm->Barrier(), "barrier");
  if (!e.empty()) return e;
  // The late ranks find every part: the others sent theirs before giving up.
  if (c.rank() >= first_missing) {
    e = Expect(c.Allgather(&mine, sizeof(mine), all.data()),
               "late Allgather");
    for (int r = 0; r < n && e.empty(); ++r) {
      if (all[r] != r) e = StrCat("late Allgather: part ", r, " is ", all[r]);
    }
  }
  std::string f = Expect(main_comm->Barrier(), "barrier after");
  return !result.empty() ? result : !e.empty() ? e : f;
}

// A Broadcast whose root never joins: the root's children name the root,
// the ranks below them the rank that was to pass the data on (with 4
// ranks, root 0: ranks 1 and 2 wait for rank 0, rank 3 for rank 2).
std::string BroadcastTimeoutNamesTheParent(Communicator* main_comm) {
  MpiOptions options;
  options.timeout = std::chrono::milliseconds(200);
  MpiCommunicator c(options);
  std::string result;
  double value = c.rank() == 0 ? 2.5 : -1.0;
  if (c.rank() != 0) {
    Status s = c.Broadcast(&value, sizeof(value), 0);
    // The rank's parent in the binomial tree: without its lowest set bit.
    const int parent = c.rank() & (c.rank() - 1);
    const std::string want =
        parent == 0
            ? "Broadcast #1 of 8 bytes from root 0: timed out after 0.2 s "
              "waiting for rank 0 (the root)"
            : StrCat(
                  "Broadcast #1 of 8 bytes from root 0: timed out after "
                  "0.2 s waiting for rank ",
                  parent, " to pass on the root's data");
    if (s.ok()) {
      result = "a Broadcast without its root succeeded";
    } else if (!Contains(s.message(), want)) {
      result = StrCat("unclear message: ", s.message(), " (want: ", want, ")");
    }
  }
  std::string e = Expect(main_comm->Barrier(), "barrier");
  if (!e.empty()) return e;
  // The late root's sends are eager and complete.
  if (c.rank() == 0) {
    e = Expect(c.Broadcast(&value, sizeof(value), 0), "late root");
  }
  std::string f = Expect(main_comm->Barrier(), "barrier after");
  return !result.empty() ? result : !e.empty() ? e : f;
}

// Two-part messages (RecvOp / SendOp with buf2), above the eager limit:
// sent in two parts and received in one, sent in one and received in two,
// and a message of another total size refused naming both sizes.
std::string TwoPartMessages(Communicator* c) {
  const int n = c->size(), r = c->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const size_t count = size_t{1} << 18;  // 1 MB of int32 after the header
  const int64_t head = 1000 + r;
  std::vector<int32_t> body(count), whole(2 + count);
  for (size_t i = 0; i < count; ++i) body[i] = static_cast<int32_t>(i) * n + r;
  std::memcpy(whole.data(), &head, 8);
  std::memcpy(whole.data() + 2, body.data(), count * 4);
  // Each rank sends to the next while it receives from the previous.
  Status sent;
  std::thread sender([&] {
    sent = c->SendAll({{&head, 8, next, 21, body.data(), count * 4},
                       {whole.data(), whole.size() * 4, next, 22}});
  });
  std::vector<int32_t> got_whole(2 + count), got_body(count);
  int64_t got_head = 0;
  Status got = c->RecvAll({{got_whole.data(), got_whole.size() * 4, prev, 21},
                           {&got_head, 8, prev, 22, got_body.data(),
                            count * 4}});
  sender.join();
  std::string e = Expect(sent, "SendAll of two-part messages");
  if (e.empty()) e = Expect(got, "RecvAll of two-part messages");
  if (!e.empty()) return e;
  int64_t whole_head = 0;
  std::memcpy(&whole_head, got_whole.data(), 8);
  if (whole_head != 1000 + prev || got_head != 1000 + prev) {
    return StrCat("headers ", whole_head, " and ", got_head, ", want ",
                  1000 + prev);
  }
  for (size_t i = 0; i < count; i += 997) {
    const int32_t want = static_cast<int32_t>(i) * n + prev;
    if (got_whole[2 + i] != want || got_body[i] != want) {
      return StrCat("element ", i, " is ", got_whole[2 + i], " / ",
                    got_body[i], ", want ", want);
    }
  }
  // 8 bytes sent; 8 + 4 expected.
  sent = c->Send(&head, 8, next, 23);
  int32_t tail = 0;
  got = c->RecvAll({{&got_head, 8, prev, 23, &tail, 4}});
  e = Expect(sent, "the short send");
  if (!e.empty()) return e;
  if (got.ok()) return "a two-part receive took a message of 8 bytes for 12";
  if (!Contains(got.message(), "sent 8 bytes, this rank expected 12")) {
    return StrCat("unclear message: ", got.message());
  }
  return "";
}

// ParamServer over real MPI: exchanges of blocks above the eager limit
// (rendezvous: a send waits for its receive), with one block at a time, a
// window of three, and the default window, and two push and pull threads:
// no deadlock, and every rank gets the rank-order sum bit for bit.
std::string ParamServerWindows(Communicator* c) {
  const size_t total = size_t{3} << 18;  // 3 MB of floats
  const std::vector<size_t> blobs = {total / 2, total / 3,
                                     total - total / 2 - total / 3};
  const std::vector<size_t> start = {0, blobs[0], blobs[0] + blobs[1]};
  const BlockPartition part(blobs, sizeof(float), 256 << 10, c->size());
  const size_t message = sizeof(BlockHeader) + (size_t{256} << 10);
  struct Case {
    int threads;
    size_t bytes_in_flight;
  };
  for (const Case k : {Case{1, 1}, Case{1, 3 * message},
                       Case{2, ParamServerOptions().bytes_in_flight}}) {
    ParamServerOptions options;
    options.push_threads = options.pull_threads = k.threads;
    options.bytes_in_flight = k.bytes_in_flight;
    std::vector<float> grad(total);
    for (size_t i = 0; i < total; ++i) grad[i] = Term<float>(c->rank(), i);
    {
      ParamServer<float> server(c, &part, options);
      std::vector<ParamServer<float>::BlockRef> refs;
      for (size_t b = 0; b < part.blocks().size(); ++b) {
        const ParamBlock& block = part.blocks()[b];
        refs.push_back({static_cast<int>(b),
                        grad.data() + start[block.blob] + block.offset});
      }
      std::promise<Status> done;
      server.Exchange(7, refs, [&done](Status s) { done.set_value(s); });
      const std::string e =
          Expect(done.get_future().get(),
                 StrCat("exchange with ", k.threads, " threads, ",
                        k.bytes_in_flight, " bytes in flight"));
      if (!e.empty()) return e;
    }
    for (size_t i = 0; i < total; ++i) {
      float want = Term<float>(0, i);
      for (int r = 1; r < c->size(); ++r) want = want + Term<float>(r, i);
      if (std::memcmp(&want, &grad[i], sizeof(float)) != 0) {
        return StrCat(k.bytes_in_flight, " bytes in flight: element ", i,
                      " is ", grad[i], ", the rank-order sum is ", want);
      }
    }
  }
  return "";
}

int Run() {
  MpiOptions options;
  options.timeout = std::chrono::seconds(20);
  MpiCommunicator comm(options);
  const std::vector<std::pair<std::string, Check>> checks = {
      {"SendRecvRing", SendRecvRing},
      {"SendRecvBothWays", SendRecvBothWays},
      {"RingAllreduce", RingAllreduce},
      {"SharedMemoryParts", SharedMemoryParts},
      {"TagMatching", TagMatching},
      {"ConcurrentTags", ConcurrentTags},
      {"SizeMismatch", SizeMismatch},
      {"BadArguments", BadArguments},
      {"BroadcastAllRoots", BroadcastAllRoots},
      {"AllgatherInts", AllgatherInts},
      {"AllgatherTimeoutNamesTheMissing", AllgatherTimeoutNamesTheMissing},
      {"BroadcastTimeoutNamesTheParent", BroadcastTimeoutNamesTheParent},
      {"Barriers", Barriers},
      {"DeterministicAllreduceFloat", DeterministicAllreduce<float>},
      {"DeterministicAllreduceDouble", DeterministicAllreduce<double>},
      {"RecvTimeout", RecvTimeout},
      {"BatchesRunAtOnce", BatchesRunAtOnce},
      {"TwoPartMessages", TwoPartMessages},
      {"ParamServerWindows", ParamServerWindows},
      {"UrgentWaitLeavesTheCore", UrgentWaitLeavesTheCore},
      {"SplitNamesJobRanks", SplitNamesJobRanks},
      {"CollectiveTimeout", CollectiveTimeout},
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<double> failed(checks.size(), 0);
  for (size_t i = 0; i < checks.size(); ++i) {
    const std::string error = checks[i].second(&comm);
    if (!error.empty()) {
      failed[i] = 1;
      std::fprintf(stderr, "rank %d: FAILED %s: %s\n", comm.rank(),
                   checks[i].first.c_str(), error.c_str());
    }
    // Keep the checks apart even when one failed on some rank.
    Status s = comm.Barrier();
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: barrier after %s failed: %s\n",
                   comm.rank(), checks[i].first.c_str(), s.message().c_str());
      comm.Abort("mpi_selftest cannot continue");
    }
  }
  Status s = comm.AllreduceSum(failed.data(), failed.size());
  if (!s.ok()) comm.Abort(s.message());
  int num_failed = 0;
  for (size_t i = 0; i < checks.size(); ++i) {
    if (failed[i] > 0) {
      ++num_failed;
      if (comm.rank() == 0) {
        std::printf("FAILED %s on %g of %d ranks\n", checks[i].first.c_str(),
                    failed[i], comm.size());
      }
    }
  }
  if (comm.rank() == 0) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    std::printf("mpi_selftest with %d ranks: %d passed, %d failed (%.2f s)\n",
                comm.size(), static_cast<int>(checks.size()) - num_failed,
                num_failed, seconds);
  }
  return num_failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace dist
}  // namespace poseidon

int main(int argc, char** argv) {
  using poseidon::dist::Hosts;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--hosts=one") {
      poseidon::dist::g_hosts = Hosts::kOne;
    } else if (arg == "--hosts=several") {
      poseidon::dist::g_hosts = Hosts::kSeveral;
    } else {
      std::fprintf(stderr, "usage: mpi_selftest [--hosts=one|several]\n");
      return 2;
    }
  }
  try {
    return poseidon::dist::Run();
  } catch (const poseidon::Error& e) {
    std::fprintf(stderr, "mpi_selftest: %s\n", e.what());
    return 1;
  }
}
