// Im2colLayer: parameter parsing per spatial axis, then im2col / col2im per
// image.
#include "poseidon/layers/im2col_layer.hpp"

#include <climits>
#include <string>

#include "poseidon/util/im2col.hpp"

namespace poseidon {
namespace {

string JoinInts(const vector<int>& v) {
  string s = "(";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + ")";
}

int ToInt(const string& field, uint32_t value) {
  POSEIDON_REQUIRE(value <= static_cast<uint32_t>(INT_MAX), ConfigError,
                   "convolution_param.", field, " must be non-negative, got ",
                   static_cast<int32_t>(value));
  return static_cast<int>(value);
}

// One value per spatial axis from the repeated field `name` or from
// name_h/name_w (2-D only); `fallback` when neither is given.
vector<int> PerAxis(const string& name,
                    const google::protobuf::RepeatedField<uint32_t>& values,
                    bool has_h, uint32_t h, bool has_w, uint32_t w,
                    int num_axes, int fallback, bool required) {
  if (has_h || has_w) {
    POSEIDON_REQUIRE(values.empty(), ConfigError, "convolution_param: give ",
                     name, " or ", name, "_h/", name, "_w, not both");
    POSEIDON_REQUIRE(has_h && has_w, ConfigError, "convolution_param.", name,
                     "_h and ", name, "_w must be given together");
    POSEIDON_REQUIRE(num_axes == 2, ConfigError, "convolution_param.", name,
                     "_h/", name,
                     "_w apply to 2-D input only, but the "
                     "input has ",
                     num_axes, " spatial axes");
    return {ToInt(name + "_h", h), ToInt(name + "_w", w)};
  }
  if (values.empty()) {
    POSEIDON_REQUIRE(!required, ConfigError, "convolution_param.", name,
                     " (or ", name, "_h and ", name, "_w) is required");
    return vector<int>(num_axes, fallback);
  }
  POSEIDON_REQUIRE(values.size() == 1 || values.size() == num_axes, ConfigError,
                   "convolution_param.", name, " must have 1 or ", num_axes,
                   " values (one per spatial axis), got ", values.size());
  vector<int> out(num_axes);
  for (int i = 0; i < num_axes; ++i) {
    out[i] = ToInt(name, values.Get(values.size() == 1 ? 0 : i));
  }
  return out;
}

}  // namespace

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
  const int n = num_spatial_axes_;
  kernel_ = PerAxis("kernel", p.kernel_size(), p.has_kernel_h(), p.kernel_h(),
                    p.has_kernel_w(), p.kernel_w(), n, 0, true);
  stride_ = PerAxis("stride", p.stride(), p.has_stride_h(), p.stride_h(),
                    p.has_stride_w(), p.stride_w(), n, 1, false);
  pad_ = PerAxis("pad", p.pad(), p.has_pad_h(), p.pad_h(), p.has_pad_w(),
                 p.pad_w(), n, 0, false);
  dilation_ =
      PerAxis("dilation", p.dilation(), false, 0, false, 0, n, 1, false);
  for (int i = 0; i < n; ++i) {
    POSEIDON_REQUIRE(kernel_[i] > 0, ConfigError,
                     "convolution_param: kernel size must be positive, got ",
                     JoinInts(kernel_));
    POSEIDON_REQUIRE(stride_[i] > 0, ConfigError,
                     "convolution_param: stride must be positive, got ",
                     JoinInts(stride_));
    POSEIDON_REQUIRE(dilation_[i] > 0, ConfigError,
                     "convolution_param: dilation must be positive, got ",
                     JoinInts(dilation_));
  }
}

template <typename Dtype>
void Im2colLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  POSEIDON_REQUIRE(bottom[0]->num_axes() == bottom_num_axes_, ShapeError,
                   "Im2col was set up for ", bottom_num_axes_,
                   "-axis input; it cannot be reshaped to ",
                   bottom[0]->shape_string());
  const Blob<Dtype>& in = *bottom[0];
  vector<int> top_shape(in.shape().begin(), in.shape().begin() + channel_axis_);
  int kernel_count = 1;
  for (int k : kernel_) kernel_count *= k;
  const int channels = in.shape(channel_axis_);
  top_shape.push_back(channels * kernel_count);
  im_shape_ = {channels};
  col_shape_ = {channels * kernel_count};
  for (int i = 0; i < num_spatial_axes_; ++i) {
    const int size = in.shape(channel_axis_ + 1 + i);
    const int extent = dilation_[i] * (kernel_[i] - 1) + 1;
    POSEIDON_REQUIRE(size + 2 * pad_[i] >= extent, ShapeError,
                     "Im2col: the kernel ", JoinInts(kernel_),
                     " with dilation ", JoinInts(dilation_), " spans ", extent,
                     " along spatial axis ", i,
                     ", larger than the padded input (", size, " + 2 * ",
                     pad_[i], ") of the bottom of shape ", in.shape_string());
    const int out =
        ConvOutputSize(size, kernel_[i], pad_[i], stride_[i], dilation_[i]);
    top_shape.push_back(out);
    im_shape_.push_back(size);
    col_shape_.push_back(out);
  }
  num_ = in.count(0, channel_axis_);
  top[0]->Reshape(top_shape);
}

template <typename Dtype>
void Im2colLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
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
void Im2colLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
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

INSTANTIATE_CLASS(Im2colLayer);
REGISTER_LAYER_CLASS(Im2col);

}  // namespace poseidon
