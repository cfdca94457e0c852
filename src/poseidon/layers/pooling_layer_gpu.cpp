// PoolingLayer's portable body (the per-element kernels, on either device)
// and its cuDNN path; see the header's paragraphs on bodies and cuDNN for
// which runs when.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "poseidon/kernels/pool_kernels.hpp"
#include "poseidon/layers/pooling_layer.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/gpu_engine.hpp"
#include "poseidon/util/math_functions.hpp"

#ifdef USE_CUDNN
#include "poseidon/util/cudnn.hpp"
#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {

struct CudnnPoolState {
#ifdef USE_CUDNN
  cudnn::TensorDescriptor bottom, top;
  cudnn::PoolingDescriptor pooling;
  std::array<int, 4> shape{};  // (N, C, H, W) the descriptors describe
  bool deterministic = false;
#endif
};

template <typename Dtype>
kernels::PoolShape PoolingLayer<Dtype>::Shape() const {
  kernels::PoolShape s;
  s.height = height_;
  s.width = width_;
  s.pooled_height = pooled_height_;
  s.pooled_width = pooled_width_;
  s.kernel_h = kernel_h_;
  s.kernel_w = kernel_w_;
  s.stride_h = stride_h_;
  s.stride_w = stride_w_;
  s.pad_h = pad_h_;
  s.pad_w = pad_w_;
  return s;
}

template <typename Dtype>
int* PoolingLayer<Dtype>::Indices(Poseidon::Brew dev) {
  CHECK(indices_ != nullptr) << "Pooling: no index buffer for this method";
  return static_cast<int*>(dev == Poseidon::GPU ? indices_->mutable_gpu_data()
                                                : indices_->mutable_cpu_data());
}

template <typename Dtype>
void PoolingLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                    const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const kernels::PoolShape s = Shape();
  const int count = top[0]->count();
  const Dtype* in = bottom[0]->data_on(dev);
  Dtype* out = top[0]->mutable_data_on(dev);
  switch (method_) {
    case PoolingParameter::MAX: {
      Dtype* mask = top.size() > 1 ? top[1]->mutable_data_on(dev) : nullptr;
      int* argmax = mask == nullptr ? Indices(dev) : nullptr;
      for_each(dev, count,
               kernels::MaxPoolForward<Dtype>{in, out, argmax, mask, s});
      break;
    }
    case PoolingParameter::AVE:
      for_each(dev, count, kernels::AvePoolForward<Dtype>{in, out, s});
      break;
    case PoolingParameter::STOCHASTIC:
      if (this->phase_ == TRAIN) {
        Dtype* draws = draws_.mutable_data_on(dev);
        math::rng_uniform<Dtype>(dev, count, Dtype(0), Dtype(1), draws);
        for_each(dev, count,
                 kernels::StochasticPoolTrain<Dtype>{in, draws, out,
                                                     Indices(dev), s});
      } else {
        for_each(dev, count, kernels::StochasticPoolTest<Dtype>{in, out, s});
      }
      break;
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                     const vector<Blob<Dtype>*>& top,
                                     const vector<bool>& propagate_down,
                                     const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const kernels::PoolShape s = Shape();
  const int count = bottom[0]->count();
  const Dtype* top_diff = top[0]->diff_on(dev);
  Dtype* bottom_diff = bottom[0]->mutable_diff_on(dev);
  switch (method_) {
    case PoolingParameter::MAX: {
      const Dtype* mask = top.size() > 1 ? top[1]->data_on(dev) : nullptr;
      const int* argmax = mask == nullptr ? Indices(dev) : nullptr;
      for_each(dev, count,
               kernels::MaxPoolBackward<Dtype>{top_diff, argmax, mask,
                                               bottom_diff, s});
      break;
    }
    case PoolingParameter::AVE:
      for_each(dev, count,
               kernels::AvePoolBackward<Dtype>{top_diff, bottom_diff, s});
      break;
    case PoolingParameter::STOCHASTIC:
      if (this->phase_ == TRAIN) {
        for_each(dev, count,
                 kernels::MaxPoolBackward<Dtype>{top_diff, Indices(dev),
                                                 nullptr, bottom_diff, s});
      } else {
        for_each(dev, count,
                 kernels::StochasticPoolTestBackward<Dtype>{
                     bottom[0]->data_on(dev), top_diff, bottom_diff, s});
      }
      break;
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::ChooseGpuPath(const vector<Blob<Dtype>*>& top) {
  const PoolingParameter& p = this->layer_param_.pooling_param();
  const PoolingParameter::Engine engine = p.engine();
  const bool gpu_mode = Poseidon::mode() == Poseidon::GPU;
  // cuDNN windows start where Caffe's do; its output size is the floor
  // rule, which must be the top's size (then no window passes the padded
  // input, so Caffe's AVE divisor is the whole window, as cuDNN's
  // INCLUDE_PADDING mode has it).
  const auto floor_size = [](int size, int kernel, int pad, int stride) {
    return (size + 2 * pad - kernel) / stride + 1;
  };
  const bool floor_shape =
      pooled_height_ == floor_size(height_, kernel_h_, pad_h_, stride_h_) &&
      pooled_width_ == floor_size(width_, kernel_w_, pad_w_, stride_w_);
  bool exact = false;
  std::string why_not;
  switch (method_) {
    case PoolingParameter::AVE:
      exact = floor_shape;
      why_not = "the top shape is ceil-rounded";
      break;
    case PoolingParameter::MAX:
      exact = floor_shape && top.size() == 1;
      why_not = floor_shape ? "MAX with a mask top"
                            : "the top shape is ceil-rounded";
      break;
    case PoolingParameter::STOCHASTIC:
      why_not = "cuDNN has no STOCHASTIC pooling";
      break;
  }
  // util/gpu_engine.hpp's rule, except that DEFAULT MAX pooling takes our
  // kernels (see the header: cuDNN does not say which of equal maxima gets
  // the gradient).
  const int chosen = method_ == PoolingParameter::MAX &&
                             engine == PoolingParameter::DEFAULT
                         ? static_cast<int>(PoolingParameter::CAFFE)
                         : static_cast<int>(engine);
  use_cudnn_ =
      !this->portable() && num_ > 0 && channels_ > 0 &&
      ChooseGpuEngine(StrCat("Pooling layer '", this->layer_param_.name(), "'"),
                      chosen, exact, why_not) == GpuEngine::kCudnn;
  if (use_cudnn_ && gpu_mode) CudnnBuild();
}

template <typename Dtype>
void PoolingLayer<Dtype>::CudnnBuild() {
#ifdef USE_CUDNN
  if (cudnn_ == nullptr) cudnn_ = std::make_shared<CudnnPoolState>();
  CudnnPoolState& st = *cudnn_;
  const std::array<int, 4> shape = {num_, channels_, height_, width_};
  const bool deterministic = gpu::GetSettings().deterministic;
  // Reshape runs before every Forward: rebuild only on a change.
  if (st.shape == shape && st.deterministic == deterministic) return;
  const cudnnDataType_t type = cudnn::DataType<Dtype>();
  st.bottom.Set(cudnn::PackedLayout({num_, channels_, height_, width_}),
                type);
  st.top.Set(cudnn::PackedLayout({num_, channels_, pooled_height_,
                                  pooled_width_}),
             type);
  const cudnnPoolingMode_t mode =
      method_ == PoolingParameter::AVE
          ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
          : (deterministic ? CUDNN_POOLING_MAX_DETERMINISTIC
                           : CUDNN_POOLING_MAX);
  st.pooling.Set(mode, {kernel_h_, kernel_w_}, {pad_h_, pad_w_},
                 {stride_h_, stride_w_});
  st.shape = shape;
  st.deterministic = deterministic;
#endif
}

template <typename Dtype>
void PoolingLayer<Dtype>::CudnnForward(const Dtype* bottom, Dtype* top) {
#ifdef USE_CUDNN
  // Normally built by Reshape already (then this only compares); a layer
  // last reshaped in CPU mode builds them now.
  CudnnBuild();
  const CudnnPoolState& st = *cudnn_;
  POSEIDON_CUDNN_CHECK(cudnnPoolingForward(
      gpu::Cudnn(), st.pooling.get(), cudnn::Scalars<Dtype>::one(),
      st.bottom.get(), bottom, cudnn::Scalars<Dtype>::zero(), st.top.get(),
      top));
#endif
}

template <typename Dtype>
void PoolingLayer<Dtype>::CudnnBackward(const Dtype* top, const Dtype* top_diff,
                                        const Dtype* bottom,
                                        Dtype* bottom_diff) {
#ifdef USE_CUDNN
  CudnnBuild();
  const CudnnPoolState& st = *cudnn_;
  POSEIDON_CUDNN_CHECK(cudnnPoolingBackward(
      gpu::Cudnn(), st.pooling.get(), cudnn::Scalars<Dtype>::one(),
      st.top.get(), top, st.top.get(), top_diff, st.bottom.get(), bottom,
      cudnn::Scalars<Dtype>::zero(), st.bottom.get(), bottom_diff));
#endif
}

template <typename Dtype>
void PoolingLayer<Dtype>::Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  if (use_cudnn_) {
    CudnnForward(bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
  } else {
    ForwardOn(Poseidon::GPU, bottom, top);
  }
}

template <typename Dtype>
void PoolingLayer<Dtype>::Backward_gpu(const vector<Blob<Dtype>*>& top,
                                       const vector<bool>& propagate_down,
                                       const vector<Blob<Dtype>*>& bottom) {
  if (!use_cudnn_) {
    BackwardOn(Poseidon::GPU, top, propagate_down, bottom);
  } else if (propagate_down[0]) {
    CudnnBackward(top[0]->gpu_data(), top[0]->gpu_diff(), bottom[0]->gpu_data(),
                  bottom[0]->mutable_gpu_diff());
  }
}

// The rest of the class is instantiated in pooling_layer.cpp.
#define POSEIDON_INSTANTIATE_POOLING_GPU(Dtype)                                \
  template kernels::PoolShape PoolingLayer<Dtype>::Shape() const;              \
  template int* PoolingLayer<Dtype>::Indices(Poseidon::Brew);                  \
  template void PoolingLayer<Dtype>::ForwardOn(Poseidon::Brew,                 \
                                               const vector<Blob<Dtype>*>&,    \
                                               const vector<Blob<Dtype>*>&);   \
  template void PoolingLayer<Dtype>::BackwardOn(                               \
      Poseidon::Brew, const vector<Blob<Dtype>*>&, const vector<bool>&,        \
      const vector<Blob<Dtype>*>&);                                            \
  template void PoolingLayer<Dtype>::ChooseGpuPath(                            \
      const vector<Blob<Dtype>*>&);                                            \
  template void PoolingLayer<Dtype>::CudnnBuild();                             \
  template void PoolingLayer<Dtype>::CudnnForward(const Dtype*, Dtype*);       \
  template void PoolingLayer<Dtype>::CudnnBackward(const Dtype*, const Dtype*, \
                                                   const Dtype*, Dtype*);      \
  template void PoolingLayer<Dtype>::Forward_gpu(const vector<Blob<Dtype>*>&,  \
                                                 const vector<Blob<Dtype>*>&); \
  template void PoolingLayer<Dtype>::Backward_gpu(                             \
      const vector<Blob<Dtype>*>&, const vector<bool>&,                        \
      const vector<Blob<Dtype>*>&);
POSEIDON_INSTANTIATE_POOLING_GPU(float)
POSEIDON_INSTANTIATE_POOLING_GPU(double)
#undef POSEIDON_INSTANTIATE_POOLING_GPU

}  // namespace poseidon
