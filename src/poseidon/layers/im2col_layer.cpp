// Im2colLayer: the per-element bodies over all images (either device), or
// im2col / col2im per image (the tuned CPU path), with the geometry parsed
// as for Convolution (conv_geometry.hpp).
#include "poseidon/layers/im2col_layer.hpp"

#include <utility>

#include "poseidon/layers/conv_geometry.hpp"
#include "poseidon/util/im2col.hpp"

namespace poseidon {

template <typename Dtype>
void Im2colLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                    const vector<Blob<Dtype>*>& top) {
  const ConvolutionParameter& p = this->layer_param_.convolution_param();
  const int num_axes = bottom[0]->num_axes();
  POSEIDON_REQUIRE(p.axis() >= -num_axes && p.axis() < num_axes, ConfigError,
                   "convolution_param.axis ", p.axis(),
                   " is out of range for the bottom of shape ",
                   bottom[0]->shape_string());
  channel_axis_ = p.axis() < 0 ? p.axis() + num_axes : p.axis();
  num_spatial_axes_ = num_axes - channel_axis_ - 1;
  bottom_num_axes_ = num_axes;
  POSEIDON_REQUIRE(num_spatial_axes_ >= 1, ShapeError,
                   "Im2col needs at least one spatial axis after the channel "
                   "axis ",
                   channel_axis_, ", got a bottom of shape ",
                   bottom[0]->shape_string());
  force_nd_ = p.force_nd_im2col();
  ConvGeometry g = ParseConvGeometry(p, num_spatial_axes_);
  kernel_ = std::move(g.kernel);
  stride_ = std::move(g.stride);
  pad_ = std::move(g.pad);
  dilation_ = std::move(g.dilation);
}

template <typename Dtype>
void Im2colLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(bottom[0]->num_axes() == bottom_num_axes_, ShapeError,
                   "Im2col was set up for ", bottom_num_axes_,
                   "-axis input; it cannot be reshaped to ",
                   bottom[0]->shape_string());
  const Blob<Dtype>& in = *bottom[0];
  const int channels = in.shape(channel_axis_);
  im_shape_ = {channels};
  col_shape_ = {0};  // channels * kernel count, once it is known to fit
  // See Note [Window sizes in 64 bits] in conv_geometry.cpp.
  vector<int64_t> image_dims = {channels};
  image_dims.insert(image_dims.end(), kernel_.begin(), kernel_.end());
  for (int i = 0; i < num_spatial_axes_; ++i) {
    const WindowAxis a{in.shape(channel_axis_ + 1 + i), kernel_[i], pad_[i],
                       stride_[i], dilation_[i]};
    WindowRule rule;
    rule.param = "convolution_param";
    rule.axis = i;
    rule.bottom_shape = &in.shape();
    rule.bottom_axis = channel_axis_ + 1 + i;
    const int out = WindowOutputSize(a, rule);
    image_dims.push_back(out);
    im_shape_.push_back(static_cast<int>(a.input));
    col_shape_.push_back(out);
  }
  // One image's columns (no output axis is empty), then the whole top.
  RequireBlobFits(image_dims, sizeof(Dtype),
                  "one image's columns (channels, kernel_size, output "
                  "positions)");
  vector<int64_t> top_dims(in.shape().begin(),
                           in.shape().begin() + channel_axis_);
  top_dims.insert(top_dims.end(), image_dims.begin(), image_dims.end());
  RequireBlobFits(top_dims, sizeof(Dtype), "the top");
  // Both fit, so the kernel axes fold into the channel axis in int.
  vector<int> top_shape(in.shape().begin(), in.shape().begin() + channel_axis_);
  int rows = channels;
  for (int k : kernel_) rows *= k;
  top_shape.push_back(rows);
  top_shape.insert(top_shape.end(), col_shape_.begin() + 1, col_shape_.end());
  col_shape_[0] = rows;
  num_ = in.count(0, channel_axis_);
  top[0]->Reshape(top_shape);
}

template <typename Dtype>
void Im2colLayer<Dtype>::TunedForward_cpu(const vector<Blob<Dtype>*>& bottom,
                                          const vector<Blob<Dtype>*>& top) {
  const int in_dim = bottom[0]->count(channel_axis_);
  const int out_dim = top[0]->count(channel_axis_);
  const Dtype* in = bottom[0]->cpu_data();
  Dtype* out = top[0]->mutable_cpu_data();
  for (int n = 0; n < num_; ++n) {
    if (Use2d()) {
      im2col_cpu(in + n * in_dim, im_shape_[0], im_shape_[1], im_shape_[2],
                 kernel_[0], kernel_[1], pad_[0], pad_[1], stride_[0],
                 stride_[1], dilation_[0], dilation_[1], out + n * out_dim);
    } else {
      im2col_nd_cpu(in + n * in_dim, num_spatial_axes_, im_shape_.data(),
                    col_shape_.data(), kernel_.data(), pad_.data(),
                    stride_.data(), dilation_.data(), out + n * out_dim);
    }
  }
}

template <typename Dtype>
void Im2colLayer<Dtype>::TunedBackward_cpu(const vector<Blob<Dtype>*>& top,
                                           const vector<bool>& propagate_down,
                                           const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int in_dim = bottom[0]->count(channel_axis_);
  const int out_dim = top[0]->count(channel_axis_);
  const Dtype* top_diff = top[0]->cpu_diff();
  Dtype* diff = bottom[0]->mutable_cpu_diff();
  for (int n = 0; n < num_; ++n) {
    if (Use2d()) {
      col2im_cpu(top_diff + n * out_dim, im_shape_[0], im_shape_[1],
                 im_shape_[2], kernel_[0], kernel_[1], pad_[0], pad_[1],
                 stride_[0], stride_[1], dilation_[0], dilation_[1],
                 diff + n * in_dim);
    } else {
      col2im_nd_cpu(top_diff + n * out_dim, num_spatial_axes_, im_shape_.data(),
                    col_shape_.data(), kernel_.data(), pad_.data(),
                    stride_.data(), dilation_.data(), diff + n * in_dim);
    }
  }
}

template <typename Dtype>
kernels::Im2colShape Im2colLayer<Dtype>::Shape() const {
  return MakeIm2colShape(num_spatial_axes_, im_shape_.data(), kernel_.data(),
                         pad_.data(), stride_.data(), dilation_.data(), num_,
                         ColumnLayout::kImageAfterImage);
}

template <typename Dtype>
bool Im2colLayer<Dtype>::PortableAxes() const {
  if (num_spatial_axes_ <= kernels::kMaxIm2colAxes) return true;
  LOG_FIRST_N(WARNING, 1) << "Im2col with " << num_spatial_axes_
                          << " spatial axes runs the CPU loop (in GPU mode "
                          << "too): the kernels take at most "
                          << kernels::kMaxIm2colAxes;
  return false;
}

template <typename Dtype>
void Im2colLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                   const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  if (!PortableAxes()) {
    TunedForward_cpu(bottom, top);
    return;
  }
  if (num_ == 0) return;
  im2col_on(dev, Shape(), !Use2d(), bottom[0]->data_on(dev),
            top[0]->mutable_data_on(dev));
}

template <typename Dtype>
void Im2colLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                    const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  if (!PortableAxes()) {
    TunedBackward_cpu(top, propagate_down, bottom);
    return;
  }
  if (num_ == 0) return;
  col2im_on(dev, Shape(), !Use2d(), top[0]->diff_on(dev),
            bottom[0]->mutable_diff_on(dev));
}

INSTANTIATE_CLASS(Im2colLayer);
REGISTER_LAYER_CLASS(Im2col);

}  // namespace poseidon
