// PoolingLayer: max, average or stochastic pooling over 2-D windows.
//
//   MAX:        top = max over the window (padding never wins).
//   AVE:        top = sum over the window / window area, where the area
//               counts padding up to the padded border but not beyond it
//               (the window clipped to [-pad, size + pad)), as in Caffe.
//   STOCHASTIC: training: one element of the window drawn with probability
//               proportional to its value (values are expected to be
//               non-negative, e.g. after ReLU); testing: the
//               probability-weighted average sum(x^2) / sum(x), 0 if
//               sum(x) is 0. No padding.
//
// Bottom: (N, C, H, W). Top: (N, C, PH, PW) with, per axis,
//   PH = ceil((H + 2 * pad_h - kernel_h) / stride_h) + 1  (round_mode CEIL)
//   PH = floor((H + 2 * pad_h - kernel_h) / stride_h) + 1 (round_mode FLOOR)
// and, when any pad is non-zero, PH is reduced by one if the last window
// would start at or past H + pad_h (every window starts inside the image
// or its top/left padding). MAX may have a second top, the mask: the index
// h * W + w of the chosen element in its channel plane.
//
// Parameters (pooling_param):
//   pool          (default MAX) MAX | AVE | STOCHASTIC.
//   kernel_size / kernel_h, kernel_w  (required unless global_pooling, > 0).
//   pad / pad_h, pad_w                (default 0; < kernel; MAX/AVE only).
//   stride / stride_h, stride_w       (default 1, > 0).
//   global_pooling (default false) the window is the whole H x W plane
//                  (pad 0, stride 1, no kernel given).
//   round_mode     (default CEIL) CEIL | FLOOR, as above.
#ifndef POSEIDON_LAYERS_POOLING_LAYER_HPP_
#define POSEIDON_LAYERS_POOLING_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class PoolingLayer final : public Layer<Dtype> {
 public:
  explicit PoolingLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Pooling"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  // MAX may output its mask as a second top.
  int MaxTopBlobs() const override {
    return this->layer_param_.pooling_param().pool() == PoolingParameter::MAX
               ? 2
               : 1;
  }

 protected:
  void Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  void Backward_cpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override;

 private:
  // The window of output (ph, pw): rows [*h0, *h1), columns [*w0, *w1),
  // clipped to the image.
  void Window(int ph, int pw, int* h0, int* h1, int* w0, int* w1) const;
  int AveArea(int ph, int pw) const;
  void ForwardMax(const Dtype* bottom, Dtype* top, Dtype* mask);
  void ForwardAve(const Dtype* bottom, Dtype* top) const;
  void ForwardStochastic(const Dtype* bottom, Dtype* top);
  void BackwardStochasticTest(const Dtype* top_diff, const Dtype* bottom,
                              Dtype* bottom_diff) const;

  PoolingParameter::PoolMethod method_ = PoolingParameter::MAX;
  bool global_pooling_ = false;
  int kernel_h_ = 0, kernel_w_ = 0;
  int stride_h_ = 1, stride_w_ = 1;
  int pad_h_ = 0, pad_w_ = 0;
  int num_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  int pooled_height_ = 0, pooled_width_ = 0;
  // Index of the chosen element in its plane, per top element (MAX without
  // a mask top, STOCHASTIC in training).
  vector<int> chosen_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_POOLING_LAYER_HPP_
