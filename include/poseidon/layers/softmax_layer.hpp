// SoftmaxLayer: normalises exponentials along one axis.
//
//   top[..., c, ...] = exp(x_c - m) / sum_k exp(x_k - m),  m = max_k x_k
// taken independently for every position of the other axes (subtracting the
// maximum keeps exp() from overflowing). Backward:
//   d x_c = y_c * (d y_c - sum_k d y_k * y_k)
//
// Bottom: any shape with at least `axis` + 1 axes. Top: the same shape. May
// run in place.
// Parameters (softmax_param):
//   axis    (default 1) the axis normalised over; negative counts from the
//           end.
//   engine  (default DEFAULT) accepted for compatibility; this is the CAFFE
//           engine.
#ifndef POSEIDON_LAYERS_SOFTMAX_LAYER_HPP_
#define POSEIDON_LAYERS_SOFTMAX_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class SoftmaxLayer final : public Layer<Dtype> {
 public:
  explicit SoftmaxLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Softmax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  void Backward_cpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override;

 private:
  int softmax_axis_ = 1;
  int outer_num_ = 0;  // product of the dims before the axis
  int channels_ = 0;   // the axis' dimension
  int inner_num_ = 0;  // product of the dims after the axis
  // One value per inner position: the running max / sum / dot product.
  vector<Dtype> scratch_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_SOFTMAX_LAYER_HPP_
