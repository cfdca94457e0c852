// BatchNorm on the CPU: plain per-channel loops over (N, spatial).
#include "poseidon/layers/batch_norm_layer.hpp"

#include <cmath>

namespace poseidon {

namespace {

// Bottom layout as (num, channels, spatial): element (n, c, s) sits at
// (n * channels + c) * spatial + s.
struct ChannelLayout {
  int num;
  int channels;
  int spatial;
};

template <typename Dtype>
ChannelLayout LayoutOf(const Blob<Dtype>& blob, int channels) {
  const int num = blob.num_axes() > 0 ? blob.shape(0) : 1;
  const int per_num = blob.num_axes() > 0 ? blob.count(1) : 1;
  return {num, channels, channels > 0 ? per_num / channels : 0};
}

}  // namespace

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
}

template <typename Dtype>
void BatchNormLayer<Dtype>::ComputeBatchStatistics(const Blob<Dtype>& bottom) {
  const ChannelLayout l = LayoutOf(bottom, channels_);
  const int m = l.num * l.spatial;
  const Dtype* x = bottom.cpu_data();
  Dtype* mean = mean_.mutable_cpu_data();
  Dtype* var = variance_.mutable_cpu_data();
  for (int c = 0; c < channels_; ++c) {
    double sum = 0;
    for (int n = 0; n < l.num; ++n) {
      const Dtype* row = x + (n * channels_ + c) * l.spatial;
      for (int s = 0; s < l.spatial; ++s) sum += row[s];
    }
    mean[c] = m > 0 ? static_cast<Dtype>(sum / m) : Dtype(0);
    double sumsq = 0;
    for (int n = 0; n < l.num; ++n) {
      const Dtype* row = x + (n * channels_ + c) * l.spatial;
      for (int s = 0; s < l.spatial; ++s) {
        const double d = row[s] - mean[c];
        sumsq += d * d;
      }
    }
    var[c] = m > 0 ? static_cast<Dtype>(sumsq / m) : Dtype(0);
  }

  const Dtype maf = moving_average_fraction_;
  const Dtype correction = m > 1 ? Dtype(m) / Dtype(m - 1) : Dtype(1);
  Dtype* factor = this->blobs_[2]->mutable_cpu_data();
  factor[0] = factor[0] * maf + 1;
  cpu_axpby(channels_, Dtype(1), mean, maf,
            this->blobs_[0]->mutable_cpu_data());
  cpu_axpby(channels_, correction, var, maf,
            this->blobs_[1]->mutable_cpu_data());
}

template <typename Dtype>
void BatchNormLayer<Dtype>::LoadGlobalStatistics() {
  const Dtype factor = this->blobs_[2]->cpu_data()[0];
  const Dtype scale = factor == 0 ? Dtype(0) : Dtype(1) / factor;
  cpu_scale(channels_, scale, this->blobs_[0]->cpu_data(),
            mean_.mutable_cpu_data());
  cpu_scale(channels_, scale, this->blobs_[1]->cpu_data(),
            variance_.mutable_cpu_data());
}

template <typename Dtype>
void BatchNormLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                        const vector<Blob<Dtype>*>& top) {
  if (use_global_stats_) {
    LoadGlobalStatistics();
  } else {
    ComputeBatchStatistics(*bottom[0]);
  }
  const Dtype* mean = mean_.cpu_data();
  const Dtype* var = variance_.cpu_data();
  Dtype* inv_std = inv_std_.mutable_cpu_data();
  for (int c = 0; c < channels_; ++c) {
    inv_std[c] = Dtype(1) / std::sqrt(var[c] + eps_);
  }

  const ChannelLayout l = LayoutOf(*bottom[0], channels_);
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  for (int n = 0; n < l.num; ++n) {
    for (int c = 0; c < channels_; ++c) {
      const int offset = (n * channels_ + c) * l.spatial;
      for (int s = 0; s < l.spatial; ++s) {
        y[offset + s] = (x[offset + s] - mean[c]) * inv_std[c];
      }
    }
  }
  cpu_copy(top[0]->count(), top[0]->cpu_data(), x_norm_.mutable_cpu_data());
}

template <typename Dtype>
void BatchNormLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                         const vector<bool>& propagate_down,
                                         const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const ChannelLayout l = LayoutOf(*bottom[0], channels_);
  const Dtype* inv_std = inv_std_.cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  if (use_global_stats_) {
    for (int n = 0; n < l.num; ++n) {
      for (int c = 0; c < channels_; ++c) {
        const int offset = (n * channels_ + c) * l.spatial;
        for (int s = 0; s < l.spatial; ++s) {
          dx[offset + s] = dy[offset + s] * inv_std[c];
        }
      }
    }
    return;
  }

  // Per-channel means of dE/dy and dE/dy * y, then the element-wise formula;
  // dx may alias dy (in place), which is safe as each element is read once
  // before it is written.
  const int m = l.num * l.spatial;
  const Dtype* y = x_norm_.cpu_data();
  vector<Dtype> mean_dy(channels_), mean_dy_y(channels_);
  for (int c = 0; c < channels_; ++c) {
    double sum_dy = 0, sum_dy_y = 0;
    for (int n = 0; n < l.num; ++n) {
      const int offset = (n * channels_ + c) * l.spatial;
      for (int s = 0; s < l.spatial; ++s) {
        sum_dy += dy[offset + s];
        sum_dy_y += dy[offset + s] * y[offset + s];
      }
    }
    mean_dy[c] = static_cast<Dtype>(sum_dy / m);
    mean_dy_y[c] = static_cast<Dtype>(sum_dy_y / m);
  }
  for (int n = 0; n < l.num; ++n) {
    for (int c = 0; c < channels_; ++c) {
      const int offset = (n * channels_ + c) * l.spatial;
      for (int s = 0; s < l.spatial; ++s) {
        const int i = offset + s;
        dx[i] = (dy[i] - mean_dy[c] - y[i] * mean_dy_y[c]) * inv_std[c];
      }
    }
  }
}

INSTANTIATE_CLASS(BatchNormLayer);
REGISTER_LAYER_CLASS(BatchNorm);

}  // namespace poseidon
