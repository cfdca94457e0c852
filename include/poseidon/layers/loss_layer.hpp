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
#ifndef POSEIDON_LAYERS_LOSS_LAYER_HPP_
#define POSEIDON_LAYERS_LOSS_LAYER_HPP_

#include <memory>
#include <vector>

#include "poseidon/layer.hpp"

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

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_LOSS_LAYER_HPP_
