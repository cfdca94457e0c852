// SoftmaxLayer: a numerically stable softmax over any axis. Each outer slice
// is a channels_ x inner_num_ row-major matrix normalised column by column;
// the CPU loops run along rows so memory is read contiguously. The GPU runs
// cuDNN or the per-position kernels of kernels/softmax_kernels.hpp.
#include "poseidon/layers/softmax_layer.hpp"

#include <algorithm>
#include <cmath>

#include "poseidon/kernels/softmax_kernels.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/gpu_engine.hpp"

#ifdef USE_CUDNN
#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

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
  position_scratch_.Reshape({outer_num_ * inner_num_});
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

template <typename Dtype>
void SoftmaxLayer<Dtype>::ForwardWithKernels(Poseidon::Brew dev,
                                             const vector<Blob<Dtype>*>& bottom,
                                             const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  const int positions = outer_num_ * inner_num_;
  if (count == 0) return;
  const Dtype* x = bottom[0]->data_on(dev);
  Dtype* y = top[0]->mutable_data_on(dev);
  Dtype* pos = position_scratch_.mutable_data_on(dev);
  const int c = channels_, inner = inner_num_;
  // In place, x and y alias: the max is taken before any element is
  // overwritten, and each element is read by the one index that writes it.
  for_each(dev, positions, kernels::ChannelMax<Dtype>{x, pos, c, inner});
  for_each(dev, count, kernels::SubtractExp<Dtype>{x, pos, y, c, inner});
  for_each(dev, positions, kernels::ChannelSum<Dtype>{y, pos, c, inner});
  for_each(dev, count, kernels::ChannelDivide<Dtype>{pos, y, c, inner});
}

template <typename Dtype>
void SoftmaxLayer<Dtype>::BackwardWithKernels(
    Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
    const vector<bool>& propagate_down, const vector<Blob<Dtype>*>& bottom) {
  const int count = top[0]->count();
  if (!propagate_down[0] || count == 0) return;
  const Dtype* y = top[0]->data_on(dev);
  const Dtype* dy = top[0]->diff_on(dev);
  Dtype* dx = bottom[0]->mutable_diff_on(dev);
  Dtype* pos = position_scratch_.mutable_data_on(dev);
  const int c = channels_, inner = inner_num_;
  // The dot products are complete before dx (which may alias dy) is written.
  for_each(dev, outer_num_ * inner,
           kernels::ChannelDot<Dtype>{dy, y, pos, c, inner});
  for_each(dev, count,
           kernels::SoftmaxGradient<Dtype>{y, dy, pos, dx, c, inner});
}

template <typename Dtype>
bool SoftmaxLayer<Dtype>::UseCudnn() {
  if (!engine_chosen_) {
    // cuDNN's CHANNEL mode covers every axis once the blob is viewed as
    // outer x channels x inner x 1.
    use_cudnn_ =
        ChooseGpuEngine(
            StrCat("Softmax layer '", this->layer_param_.name(), "'"),
            this->layer_param_.softmax_param().engine(), true) ==
        GpuEngine::kCudnn;
    engine_chosen_ = true;
  }
  return use_cudnn_;
}

#ifdef USE_CUDNN
template <typename Dtype>
cudnnTensorDescriptor_t SoftmaxLayer<Dtype>::CudnnDescriptor() {
  if (!cudnn_desc_) cudnn_desc_.reset(new cudnn::TensorDescriptor());
  cudnn_desc_->Set(cudnn::PackedLayout({outer_num_, channels_, inner_num_, 1}),
                   cudnn::DataType<Dtype>());
  return cudnn_desc_->get();
}
#endif

template <typename Dtype>
void SoftmaxLayer<Dtype>::Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  if (UseCudnn()) {
#ifdef USE_CUDNN
    if (bottom[0]->count() == 0) return;
    const cudnnTensorDescriptor_t desc = CudnnDescriptor();
    // In place is allowed: y may be x.
    POSEIDON_CUDNN_CHECK(cudnnSoftmaxForward(
        gpu::Cudnn(), CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL,
        cudnn::Scalars<Dtype>::one(), desc, bottom[0]->gpu_data(),
        cudnn::Scalars<Dtype>::zero(), desc, top[0]->mutable_gpu_data()));
#endif
    return;
  }
  ForwardWithKernels(Poseidon::GPU, bottom, top);
}

template <typename Dtype>
void SoftmaxLayer<Dtype>::Backward_gpu(const vector<Blob<Dtype>*>& top,
                                       const vector<bool>& propagate_down,
                                       const vector<Blob<Dtype>*>& bottom) {
  if (UseCudnn()) {
#ifdef USE_CUDNN
    if (!propagate_down[0] || top[0]->count() == 0) return;
    const cudnnTensorDescriptor_t desc = CudnnDescriptor();
    // In place is allowed: dx may be dy.
    POSEIDON_CUDNN_CHECK(cudnnSoftmaxBackward(
        gpu::Cudnn(), CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL,
        cudnn::Scalars<Dtype>::one(), desc, top[0]->gpu_data(), desc,
        top[0]->gpu_diff(), cudnn::Scalars<Dtype>::zero(), desc,
        bottom[0]->mutable_gpu_diff()));
#endif
    return;
  }
  BackwardWithKernels(Poseidon::GPU, top, propagate_down, bottom);
}

INSTANTIATE_CLASS(SoftmaxLayer);
REGISTER_LAYER_CLASS(Softmax);

}  // namespace poseidon
