// Net: running the layers, forward and backward over any range of them
// (with the hooks, the BatchNorm + Scale folds and replaced bodies, such as
// emulated layer times),
// reshaping, clearing and applying parameter diffs, and debug_info, whose
// lines observers on the hooks print.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <new>
#include <thread>

#include "net_impl.hpp"
#include "poseidon/layers/batch_norm_layer.hpp"  // Note [BatchNorm + Scale]
#include "poseidon/layers/eltwise_layer.hpp"
#include "poseidon/layers/scale_layer.hpp"
#include "poseidon/net.hpp"

namespace poseidon {

namespace {

void SleepMilliseconds(double ms) {
  if (ms > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  }
}

}  // namespace

template <typename Dtype>
void Net<Dtype>::SetEmulatedTimes(vector<double> forward_ms,
                                  vector<double> backward_ms) {
  const size_t n = layers_.size();
  POSEIDON_REQUIRE((forward_ms.empty() && backward_ms.empty()) ||
                       (forward_ms.size() == n && backward_ms.size() == n),
                   ConfigError, "emulated times for net ", name_,
                   ": need one forward and one backward time per layer (",
                   n, "), got ", forward_ms.size(), " and ",
                   backward_ms.size());
  emulated_forward_.Reset();
  emulated_backward_.Reset();
  if (forward_ms.empty()) return;
  emulated_forward_ = forward_replacements_.Add(
      [ms = std::move(forward_ms)](int i) { SleepMilliseconds(ms[i]); });
  emulated_backward_ = backward_replacements_.Add(
      [ms = std::move(backward_ms)](int i) { SleepMilliseconds(ms[i]); });
}

template <typename Dtype>
Dtype Net<Dtype>::ForwardFromTo(int start, int end) {
  CHECK_GE(start, 0);
  CHECK_LT(end, static_cast<int>(layers_.size()));
  // See Note [BatchNorm + Scale] (net_fold.cpp).
  const bool fold = FoldingNow();
  const BatchNormScaleFold* folded = nullptr;  // whose BatchNorm just ran
  // A ReLU that the BatchNorm or Eltwise before it ran (Note [BatchNorm +
  // Scale + ReLU]).
  int folded_relu = -1;
  Dtype loss = 0;
  for (int i = start; i <= end; ++i) {
    const vector<Blob<Dtype>*>& bottom = bottom_vecs_[i];
    const vector<Blob<Dtype>*>& top = top_vecs_[i];
    if (i == folded_relu) {
      before_forward_.Run(i);
      after_forward_.Run(i);
      folded_relu = -1;
      continue;
    }
    if (folded != nullptr) {
      // The pair's Scale: its before-forward hooks ran with the BatchNorm's.
      NamingLayerOnOutOfMemory(*layers_[i], bottom, top, [&] {
        folded->scale->ForwardFolded(bottom, top,
                                     folded->batch_norm->normalized());
      });
      folded = nullptr;
      after_forward_.Run(i);
      continue;
    }
    before_forward_.Run(i);
    folded = fold && i < end ? FoldOfBatchNorm(i) : nullptr;
    const EltwiseReLUFold* sum_relu =
        fold && i < end ? EltwiseReLUOf(i) : nullptr;
    if (!forward_replacements_.empty()) {
      forward_replacements_.Run(i);
    } else if (sum_relu != nullptr) {
      NamingLayerOnOutOfMemory(*layers_[i], bottom, top, [&] {
        sum_relu->eltwise->ForwardWithReLU(bottom, top, sum_relu->relu_slope);
      });
      folded_relu = i + 1;
    } else if (folded != nullptr) {
      // The Scale's parameters are read here.
      before_forward_.Run(i + 1);
      const ScaleLayer<Dtype>& scale = *folded->scale;
      const bool relu = folded->relu && i + 2 <= end;
      NamingLayerOnOutOfMemory(*layers_[i], bottom, top, [&] {
        folded->batch_norm->ForwardFolded(bottom, top, scale.scale_cpu_data(),
                                          scale.bias_cpu_data(),
                                          relu ? &folded->relu_slope : nullptr);
      });
      if (relu) folded_relu = i + 2;
    } else {
      loss += NamingLayerOnOutOfMemory(*layers_[i], bottom, top, [&] {
        return layers_[i]->Forward(bottom, top);
      });
    }
    after_forward_.Run(i);
  }
  return loss;
}

template <typename Dtype>
Dtype Net<Dtype>::ForwardFrom(int start) {
  return ForwardFromTo(start, static_cast<int>(layers_.size()) - 1);
}

template <typename Dtype>
Dtype Net<Dtype>::ForwardTo(int end) {
  return ForwardFromTo(0, end);
}

template <typename Dtype>
const vector<Blob<Dtype>*>& Net<Dtype>::Forward(Dtype* loss) {
  const Dtype l = layers_.empty() ? Dtype(0) : ForwardFrom(0);
  if (loss != nullptr) *loss = l;
  return net_output_blobs_;
}

template <typename Dtype>
void Net<Dtype>::BackwardFromTo(int start, int end) {
  CHECK_GE(end, 0);
  CHECK_LT(start, static_cast<int>(layers_.size()));
  PrepareDiffPool();  // See Note [Shared diffs] (net_diffs.cpp).
  // See Note [BatchNorm + Scale] (net_fold.cpp).
  const bool fold = FoldingNow();
  const BatchNormScaleFold* folded = nullptr;  // whose Scale just ran
  for (int i = start; i >= end; --i) {
    const vector<Blob<Dtype>*>& bottom = bottom_vecs_[i];
    const vector<Blob<Dtype>*>& top = top_vecs_[i];
    before_backward_.Run(i);
    if (folded != nullptr) {
      const Dtype* sums = folded->scale->channel_sums();
      NamingLayerOnOutOfMemory(*layers_[i], bottom, top, [&] {
        folded->batch_norm->BackwardFolded(top, bottom, sums);
      });
      folded = nullptr;
    } else if (layer_need_backward_[i] && !backward_replacements_.empty()) {
      backward_replacements_.Run(i);
    } else if (layer_need_backward_[i]) {
      folded = fold ? FoldOfScaleForBackward(i, end) : nullptr;
      NamingLayerOnOutOfMemory(*layers_[i], bottom, top, [&] {
        if (folded != nullptr) {
          folded->scale->BackwardFolded(top, bottom);
        } else {
          layers_[i]->Backward(top, bottom_need_backward_[i], bottom);
        }
      });
    }
    after_backward_.Run(i);
  }
}

template <typename Dtype>
void Net<Dtype>::BackwardFrom(int start) {
  BackwardFromTo(start, 0);
}

template <typename Dtype>
void Net<Dtype>::BackwardTo(int end) {
  BackwardFromTo(static_cast<int>(layers_.size()) - 1, end);
}

template <typename Dtype>
void Net<Dtype>::Backward() {
  if (layers_.empty()) return;
  BackwardFromTo(static_cast<int>(layers_.size()) - 1, 0);
  if (debug_info_) {
    Dtype asum_data = 0, asum_diff = 0, sumsq_data = 0, sumsq_diff = 0;
    for (Blob<Dtype>* p : learnable_params_) {
      asum_data += p->asum_data();
      asum_diff += p->asum_diff();
      sumsq_data += p->sumsq_data();
      sumsq_diff += p->sumsq_diff();
    }
    LOG(INFO) << "    [Backward] All net params (data, diff): L1 norm = ("
              << asum_data << ", " << asum_diff << "); L2 norm = ("
              << std::sqrt(sumsq_data) << ", " << std::sqrt(sumsq_diff) << ")";
  }
}

template <typename Dtype>
void Net<Dtype>::Reshape() {
  for (size_t i = 0; i < layers_.size(); ++i) {
    NamingLayerOnOutOfMemory(*layers_[i], bottom_vecs_[i], top_vecs_[i], [&] {
      layers_[i]->Reshape(bottom_vecs_[i], top_vecs_[i]);
    });
  }
}

template <typename Dtype>
void Net<Dtype>::ClearParamDiffs() {
  const Poseidon::Brew dev = Poseidon::mode();
  for (Blob<Dtype>* p : learnable_params_) {
    math::set<Dtype>(dev, p->count(), Dtype(0), p->mutable_diff_on(dev));
  }
}

template <typename Dtype>
void Net<Dtype>::Update() {
  for (size_t i = 0; i < learnable_params_.size(); ++i) {
    learnable_params_[i]->Update();
    if (debug_info_) UpdateDebugInfo(learnable_param_ids_[i]);
  }
}

template <typename Dtype>
void Net<Dtype>::set_debug_info(bool value) {
  debug_info_ = value;
  debug_observers_.clear();
  if (!value) return;
  // Replaced bodies compute nothing: nothing to print.
  debug_observers_.push_back(after_forward_.Add([this](int i) {
    if (forward_replacements_.empty()) ForwardDebugInfo(i);
  }));
  debug_observers_.push_back(after_backward_.Add([this](int i) {
    if (layer_need_backward_[i] && backward_replacements_.empty()) {
      BackwardDebugInfo(i);
    }
  }));
}

template <typename Dtype>
void Net<Dtype>::ForwardDebugInfo(int layer_id) const {
  for (size_t t = 0; t < top_vecs_[layer_id].size(); ++t) {
    const Blob<Dtype>& blob = *top_vecs_[layer_id][t];
    LOG(INFO) << "    [Forward] Layer " << layer_names_[layer_id]
              << ", top blob " << blob_names_[top_id_vecs_[layer_id][t]]
              << " data: " << blob.asum_data() / std::max(1, blob.count());
  }
  for (size_t p = 0; p < layers_[layer_id]->blobs().size(); ++p) {
    const Blob<Dtype>& blob = *layers_[layer_id]->blobs()[p];
    LOG(INFO) << "    [Forward] Layer " << layer_names_[layer_id]
              << ", param blob " << p
              << " data: " << blob.asum_data() / std::max(1, blob.count());
  }
}

template <typename Dtype>
void Net<Dtype>::BackwardDebugInfo(int layer_id) const {
  for (size_t b = 0; b < bottom_vecs_[layer_id].size(); ++b) {
    if (!bottom_need_backward_[layer_id][b]) continue;
    const Blob<Dtype>& blob = *bottom_vecs_[layer_id][b];
    LOG(INFO) << "    [Backward] Layer " << layer_names_[layer_id]
              << ", bottom blob " << blob_names_[bottom_id_vecs_[layer_id][b]]
              << " diff: " << blob.asum_diff() / std::max(1, blob.count());
  }
  for (size_t p = 0; p < layers_[layer_id]->blobs().size(); ++p) {
    if (!layers_[layer_id]->param_propagate_down(static_cast<int>(p))) continue;
    const Blob<Dtype>& blob = *layers_[layer_id]->blobs()[p];
    LOG(INFO) << "    [Backward] Layer " << layer_names_[layer_id]
              << ", param blob " << p
              << " diff: " << blob.asum_diff() / std::max(1, blob.count());
  }
}

template <typename Dtype>
void Net<Dtype>::UpdateDebugInfo(int param_id) const {
  const Blob<Dtype>& blob = *params_[param_id];
  LOG(INFO) << "    [Update] Param " << param_display_names_[param_id]
            << " data: " << blob.asum_data() / std::max(1, blob.count())
            << "; diff: " << blob.asum_diff() / std::max(1, blob.count());
}

// net.cpp instantiates the rest of the class.
#define POSEIDON_INSTANTIATE_NET_PASSES(Dtype)                                \
  template void Net<Dtype>::SetEmulatedTimes(vector<double>, vector<double>); \
  template Dtype Net<Dtype>::ForwardFromTo(int, int);                         \
  template Dtype Net<Dtype>::ForwardFrom(int);                                \
  template Dtype Net<Dtype>::ForwardTo(int);                                  \
  template const vector<Blob<Dtype>*>& Net<Dtype>::Forward(Dtype*);           \
  template void Net<Dtype>::BackwardFromTo(int, int);                         \
  template void Net<Dtype>::BackwardFrom(int);                                \
  template void Net<Dtype>::BackwardTo(int);                                  \
  template void Net<Dtype>::Backward();                                       \
  template void Net<Dtype>::Reshape();                                        \
  template void Net<Dtype>::ClearParamDiffs();                                \
  template void Net<Dtype>::Update();                                         \
  template void Net<Dtype>::set_debug_info(bool);                             \
  template void Net<Dtype>::ForwardDebugInfo(int) const;                      \
  template void Net<Dtype>::BackwardDebugInfo(int) const;                     \
  template void Net<Dtype>::UpdateDebugInfo(int) const;
POSEIDON_INSTANTIATE_NET_PASSES(float)
POSEIDON_INSTANTIATE_NET_PASSES(double)
#undef POSEIDON_INSTANTIATE_NET_PASSES

}  // namespace poseidon
