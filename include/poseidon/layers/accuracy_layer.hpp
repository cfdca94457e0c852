// AccuracyLayer: the fraction of predictions whose true class is among the
// top_k scores.
//
// A position (i, j) with label l counts as correct when fewer than top_k
// classes score STRICTLY higher than class l (so ties favour the label):
//   accuracy = #correct / #non-ignored positions   (0 if there are none)
// where i runs over the axes before `axis` and j over those after it.
//
// Bottoms: bottom[0] scores, shape (outer..., C, inner...); bottom[1] labels,
//   outer * inner integer values in [0, C) stored as Dtype.
// Tops: top[0] the accuracy (scalar); optional top[1] per-class accuracy,
//   shape {C}: for each class, the fraction of its non-ignored positions
//   that are correct (0 for a class that does not occur).
// No gradient: Backward throws if asked for one, and force_backward does not
// reach either bottom.
// Parameters (accuracy_param):
//   top_k         (default 1) how many of the best classes count as a hit;
//                 1 <= top_k <= C.
//   axis          (default 1) the class axis; negative counts from the end.
//   ignore_label  (unset) positions with this label are skipped.
//
// Devices: one body for the CPU and the GPU (kernels/accuracy_kernels.hpp):
// a hit and a valid flag per position, summed on the device; per-class
// counts by atomic adds. Labels are checked on the host where its copy is
// current (see CheckLabelsOnHost in loss_layer.hpp); an unchecked invalid
// label makes the accuracy NaN.
#ifndef POSEIDON_LAYERS_ACCURACY_LAYER_HPP_
#define POSEIDON_LAYERS_ACCURACY_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/util/device_reduce.hpp"

namespace poseidon {

template <typename Dtype>
class AccuracyLayer final : public Layer<Dtype> {
 public:
  explicit AccuracyLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Accuracy"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  // Throws ConfigError if any propagate_down is set; otherwise does nothing
  // (on either device).
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // Throws ConfigError for a label that is neither ignored nor in [0, C).
  void CheckLabels(const Dtype* labels, int classes) const;

  int label_axis_ = 1;
  int outer_num_ = 0;
  int inner_num_ = 0;
  // Per position: hit, then valid. Per class: total, then correct. And the
  // two sums (correct, total).
  Blob<Dtype> flags_;
  Blob<Dtype> class_counts_;
  Blob<Dtype> sums_;
  OnesVector<Dtype> ones_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_ACCURACY_LAYER_HPP_
