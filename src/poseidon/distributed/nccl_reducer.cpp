// NCCL between the GPUs of one process; see Note [NCCL streams] in the
// header. Never run on a GPU in this repository's CI (no GPU there): it is
// compiled in the CUDA configuration, and scripts/gpu_check.sh runs its
// tests where a GPU is lent.
#include "poseidon/distributed/nccl_reducer.hpp"

#include <algorithm>
#include <mutex>
#include <set>

#include "poseidon/util/status.hpp"

#ifdef USE_NCCL
#include <nccl.h>

#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"

#define POSEIDON_NCCL_CHECK(call)                                 \
  POSEIDON_DEVICE_CHECK_IMPL_(call, ncclResult_t, ncclSuccess, \
                              ncclGetErrorString)
#endif

namespace poseidon {
namespace dist {

#ifdef USE_NCCL

namespace {

template <typename Dtype>
ncclDataType_t NcclType();
template <>
ncclDataType_t NcclType<float>() {
  return ncclFloat32;
}
template <>
ncclDataType_t NcclType<double>() {
  return ncclFloat64;
}

}  // namespace

struct NcclReducer::Impl {
  std::vector<int> devices;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;     // the NCCL stream of each worker
  std::vector<cudaEvent_t> before, after;
  std::mutex mu;
  std::string aborted;  // GUARDED_BY(mu)

  void CheckOpen() {
    std::lock_guard<std::mutex> lock(mu);
    POSEIDON_REQUIRE(aborted.empty(), DistributedError,
                     "NCCL between the device workers was aborted: ",
                     aborted);
  }
  // The NCCL stream of t waits for t's compute stream so far.
  void Follow(int t) {
    POSEIDON_CUDA_CHECK(cudaEventRecord(before[t], gpu::Stream()));
    POSEIDON_CUDA_CHECK(cudaStreamWaitEvent(streams[t], before[t], 0));
  }
  // t's compute stream waits for its NCCL stream so far.
  void Lead(int t) {
    POSEIDON_CUDA_CHECK(cudaEventRecord(after[t], streams[t]));
    POSEIDON_CUDA_CHECK(cudaStreamWaitEvent(gpu::Stream(), after[t], 0));
  }
};

bool NcclReducer::Available() { return true; }

std::string NcclReducer::Version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return StrCat("NCCL ", v / 10000, ".", v / 100 % 100, ".", v % 100);
}

NcclReducer::NcclReducer(const std::vector<int>& devices)
    : impl_(std::make_unique<Impl>()) {
  POSEIDON_REQUIRE(!devices.empty(), ConfigError,
                   "an NCCL communicator needs at least one GPU");
  POSEIDON_REQUIRE(
      std::set<int>(devices.begin(), devices.end()).size() == devices.size(),
      ConfigError, "NCCL device workers need distinct GPUs");
  Impl& d = *impl_;
  d.devices = devices;
  const int n = static_cast<int>(devices.size());
  d.comms.resize(n);
  POSEIDON_NCCL_CHECK(ncclCommInitAll(d.comms.data(), n, devices.data()));
  int current = 0;
  POSEIDON_CUDA_CHECK(cudaGetDevice(&current));
  d.streams.resize(n);
  d.before.resize(n);
  d.after.resize(n);
  for (int t = 0; t < n; ++t) {
    POSEIDON_CUDA_CHECK(cudaSetDevice(devices[t]));
    POSEIDON_CUDA_CHECK(
        cudaStreamCreateWithFlags(&d.streams[t], cudaStreamNonBlocking));
    POSEIDON_CUDA_CHECK(
        cudaEventCreateWithFlags(&d.before[t], cudaEventDisableTiming));
    POSEIDON_CUDA_CHECK(
        cudaEventCreateWithFlags(&d.after[t], cudaEventDisableTiming));
  }
  POSEIDON_CUDA_CHECK(cudaSetDevice(current));
}

NcclReducer::~NcclReducer() {
  Impl& d = *impl_;
  int current = 0;
  cudaGetDevice(&current);
  const bool aborted = !d.aborted.empty();  // Abort freed the comms
  for (size_t t = 0; t < d.comms.size(); ++t) {
    cudaSetDevice(d.devices[t]);
    if (!aborted) {
      cudaStreamSynchronize(d.streams[t]);
      ncclCommDestroy(d.comms[t]);
    }
    cudaEventDestroy(d.before[t]);
    cudaEventDestroy(d.after[t]);
    cudaStreamDestroy(d.streams[t]);
  }
  cudaSetDevice(current);
}

int NcclReducer::size() const {
  return static_cast<int>(impl_->devices.size());
}
int NcclReducer::device(int t) const { return impl_->devices[t]; }

template <typename Dtype>
void NcclReducer::Reduce(int t, Dtype* buf, size_t count) {
  Impl& d = *impl_;
  d.CheckOpen();
  d.Follow(t);
  POSEIDON_NCCL_CHECK(ncclReduce(buf, buf, count, NcclType<Dtype>(), ncclSum,
                                 0, d.comms[t], d.streams[t]));
  if (t == 0) d.Lead(t);  // worker 0 scales and stages the sum next
}

template <typename Dtype>
void NcclReducer::Broadcast(int t, Dtype* buf, size_t count) {
  Impl& d = *impl_;
  d.CheckOpen();
  d.Follow(t);
  POSEIDON_NCCL_CHECK(ncclBroadcast(buf, buf, count, NcclType<Dtype>(), 0,
                                    d.comms[t], d.streams[t]));
  if (t != 0) d.Lead(t);  // the forward reads the weights next
}

void NcclReducer::Settle(int t) { impl_->Lead(t); }

void NcclReducer::Abort(const std::string& why) {
  Impl& d = *impl_;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    if (!d.aborted.empty()) return;
    d.aborted = why;
  }
  for (ncclComm_t comm : d.comms) ncclCommAbort(comm);
}

#else  // !USE_NCCL

struct NcclReducer::Impl {};

bool NcclReducer::Available() { return false; }
std::string NcclReducer::Version() { return "no NCCL"; }

NcclReducer::NcclReducer(const std::vector<int>& devices) {
  POSEIDON_THROW(ConfigError, "device workers on ", devices.size(),
                 " GPUs need NCCL, and this build has none (configure with "
                 "-DUSE_CUDA=ON and NCCL installed)");
}
NcclReducer::~NcclReducer() = default;
int NcclReducer::size() const { return 0; }
int NcclReducer::device(int) const { return -1; }
template <typename Dtype>
void NcclReducer::Reduce(int, Dtype*, size_t) {}
template <typename Dtype>
void NcclReducer::Broadcast(int, Dtype*, size_t) {}
void NcclReducer::Settle(int) {}
void NcclReducer::Abort(const std::string&) {}

#endif  // USE_NCCL

template void NcclReducer::Reduce<float>(int, float*, size_t);
template void NcclReducer::Reduce<double>(int, double*, size_t);
template void NcclReducer::Broadcast<float>(int, float*, size_t);
template void NcclReducer::Broadcast<double>(int, double*, size_t);

}  // namespace dist
}  // namespace poseidon
