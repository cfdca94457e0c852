// LRNLayer. The tuned CPU path: window sums of squares across channels (a
// running sum over whole planes, so the inner loops run over contiguous
// memory) or within each plane (a separable box sum), then the power;
// images split over ParallelFor for large blobs. The portable body, on
// either device: the kernels of kernels/lrn_kernels.hpp; the GPU may run
// cuDNN instead.
#include "poseidon/layers/lrn_layer.hpp"

#include <algorithm>
#include <cmath>

#include "poseidon/kernels/lrn_kernels.hpp"
#include "poseidon/util/for_each.hpp"
#include "poseidon/util/gpu_engine.hpp"
#include "poseidon/util/parallel.hpp"

#ifdef USE_CUDNN
#include "poseidon/util/device_check.hpp"
#include "poseidon/util/gpu_context.hpp"
#endif

namespace poseidon {
namespace {

// out = s^-beta. The usual beta = 0.75 takes two square roots, several
// times cheaper than pow.
template <typename Dtype>
void NegativePower(size_t n, const Dtype* s, Dtype beta, Dtype* out) {
  if (beta == Dtype(0.75)) {
    for (size_t i = 0; i < n; ++i) {
      out[i] = Dtype(1) / std::sqrt(s[i] * std::sqrt(s[i]));
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) out[i] = std::pow(s[i], -beta);
}

// Blobs with fewer elements stay on the calling thread.
constexpr size_t kMinParallelCount = 1 << 15;

// cuDNN's limits on the LRN descriptor (CUDNN_LRN_MIN_N, CUDNN_LRN_MAX_N,
// CUDNN_LRN_MIN_K, CUDNN_LRN_MIN_BETA in cudnn_ops.h), here so that the
// choice is made, and tested, in every build.
constexpr unsigned kCudnnMinN = 1;
constexpr unsigned kCudnnMaxN = 16;
constexpr double kCudnnMinK = 1e-5;
constexpr double kCudnnMinBeta = 0.01;
#ifdef USE_CUDNN
static_assert(kCudnnMinN == CUDNN_LRN_MIN_N && kCudnnMaxN == CUDNN_LRN_MAX_N,
              "cuDNN's LRN window limits changed");
#endif

}  // namespace

template <typename Dtype>
void LRNLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  const LRNParameter& p = this->layer_param_.lrn_param();
  POSEIDON_REQUIRE(p.local_size() % 2 == 1 && p.local_size() < (1u << 20),
                   ConfigError, "lrn_param.local_size must be odd and ",
                   "positive, got ", static_cast<int32_t>(p.local_size()));
  size_ = static_cast<int>(p.local_size());
  alpha_ = p.alpha();
  beta_ = p.beta();
  k_ = p.k();
  across_channels_ = p.norm_region() == LRNParameter::ACROSS_CHANNELS;
}

template <typename Dtype>
bool LRNLayer<Dtype>::CudnnSupports(const LRNParameter& p,
                                    std::string* why_not) {
  std::string reason;
  if (p.norm_region() != LRNParameter::ACROSS_CHANNELS) {
    reason = "cuDNN has no WITHIN_CHANNEL LRN";
  } else if (p.local_size() < kCudnnMinN || p.local_size() > kCudnnMaxN) {
    reason = StrCat("cuDNN takes local_size ", kCudnnMinN, " to ", kCudnnMaxN,
                    ", not ", p.local_size());
  } else if (!(p.k() >= kCudnnMinK)) {
    reason = StrCat("cuDNN needs k >= ", kCudnnMinK, ", not ", p.k());
  } else if (!(p.beta() >= kCudnnMinBeta)) {
    reason = StrCat("cuDNN needs beta >= ", kCudnnMinBeta, ", not ", p.beta());
  }
  if (why_not != nullptr) *why_not = reason;
  return reason.empty();
}

template <typename Dtype>
void LRNLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                              const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(bottom[0]->num_axes() == 4, ShapeError,
                   "LRN needs a 4-D bottom (num, channels, height, width), "
                   "got shape ",
                   bottom[0]->shape_string());
  POSEIDON_REQUIRE(bottom[0] != top[0], ConfigError, "LRN cannot run in place");
  num_ = bottom[0]->shape(0);
  channels_ = bottom[0]->shape(1);
  height_ = bottom[0]->shape(2);
  width_ = bottom[0]->shape(3);
  top[0]->ReshapeLike(*bottom[0]);
  scale_.ReshapeLike(*bottom[0]);
  if (!across_channels_) ratio_.ReshapeLike(*bottom[0]);
}

template <typename Dtype>
template <typename Fn>
void LRNLayer<Dtype>::ForImages(const Fn& fn) {
  const size_t image = static_cast<size_t>(channels_) * height_ * width_;
  const int workers = image * num_ < kMinParallelCount
                          ? 1
                          : std::max(1, ParallelForWorkers(num_));
  if (scratch_.size() < 3 * image * workers) {
    scratch_.resize(3 * image * workers);
  }
  if (workers == 1) {
    fn(0, num_, scratch_.data());
    return;
  }
  ParallelFor(num_, [&](int begin, int end, int w) {
    fn(begin, end, scratch_.data() + 3 * image * w);
  });
}

template <typename Dtype>
void LRNLayer<Dtype>::WindowSum(const Dtype* in, Dtype coeff, Dtype offset,
                                Dtype* out, Dtype* scratch) const {
  const int half = (size_ - 1) / 2;
  const int plane = height_ * width_;
  if (across_channels_) {
    // running[s] = sum of in[c'][s] for c' in the window of channel c.
    Dtype* running = scratch;
    std::fill(running, running + plane, Dtype(0));
    for (int c = 0; c < std::min(half, channels_); ++c) {
      const Dtype* add = in + static_cast<size_t>(c) * plane;
      for (int s = 0; s < plane; ++s) running[s] += add[s];
    }
    for (int c = 0; c < channels_; ++c) {
      if (c + half < channels_) {
        const Dtype* add = in + static_cast<size_t>(c + half) * plane;
        for (int s = 0; s < plane; ++s) running[s] += add[s];
      }
      if (c - half - 1 >= 0) {
        const Dtype* sub = in + static_cast<size_t>(c - half - 1) * plane;
        for (int s = 0; s < plane; ++s) running[s] -= sub[s];
      }
      Dtype* o = out + static_cast<size_t>(c) * plane;
      for (int s = 0; s < plane; ++s) o[s] = offset + coeff * running[s];
    }
    return;
  }
  // Separable box sum per plane: rows into scratch, then columns.
  Dtype* rows = scratch;
  for (int c = 0; c < channels_; ++c) {
    const Dtype* x = in + static_cast<size_t>(c) * plane;
    Dtype* o = out + static_cast<size_t>(c) * plane;
    for (int h = 0; h < height_; ++h) {
      for (int w = 0; w < width_; ++w) {
        Dtype sum = 0;
        const int w1 = std::min(w + half + 1, width_);
        for (int v = std::max(w - half, 0); v < w1; ++v) {
          sum += x[h * width_ + v];
        }
        rows[h * width_ + w] = sum;
      }
    }
    for (int h = 0; h < height_; ++h) {
      Dtype* orow = o + h * width_;
      std::fill(orow, orow + width_, Dtype(0));
      const int h1 = std::min(h + half + 1, height_);
      for (int u = std::max(h - half, 0); u < h1; ++u) {
        const Dtype* r = rows + u * width_;
        for (int w = 0; w < width_; ++w) orow[w] += r[w];
      }
      for (int w = 0; w < width_; ++w) orow[w] = offset + coeff * orow[w];
    }
  }
}

template <typename Dtype>
void LRNLayer<Dtype>::TunedForward_cpu(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  const size_t image = static_cast<size_t>(channels_) * height_ * width_;
  const Dtype area = across_channels_ ? Dtype(size_) : Dtype(size_ * size_);
  const Dtype offset = across_channels_ ? k_ : Dtype(1);
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  Dtype* scale = scale_.mutable_cpu_data();
  ForImages([&](int begin, int end, Dtype* scratch) {
    Dtype* squares = scratch;
    for (int n = begin; n < end; ++n) {
      const Dtype* xn = x + n * image;
      for (size_t i = 0; i < image; ++i) squares[i] = xn[i] * xn[i];
      Dtype* sn = scale + n * image;
      WindowSum(squares, alpha_ / area, offset, sn, scratch + image);
      Dtype* yn = y + n * image;
      NegativePower(image, sn, beta_, yn);
      for (size_t i = 0; i < image; ++i) yn[i] *= xn[i];
    }
  });
}

template <typename Dtype>
void LRNLayer<Dtype>::TunedBackward_cpu(const vector<Blob<Dtype>*>& top,
                                        const vector<bool>& propagate_down,
                                        const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const size_t image = static_cast<size_t>(channels_) * height_ * width_;
  const Dtype area = across_channels_ ? Dtype(size_) : Dtype(size_ * size_);
  const Dtype coeff = -2 * alpha_ * beta_ / area;
  const Dtype* x = bottom[0]->cpu_data();
  const Dtype* y = top[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  const Dtype* scale = scale_.cpu_data();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  ForImages([&](int begin, int end, Dtype* scratch) {
    Dtype* ratio = scratch;
    Dtype* window = scratch + image;
    Dtype* tmp = scratch + 2 * image;
    for (int n = begin; n < end; ++n) {
      const size_t off = n * image;
      for (size_t i = 0; i < image; ++i) {
        ratio[i] = dy[off + i] * y[off + i] / scale[off + i];
      }
      WindowSum(ratio, Dtype(1), Dtype(0), window, tmp);
      NegativePower(image, scale + off, beta_, ratio);
      for (size_t i = 0; i < image; ++i) {
        dx[off + i] = dy[off + i] * ratio[i] + coeff * x[off + i] * window[i];
      }
    }
  });
}

template <typename Dtype>
void LRNLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                const vector<Blob<Dtype>*>& bottom,
                                const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  if (count == 0) return;
  const Dtype* x = bottom[0]->data_on(dev);
  Dtype* scale = scale_.mutable_data_on(dev);
  const int spatial = height_ * width_;
  if (across_channels_) {
    for_each(dev, num_ * spatial,
             kernels::LRNScaleAcross<Dtype>{x, scale, channels_, spatial, size_,
                                            alpha_ / size_, k_});
  } else {
    for_each(dev, count,
             kernels::LRNScaleWithin<Dtype>{x, scale, height_, width_, size_,
                                            alpha_ / (size_ * size_)});
  }
  for_each(
      dev, count,
      kernels::LRNOutput<Dtype>{x, scale, top[0]->mutable_data_on(dev), beta_});
}

template <typename Dtype>
void LRNLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& top,
                                 const vector<bool>& propagate_down,
                                 const vector<Blob<Dtype>*>& bottom) {
  const int count = bottom[0]->count();
  if (!propagate_down[0] || count == 0) return;
  const Dtype* x = bottom[0]->data_on(dev);
  const Dtype* y = top[0]->data_on(dev);
  const Dtype* dy = top[0]->diff_on(dev);
  const Dtype* scale = scale_.data_on(dev);
  Dtype* dx = bottom[0]->mutable_diff_on(dev);
  if (across_channels_) {
    const Dtype coeff = -2 * alpha_ * beta_ / Dtype(size_);
    for_each(dev, num_ * height_ * width_,
             kernels::LRNBackwardAcross<Dtype>{x, y, scale, dy, dx, channels_,
                                               height_ * width_, size_, beta_,
                                               coeff});
    return;
  }
  const Dtype coeff = -2 * alpha_ * beta_ / Dtype(size_ * size_);
  Dtype* ratio = ratio_.mutable_data_on(dev);
  for_each(dev, count, kernels::LRNRatio<Dtype>{y, dy, scale, ratio});
  for_each(dev, count,
           kernels::LRNBackwardWithin<Dtype>{x, scale, dy, ratio, dx, height_,
                                             width_, size_, beta_, coeff});
}

template <typename Dtype>
bool LRNLayer<Dtype>::UseCudnn() {
  if (!engine_chosen_) {
    const LRNParameter& p = this->layer_param_.lrn_param();
    std::string why_not;
    const bool supported = CudnnSupports(p, &why_not);
    use_cudnn_ =
        ChooseGpuEngine(StrCat("LRN layer '", this->layer_param_.name(), "'"),
                        p.engine(), supported, why_not) == GpuEngine::kCudnn;
    engine_chosen_ = true;
  }
  return use_cudnn_;
}

#ifdef USE_CUDNN
template <typename Dtype>
cudnnTensorDescriptor_t LRNLayer<Dtype>::CudnnTensor(const Blob<Dtype>& blob) {
  if (!cudnn_lrn_) {
    cudnn_lrn_.reset(new cudnn::LRNDescriptor());
    cudnn_lrn_->Set(static_cast<unsigned>(size_), alpha_, beta_, k_);
    cudnn_tensor_.reset(new cudnn::TensorDescriptor());
  }
  cudnn_tensor_->Set(cudnn::PackedLayout(blob.shape()),
                     cudnn::DataType<Dtype>());
  return cudnn_tensor_->get();
}
#endif

template <typename Dtype>
void LRNLayer<Dtype>::Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  if (!this->portable() && UseCudnn()) {
#ifdef USE_CUDNN
    if (bottom[0]->count() == 0) return;
    const cudnnTensorDescriptor_t desc = CudnnTensor(*bottom[0]);
    POSEIDON_CUDNN_CHECK(cudnnLRNCrossChannelForward(
        gpu::Cudnn(), cudnn_lrn_->get(), CUDNN_LRN_CROSS_CHANNEL_DIM1,
        cudnn::Scalars<Dtype>::one(), desc, bottom[0]->gpu_data(),
        cudnn::Scalars<Dtype>::zero(), desc, top[0]->mutable_gpu_data()));
#endif
    return;
  }
  ForwardOn(Poseidon::GPU, bottom, top);
}

template <typename Dtype>
void LRNLayer<Dtype>::Backward_gpu(const vector<Blob<Dtype>*>& top,
                                   const vector<bool>& propagate_down,
                                   const vector<Blob<Dtype>*>& bottom) {
  if (!this->portable() && UseCudnn()) {
#ifdef USE_CUDNN
    if (!propagate_down[0] || bottom[0]->count() == 0) return;
    const cudnnTensorDescriptor_t desc = CudnnTensor(*bottom[0]);
    POSEIDON_CUDNN_CHECK(cudnnLRNCrossChannelBackward(
        gpu::Cudnn(), cudnn_lrn_->get(), CUDNN_LRN_CROSS_CHANNEL_DIM1,
        cudnn::Scalars<Dtype>::one(), desc, top[0]->gpu_data(), desc,
        top[0]->gpu_diff(), desc, bottom[0]->gpu_data(),
        cudnn::Scalars<Dtype>::zero(), desc, bottom[0]->mutable_gpu_diff()));
#endif
    return;
  }
  BackwardOn(Poseidon::GPU, top, propagate_down, bottom);
}

INSTANTIATE_CLASS(LRNLayer);
REGISTER_LAYER_CLASS(LRN);

}  // namespace poseidon
