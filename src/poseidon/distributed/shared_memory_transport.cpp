// The shared-memory allreduce as a transport: staging writes straight into
// this rank's slot of memory every rank maps, Post publishes it, and Read
// sums every rank's slot in rank order (shared_allreduce.hpp). All on the
// training thread; no messages.
#include <memory>
#include <utility>
#include <vector>

#include "poseidon/distributed/shared_allreduce.hpp"
#include "poseidon/distributed/transport.hpp"

namespace poseidon {
namespace dist {
namespace {

template <typename Dtype>
class SharedMemoryTransport final : public Transport<Dtype> {
 public:
  explicit SharedMemoryTransport(
      std::unique_ptr<SharedAllreduce<Dtype>> shared)
      : shared_(std::move(shared)) {}

  const char* name() const override { return "ALLREDUCE (shared memory)"; }
  Dtype* Stage(int g, int64_t iter) override {
    return shared_->Slot(g, iter);
  }
  void Post(int g, int64_t iter) override { shared_->Publish(g, iter); }
  bool Done(int g, int64_t iter) override { return shared_->Ready(g, iter); }
  void Wait(int g, int64_t iter) override { shared_->Wait(g, iter); }
  void Read(int g, int64_t iter, size_t offset, size_t count, Dtype scale,
            Dtype* out) override {
    shared_->Sum(g, iter, offset, count, scale, out);
  }
  void Release(int g, int64_t iter) override { shared_->Release(g, iter); }
  uint64_t bytes_moved() const override { return 0; }
  uint64_t group_bytes(int) const override { return 0; }

 private:
  std::unique_ptr<SharedAllreduce<Dtype>> shared_;
};

}  // namespace

template <typename Dtype>
std::unique_ptr<Transport<Dtype>> MakeSharedMemoryTransport(
    const TransportContext& context, std::vector<ExchangeSpec> groups) {
  // Slots: see Note [Shared memory allreduce] in shared_allreduce.cpp (a
  // slot is reused only after every rank released it, one more than the
  // staging slots).
  std::vector<typename SharedAllreduce<Dtype>::Group> specs;
  for (const ExchangeSpec& g : groups) specs.push_back({g.name, g.count});
  std::unique_ptr<SharedAllreduce<Dtype>> shared =
      SharedAllreduce<Dtype>::Create(context.comm, std::move(specs),
                                     context.slots + 1);
  if (!shared) return nullptr;
  return std::make_unique<SharedMemoryTransport<Dtype>>(std::move(shared));
}

template std::unique_ptr<Transport<float>> MakeSharedMemoryTransport<float>(
    const TransportContext&, std::vector<ExchangeSpec>);
template std::unique_ptr<Transport<double>> MakeSharedMemoryTransport<double>(
    const TransportContext&, std::vector<ExchangeSpec>);

}  // namespace dist
}  // namespace poseidon
