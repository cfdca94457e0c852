// BaseConvolutionLayer: parameter parsing, shape checks, and the convolution
// as GEMMs over im2col columns, per image (reference) or per chunk of
// images. The direct path is in base_conv_layer_direct.cpp.
#include "poseidon/layers/base_conv_layer.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "poseidon/filler.hpp"
#include "poseidon/layers/conv_geometry.hpp"
#include "poseidon/util/alloc_guard.hpp"
#include "poseidon/util/avx512.hpp"
#include "poseidon/util/im2col.hpp"
#include "poseidon/util/parallel.hpp"
#include "poseidon/util/thread_scratch.hpp"

namespace poseidon {

// Note [Batched im2col]
// Caffe convolves image by image: im2col of one image into a K x S column
// matrix (K = channels/group * kernel size, S = output positions), then an
// (O/group) x K by K x S GEMM per group. When S is small (the 8x8 maps of
// CIFAR-10's conv3, LeNet's conv2, AlexNet's 13x13 layers) those GEMMs are
// too narrow to keep BLAS busy, and its per-call overhead and thread
// wake-ups dominate. The batched path writes the columns of a chunk of B
// images side by side into one K x (B*S) matrix (im2col_batch_cpu), does
// one GEMM per group into an O x (B*S) buffer, and copies that back to
// (B, O, S) order. Backward gathers the top diff into the same (O, B*S)
// order once and uses it for the weight gradient (one GEMM accumulating
// over the chunk) and the column gradient (one GEMM, then col2im).
//
// Chunks are NOT the whole batch: measured on the 2-core development
// machine, a column matrix that outgrows the L2 cache makes im2col, the
// GEMMs and col2im all slower (a 64-image CIFAR-10 conv1 chunk, 20 MB of
// columns, ran at half the speed of per-image GEMMs). kAuto therefore takes
// just enough images for kTargetColumns GEMM columns, within
// max_buffer_bytes_; layers whose images alone give that many columns run
// per image, where a 1x1, stride 1, pad 0 convolution needs no im2col at
// all (the image is its own column matrix). N-D convolutions (and
// force_nd_im2col) always run per image.
//
// Note [Parallel chunks]
// With Poseidon::num_threads() T > 1, BLAS threading alone does little for
// these GEMMs (32 output channels by ~512 columns is too small to split
// well), so the batched path instead runs whole chunks on T threads
// (ParallelFor) with single-threaded BLAS inside. kAuto then batches even
// when one image fills a GEMM (chunks of one image), caps the chunk at
// ceil(N / T) images so every thread gets a chunk, and sizes the chunks so
// that every thread gets the same number of images: each worker takes a
// contiguous range of the batch (sizes differing by at most one) and cuts it
// into chunks of as equal sizes as the cap allows. (Counting chunks instead
// left threads unequal shares: ResNet-50's 14 x 14 layers at batch 8 on 2
// threads ran 3 + 3 + 2 images, one thread doing 6, and 100 images of
// 8 x 8 in 13 chunks of at most 8 gave 56 and 44. The benchmark nets'
// batched layers already split evenly; batches like CIFAR-10's 100 on the
// reference kernels, POSEIDON_KERNELS=blas, did not.)
// Each worker has its own slice of the calling thread's scratch
// (util/thread_scratch.hpp; max_buffer_bytes bounds one slice, and all
// convolutions of a net share the one scratch) and, in Backward, its own
// weight-gradient accumulator; the accumulators are added to the weight
// diff in worker order, and ParallelFor's split depends only on the chunk
// and thread counts, so results are the same from run to run for a given T
// (they differ from T = 1 by rounding only).
// The bias terms split the images the same way. With T == 1, or a single
// chunk, everything runs serially as before.
namespace {

// GEMM width kAuto aims for when batching images (see Note [Batched im2col]).
constexpr int kTargetColumns = 512;

// Makes OpenBLAS single-threaded for its lifetime (a parallel region whose
// threads each call BLAS), then restores the previous thread count. The
// setting is process-wide.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : previous_(openblas_get_num_threads()) {
    if (previous_ != 1) openblas_set_num_threads(1);
  }
  ~SingleThreadedBlas() {
    if (previous_ != 1) openblas_set_num_threads(previous_);
  }
  POSEIDON_DISABLE_COPY_AND_ASSIGN(SingleThreadedBlas);

 private:
  const int previous_;
};

int Product(const vector<int>& v, size_t begin = 0) {
  int p = 1;
  for (size_t i = begin; i < v.size(); ++i) p *= v[i];
  return p;
}

// (images, channels, S) <-> (channels, images * S).
template <typename Dtype>
void ImagesToChannelMajor(const Dtype* images, int num, int channels,
                          int spatial, Dtype* out) {
  for (int n = 0; n < num; ++n) {
    for (int c = 0; c < channels; ++c) {
      std::memcpy(out + (static_cast<size_t>(c) * num + n) * spatial,
                  images + (static_cast<size_t>(n) * channels + c) * spatial,
                  sizeof(Dtype) * spatial);
    }
  }
}

template <typename Dtype>
void ChannelMajorToImages(const Dtype* in, int num, int channels, int spatial,
                          Dtype* images) {
  for (int n = 0; n < num; ++n) {
    for (int c = 0; c < channels; ++c) {
      std::memcpy(images + (static_cast<size_t>(n) * channels + c) * spatial,
                  in + (static_cast<size_t>(c) * num + n) * spatial,
                  sizeof(Dtype) * spatial);
    }
  }
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

  const vector<int>& im_side =
      reverse_dimensions() ? output_shape_ : input_shape_;
  const vector<int>& col_side =
      reverse_dimensions() ? input_shape_ : output_shape_;
  conv_input_shape_ = {conv_in_channels_};
  conv_input_shape_.insert(conv_input_shape_.end(), im_side.begin(),
                           im_side.end());
  kernel_dim_ = conv_in_channels_ / group_ * Product(kernel_shape_);
  col_shape_ = {kernel_dim_ * group_};
  col_shape_.insert(col_shape_.end(), col_side.begin(), col_side.end());
  conv_out_spatial_dim_ = Product(col_side);
  conv_input_dim_ = Product(conv_input_shape_);
  conv_output_dim_ = conv_out_channels_ * conv_out_spatial_dim_;
  bottom_dim_ = bottom[0]->count(channel_axis_);
  top_dim_ = top[0]->count(channel_axis_);
  top_spatial_dim_ = Product(output_shape_);
  ChooseAlgorithm();
  if (Poseidon::mode() == Poseidon::CPU) {
    // What runs, once per layer and whenever it changes (a new shape).
    string path = CpuPathDescription();
    if (path != logged_cpu_path_) {
      LOG(INFO) << this->layer_param_.name() << ": " << path;
      logged_cpu_path_ = std::move(path);
    }
  }

  // Refilled only when the size changes: Reshape runs before every Forward.
  if (bias_term_ && spatial_ones_.count() != top_spatial_dim_) {
    spatial_ones_.Reshape({top_spatial_dim_});
    cpu_set(top_spatial_dim_, Dtype(1), spatial_ones_.mutable_cpu_data());
  }
  ChoosePortable();
  if (Poseidon::mode() == Poseidon::GPU) CudnnReshape();
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
void BaseConvolutionLayer<Dtype>::ChooseAlgorithm() {
  ChooseDirect();
  ChooseWinograd();
  ChooseRowWeightGrad();
  const bool can_batch = num_spatial_axes_ == 2 && !force_nd_im2col_;
  const int col_rows = col_shape_[0];
  const int S = std::max(conv_out_spatial_dim_, 1);
  const int num = std::max(num_, 1);
  const int threads = Poseidon::num_threads();
  const size_t per_image =
      sizeof(Dtype) * static_cast<size_t>(col_rows + conv_out_channels_) * S;
  const size_t fit = std::max<size_t>(1, max_buffer_bytes_ / per_image);
  const size_t wanted = (kTargetColumns + S - 1) / S;
  size_t chunk = 1;
  switch (algorithm_) {
    case Algorithm::kPerImage:
    case Algorithm::kPortable:  // chunked by ChoosePortable instead
      break;
    case Algorithm::kBatched:
      chunk = fit;
      break;
    case Algorithm::kAuto: {
      // See Note [Parallel chunks] for the threaded choice: a thread's
      // range of ceil(N / T) images, cut into the fewest chunks of at most
      // min(fit, wanted) images; the largest of those chunks is the
      // chunk size (8 images of 14 x 14 on 2 threads, 3 wanted: 4 per
      // thread in two chunks of 2).
      const size_t t = static_cast<size_t>(std::max(threads, 1));
      const size_t range = (static_cast<size_t>(num) + t - 1) / t;
      const size_t cap = std::min({fit, wanted, range});
      const size_t pieces = (range + cap - 1) / cap;
      chunk = (range + pieces - 1) / pieces;
      break;
    }
  }
  chunk = std::min<size_t>(chunk, num);
  batched_ = can_batch && (algorithm_ == Algorithm::kBatched ||
                           (algorithm_ == Algorithm::kAuto &&
                            (chunk > 1 || (threads > 1 && num > 1))));
  images_per_chunk_ = batched_ ? static_cast<int>(chunk) : 1;
}

template <typename Dtype>
string BaseConvolutionLayer<Dtype>::CpuPathDescription() const {
  std::ostringstream s;
  if (winograd_) {
    s << "Winograd F(4x4, 3x3)";
  } else if (direct_) {
    s << (!Avx512KernelsAvailable()
              ? "direct (AVX2 GEMM, columns packed from the image)"
          : direct_forward_->output_vectors()
              ? "direct (AVX-512 kernels, vectors of output channels)"
              : "direct (AVX-512 kernels)");
    if (!direct_input_grad_) {
      s << ", input gradient by im2col + GEMM (the output is smaller than "
           "the input)";
    }
  } else if (batched_) {
    s << "im2col + GEMM, " << images_per_chunk_ << " images per product";
  } else {
    s << "im2col + GEMM per image";
  }
  if (row_weight_grad_) {
    s << "; weight gradient by rows (" << conv_in_channels_ / group_
      << " input channels)";
  }
  return s.str();
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::Im2col(const Dtype* input, int images,
                                         Dtype* col) const {
  if (num_spatial_axes_ == 2 && !force_nd_im2col_) {
    im2col_batch_cpu(input, images, conv_in_channels_, conv_input_shape_[1],
                     conv_input_shape_[2], kernel_shape_[0], kernel_shape_[1],
                     pad_[0], pad_[1], stride_[0], stride_[1], dilation_[0],
                     dilation_[1], col);
    return;
  }
  CHECK_EQ(images, 1) << "N-D im2col runs one image at a time";
  im2col_nd_cpu(input, num_spatial_axes_, conv_input_shape_.data(),
                col_shape_.data(), kernel_shape_.data(), pad_.data(),
                stride_.data(), dilation_.data(), col);
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::Col2im(const Dtype* col, int images,
                                         Dtype* input) const {
  if (num_spatial_axes_ == 2 && !force_nd_im2col_) {
    col2im_batch_cpu(col, images, conv_in_channels_, conv_input_shape_[1],
                     conv_input_shape_[2], kernel_shape_[0], kernel_shape_[1],
                     pad_[0], pad_[1], stride_[0], stride_[1], dilation_[0],
                     dilation_[1], input);
    return;
  }
  CHECK_EQ(images, 1) << "N-D col2im runs one image at a time";
  col2im_nd_cpu(col, num_spatial_axes_, conv_input_shape_.data(),
                col_shape_.data(), kernel_shape_.data(), pad_.data(),
                stride_.data(), dilation_.data(), input);
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::CpuConvForward(const Dtype* input,
                                                 const Dtype* weights,
                                                 Dtype* output) {
  if constexpr (std::is_same<Dtype, float>::value) {
    // See Note [Winograd path] in base_conv_layer_winograd.cpp.
    if (winograd_) {
      ForwardWinograd(input, weights, output);
      return;
    }
    // See Note [Direct path] in base_conv_layer_direct.cpp.
    if (direct_) {
      ForwardDirect(input, weights, output);
      return;
    }
  }
  if (batched_) {
    ForwardBatched(input, weights, output);
  } else {
    ForwardPerImage(input, weights, output);
  }
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::CpuConvBackward(const Dtype* input,
                                                  const Dtype* output_diff,
                                                  const Dtype* weights,
                                                  Dtype* weight_diff,
                                                  Dtype* input_diff) {
  if (weight_diff == nullptr && input_diff == nullptr) return;
  if constexpr (std::is_same<Dtype, float>::value) {
    // See Note [Row weight-gradient path] in base_conv_layer_row_wgrad.cpp.
    if (row_weight_grad_ && weight_diff != nullptr) {
      BackwardWeightsRows(input, output_diff, weight_diff);
      if (input_diff == nullptr) return;
      weight_diff = nullptr;
    }
    // See Note [Winograd path].
    if (winograd_) {
      if (input_diff != nullptr) {
        BackwardDataWinograd(output_diff, weights, input_diff);
      }
      if (weight_diff != nullptr) {
        BackwardWeightsWinograd(input, output_diff, weight_diff);
      }
      return;
    }
    if (direct_) {
      // See Note [Direct path] in base_conv_layer_direct.cpp.
      Dtype* direct_input_diff = direct_input_grad_ ? input_diff : nullptr;
      if (weight_diff != nullptr || direct_input_diff != nullptr) {
        BackwardDirect(input, output_diff, weights, weight_diff,
                       direct_input_diff);
      }
      if (direct_input_grad_ || input_diff == nullptr) return;
      weight_diff = nullptr;  // done; the im2col path adds the input gradient
    }
  }
  if (batched_) {
    BackwardBatched(input, output_diff, weights, weight_diff, input_diff);
  } else {
    BackwardPerImage(input, output_diff, weights, weight_diff, input_diff);
  }
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::ForwardPerImage(const Dtype* input,
                                                  const Dtype* weights,
                                                  Dtype* output) {
  const int out_per_group = conv_out_channels_ / group_;
  const int S = conv_out_spatial_dim_;
  const size_t w_step = static_cast<size_t>(out_per_group) * kernel_dim_;
  const size_t col_step = static_cast<size_t>(kernel_dim_) * S;
  const size_t out_step = static_cast<size_t>(out_per_group) * S;
  Dtype* col_buffer = PerImageColumns();
  for (int n = 0; n < num_; ++n) {
    const Dtype* in_n = input + static_cast<size_t>(n) * conv_input_dim_;
    Dtype* out_n = output + static_cast<size_t>(n) * conv_output_dim_;
    const Dtype* col = in_n;
    if (!is_1x1_) {
      Im2col(in_n, 1, col_buffer);
      col = col_buffer;
    }
    for (int g = 0; g < group_; ++g) {
      cpu_gemm<Dtype>(CblasNoTrans, CblasNoTrans, out_per_group, S, kernel_dim_,
                      Dtype(1), weights + g * w_step, col + g * col_step,
                      Dtype(0), out_n + g * out_step);
    }
  }
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::BackwardPerImage(const Dtype* input,
                                                   const Dtype* output_diff,
                                                   const Dtype* weights,
                                                   Dtype* weight_diff,
                                                   Dtype* input_diff) {
  const int out_per_group = conv_out_channels_ / group_;
  const int S = conv_out_spatial_dim_;
  const size_t w_step = static_cast<size_t>(out_per_group) * kernel_dim_;
  const size_t col_step = static_cast<size_t>(kernel_dim_) * S;
  const size_t out_step = static_cast<size_t>(out_per_group) * S;
  Dtype* col_buffer = PerImageColumns();
  for (int n = 0; n < num_; ++n) {
    const Dtype* od_n = output_diff + static_cast<size_t>(n) * conv_output_dim_;
    if (weight_diff != nullptr) {
      const Dtype* in_n = input + static_cast<size_t>(n) * conv_input_dim_;
      const Dtype* col = in_n;
      if (!is_1x1_) {
        Im2col(in_n, 1, col_buffer);
        col = col_buffer;
      }
      for (int g = 0; g < group_; ++g) {
        cpu_gemm<Dtype>(CblasNoTrans, CblasTrans, out_per_group, kernel_dim_, S,
                        Dtype(1), od_n + g * out_step, col + g * col_step,
                        Dtype(1), weight_diff + g * w_step);
      }
    }
    if (input_diff != nullptr) {
      Dtype* id_n = input_diff + static_cast<size_t>(n) * conv_input_dim_;
      Dtype* col_diff = is_1x1_ ? id_n : col_buffer;
      for (int g = 0; g < group_; ++g) {
        cpu_gemm<Dtype>(CblasTrans, CblasNoTrans, kernel_dim_, S, out_per_group,
                        Dtype(1), weights + g * w_step, od_n + g * out_step,
                        Dtype(0), col_diff + g * col_step);
      }
      if (!is_1x1_) Col2im(col_diff, 1, id_n);
    }
  }
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::ForwardChunk(const Dtype* input,
                                               const Dtype* weights, int n0,
                                               int images, Dtype* col,
                                               Dtype* buf,
                                               Dtype* output) const {
  const int out_per_group = conv_out_channels_ / group_;
  const size_t w_step = static_cast<size_t>(out_per_group) * kernel_dim_;
  const int columns = images * conv_out_spatial_dim_;
  Dtype* out_n0 = output + static_cast<size_t>(n0) * conv_output_dim_;
  // A lone image's (O, S) block is already in output order, and a 1x1
  // convolution's columns for it are the image itself.
  Dtype* dst = images == 1 ? out_n0 : buf;
  const Dtype* cols = ChunkColumns(input, n0, images, col);
  for (int g = 0; g < group_; ++g) {
    cpu_gemm<Dtype>(CblasNoTrans, CblasNoTrans, out_per_group, columns,
                    kernel_dim_, Dtype(1), weights + g * w_step,
                    cols + static_cast<size_t>(g) * kernel_dim_ * columns,
                    Dtype(0),
                    dst + static_cast<size_t>(g) * out_per_group * columns);
  }
  if (images > 1) {
    ChannelMajorToImages(buf, images, conv_out_channels_, conv_out_spatial_dim_,
                         out_n0);
  }
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::BackwardChunk(const Dtype* input,
                                                const Dtype* output_diff,
                                                const Dtype* weights, int n0,
                                                int images, Dtype* col,
                                                Dtype* buf, Dtype* weight_diff,
                                                Dtype* input_diff) const {
  const int out_per_group = conv_out_channels_ / group_;
  const size_t w_step = static_cast<size_t>(out_per_group) * kernel_dim_;
  const size_t columns = static_cast<size_t>(images) * conv_out_spatial_dim_;
  const Dtype* od_n0 = output_diff + static_cast<size_t>(n0) * conv_output_dim_;
  const Dtype* od = od_n0;
  if (images > 1) {
    ImagesToChannelMajor(od_n0, images, conv_out_channels_,
                         conv_out_spatial_dim_, buf);
    od = buf;
  }
  // A 1x1 convolution of one image: its columns are the image and their
  // gradient is the image's (see ForwardChunk).
  const bool lone_1x1 = is_1x1_ && images == 1;
  if (weight_diff != nullptr) {
    const Dtype* cols = ChunkColumns(input, n0, images, col);
    for (int g = 0; g < group_; ++g) {
      cpu_gemm<Dtype>(
          CblasNoTrans, CblasTrans, out_per_group, kernel_dim_,
          static_cast<int>(columns), Dtype(1), od + g * out_per_group * columns,
          cols + g * kernel_dim_ * columns, Dtype(1), weight_diff + g * w_step);
    }
  }
  if (input_diff != nullptr) {
    Dtype* id_n0 = input_diff + static_cast<size_t>(n0) * conv_input_dim_;
    Dtype* col_diff = lone_1x1 ? id_n0 : col;
    for (int g = 0; g < group_; ++g) {
      cpu_gemm<Dtype>(CblasTrans, CblasNoTrans, kernel_dim_,
                      static_cast<int>(columns), out_per_group, Dtype(1),
                      weights + g * w_step, od + g * out_per_group * columns,
                      Dtype(0), col_diff + g * kernel_dim_ * columns);
    }
    if (!lone_1x1) Col2im(col, images, id_n0);
  }
}

template <typename Dtype>
Dtype* BaseConvolutionLayer<Dtype>::PerImageColumns() const {
  if (is_1x1_) return nullptr;
  const size_t count = static_cast<size_t>(col_shape_[0]) *
                       static_cast<size_t>(conv_out_spatial_dim_);
  return static_cast<Dtype*>(ThreadScratch(count * sizeof(Dtype)));
}

template <typename Dtype>
const Dtype* BaseConvolutionLayer<Dtype>::ChunkColumns(const Dtype* input,
                                                       int n0, int images,
                                                       Dtype* col) const {
  const Dtype* in_n0 = input + static_cast<size_t>(n0) * conv_input_dim_;
  if (is_1x1_ && images == 1) return in_n0;
  Im2col(in_n0, images, col);
  return col;
}

template <typename Dtype>
auto BaseConvolutionLayer<Dtype>::BatchedScratch(int workers,
                                                 size_t extra) const
    -> WorkerScratch {
  const size_t columns =
      static_cast<size_t>(images_per_chunk_) * conv_out_spatial_dim_;
  WorkerScratch s;
  s.col_size = static_cast<size_t>(col_shape_[0]) * columns;
  s.buf_size = static_cast<size_t>(conv_out_channels_) * columns;
  s.base = static_cast<Dtype*>(ThreadScratch(
      (static_cast<size_t>(workers) * (s.col_size + s.buf_size) + extra) *
      sizeof(Dtype)));
  return s;
}

template <typename Dtype>
int BaseConvolutionLayer<Dtype>::BatchedWorkers() const {
  return ParallelForWorkers((num_ + images_per_chunk_ - 1) / images_per_chunk_);
}

template <typename Dtype>
template <typename ChunkFn>
void BaseConvolutionLayer<Dtype>::ForEachChunk(int worker, int workers,
                                               const ChunkFn& fn) const {
  // See Note [Parallel chunks]: the worker's range of images (earlier ranges
  // one larger), then chunks of at most images_per_chunk_ as equal as can be.
  const int base = num_ / workers, extra = num_ % workers;
  const int begin = worker * base + std::min(worker, extra);
  const int size = base + (worker < extra ? 1 : 0);
  const int pieces = (size + images_per_chunk_ - 1) / images_per_chunk_;
  for (int p = 0, n0 = begin; p < pieces; ++p) {
    const int images = size / pieces + (p < size % pieces ? 1 : 0);
    fn(n0, images);
    n0 += images;
  }
}

template <typename Dtype>
std::vector<int> BaseConvolutionLayer<Dtype>::images_per_worker() const {
  const int workers = std::max(BatchedWorkers(), 1);
  std::vector<int> images(workers, 0);
  for (int w = 0; w < workers; ++w) {
    ForEachChunk(w, workers, [&](int, int n) { images[w] += n; });
  }
  return images;
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::ForwardBatched(const Dtype* input,
                                                 const Dtype* weights,
                                                 Dtype* output) {
  const int workers = BatchedWorkers();
  const WorkerScratch scratch = BatchedScratch(std::max(workers, 1), 0);
  auto run = [&](int w, int of) {
    ForEachChunk(w, of, [&](int n0, int images) {
      ForwardChunk(input, weights, n0, images, scratch.col(w), scratch.buf(w),
                   output);
    });
  };
  if (workers <= 1) {
    run(0, 1);
    return;
  }
  SingleThreadedBlas single_threaded_blas;
  ParallelFor(workers, [&](int begin, int end, int) {
    for (int w = begin; w < end; ++w) run(w, workers);
  });
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::BackwardBatched(const Dtype* input,
                                                  const Dtype* output_diff,
                                                  const Dtype* weights,
                                                  Dtype* weight_diff,
                                                  Dtype* input_diff) {
  const int workers = BatchedWorkers();
  // Worker w of `of` runs its chunks, accumulating into w_acc.
  auto run = [&](const WorkerScratch& scratch, int w, int of, Dtype* w_acc) {
    ForEachChunk(w, of, [&](int n0, int images) {
      BackwardChunk(input, output_diff, weights, n0, images, scratch.col(w),
                    scratch.buf(w), w_acc, input_diff);
    });
  };
  if (workers <= 1) {
    run(BatchedScratch(1, 0), 0, 1, weight_diff);
    return;
  }
  // Each worker accumulates its chunks' weight gradient into its own zeroed
  // slice (after the workers' columns and buffers in the scratch); the
  // slices are added to weight_diff in worker order below.
  const int w_count = conv_out_channels_ * kernel_dim_;
  const size_t accs_size =
      weight_diff != nullptr ? static_cast<size_t>(workers) * w_count : 0;
  const WorkerScratch scratch = BatchedScratch(workers, accs_size);
  Dtype* w_accs = nullptr;
  if (weight_diff != nullptr) {
    w_accs = scratch.col(workers);  // past the workers' slices
    cpu_set(static_cast<int>(accs_size), Dtype(0), w_accs);
  }
  {
    SingleThreadedBlas single_threaded_blas;
    ParallelFor(workers, [&](int begin, int end, int) {
      for (int w = begin; w < end; ++w) {
        run(scratch, w, workers,
            w_accs == nullptr ? nullptr : w_accs + w * w_count);
      }
    });
  }
  if (weight_diff != nullptr) {
    for (int w = 0; w < workers; ++w) {
      cpu_axpy(w_count, Dtype(1), w_accs + w * w_count, weight_diff);
    }
  }
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::CpuAddBias(const Dtype* bias, Dtype* top) {
  auto add = [&](int begin, int end, int) {
    for (int n = begin; n < end; ++n) {
      for (int o = 0; o < num_output_; ++o) {
        Dtype* row =
            top + (static_cast<size_t>(n) * num_output_ + o) * top_spatial_dim_;
        const Dtype b = bias[o];
        for (int s = 0; s < top_spatial_dim_; ++s) row[s] += b;
      }
    }
  };
  if (ParallelForWorkers(num_) <= 1) {
    add(0, num_, 0);
  } else {
    ParallelFor(num_, add);
  }
}

template <typename Dtype>
void BaseConvolutionLayer<Dtype>::CpuAccumulateBiasDiff(const Dtype* top_diff,
                                                        Dtype* bias_diff) {
  const Dtype* ones = spatial_ones_.cpu_data();
  auto accumulate = [&](int begin, int end, Dtype* acc) {
    for (int n = begin; n < end; ++n) {
      cpu_gemv<Dtype>(CblasNoTrans, num_output_, top_spatial_dim_, Dtype(1),
                      top_diff + static_cast<size_t>(n) * top_dim_, ones,
                      Dtype(1), acc);
    }
  };
  const int workers = ParallelForWorkers(num_);
  if (workers <= 1) {
    accumulate(0, num_, bias_diff);
    return;
  }
  // Per-worker partial sums, added in worker order: deterministic for a
  // given thread count.
  Dtype* accs = static_cast<Dtype*>(ThreadScratch(static_cast<size_t>(workers) *
                                                  num_output_ * sizeof(Dtype)));
  cpu_set(workers * num_output_, Dtype(0), accs);
  {
    SingleThreadedBlas single_threaded_blas;
    ParallelFor(num_, [&](int begin, int end, int w) {
      accumulate(begin, end, accs + w * num_output_);
    });
  }
  for (int w = 0; w < workers; ++w) {
    cpu_axpy(num_output_, Dtype(1), accs + w * num_output_, bias_diff);
  }
}

INSTANTIATE_CLASS(BaseConvolutionLayer);

}  // namespace poseidon
