// Eltwise: combines two or more bottoms of the same shape element by element.
//
//   SUM:  y = sum_k c_k x_k            dE/dx_k = c_k dE/dy
//   PROD: y = prod_k x_k               dE/dx_k = dE/dy * prod_{j != k} x_j
//   MAX:  y = max_k x_k                dE/dx_k = dE/dy where x_k was the
//                                      maximum (the first bottom on ties),
//                                      0 elsewhere
//
//   bottom[0..K-1]: K >= 2 blobs of one shape    top[0]: that shape
//
// Prototxt: eltwise_param {
//   operation: SUM        (PROD | SUM | MAX)
//   coeff: ...            SUM only; none (all 1) or exactly one per bottom
//   stable_prod_grad: true  PROD: true multiplies the other bottoms
//                         (exact with zeros), false divides y by x_k }
//
// The top may be one of the bottoms (in place) for SUM and MAX; PROD needs
// every input intact for Backward and rejects it.
//
// One body for both devices (kernels/eltwise_kernels.hpp): each pass is one
// functor over the elements reading every bottom (up to 16 per launch;
// more are combined in chunks with the same arithmetic); SUM's backward
// writes every bottom's diff in one pass over dE/dy. MAX keeps the index of
// the winning bottom per element on the device that computes.
#ifndef POSEIDON_LAYERS_ELTWISE_LAYER_HPP_
#define POSEIDON_LAYERS_ELTWISE_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/util/mask_buffer.hpp"

namespace poseidon {

template <typename Dtype>
class EltwiseLayer final : public Layer<Dtype> {
 public:
  explicit EltwiseLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Eltwise"; }
  int MinBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  // SUM: the first bottom with coefficient 1 gets dE/dy itself.
  int BottomDiffSharesTop(int bottom_index) const override;

  // An in-place ReLU after this layer folded into its forward (CPU; Note
  // [BatchNorm + Scale + ReLU] in net_fold.cpp): for the sum of two
  // bottoms with coefficients 1, ResNet's shortcut. ForwardWithReLU writes
  // ReLUValue(x_0 + x_1, relu_slope), what the sum then the ReLU write.
  bool ReLUFoldsIn() const;
  void ForwardWithReLU(const vector<Blob<Dtype>*>& bottom,
                       const vector<Blob<Dtype>*>& top, Dtype relu_slope);

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // SUM of exactly two bottoms, both with coefficient 1: ResNet's shortcut,
  // the case math::add computes and a ReLU folds into.
  bool PlainSumOfTwo() const;

  void ProdGradient(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                    const vector<Blob<Dtype>*>& bottom, int k);

  EltwiseParameter::EltwiseOp op_ = EltwiseParameter::SUM;
  vector<Dtype> coeffs_;
  bool stable_prod_grad_ = true;
  // MAX: the index of the bottom that gave each top element.
  MaskBuffer<int> argmax_;
  // The result, when the top is a bottom that a later chunk still reads.
  Blob<Dtype> staging_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_ELTWISE_LAYER_HPP_
