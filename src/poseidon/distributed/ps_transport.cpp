// The parameter server as a transport: the groups' gradients are cut into
// the blocks of one BlockPartition over every learnable param and exchanged
// through ParamServer, each group's blocks in one Exchange; with the
// context's server_update the shards apply the update and the groups' slots
// come back holding parameters.
#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "poseidon/distributed/block_partition.hpp"
#include "poseidon/distributed/param_server.hpp"
#include "poseidon/distributed/transport.hpp"
#include "poseidon/util/timeline.hpp"

namespace poseidon {
namespace dist {
namespace {

template <typename Dtype>
class PsTransport final : public Transport<Dtype> {
 public:
  PsTransport(const TransportContext& context,
              std::vector<ExchangeSpec> groups)
      : context_(context),
        groups_(std::move(groups)),
        slots_(groups_, context.slots),
        completions_(context.comm, GroupNames(groups_)) {
    completions_.set_on_finish(context.on_exchanged);
    partition_ = MakePsPartition(context, sizeof(Dtype));
    blocks_.resize(groups_.size());
    for (size_t g = 0; g < groups_.size(); ++g) {
      const ExchangeSpec& spec = groups_[g];
      for (size_t i = 0; i < spec.params.size(); ++i) {
        for (int b : partition_->blob_blocks(spec.params[i])) {
          blocks_[g].emplace_back(
              b, spec.offsets[i] + partition_->blocks()[b].offset);
        }
      }
    }
    ParamServerOptions options;
    options.roles = context.ps_roles;
    options.push_threads = context.param->num_push_threads();
    options.pull_threads = context.param->num_pull_threads();
    options.bytes_in_flight =
        static_cast<size_t>(context.param->bytes_in_flight());
    options.server_lanes = context.param->server_lanes();
    options.consistency = ConsistencyFromProto(context.param->consistency());
    options.staleness = context.param->staleness();
    options.hold_updates = static_cast<bool>(context.take_sender);
    typename ParamServer<Dtype>::Update update;
    if (context.server_update) {
      update = [f = context.server_update](int64_t iter, int block,
                                           Dtype* values) {
        f(iter, block, values);
      };
    }
    server_ = std::make_unique<ParamServer<Dtype>>(
        context.ps_comm != nullptr ? context.ps_comm : context.comm,
        partition_.get(), options, context.timeline, std::move(update));
    if (context.take_sender) {
      ParamServer<Dtype>* server = server_.get();
      context.take_sender(
          [server](int64_t iter, int block, const void* params) {
            server->SendHeld(iter, block, static_cast<const Dtype*>(params));
          });
    }
  }

  ~PsTransport() override {
    server_.reset();  // finishes the exchanges posted, before the buffers go
  }

  const char* name() const override { return "PS"; }
  Dtype* Stage(int g, int64_t iter) override { return slots_.slot(g, iter); }
  void Fill(int g, const std::vector<Net<Dtype>*>& workers,
            Dtype* slot) override {
    StageGradient(groups_[g], *workers[0], slot);
  }

  void Post(int g, int64_t iter) override {
    Dtype* buf = slots_.slot(g, iter);
    std::vector<typename ParamServer<Dtype>::BlockRef> refs;
    for (const auto& [block, offset] : blocks_[g]) {
      refs.push_back({block, buf + offset});
    }
    Timeline* timeline = context_.timeline;
    const int64_t begin = timeline ? timeline->NowMicros() : 0;
    server_->Exchange(iter, std::move(refs),
                      [this, g, iter, begin, timeline](Status st) {
                        if (timeline) {
                          timeline->Complete(timeline->Lane("ps"),
                                             groups_[g].name, "push+pull",
                                             begin, timeline->NowMicros(),
                                             {{"iter", iter}});
                        }
                        completions_.Finish(g, iter, st);
                      });
  }

  bool Done(int g, int64_t iter) override {
    return completions_.Done(g, iter);
  }
  void Wait(int g, int64_t iter) override {
    completions_.Wait(g, iter, name());
  }
  void Read(int g, int64_t iter, size_t offset, size_t count, Dtype scale,
            Dtype* out) override {
    slots_.Read(g, iter, offset, count, scale, out);
  }
  void Release(int, int64_t) override {}
  void BeginStale(const std::vector<int>& groups, int64_t first) override {
    schedule_.clear();
    for (int g : groups) {
      schedule_.emplace_back();
      for (const auto& block : blocks_[g]) schedule_.back().push_back(block.first);
    }
    served_ = std::make_shared<std::promise<Status>>();
    if (server_->shard() < 0) {
      served_->set_value(Status::OK());
      return;
    }
    auto served = served_;
    server_->ServeStale(schedule_, first,
                        [served](Status s) { served->set_value(s); });
  }

  Status EndStale(int64_t end) override {
    CHECK(served_) << "EndStale without BeginStale";
    Status s = server_->EndStale(schedule_, end);
    // Even after a failed send: the shard ends or fails on its own (at the
    // latest at the communicator's deadline).
    const Status served = served_->get_future().get();
    served_.reset();
    return s.ok() ? served : s;
  }

  uint64_t bytes_moved() const override { return server_->bytes_moved(); }
  uint64_t group_bytes(int g) const override {
    uint64_t sum = 0;
    for (const auto& block : blocks_[g]) {
      sum += server_->block_bytes(block.first);
    }
    return sum;
  }

 private:
  TransportContext context_;
  std::vector<ExchangeSpec> groups_;
  SlotBuffers<Dtype> slots_;
  Completions completions_;
  std::unique_ptr<BlockPartition> partition_;
  // Per group: (block id, offset of the block in the group's gradient).
  std::vector<std::vector<std::pair<int, size_t>>> blocks_;
  std::unique_ptr<ParamServer<Dtype>> server_;
  // Under SSP or ASYNC: the blocks of each exchange in posting order, and
  // the end of this rank's shard's serving (BeginStale, EndStale).
  std::vector<std::vector<int>> schedule_;
  std::shared_ptr<std::promise<Status>> served_;
};

}  // namespace

std::unique_ptr<BlockPartition> MakePsPartition(
    const TransportContext& context, size_t elem_bytes) {
  return std::make_unique<BlockPartition>(
      context.param_counts, elem_bytes,
      static_cast<size_t>(context.param->block_size()),
      context.ps_roles.servers.empty()
          ? context.comm->size()
          : static_cast<int>(context.ps_roles.servers.size()));
}

template <typename Dtype>
std::unique_ptr<Transport<Dtype>> MakePsTransport(
    const TransportContext& context, std::vector<ExchangeSpec> groups) {
  return std::make_unique<PsTransport<Dtype>>(context, std::move(groups));
}

template std::unique_ptr<Transport<float>> MakePsTransport<float>(
    const TransportContext&, std::vector<ExchangeSpec>);
template std::unique_ptr<Transport<double>> MakePsTransport<double>(
    const TransportContext&, std::vector<ExchangeSpec>);

}  // namespace dist
}  // namespace poseidon
