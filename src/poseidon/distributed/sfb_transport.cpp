// Sufficient factor broadcasting as a transport: each rank allgathers its
// factors [U | V] on the collective thread and rebuilds the summed gradient
// from every rank's, in rank order (sufficient_factor.hpp).
#include <atomic>
#include <utility>
#include <vector>

#include "poseidon/distributed/sufficient_factor.hpp"
#include "poseidon/distributed/transport.hpp"
#include "poseidon/distributed/wire.hpp"
#include "poseidon/util/emulation.hpp"
#include "poseidon/util/math_functions.hpp"
#include "poseidon/util/timeline.hpp"

namespace poseidon {
namespace dist {
namespace {

template <typename Dtype>
class SfbTransport final : public Transport<Dtype> {
 public:
  SfbTransport(const TransportContext& context,
               std::vector<ExchangeSpec> groups)
      : context_(context),
        groups_(std::move(groups)),
        completions_(context.comm, GroupNames(groups_)),
        bytes_(groups_.size()) {
    completions_.set_on_finish(context.on_exchanged);
    const int W = context.comm->size();
    for (const ExchangeSpec& g : groups_) {
      CHECK_EQ(g.payload, static_cast<size_t>(g.rows) * (g.M + g.N))
          << "SFB group '" << g.name << "'";
      factors_.emplace_back(context.slots, std::vector<Dtype>(g.payload));
      gathered_.emplace_back(context.slots,
                             std::vector<Dtype>(g.payload * W));
      sums_.emplace_back(context.slots, std::vector<Dtype>(g.count));
    }
  }

  const char* name() const override { return "SFB"; }
  Dtype* Stage(int g, int64_t iter) override {
    return factors_[g][Slot(iter)].data();
  }
  void Fill(int g, const std::vector<Net<Dtype>*>& workers,
            Dtype* slot) override {
    StageFactors(groups_[g], workers, slot);
  }
  void Adapt(Net<Dtype>* worker) override {
    SkipFactoredGradients(groups_, worker);
  }

  void Post(int g, int64_t iter) override {
    context_.collective->Post(
        [this, g, iter] {
          Timeline* timeline = context_.timeline;
          const int64_t begin = timeline ? timeline->NowMicros() : 0;
          const Status s = Exchange(g, iter);
          if (timeline) {
            timeline->Complete(timeline->Lane("collective"), groups_[g].name,
                               "SFB", begin, timeline->NowMicros(),
                               {{"iter", iter}});
          }
          completions_.Finish(g, iter, s);
        },
        completions_.FailureOf(g, iter));
  }

  bool Done(int g, int64_t iter) override {
    return completions_.Done(g, iter);
  }
  void Wait(int g, int64_t iter) override {
    completions_.Wait(g, iter, name());
  }
  void Read(int g, int64_t iter, size_t offset, size_t count, Dtype scale,
            Dtype* out) override {
    cpu_scale(static_cast<int>(count), scale,
              sums_[g][Slot(iter)].data() + offset, out);
  }
  void Release(int, int64_t) override {}
  uint64_t bytes_moved() const override { return bytes_.all(); }
  uint64_t group_bytes(int g) const override { return bytes_.group(g); }

 private:
  size_t Slot(int64_t iter) const {
    return static_cast<size_t>(iter % context_.slots);
  }

  // Runs on the collective thread.
  Status Exchange(int g, int64_t iter) {
    const ExchangeSpec& spec = groups_[g];
    Communicator* comm = context_.comm;
    const int W = comm->size();
    const size_t s = Slot(iter);
    const size_t per = spec.payload;
    Status st = comm->Allgather(factors_[g][s].data(), per * sizeof(Dtype),
                                gathered_[g][s].data());
    bytes_.Add(g, static_cast<uint64_t>(2) * (W - 1) * per * sizeof(Dtype));
    if (!st.ok()) return st;
    try {
      CheckFactorMessage(gathered_[g][s].size() * sizeof(Dtype), W,
                         spec.rows, spec.M, spec.N, sizeof(Dtype), spec.name);
    } catch (const DistributedError& e) {
      return Status::Failure(e.what());
    }
    const Dtype* gathered = gathered_[g][s].data();
    RebuildFromFactors<Dtype>(
        spec, W, [&](int r) { return gathered + r * per; },
        sums_[g][s].data());
    return Status::OK();
  }

  TransportContext context_;
  std::vector<ExchangeSpec> groups_;
  Completions completions_;
  // [group][slot]: this rank's factors, every rank's, and the rebuilt sum.
  std::vector<std::vector<std::vector<Dtype>>> factors_, gathered_, sums_;
  ByteCounts bytes_;
};

}  // namespace

template <typename Dtype>
void RebuildFromFactors(const ExchangeSpec& spec, int ranks,
                        const std::function<const Dtype*(int)>& factors,
                        Dtype* sum) {
  emulation::DilatedCompute dilated;  // Note [Time dilation]
  std::vector<SufficientFactors<Dtype>> peers(ranks);
  const size_t u = static_cast<size_t>(spec.rows) * spec.M;
  for (int r = 0; r < ranks; ++r) {
    peers[r].rows = spec.rows;
    peers[r].u = factors(r);
    peers[r].v = factors(r) + u;
  }
  SumSufficientFactors(peers, spec.M, spec.N, spec.layout, false, sum,
                       spec.bias ? sum + static_cast<size_t>(spec.M) * spec.N
                                 : nullptr);
}

template void RebuildFromFactors<float>(
    const ExchangeSpec&, int, const std::function<const float*(int)>&, float*);
template void RebuildFromFactors<double>(
    const ExchangeSpec&, int, const std::function<const double*(int)>&,
    double*);

template <typename Dtype>
std::unique_ptr<Transport<Dtype>> MakeSfbTransport(
    const TransportContext& context, std::vector<ExchangeSpec> groups) {
  return std::make_unique<SfbTransport<Dtype>>(context, std::move(groups));
}

template std::unique_ptr<Transport<float>> MakeSfbTransport<float>(
    const TransportContext&, std::vector<ExchangeSpec>);
template std::unique_ptr<Transport<double>> MakeSfbTransport<double>(
    const TransportContext&, std::vector<ExchangeSpec>);

}  // namespace dist
}  // namespace poseidon
