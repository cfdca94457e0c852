// SoftmaxLayer: a numerically stable softmax over any axis. Each outer slice
// is a channels_ x inner_num_ row-major matrix normalised column by column,
// by the per-position kernels of kernels/softmax_kernels.hpp on either
// device, or by cuDNN on the GPU.
#include "poseidon/layers/softmax_layer.hpp"

#include <type_traits>

#include "poseidon/kernels/softmax_kernels.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/for_each_rows.hpp"
#include "poseidon/util/gpu_engine.hpp"

#ifdef USE_CUDNN
#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {
namespace {

// Runs a per-position reduction (kernels/softmax_kernels.hpp) into pos:
// on the GPU one thread per position, on the CPU in blocks of neighbouring
// positions of one outer slice, folded channel by channel (contiguous rows,
// the same order per position as the GPU's), the blocks split over the
// thread pool when the blob is large.
template <typename F>
void ColumnReduce(Poseidon::Brew dev, int outer, int channels, int inner,
                  const F& f) {
  using Dtype = std::remove_pointer_t<decltype(f.pos)>;
  if (dev == Poseidon::GPU) {
    for_each(dev, outer * inner, f);
    return;
  }
  constexpr int kBlock = 64;
  if (inner < 8) {
    // Columns too short for blocks: one position at a time (its channels
    // are near each other anyway).
    for_each(dev, outer * inner, f);
    return;
  }
  if (outer <= 0 || channels <= 0) return;
  const int per_slice = (inner + kBlock - 1) / kBlock;
  const int blocks = outer * per_slice;
  auto run = [&f, channels, inner, per_slice](int begin, int end) {
    const F local = f;
    Dtype acc[kBlock];
    for (int b = begin; b < end; ++b) {
      const int n = b / per_slice;
      const int j0 = b % per_slice * kBlock;
      const int width = inner - j0 < kBlock ? inner - j0 : kBlock;
      const int i0 = n * channels * inner + j0;
      for (int j = 0; j < width; ++j) acc[j] = local.Start(i0 + j);
      for (int c = 1; c < channels; ++c) {
        const int row = i0 + c * inner;
        for (int j = 0; j < width; ++j) acc[j] = local.Combine(acc[j], row + j);
      }
      Dtype* out = local.pos + n * inner + j0;
      for (int j = 0; j < width; ++j) out[j] = acc[j];
    }
  };
  cpu_for_ranges(blocks, static_cast<long>(outer) * channels * inner, run);
}

}  // namespace

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
  position_scratch_.Reshape({outer_num_ * inner_num_});
}

template <typename Dtype>
void SoftmaxLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                    const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  if (count == 0) return;
  const Dtype* x = bottom[0]->data_on(dev);
  Dtype* y = top[0]->mutable_data_on(dev);
  Dtype* pos = position_scratch_.mutable_data_on(dev);
  const int c = channels_, inner = inner_num_;
  // In place, x and y alias: the max is taken before any element is
  // overwritten, and each element is read by the one index that writes it.
  ColumnReduce(dev, outer_num_, c, inner,
               kernels::ChannelMax<Dtype>{x, pos, c, inner});
  for_each_rows(dev, outer_num_ * c, inner,
                kernels::SubtractExp<Dtype>{x, pos, y, c, inner});
  ColumnReduce(dev, outer_num_, c, inner,
               kernels::ChannelSum<Dtype>{y, pos, c, inner});
  for_each_rows(dev, outer_num_ * c, inner,
                kernels::ChannelDivide<Dtype>{pos, y, c, inner});
}

template <typename Dtype>
void SoftmaxLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                     const vector<Blob<Dtype>*>& top,
                                     const vector<bool>& propagate_down,
                                     const vector<Blob<Dtype>*>& bottom) {
  const int count = top[0]->count();
  if (!propagate_down[0] || count == 0) return;
  const Dtype* y = top[0]->data_on(dev);
  const Dtype* dy = top[0]->diff_on(dev);
  Dtype* dx = bottom[0]->mutable_diff_on(dev);
  Dtype* pos = position_scratch_.mutable_data_on(dev);
  const int c = channels_, inner = inner_num_;
  // The dot products are complete before dx (which may alias dy) is written.
  ColumnReduce(dev, outer_num_, c, inner,
               kernels::ChannelDot<Dtype>{dy, y, pos, c, inner});
  for_each_rows(dev, outer_num_ * c, inner,
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
  if (!this->portable() && UseCudnn()) {
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
  ForwardOn(Poseidon::GPU, bottom, top);
}

template <typename Dtype>
void SoftmaxLayer<Dtype>::Backward_gpu(const vector<Blob<Dtype>*>& top,
                                       const vector<bool>& propagate_down,
                                       const vector<Blob<Dtype>*>& bottom) {
  if (!this->portable() && UseCudnn()) {
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
  BackwardOn(Poseidon::GPU, top, propagate_down, bottom);
}

INSTANTIATE_CLASS(SoftmaxLayer);
REGISTER_LAYER_CLASS(Softmax);

}  // namespace poseidon
