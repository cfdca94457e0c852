// BaseConvolutionLayer: parameter parsing, shape checks, and the
// conv-space shape the convolution algorithms (conv_algorithm.hpp) run on.
#include "poseidon/layers/base_conv_layer.hpp"

#include <string>
#include <utility>

#include "poseidon/filler.hpp"
#include "poseidon/kernels/im2col_kernels.hpp"
#include "poseidon/layers/conv_geometry.hpp"
#include "poseidon/util/status.hpp"

namespace poseidon {

namespace {

int Product(const vector<int>& v, size_t begin = 0) {
  int p = 1;
  for (size_t i = begin; i < v.size(); ++i) p *= v[i];
  return p;
}

}  // namespace

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::ReadGeometry(const ConvolutionParameter& p) {
  ConvGeometry g = ParseConvGeometry(p, num_spatial_axes_);
  is_1x1_ = g.is_1x1();
  kernel_shape_ = std::move(g.kernel);
  stride_ = std::move(g.stride);
  pad_ = std::move(g.pad);
  dilation_ = std::move(g.dilation);
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                             const vector<Blob<Dtype>*>& top) {
  const ConvolutionParameter& p = this->layer_param_.convolution_param();
  const int num_axes = bottom[0]->num_axes();
  POSEIDON_REQUIRE(p.axis() >= -num_axes && p.axis() < num_axes, ConfigError,
                   "convolution_param.axis ", p.axis(),
                   " is out of range for bottom[0] of shape ",
                   bottom[0]->shape_string());
  channel_axis_ = p.axis() < 0 ? p.axis() + num_axes : p.axis();
  num_spatial_axes_ = num_axes - channel_axis_ - 1;
  POSEIDON_REQUIRE(num_spatial_axes_ >= 1, ShapeError, this->type(),
                   " needs at least one spatial axis after the channel axis ",
                   channel_axis_, ", but bottom[0] has shape ",
                   bottom[0]->shape_string());
  force_nd_im2col_ = p.force_nd_im2col();
  ReadGeometry(p);
  options_.engine = p.engine();
  options_.who =
      StrCat(this->type(), " layer '", this->layer_param_.name(), "'");

  num_output_ =
      UInt32FieldToInt("convolution_param.num_output", p.num_output());
  POSEIDON_REQUIRE(num_output_ > 0, ConfigError,
                   "convolution_param.num_output must be positive, got 0");
  group_ = UInt32FieldToInt("convolution_param.group", p.group());
  POSEIDON_REQUIRE(group_ > 0, ConfigError,
                   "convolution_param.group must be positive, got 0");
  channels_ = bottom[0]->shape(channel_axis_);
  POSEIDON_REQUIRE(channels_ % group_ == 0, ShapeError, this->type(),
                   ": bottom[0] has ", channels_, " channels (shape ",
                   bottom[0]->shape_string(),
                   "), not divisible by convolution_param.group ", group_);
  POSEIDON_REQUIRE(num_output_ % group_ == 0, ConfigError,
                   "convolution_param.num_output ", num_output_,
                   " is not divisible by convolution_param.group ", group_);
  if (reverse_dimensions()) {
    conv_out_channels_ = channels_;
    conv_in_channels_ = num_output_;
  } else {
    conv_out_channels_ = num_output_;
    conv_in_channels_ = channels_;
  }
  bias_term_ = p.bias_term();
  // Every shape is known to fit before the weights are allocated.
  ComputeShapes(*bottom[0]);

  vector<int> weight_shape = {conv_out_channels_, conv_in_channels_ / group_};
  weight_shape.insert(weight_shape.end(), kernel_shape_.begin(),
                      kernel_shape_.end());
  const vector<int> bias_shape = {num_output_};
  auto& blobs = this->blobs_;
  if (!blobs.empty()) {
    const size_t expected = bias_term_ ? 2 : 1;
    POSEIDON_REQUIRE(blobs.size() == expected, ShapeError, this->type(),
                     " has ", blobs.size(), " parameter blobs but expects ",
                     expected, " (bias_term ", bias_term_ ? "true" : "false",
                     ")");
    POSEIDON_REQUIRE(
        blobs[0]->shape() == weight_shape, ShapeError, this->type(),
        ": weights have shape ", blobs[0]->shape_string(),
        " but bottom[0] of shape ", bottom[0]->shape_string(),
        " with num_output ", num_output_, ", group ", group_, " and kernel ",
        JoinAxisValues(kernel_shape_), " needs ", JoinAxisValues(weight_shape));
    if (bias_term_) {
      POSEIDON_REQUIRE(blobs[1]->shape() == bias_shape, ShapeError,
                       this->type(), ": bias has shape ",
                       blobs[1]->shape_string(), " but num_output is ",
                       num_output_);
    }
  } else {
    blobs.push_back(std::make_shared<Blob<Dtype>>(weight_shape));
    GetFiller<Dtype>(p.weight_filler())->Fill(blobs[0].get());
    if (bias_term_) {
      blobs.push_back(std::make_shared<Blob<Dtype>>(bias_shape));
      GetFiller<Dtype>(p.bias_filler())->Fill(blobs[1].get());
    }
  }
  this->param_propagate_down_.resize(blobs.size(), true);
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                                          const vector<Blob<Dtype>*>& top) {
  const int first_spatial = channel_axis_ + 1;
  POSEIDON_REQUIRE(bottom[0]->num_axes() == first_spatial + num_spatial_axes_,
                   ShapeError, this->type(), ": bottom[0] has shape ",
                   bottom[0]->shape_string(), " but the layer was set up for ",
                   first_spatial + num_spatial_axes_, " axes");
  POSEIDON_REQUIRE(
      bottom[0]->shape(channel_axis_) == channels_, ShapeError, this->type(),
      ": bottom[0] has shape ", bottom[0]->shape_string(), " with ",
      bottom[0]->shape(channel_axis_), " channels, but the weights (shape ",
      this->blobs_[0]->shape_string(), ") expect ", channels_);
  for (size_t i = 1; i < bottom.size(); ++i) {
    POSEIDON_REQUIRE(bottom[i]->shape() == bottom[0]->shape(), ShapeError,
                     this->type(), ": all bottoms must have the same shape; ",
                     "bottom[0] is ", bottom[0]->shape_string(), ", bottom[", i,
                     "] is ", bottom[i]->shape_string());
  }
  ComputeShapes(*bottom[0]);

  vector<int> top_shape(bottom[0]->shape().begin(),
                        bottom[0]->shape().begin() + channel_axis_);
  top_shape.push_back(num_output_);
  top_shape.insert(top_shape.end(), output_shape_.begin(), output_shape_.end());
  for (Blob<Dtype>* t : top) t->Reshape(top_shape);

  // The conv-space shape the algorithms run on (kept in shape_, whose
  // vectors keep their storage while the shape stays).
  const vector<int>& im_side =
      reverse_dimensions() ? output_shape_ : input_shape_;
  const vector<int>& col_side =
      reverse_dimensions() ? input_shape_ : output_shape_;
  ConvShape& s = shape_;
  s.num = num_;
  s.num_spatial_axes = num_spatial_axes_;
  s.force_nd_im2col = force_nd_im2col_;
  s.is_1x1 = is_1x1_;
  s.kernel = kernel_shape_;
  s.stride = stride_;
  s.pad = pad_;
  s.dilation = dilation_;
  s.group = group_;
  s.in_channels = conv_in_channels_;
  s.out_channels = conv_out_channels_;
  s.input_shape.assign(1, conv_in_channels_);
  s.input_shape.insert(s.input_shape.end(), im_side.begin(), im_side.end());
  s.kernel_dim = conv_in_channels_ / group_ * Product(kernel_shape_);
  s.col_shape.assign(1, s.kernel_dim * group_);
  s.col_shape.insert(s.col_shape.end(), col_side.begin(), col_side.end());
  s.out_spatial_dim = Product(col_side);
  s.input_dim = Product(s.input_shape);
  s.output_dim = conv_out_channels_ * s.out_spatial_dim;
  s.num_output = num_output_;
  s.top_spatial_dim = Product(output_shape_);
  s.top_dim = top[0]->count(channel_axis_);
  s.bias_term = bias_term_;
  s.top_is_input = reverse_dimensions();
  // set_portable(true) (Note [Layer bodies] in layer.hpp) is the GPU im2col
  // path on either device, as set_algorithm(kPortable) asks.
  ConvOptions options = options_;
  if (this->portable()) options.mode = ConvMode::kPortable;
  algorithms_.Choose(s, options);
  if (Poseidon::mode() == Poseidon::CPU) {
    // What runs, and why the faster paths do not, once per layer and
    // whenever it changes (a new shape).
    string path = CpuPathDescription();
    if (path != logged_cpu_path_) {
      const string refusals = algorithms_.Refusals();
      LOG(INFO) << this->layer_param_.name() << ": " << path
                << (refusals.empty() ? "" : " (") << refusals
                << (refusals.empty() ? "" : ")");
      logged_cpu_path_ = std::move(path);
    }
  }
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::ComputeShapes(const Blob<Dtype>& bottom) {
  num_ = bottom.count(0, channel_axis_);
  input_shape_.assign(bottom.shape().begin() + channel_axis_ + 1,
                      bottom.shape().end());
  compute_output_shape(bottom);
  // See Note [Window sizes in 64 bits] in conv_geometry.cpp: the top, the
  // weights and one image's column buffer, checked before any is allocated.
  const vector<int>& shape = bottom.shape();
  vector<int64_t> top(shape.begin(), shape.begin() + channel_axis_);
  top.push_back(num_output_);
  top.insert(top.end(), output_shape_.begin(), output_shape_.end());
  RequireBlobFits(top, sizeof(Dtype), "the top (convolution_param.num_output)");
  vector<int64_t> weights = {conv_out_channels_, conv_in_channels_ / group_};
  weights.insert(weights.end(), kernel_shape_.begin(), kernel_shape_.end());
  RequireBlobFits(weights, sizeof(Dtype),
                  "the weights (convolution_param.num_output, group, "
                  "kernel_size)");
  const vector<int>& col_side =
      reverse_dimensions() ? input_shape_ : output_shape_;
  vector<int64_t> col = {conv_in_channels_};
  col.insert(col.end(), kernel_shape_.begin(), kernel_shape_.end());
  col.insert(col.end(), col_side.begin(), col_side.end());
  RequireBlobFits(col, sizeof(Dtype),
                  "the column buffer of one image (channels, kernel_size, "
                  "output positions)");
}

template <typename Dtype>
bool BaseConvolutionLayer<Dtype>::RunsOnGpu() const {
  return num_spatial_axes_ <= kernels::kMaxIm2colAxes;
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::WarnCpuFallback() const {
  LogWarningOnce(StrCat(this->type(), " layer '", this->layer_param_.name(),
                        "' has ", num_spatial_axes_,
                        " spatial axes; the GPU pass takes at most ",
                        kernels::kMaxIm2colAxes, ", so it runs on the CPU"));
}

INSTANTIATE_CLASS(BaseConvolutionLayer);

}  // namespace poseidon
