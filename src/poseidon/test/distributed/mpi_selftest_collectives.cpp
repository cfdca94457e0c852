// mpi_selftest: collectives under a real mpirun (broadcast from every
// root, allgather, barriers, rank-order allreduce with the same bits on
// every rank), shared memory between the ranks of a host, and the
// library's users of the communicator: the ring allreduce and the
// parameter server.
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "mpi_selftest.hpp"
#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/param_server.hpp"
#include "poseidon/distributed/ring_allreduce.hpp"

namespace poseidon {
namespace dist {
namespace selftest {

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

template std::string DeterministicAllreduce<float>(Communicator* c);
template std::string DeterministicAllreduce<double>(Communicator* c);

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

}  // namespace selftest
}  // namespace dist
}  // namespace poseidon
