// Accuracy's bodies, shared by the CPU and the GPU (util/for_each.hpp); see
// layers/accuracy_layer.hpp for the definition. Scores are viewed as
// outer x channels x inner, position p having label labels[p] (as in
// kernels/loss_kernels.hpp). Counts are kept as Dtype values (exact below
// 2^24 for float) and summed on the device (util/device_reduce.hpp).
#ifndef POSEIDON_KERNELS_ACCURACY_KERNELS_HPP_
#define POSEIDON_KERNELS_ACCURACY_KERNELS_HPP_

#include "poseidon/util/hd.hpp"

namespace poseidon {
namespace kernels {

// Per position: hit = 1 when fewer than top_k classes score strictly
// higher than the label, else 0; valid = 1. An ignored position gives 0, 0.
// A label outside [0, channels) that the host could not check gives hit =
// NaN, so the accuracy is NaN rather than a silent wrong count.
template <typename Dtype>
struct AccuracyPerPosition {
  static constexpr int kCostPerIndex = 32;
  const Dtype* scores;
  const Dtype* labels;
  Dtype* hit;
  Dtype* valid;
  int channels;
  int inner;
  int top_k;
  bool has_ignore;
  int ignore;
  POSEIDON_HD void operator()(int p) const {
    const int label = static_cast<int>(labels[p]);
    if (has_ignore && label == ignore) {
      hit[p] = 0;
      valid[p] = 0;
      return;
    }
    valid[p] = 1;
    if (label < 0 || label >= channels) {
      hit[p] = hd::sqrt(Dtype(-1));
      return;
    }
    const Dtype* s = scores + (p / inner * channels) * inner + p % inner;
    const Dtype truth = s[label * inner];
    int better = 0;
    for (int c = 0; c < channels && better < top_k; ++c) {
      if (s[c * inner] > truth) ++better;
    }
    hit[p] = better < top_k ? Dtype(1) : Dtype(0);
  }
};

// Per position: class_total[label] += valid, class_correct[label] += hit
// (atomically; serial on the host). Both start at 0.
template <typename Dtype>
struct AccuracyPerClassCounts {
  static constexpr bool kSerialOnHost = true;
  const Dtype* labels;
  const Dtype* hit;
  const Dtype* valid;
  Dtype* class_total;
  Dtype* class_correct;
  int channels;
  POSEIDON_HD void operator()(int p) const {
    const int label = static_cast<int>(labels[p]);
    if (valid[p] == Dtype(0) || label < 0 || label >= channels) return;
    hd::AtomicAdd(class_total + label, Dtype(1));
    hd::AtomicAdd(class_correct + label, hit[p]);
  }
};

// out[i] = total[i] == 0 ? 0 : correct[i] / total[i]
template <typename Dtype>
struct AccuracyRatio {
  const Dtype* correct;
  const Dtype* total;
  Dtype* out;
  POSEIDON_HD void operator()(int i) const {
    out[i] = total[i] == Dtype(0) ? Dtype(0) : correct[i] / total[i];
  }
};

}  // namespace kernels
}  // namespace poseidon

#endif  // POSEIDON_KERNELS_ACCURACY_KERNELS_HPP_
