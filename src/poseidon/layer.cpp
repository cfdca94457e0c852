// The non-virtual parts of Layer: setup checks, loss weighting, dispatch.
#include "poseidon/layer.hpp"

namespace poseidon {
namespace {

// Warns once per layer type that runs its CPU pass in GPU mode.
void WarnCpuFallback(const char* type) {
  LogWarningOnce(StrCat(type, " layers have no GPU implementation; in GPU "
                        "mode they run on the CPU (see docs/layers.md)"));
}

}  // namespace

template <typename Dtype>
void Layer<Dtype>::ForwardOn(Poseidon::Brew dev,
                             const vector<Blob<Dtype>*>& bottom,
                             const vector<Blob<Dtype>*>& top) {
  CHECK(dev == Poseidon::GPU) << type() << " layer implements neither "
                              << "Forward_cpu nor ForwardOn";
  WarnCpuFallback(type());
  Forward_cpu(bottom, top);
}

template <typename Dtype>
void Layer<Dtype>::BackwardOn(Poseidon::Brew dev,
                              const vector<Blob<Dtype>*>& top,
                              const vector<bool>& propagate_down,
                              const vector<Blob<Dtype>*>& bottom) {
  CHECK(dev == Poseidon::GPU) << type() << " layer implements neither "
                              << "Backward_cpu nor BackwardOn";
  WarnCpuFallback(type());
  Backward_cpu(top, propagate_down, bottom);
}

template <typename Dtype>
void Layer<Dtype>::TunedForward_cpu(const vector<Blob<Dtype>*>&,
                                    const vector<Blob<Dtype>*>&) {
  LOG(FATAL) << type() << " layer says it has a tuned CPU path but does not "
             << "implement TunedForward_cpu";
}

template <typename Dtype>
void Layer<Dtype>::TunedBackward_cpu(const vector<Blob<Dtype>*>&,
                                     const vector<bool>&,
                                     const vector<Blob<Dtype>*>&) {
  LOG(FATAL) << type() << " layer says it has a tuned CPU path but does not "
             << "implement TunedBackward_cpu";
}

template <typename Dtype>
Layer<Dtype>::Layer(const LayerParameter& param)
    : layer_param_(param), phase_(param.phase()) {
  for (int i = 0; i < layer_param_.blobs_size(); ++i) {
    blobs_.push_back(std::make_shared<Blob<Dtype>>());
    try {
      blobs_.back()->FromProto(layer_param_.blobs(i));
    } catch (const Error&) {
      RethrowWithContext(
          StrCat("layer '", layer_param_.name(), "' blob ", i));
    }
  }
}

template <typename Dtype>
void Layer<Dtype>::SetUp(const vector<Blob<Dtype>*>& bottom,
                         const vector<Blob<Dtype>*>& top) {
  CheckBlobCounts(bottom, top);
  LayerSetUp(bottom, top);
  Reshape(bottom, top);
  SetLossWeights(top);
}

template <typename Dtype>
Dtype Layer<Dtype>::Forward(const vector<Blob<Dtype>*>& bottom,
                            const vector<Blob<Dtype>*>& top) {
  Dtype total_loss = 0;
  Reshape(bottom, top);
  if (Poseidon::mode() == Poseidon::GPU) {
    Forward_gpu(bottom, top);
  } else {
    Forward_cpu(bottom, top);
  }
  for (size_t i = 0; i < top.size(); ++i) {
    if (loss(static_cast<int>(i)) == Dtype(0)) continue;
    // The loss weight sits in the top's diff (see SetLossWeights).
    const Poseidon::Brew dev = Poseidon::mode();
    total_loss += math::dot<Dtype>(dev, top[i]->count(), top[i]->data_on(dev),
                                   top[i]->diff_on(dev));
  }
  return total_loss;
}

template <typename Dtype>
void Layer<Dtype>::Backward(const vector<Blob<Dtype>*>& top,
                            const vector<bool>& propagate_down,
                            const vector<Blob<Dtype>*>& bottom) {
  if (Poseidon::mode() == Poseidon::GPU) {
    Backward_gpu(top, propagate_down, bottom);
  } else {
    Backward_cpu(top, propagate_down, bottom);
  }
}

template <typename Dtype>
void Layer<Dtype>::ToProto(LayerParameter* param, bool write_diff) {
  param->Clear();
  param->CopyFrom(layer_param_);
  param->clear_blobs();
  for (const auto& blob : blobs_) blob->ToProto(param->add_blobs(), write_diff);
}

template <typename Dtype>
void Layer<Dtype>::CheckBlobCounts(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) const {
  const int nb = static_cast<int>(bottom.size());
  const int nt = static_cast<int>(top.size());
  auto fail = [&](const char* relation, int want, int got, const char* kind) {
    POSEIDON_THROW(ConfigError, type(), " layer takes ", relation, " ", want,
                   " ", kind, " blob(s), but ", got, " were given");
  };
  if (ExactNumBottomBlobs() >= 0 && nb != ExactNumBottomBlobs())
    fail("exactly", ExactNumBottomBlobs(), nb, "bottom");
  if (MinBottomBlobs() >= 0 && nb < MinBottomBlobs())
    fail("at least", MinBottomBlobs(), nb, "bottom");
  if (MaxBottomBlobs() >= 0 && nb > MaxBottomBlobs())
    fail("at most", MaxBottomBlobs(), nb, "bottom");
  if (ExactNumTopBlobs() >= 0 && nt != ExactNumTopBlobs())
    fail("exactly", ExactNumTopBlobs(), nt, "top");
  if (MinTopBlobs() >= 0 && nt < MinTopBlobs())
    fail("at least", MinTopBlobs(), nt, "top");
  if (MaxTopBlobs() >= 0 && nt > MaxTopBlobs())
    fail("at most", MaxTopBlobs(), nt, "top");
  if (EqualNumBottomTopBlobs() && nb != nt) {
    POSEIDON_THROW(ConfigError, type(),
                   " layer needs as many tops as bottoms, but has ", nb,
                   " bottom(s) and ", nt, " top(s)");
  }
}

template <typename Dtype>
void Layer<Dtype>::SetLossWeights(const vector<Blob<Dtype>*>& top) {
  const int num_weights = layer_param_.loss_weight_size();
  if (num_weights == 0) return;
  POSEIDON_REQUIRE(num_weights == static_cast<int>(top.size()), ConfigError,
                   "loss_weight must be given once per top (", top.size(),
                   " tops, ", num_weights, " loss_weight values)");
  for (int i = 0; i < num_weights; ++i) {
    const Dtype w = layer_param_.loss_weight(i);
    set_loss(i, w);
    if (w == Dtype(0)) continue;
    cpu_set(top[i]->count(), w, top[i]->mutable_cpu_diff());
  }
}

INSTANTIATE_CLASS(Layer);

}  // namespace poseidon
