// SoftmaxLayer: a numerically stable softmax over any axis. Each outer slice
// is a channels_ x inner_num_ row-major matrix normalised column by column;
// the loops run along rows so memory is read contiguously.
#include "poseidon/layers/softmax_layer.hpp"

#include <algorithm>
#include <cmath>

namespace poseidon {

template <typename Dtype>
void SoftmaxLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  const int num_axes = bottom[0]->num_axes();
  const int axis = this->layer_param_.softmax_param().axis();
  POSEIDON_REQUIRE(axis >= -num_axes && axis < num_axes, ConfigError,
                   "softmax_param.axis ", axis,
                   " is out of range for a bottom with num_axes ", num_axes,
                   " (shape ", bottom[0]->shape_string(), ")");
  softmax_axis_ = axis < 0 ? axis + num_axes : axis;
  outer_num_ = bottom[0]->count(0, softmax_axis_);
  channels_ = bottom[0]->shape(softmax_axis_);
  inner_num_ = bottom[0]->count(softmax_axis_ + 1);
  top[0]->ReshapeLike(*bottom[0]);
  scratch_.resize(inner_num_);
}

template <typename Dtype>
void SoftmaxLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  if (channels_ == 0) return;  // an empty blob: nothing to normalise
  const Dtype* bottom_data = bottom[0]->cpu_data();
  Dtype* top_data = top[0]->mutable_cpu_data();
  const int dim = channels_ * inner_num_;
  Dtype* scratch = scratch_.data();
  for (int n = 0; n < outer_num_; ++n) {
    const Dtype* x = bottom_data + n * dim;
    Dtype* y = top_data + n * dim;
    // Column maxima. With in-place use x and y alias; every element is read
    // before (or as) it is written.
    std::copy(x, x + inner_num_, scratch);
    for (int c = 1; c < channels_; ++c) {
      for (int j = 0; j < inner_num_; ++j) {
        scratch[j] = std::max(scratch[j], x[c * inner_num_ + j]);
      }
    }
    for (int c = 0; c < channels_; ++c) {
      for (int j = 0; j < inner_num_; ++j) {
        y[c * inner_num_ + j] = std::exp(x[c * inner_num_ + j] - scratch[j]);
      }
    }
    // Column sums (each >= 1, since the maximum contributes exp(0)).
    std::fill(scratch, scratch + inner_num_, Dtype(0));
    for (int c = 0; c < channels_; ++c) {
      cpu_axpy(inner_num_, Dtype(1), y + c * inner_num_, scratch);
    }
    for (int c = 0; c < channels_; ++c) {
      cpu_div(inner_num_, y + c * inner_num_, scratch, y + c * inner_num_);
    }
  }
}

template <typename Dtype>
void SoftmaxLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                       const vector<bool>& propagate_down,
                                       const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype* top_diff = top[0]->cpu_diff();
  const Dtype* top_data = top[0]->cpu_data();
  Dtype* bottom_diff = bottom[0]->mutable_cpu_diff();
  const int dim = channels_ * inner_num_;
  Dtype* scratch = scratch_.data();
  for (int n = 0; n < outer_num_; ++n) {
    const Dtype* dy = top_diff + n * dim;
    const Dtype* y = top_data + n * dim;
    Dtype* dx = bottom_diff + n * dim;
    // Column dot products sum_c dy_c * y_c, complete before dx (which may
    // alias dy) is written.
    std::fill(scratch, scratch + inner_num_, Dtype(0));
    for (int c = 0; c < channels_; ++c) {
      for (int j = 0; j < inner_num_; ++j) {
        scratch[j] += dy[c * inner_num_ + j] * y[c * inner_num_ + j];
      }
    }
    for (int c = 0; c < channels_; ++c) {
      for (int j = 0; j < inner_num_; ++j) {
        const int i = c * inner_num_ + j;
        dx[i] = y[i] * (dy[i] - scratch[j]);
      }
    }
  }
}

INSTANTIATE_CLASS(SoftmaxLayer);
REGISTER_LAYER_CLASS(Softmax);

}  // namespace poseidon
