// The shared-memory allreduce as a transport: staging writes straight into
// this rank's slot of memory every rank maps, Post publishes it, and Read
// sums every rank's slot in rank order (shared_allreduce.hpp). All on the
// training thread; no messages. The training thread's share of the exchange
// (from Stage to Post) shows in the timeline's compute lane; the sum shows
// in the wait+update before the next forward.
#include <memory>
#include <utility>
#include <vector>

#include "poseidon/distributed/shared_allreduce.hpp"
#include "poseidon/distributed/transport.hpp"
#include "poseidon/util/timeline.hpp"

namespace poseidon {
namespace dist {
namespace {

template <typename Dtype>
class SharedMemoryTransport final : public Transport<Dtype> {
 public:
  SharedMemoryTransport(const TransportContext& context,
                        std::vector<ExchangeSpec> groups,
                        std::unique_ptr<SharedAllreduce<Dtype>> shared)
      : timeline_(context.timeline),
        groups_(std::move(groups)),
        shared_(std::move(shared)) {}

  const char* name() const override { return "ALLREDUCE (shared memory)"; }
  const char* route() const override {
    return "through shared memory: every rank is on this host";
  }
  Dtype* Stage(int g, int64_t iter) override {
    if (timeline_) staged_at_ = timeline_->NowMicros();
    return shared_->Slot(g, iter);
  }
  Dtype* Home(int g, int64_t iter) override { return shared_->Slot(g, iter); }
  void Fill(int g, const std::vector<Net<Dtype>*>& workers,
            Dtype* slot) override {
    StageGradient(groups_[g], *workers[0], slot);
  }
  void Post(int g, int64_t iter) override {
    shared_->Publish(g, iter);
    if (timeline_) {
      timeline_->Complete(timeline_->Lane("compute"), groups_[g].name,
                          "ALLREDUCE", staged_at_, timeline_->NowMicros(),
                          {{"iter", iter}});
    }
  }
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
  Timeline* timeline_;
  std::vector<ExchangeSpec> groups_;
  std::unique_ptr<SharedAllreduce<Dtype>> shared_;
  int64_t staged_at_ = 0;  // timeline: when the group being posted staged
};

}  // namespace

template <typename Dtype>
std::unique_ptr<Transport<Dtype>> MakeSharedMemoryTransport(
    const TransportContext& context, std::vector<ExchangeSpec> groups) {
  // Slots: see Note [Shared memory allreduce] in shared_allreduce.cpp (a
  // slot is reused only after every rank released it, one more than the
  // staging slots), and one more without staleness, where the gradients
  // are born in the slots: then moving the diffs on at the update point
  // never waits (Note [Gradients born in shared memory] in
  // synchronizer_exchange.cpp).
  std::vector<typename SharedAllreduce<Dtype>::Group> specs;
  for (const ExchangeSpec& g : groups) specs.push_back({g.name, g.count});
  const int slots = context.slots + (context.diffs_born_in_slots ? 2 : 1);
  std::unique_ptr<SharedAllreduce<Dtype>> shared =
      SharedAllreduce<Dtype>::Create(context.comm, std::move(specs), slots);
  if (!shared) return nullptr;
  return std::make_unique<SharedMemoryTransport<Dtype>>(
      context, std::move(groups), std::move(shared));
}

template std::unique_ptr<Transport<float>> MakeSharedMemoryTransport<float>(
    const TransportContext&, std::vector<ExchangeSpec>);
template std::unique_ptr<Transport<double>> MakeSharedMemoryTransport<double>(
    const TransportContext&, std::vector<ExchangeSpec>);

}  // namespace dist
}  // namespace poseidon
