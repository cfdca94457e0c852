// Net: folding an in-place Scale layer into the BatchNorm before it on the
// CPU (Note [BatchNorm + Scale]).
#include <cstdlib>
#include <cstring>

#include "poseidon/layers/batch_norm_layer.hpp"
#include "poseidon/layers/eltwise_layer.hpp"
#include "poseidon/layers/relu_layer.hpp"
#include "poseidon/layers/scale_layer.hpp"
#include "poseidon/net.hpp"

namespace poseidon {

// Note [BatchNorm + Scale]
// Caffe writes a learned batch normalisation as two layers, BatchNorm then
// Scale (bias_term: true), both in place on one blob; ResNet-50 has 53 such
// pairs. Run one after the other on the CPU they are memory-bound passes
// over the whole activation: BatchNorm reads x for its statistics, reads
// it again to write x_hat (top and its own copy for backward), Scale copies
// its input for its own backward and writes s x_hat + b; backward reads
// dE/dy and x_hat in Scale, then twice more in BatchNorm. Folded, the
// passes are: statistics (read x), one pass writing x_hat and y; backward,
// Scale's sums of dE/dy and dE/dy x_hat (which are also what BatchNorm
// needs, scaled by s) and BatchNorm's one pass writing dE/dx.
//
// The layers stay as they are (names, blobs, pycaffe's view, the per-layer
// hooks). A graph pass, FoldBatchNormScale, finds the pairs once when the
// net is built; a pass over the layers that runs both halves of a pair
// calls each layer's folded half in place of its Forward or Backward
// (BatchNormLayer and ScaleLayer's ForwardFolded / BackwardFolded), with
// what one half needs from the other as arguments:
//  - Forward: the BatchNorm (layer l) writes y = s x_hat + b, given the
//    Scale's parameters; the Scale (l + 1) writes nothing and takes the
//    BatchNorm's x_hat as its input for backward. The Scale's
//    before-forward hooks run before the BatchNorm's forward, right after
//    the BatchNorm's own, because its parameters are read there (the
//    synchroniser waits in that hook for fresh parameters).
//  - Backward: the Scale computes its parameter gradients as always plus
//    the per-channel sums and the scale it used, and leaves dE/dy in the
//    diff; its after-backward hooks see complete gradients. The BatchNorm
//    then writes dE/dx = s (dE/dy - mean(dE/dy) - x_hat mean(dE/dy x_hat))
//    / sqrt(var + eps) from those sums.
// No state is set on the layers for a pass, so nothing is left behind when
// a pass stops on an error. A pass that runs only one of the two
// (ForwardTo the BatchNorm, a backward ending at the Scale, a BatchNorm that
// needs no backward) runs them unfolded, and so do debug_info (which prints
// each layer's own output), the GPU and emulated passes. Folded and
// unfolded results agree to rounding (test_net_fold.cpp).
//
// A pair folds when layer l is a BatchNorm, layer l + 1 a Scale with a
// learned scale over axis 1 alone (num_axes 1; the bias, if any, over the
// same axis), in place on the BatchNorm's top, no other layer reads that
// top in between (a Split after the BatchNorm would sit between them), and
// neither top has a loss weight.

// Note [BatchNorm + Scale + ReLU]
// ResNet-50 follows 33 of its 53 BatchNorm + Scale pairs with a ReLU in
// place on the same blob, Inception-V3 all 96, and ResNet-50's 16
// shortcut sums (Eltwise) too. Run alone, that ReLU's forward is another
// pass over the activation (read and write), memory-bound. When layer
// l + 2 is a ReLU in place on the Scale's top, with a slope >= 0 and no
// loss weight, a forward pass that runs all three has the BatchNorm write
// ReLUValue(s x_hat + b) at once (kernels/relu_kernels.hpp, the ReLU
// layer's own body); likewise an Eltwise sum of two with coefficients 1
// and such a ReLU right after it writes ReLUValue(x_0 + x_1). The ReLU's
// forward is skipped; its before- and after-forward hooks still run in
// its turn. The blob ends as it would unfolded, bit for bit: a plain ReLU
// in place leaves the rectified values there too, and the Scale's
// backward reads x_hat, not its top. What differs: the Scale's (or the
// Eltwise's) after-forward hooks see the rectified values. The ReLU's
// backward runs as it is (its mask comes from the rectified top, whose
// signs are those of its input with a slope >= 0). A negative slope keeps
// the ReLU apart: it saves its input for backward. A forward that ends
// before the ReLU runs it (or not) as it would unfolded. On ResNet-50 at
// batch 8 (1 thread, AVX-512 Xeon) the ReLUs' forward went from 39 ms to
// nothing, the sums' from 37 to 43 ms (docs/performance.md).

template <typename Dtype>
void Net<Dtype>::FoldBatchNormScale() {
  const char* env = std::getenv("POSEIDON_FOLD_BN_SCALE");
  if (env != nullptr && std::strcmp(env, "0") == 0) fold_enabled_ = false;
  folds_.clear();
  fold_of_layer_.assign(layers_.size(), -1);
  for (size_t l = 0; l + 1 < layers_.size(); ++l) {
    auto* bn = dynamic_cast<BatchNormLayer<Dtype>*>(layers_[l].get());
    auto* scale = dynamic_cast<ScaleLayer<Dtype>*>(layers_[l + 1].get());
    if (bn == nullptr || scale == nullptr || bottom_vecs_[l + 1].size() != 1 ||
        bottom_vecs_[l + 1][0] != top_vecs_[l][0] ||
        !scale->FoldableIntoBatchNorm(bottom_vecs_[l + 1], top_vecs_[l + 1]) ||
        bn->loss(0) != Dtype(0) || scale->loss(0) != Dtype(0)) {
      continue;
    }
    fold_of_layer_[l] = fold_of_layer_[l + 1] = static_cast<int>(folds_.size());
    BatchNormScaleFold fold{static_cast<int>(l), bn, scale};
    fold.relu = FoldableReLU(l + 2, top_vecs_[l + 1][0], &fold.relu_slope);
    folds_.push_back(fold);
  }
  eltwise_relus_.clear();
  for (size_t l = 0; l + 1 < layers_.size(); ++l) {
    auto* eltwise = dynamic_cast<EltwiseLayer<Dtype>*>(layers_[l].get());
    Dtype slope = 0;
    if (eltwise != nullptr && eltwise->ReLUFoldsIn() &&
        layers_[l]->loss(0) == Dtype(0) &&
        FoldableReLU(l + 1, top_vecs_[l][0], &slope)) {
      eltwise_relus_[static_cast<int>(l)] = {eltwise, slope};
    }
  }
  if (!folds_.empty()) {
    LOG(INFO) << "Network '" << name_ << "': " << folds_.size()
              << " Scale layer(s) fold into the BatchNorm before them on the "
                 "CPU, "
              << num_batch_norm_scale_relu_folds()
              << " with the ReLU after them"
              << (fold_enabled_ ? "" : " (off: POSEIDON_FOLD_BN_SCALE=0)");
  }
  if (!eltwise_relus_.empty()) {
    LOG(INFO) << "Network '" << name_ << "': " << eltwise_relus_.size()
              << " ReLU layer(s) fold into the Eltwise sum before them on "
                 "the CPU"
              << (fold_enabled_ ? "" : " (off: POSEIDON_FOLD_BN_SCALE=0)");
  }
}

template <typename Dtype>
bool Net<Dtype>::FoldableReLU(size_t r, const Blob<Dtype>* blob,
                              Dtype* slope) const {
  if (r >= layers_.size() ||
      dynamic_cast<ReLULayer<Dtype>*>(layers_[r].get()) == nullptr ||
      bottom_vecs_[r].size() != 1 || top_vecs_[r].size() != 1 ||
      bottom_vecs_[r][0] != blob || top_vecs_[r][0] != blob ||
      layers_[r]->loss(0) != Dtype(0) ||
      layers_[r]->layer_param().relu_param().negative_slope() < 0) {
    return false;
  }
  *slope = static_cast<Dtype>(
      layers_[r]->layer_param().relu_param().negative_slope());
  return true;
}

template <typename Dtype>
auto Net<Dtype>::EltwiseReLUOf(int layer) const -> const EltwiseReLUFold* {
  const auto it = eltwise_relus_.find(layer);
  return it == eltwise_relus_.end() ? nullptr : &it->second;
}

template <typename Dtype>
int Net<Dtype>::num_batch_norm_scale_relu_folds() const {
  int n = 0;
  for (const BatchNormScaleFold& f : folds_) n += f.relu ? 1 : 0;
  return n;
}

template <typename Dtype>
bool Net<Dtype>::FoldingNow() const {
  return fold_enabled_ && (!folds_.empty() || !eltwise_relus_.empty()) &&
         Poseidon::mode() == Poseidon::CPU && !debug_info_ &&
         forward_replacements_.empty();
}

template <typename Dtype>
auto Net<Dtype>::FoldOfBatchNorm(int layer) const -> const BatchNormScaleFold* {
  const int f = fold_of_layer_[layer];
  return f >= 0 && folds_[f].batch_norm_layer == layer ? &folds_[f] : nullptr;
}

template <typename Dtype>
auto Net<Dtype>::FoldOfScaleForBackward(int layer, int end) const
    -> const BatchNormScaleFold* {
  const int i = fold_of_layer_[layer];
  const BatchNormScaleFold* f = i >= 0 ? &folds_[i] : nullptr;
  if (f == nullptr || f->batch_norm_layer + 1 != layer) return nullptr;
  const int bn = f->batch_norm_layer;
  const bool folds = bn >= end && layer_need_backward_[bn] &&
                     bottom_need_backward_[bn][0] &&
                     bottom_need_backward_[layer][0];
  return folds ? f : nullptr;
}

#define POSEIDON_INSTANTIATE_NET_FOLD(Dtype)                                  \
  template void Net<Dtype>::FoldBatchNormScale();                             \
  template int Net<Dtype>::num_batch_norm_scale_relu_folds() const;           \
  template bool Net<Dtype>::FoldableReLU(size_t, const Blob<Dtype>*, Dtype*)  \
      const;                                                                  \
  template auto Net<Dtype>::EltwiseReLUOf(int) const->const EltwiseReLUFold*; \
  template bool Net<Dtype>::FoldingNow() const;                               \
  template auto Net<Dtype>::FoldOfBatchNorm(int)                              \
      const->const BatchNormScaleFold*;                                       \
  template auto Net<Dtype>::FoldOfScaleForBackward(int, int)                  \
      const->const BatchNormScaleFold*;
POSEIDON_INSTANTIATE_NET_FOLD(float)
POSEIDON_INSTANTIATE_NET_FOLD(double)
#undef POSEIDON_INSTANTIATE_NET_FOLD

}  // namespace poseidon
