// InnerProductLayer: a fully connected layer.
//
//   top = bottom * W^T + bias          (W stored N x K, the default)
//   top = bottom * W + bias            (transpose: W stored K x N)
// where the bottom is viewed as an M x K matrix: M = product of the dims
// before `axis`, K = product of the dims from `axis` on. One GEMM forward,
// one GEMM per gradient backward.
//
// Bottom: any shape with axis < num_axes. Top: bottom dims before `axis`,
// then N = num_output.
// Parameters (inner_product_param):
//   num_output   (required, > 0) N.
//   bias_term    (default true) learn a bias of shape (N).
//   axis         (default 1) first axis flattened into K; negative counts
//                from the end.
//   transpose    (default false) store W as K x N instead of N x K.
//   weight_filler, bias_filler (default constant 0).
// Blobs: blobs()[0] the weights, blobs()[1] the bias if bias_term.
#ifndef POSEIDON_LAYERS_INNER_PRODUCT_LAYER_HPP_
#define POSEIDON_LAYERS_INNER_PRODUCT_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class InnerProductLayer final : public Layer<Dtype> {
 public:
  explicit InnerProductLayer(const LayerParameter& param)
      : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "InnerProduct"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  int axis_ = 1;
  int M_ = 0;  // rows: product of the dims before axis
  int K_ = 0;  // inputs per row
  int N_ = 0;  // num_output
  bool bias_term_ = true;
  bool transpose_ = false;
  Blob<Dtype> bias_multiplier_;  // M ones
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_INNER_PRODUCT_LAYER_HPP_
