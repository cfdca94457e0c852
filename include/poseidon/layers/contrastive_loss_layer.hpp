// ContrastiveLossLayer: the siamese-network loss of Hadsell, Chopra and
// LeCun (2006) on pairs of feature vectors a_n, b_n with a similarity label.
//
//   d_n = ||a_n - b_n||_2
//   similar (y_n != 0):   E_n = d_n^2
//   dissimilar (y_n == 0):
//     E_n = max(margin - d_n, 0)^2      (default)
//     E_n = max(margin - d_n^2, 0)      (legacy_version)
//   loss = (1 / 2N) * sum_n E_n
// Gradient with respect to a_n (that of b_n is its negative), w the loss
// weight:
//   similar:            w / N * (a_n - b_n)
//   dissimilar default: -w / N * (margin - d_n) / (d_n + 1e-4) * (a_n - b_n)
//                       when margin - d_n > 0, else 0 (the 1e-4 guards
//                       d_n = 0, as in Caffe)
//   dissimilar legacy:  -w / N * (a_n - b_n) when margin - d_n^2 > 0, else 0
//
// Bottoms: bottom[0] a and bottom[1] b, the same shape (N, ...), each sample
//   a vector of D = count / N values (Caffe uses N x D x 1 x 1); bottom[2]
//   the similarity labels y, N values (nonzero means similar).
// Tops: top[0] the loss (scalar).
// Gradient flows to bottom[0] and bottom[1]; none to the labels.
// Parameters (contrastive_loss_param):
//   margin         (default 1.0)
//   legacy_version (default false) see above.
//
// Devices: one body for the CPU and the GPU: the squared distances are a
// gemv against a ones vector, the rest kernels/loss_kernels.hpp, reduced
// on the device by LossReducer.
#ifndef POSEIDON_LAYERS_CONTRASTIVE_LOSS_LAYER_HPP_
#define POSEIDON_LAYERS_CONTRASTIVE_LOSS_LAYER_HPP_

#include <vector>

#include "poseidon/layers/loss_layer.hpp"

namespace poseidon {

template <typename Dtype>
class ContrastiveLossLayer final : public LossLayer<Dtype> {
 public:
  explicit ContrastiveLossLayer(const LayerParameter& param)
      : LossLayer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "ContrastiveLoss"; }
  int ExactNumBottomBlobs() const override { return 3; }
  // The features a and b are both differentiable; the labels are not.
  bool AllowForceBackward(int bottom_index) const override {
    return bottom_index != 2;
  }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  Blob<Dtype> diff_;     // a - b
  Blob<Dtype> diff_sq_;  // (a - b)^2
  Blob<Dtype> dist_sq_;  // ||a_n - b_n||^2, one per sample
  Blob<Dtype> losses_;   // one per sample
  OnesVector<Dtype> ones_;
  LossReducer<Dtype> reducer_;
  int num_ = 0;
  int dim_ = 0;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_CONTRASTIVE_LOSS_LAYER_HPP_
