// LossLayer: the common base of layers that reduce a prediction and a target
// to one scalar objective (SoftmaxWithLoss, EuclideanLoss, ...).
//
// Bottoms: bottom[0] the prediction, shape (N, ...); bottom[1] the target
//   (labels or values), shape (N, ...). Their first axes must agree.
// Tops: top[0] the loss, a 0-D blob (shape {}, one element); subclasses may
//   allow further tops, which carry no loss.
// Parameters: loss_weight (LayerParameter) defaults to 1 for top[0] and 0 for
//   any further top when the prototxt gives none, so a loss layer contributes
//   to the objective by default. The Net creates missing tops automatically.
// Targets are not differentiable by default: force_backward does not reach
//   bottom[1] (subclasses with two differentiable inputs override this).
//
// Devices: the loss layers are written once for the CPU and the GPU
// (ForwardOn/BackwardOn): per-item bodies from kernels/loss_kernels.hpp,
// then LossReducer below, which sums and normalises on the device. The
// only value a GPU pass hands to the host is the loss itself, which
// Layer::Forward reads back.
#ifndef POSEIDON_LAYERS_LOSS_LAYER_HPP_
#define POSEIDON_LAYERS_LOSS_LAYER_HPP_

#include <memory>
#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/syncedmem.hpp"
#include "poseidon/util/device_reduce.hpp"

namespace poseidon {

template <typename Dtype>
class LossLayer : public Layer<Dtype> {
 public:
  explicit LossLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  // Fills in the default loss weights (see above). Subclasses that override
  // this must call it.
  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  // Checks that the bottoms agree on their first axis and makes top[0] a
  // scalar. Subclasses that override this must call it.
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AutoTopBlobs() const override { return true; }
  bool AllowForceBackward(int bottom_index) const override {
    return bottom_index != 1;
  }
};

// The Softmax a loss layer runs inside it (SoftmaxWithLoss, InfogainLoss):
// named "<owner>/softmax", in the owner's phase, with `softmax_param`,
// created through the registry (so a device-specific Softmax is picked up)
// and set up on bottom -> top.
template <typename Dtype>
shared_ptr<Layer<Dtype>> SetUpInnerSoftmax(
    const LayerParameter& owner, const SoftmaxParameter& softmax_param,
    const vector<Blob<Dtype>*>& bottom, const vector<Blob<Dtype>*>& top);

// The normalization a loss layer uses: `normalization` when set, else the
// legacy `normalize` (true: VALID, false: BATCH_SIZE), else `fallback` (the
// layer's own default: VALID for SoftmaxWithLoss, BATCH_SIZE for
// SigmoidCrossEntropyLoss, as in Caffe).
LossParameter::NormalizationMode ResolveNormalization(
    const LossParameter& loss, LossParameter::NormalizationMode fallback);

// The divisor of a loss under LossParameter.normalization: FULL outer x
// inner, VALID the number of items not ignored, BATCH_SIZE outer, NONE 1;
// never below 1, so an empty or all-ignored batch gives loss 0, not 0 / 0.
double LossNormalizer(LossParameter::NormalizationMode mode, int outer_num,
                      int inner_num, int valid_count);

// The end of a loss layer's pass, on the device that runs it: the sum of
// the per-item losses (and, under VALID, of the 1/0 valid flags), the
// normalised loss written into top[0], and the gradient scales +-w / Z
// (w = top[0]'s diff, the loss weight) read by the backward bodies. Nothing
// is read back on the host.
template <typename Dtype>
class LossReducer {
 public:
  LossReducer() : scalars_(vector<int>{4}) {}
  POSEIDON_DISABLE_COPY_AND_ASSIGN(LossReducer);

  // Z as LossNormalizer says for `mode`; under VALID it is counted on the
  // device from the valid flags given to Sum.
  void SetNormalizer(LossParameter::NormalizationMode mode, int outer_num,
                     int inner_num);
  // Z = max(1, z).
  void SetNormalizer(double z);

  // Sums losses[0, n) (in index order on the CPU, in double) and, under
  // VALID, valid[0, n) (which may be null otherwise).
  void Sum(Poseidon::Brew dev, int n, const Dtype* losses, const Dtype* valid);
  // Where a layer that reduces its loss itself (a dot product) puts it,
  // instead of calling Sum.
  Dtype* mutable_sum(Poseidon::Brew dev) {
    return scalars_.mutable_data_on(dev);
  }
  // loss[0] = sum / Z / divisor.
  void WriteLoss(Poseidon::Brew dev, Dtype* loss, Dtype divisor = 1);
  // Device pointer to {w / Z, -w / Z}, w = loss_weight[0], Z from the last
  // Sum (so Backward uses the count of the Forward it follows).
  const Dtype* GradientScales(Poseidon::Brew dev, const Dtype* loss_weight);

 private:
  bool by_count_ = false;
  Dtype fixed_z_ = 1;
  Blob<Dtype> scalars_;  // {sum, valid count, w / Z, -w / Z}
  OnesVector<Dtype> ones_;
};

// Whether a pass on `dev` checks `labels` on the host: always on the CPU;
// on the GPU only when the host copy is current, so that the check neither
// copies from the device nor waits for it (labels from a data layer usually
// are). Where labels are not checked, an invalid one makes the loss NaN
// (kernels/loss_kernels.hpp).
template <typename Dtype>
bool CheckLabelsOnHost(Poseidon::Brew dev, const Blob<Dtype>& labels) {
  return dev == Poseidon::CPU || !labels.data() ||
         labels.data()->head() != SyncedMemory::HEAD_AT_GPU;
}

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_LOSS_LAYER_HPP_
