// BatchNorm on either device: partial sums per plane added up by gemv,
// element-wise and per-channel bodies from kernels/norm_kernels.hpp.
#include "poseidon/layers/batch_norm_layer.hpp"

#include <algorithm>

#include "poseidon/kernels/norm_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void BatchNormLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                       const vector<Blob<Dtype>*>& top) {
  const BatchNormParameter& param = this->layer_param_.batch_norm_param();
  use_global_stats_ = param.has_use_global_stats()
                          ? param.use_global_stats()
                          : this->layer_param_.phase() == TEST;
  moving_average_fraction_ = param.moving_average_fraction();
  eps_ = param.eps();
  POSEIDON_REQUIRE(param.eps() >= 0, ConfigError,
                   "batch_norm_param.eps must not be negative, got ",
                   param.eps());
  POSEIDON_REQUIRE(bottom[0]->num_axes() >= 1, ShapeError,
                   "BatchNorm needs a bottom with at least one axis, got ",
                   bottom[0]->shape_string());
  channels_ = bottom[0]->num_axes() == 1 ? 1 : bottom[0]->shape(1);

  const vector<int> sizes = {channels_, channels_, 1};
  if (this->blobs_.empty()) {
    for (int size : sizes) {
      this->blobs_.push_back(std::make_shared<Blob<Dtype>>(vector<int>{size}));
      cpu_set(size, Dtype(0), this->blobs_.back()->mutable_cpu_data());
    }
  } else {
    POSEIDON_REQUIRE(this->blobs_.size() == 3, ConfigError,
                     "BatchNorm stores 3 blobs (mean, variance, factor), but ",
                     this->blobs_.size(), " were given");
    for (int i = 0; i < 3; ++i) {
      POSEIDON_REQUIRE(
          this->blobs_[i]->count() == sizes[i], ShapeError, "BatchNorm blob ",
          i, " has shape ", this->blobs_[i]->shape_string(), " but ", sizes[i],
          " values are needed for bottom shape ", bottom[0]->shape_string());
    }
  }
  // See the header: running statistics are never touched by a solver.
  // The statistics are not learned: no gradient, and lr_mult 0 so that no
  // solver step (weight decay included) ever touches them, as in Caffe.
  for (int i = 0; i < 3; ++i) {
    this->set_param_propagate_down(i, false);
    if (this->layer_param_.param_size() == i) {
      this->layer_param_.add_param()->set_lr_mult(0);
    }
    POSEIDON_REQUIRE(this->layer_param_.param(i).lr_mult() == 0, ConfigError,
                     "BatchNorm statistics cannot be learned: param ", i,
                     " must have lr_mult 0 (or be left out)");
  }
}

template <typename Dtype>
void BatchNormLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const int axes = bottom[0]->num_axes();
  POSEIDON_REQUIRE(
      axes >= 1 && (axes == 1 ? 1 : bottom[0]->shape(1)) == channels_,
      ShapeError, "BatchNorm was set up for ", channels_,
      " channels, but the bottom now has shape ", bottom[0]->shape_string());
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
  mean_.Reshape({channels_});
  variance_.Reshape({channels_});
  inv_std_.Reshape({channels_});
  x_norm_.ReshapeLike(*bottom[0]);
  const int rows = Num(*bottom[0]) * channels_;
  row_sums_.Reshape({rows});
  // Room for the GPU's parts, the most either device uses.
  partials_.Reshape(
      {2, rows * kernels::RowParts(true, rows, Spatial(*bottom[0]))});
  mean_dy_.Reshape({channels_});
  mean_dy_y_.Reshape({channels_});
}

template <typename Dtype>
int BatchNormLayer<Dtype>::Num(const Blob<Dtype>& blob) const {
  return blob.num_axes() > 0 ? blob.shape(0) : 1;
}

template <typename Dtype>
int BatchNormLayer<Dtype>::Spatial(const Blob<Dtype>& blob) const {
  const int per_num = blob.num_axes() > 0 ? blob.count(1) : 1;
  return channels_ > 0 ? per_num / channels_ : 0;
}

template <typename Dtype>
void BatchNormLayer<Dtype>::ChannelSums(Poseidon::Brew dev, int num, int parts,
                                        Dtype alpha, const Dtype* partial,
                                        Dtype* out) {
  const Dtype* ones = ones_.Get(dev, std::max(num, parts));
  Dtype* rows = row_sums_.mutable_data_on(dev);
  math::gemv<Dtype>(dev, CblasNoTrans, num * channels_, parts, alpha, partial,
                    ones, Dtype(0), rows);
  math::gemv<Dtype>(dev, CblasTrans, num, channels_, Dtype(1), rows, ones,
                    Dtype(0), out);
}

template <typename Dtype>
void BatchNormLayer<Dtype>::BatchStatistics(Poseidon::Brew dev,
                                            const Blob<Dtype>& bottom) {
  const int num = Num(bottom);
  const int spatial = Spatial(bottom);
  const int m = num * spatial;
  Dtype* mean = mean_.mutable_data_on(dev);
  Dtype* var = variance_.mutable_data_on(dev);
  // One pass over x: the moments about a per-channel shift, turned into
  // the mean and the variance by BatchNormUpdateStatistics.
  const Dtype* shift_source = nullptr;
  if (m > 0) {
    const int rows = num * channels_;
    const int parts = kernels::RowParts(dev == Poseidon::GPU, rows, spatial);
    shift_source = bottom.data_on(dev);
    Dtype* partial = partials_.mutable_data_on(dev);
    Dtype* partial_d2 = partial + rows * parts;
    for_each(dev, rows * parts,
             kernels::RowPartialShiftedMoments<Dtype>{
                 shift_source, partial, partial_d2, spatial, parts, channels_});
    ChannelSums(dev, num, parts, Dtype(1) / m, partial, mean);
    ChannelSums(dev, num, parts, Dtype(1) / m, partial_d2, var);
  } else {
    math::set<Dtype>(dev, channels_, Dtype(0), mean);
    math::set<Dtype>(dev, channels_, Dtype(0), var);
  }
  const Dtype correction = m > 1 ? Dtype(m) / Dtype(m - 1) : Dtype(1);
  for_each(dev, std::max(channels_, 1),
           kernels::BatchNormUpdateStatistics<Dtype>{
               shift_source, spatial, mean, var, inv_std_.mutable_data_on(dev),
               this->blobs_[0]->mutable_data_on(dev),
               this->blobs_[1]->mutable_data_on(dev),
               this->blobs_[2]->mutable_data_on(dev), channels_, eps_,
               moving_average_fraction_, correction});
}

template <typename Dtype>
void BatchNormLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                      const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top) {
  Normalize(dev, bottom, top, nullptr, nullptr);
}

template <typename Dtype>
void BatchNormLayer<Dtype>::ForwardFolded(const vector<Blob<Dtype>*>& bottom,
                                          const vector<Blob<Dtype>*>& top,
                                          const Dtype* scale, const Dtype* bias,
                                          const Dtype* relu_slope) {
  // A folded Scale (Note [BatchNorm + Scale] in net_fold.cpp) is on the CPU.
  CHECK(Poseidon::mode() == Poseidon::CPU)
      << "a Scale is folded into BatchNorm " << this->layer_param_.name()
      << " on the GPU";
  Reshape(bottom, top);
  Normalize(Poseidon::CPU, bottom, top, scale, bias, relu_slope);
}

template <typename Dtype>
void BatchNormLayer<Dtype>::Normalize(Poseidon::Brew dev,
                                      const vector<Blob<Dtype>*>& bottom,
                                      const vector<Blob<Dtype>*>& top,
                                      const Dtype* scale, const Dtype* bias,
                                      const Dtype* relu_slope) {
  if (use_global_stats_) {
    for_each(dev, channels_,
             kernels::BatchNormGlobalStatistics<Dtype>{
                 this->blobs_[0]->data_on(dev), this->blobs_[1]->data_on(dev),
                 this->blobs_[2]->data_on(dev), mean_.mutable_data_on(dev),
                 variance_.mutable_data_on(dev), inv_std_.mutable_data_on(dev),
                 eps_});
  } else {
    BatchStatistics(dev, *bottom[0]);
  }
  // In place, y is x: the statistics have read it, and each element is
  // read once, by the index writing it.
  const kernels::RowSpans spans = kernels::MakeRowSpans(
      dev == Poseidon::GPU, Num(*bottom[0]) * channels_, Spatial(*bottom[0]));
  const Dtype* x = bottom[0]->data_on(dev);
  CHECK(relu_slope == nullptr || scale != nullptr)
      << "BatchNorm " << this->layer_param_.name()
      << ": a ReLU folds in only with a Scale";
  for_each(dev, spans.count,
           kernels::BatchNormNormalize<Dtype>{
               x, mean_.data_on(dev), inv_std_.data_on(dev),
               top[0]->mutable_data_on(dev), x_norm_.mutable_data_on(dev),
               channels_, spans, scale, bias, relu_slope != nullptr,
               relu_slope != nullptr ? *relu_slope : Dtype(0)});
}

template <typename Dtype>
void BatchNormLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                       const vector<Blob<Dtype>*>& top,
                                       const vector<bool>& propagate_down,
                                       const vector<Blob<Dtype>*>& bottom) {
  BackwardBody(dev, top, propagate_down, bottom, nullptr);
}

template <typename Dtype>
void BatchNormLayer<Dtype>::BackwardFolded(const vector<Blob<Dtype>*>& top,
                                           const vector<Blob<Dtype>*>& bottom,
                                           const Dtype* channel_sums) {
  CHECK(Poseidon::mode() == Poseidon::CPU)
      << "a Scale is folded into BatchNorm " << this->layer_param_.name()
      << " on the GPU";
  BackwardBody(Poseidon::CPU, top, {true}, bottom, channel_sums);
}

template <typename Dtype>
void BatchNormLayer<Dtype>::BackwardBody(Poseidon::Brew dev,
                                         const vector<Blob<Dtype>*>& top,
                                         const vector<bool>& propagate_down,
                                         const vector<Blob<Dtype>*>& bottom,
                                         const Dtype* channel_sums) {
  if (!propagate_down[0] || bottom[0]->count() == 0) return;
  const bool gpu = dev == Poseidon::GPU;
  const int num = Num(*bottom[0]);
  const int spatial = Spatial(*bottom[0]);
  const int rows = num * channels_;
  const Dtype* dy = top[0]->diff_on(dev);
  const Dtype* y = x_norm_.data_on(dev);
  const Dtype* mean_dy = nullptr;
  const Dtype* mean_dy_y = nullptr;
  const Dtype* inv_std = inv_std_.data_on(dev);
  if (channel_sums != nullptr) {
    // See Note [BatchNorm + Scale] in net_fold.cpp: the Scale's backward
    // summed dE/dy and dE/dy * x_hat; dE/dx_hat = s_c dE/dy, so the plain
    // body below runs on dE/dy with the gain s_c / sqrt(var_c + eps).
    const Dtype* sum_dy = channel_sums;
    const Dtype* sum_dy_y = channel_sums + channels_;
    const Dtype* scale = channel_sums + 2 * channels_;
    const Dtype inv_m = Dtype(1) / (num * spatial);
    gain_.Reshape({channels_});
    Dtype* gain = gain_.mutable_cpu_data();
    Dtype* mdy = mean_dy_.mutable_cpu_data();
    Dtype* mdyy = mean_dy_y_.mutable_cpu_data();
    for (int c = 0; c < channels_; ++c) {
      gain[c] = scale[c] * inv_std[c];
      mdy[c] = sum_dy[c] * inv_m;
      mdyy[c] = sum_dy_y[c] * inv_m;
    }
    inv_std = gain;
    if (!use_global_stats_) {
      mean_dy = mdy;
      mean_dy_y = mdyy;
    }
  } else if (!use_global_stats_) {
    // Per-channel means of dE/dy and dE/dy * y, complete before dx (which
    // may alias dy in place) is written.
    const int parts = kernels::RowParts(gpu, rows, spatial);
    const Dtype inv_m = Dtype(1) / (num * spatial);
    Dtype* partial = partials_.mutable_data_on(dev);
    Dtype* partial_y = partial + rows * parts;
    for_each(dev, rows * parts,
             kernels::RowPartialSums<Dtype>{dy, y, partial, partial_y, spatial,
                                            parts});
    ChannelSums(dev, num, parts, inv_m, partial, mean_dy_.mutable_data_on(dev));
    ChannelSums(dev, num, parts, inv_m, partial_y,
                mean_dy_y_.mutable_data_on(dev));
    mean_dy = mean_dy_.data_on(dev);
    mean_dy_y = mean_dy_y_.data_on(dev);
  }
  const kernels::RowSpans spans = kernels::MakeRowSpans(gpu, rows, spatial);
  for_each(dev, spans.count,
           kernels::BatchNormBackward<Dtype>{dy, y, mean_dy, mean_dy_y, inv_std,
                                             bottom[0]->mutable_diff_on(dev),
                                             channels_, spans});
}

INSTANTIATE_CLASS(BatchNormLayer);
REGISTER_LAYER_CLASS(BatchNorm);

}  // namespace poseidon
