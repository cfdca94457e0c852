// DeconvolutionLayer: the output-size rule and the passes, which are the
// convolution algorithms (conv_algorithm.hpp) run the other way round: the
// bottom is the convolution's output side (GEMM side), the top its input
// side (im2col side).
#include "poseidon/layers/deconv_layer.hpp"

#include <climits>
#include <cstdint>

#include "poseidon/layers/conv_geometry.hpp"

namespace poseidon {

template <typename Dtype>
void DeconvolutionLayer<Dtype>::compute_output_shape(
    const Blob<Dtype>& bottom) {
  this->output_shape_.clear();
  for (int i = 0; i < this->num_spatial_axes_; ++i) {
    const int in = this->input_shape_[i];
    const int64_t extent =
        int64_t{this->dilation_[i]} * (this->kernel_shape_[i] - 1) + 1;
    const int64_t out = int64_t{this->stride_[i]} * (in - 1) + extent -
                        2 * int64_t{this->pad_[i]};
    POSEIDON_REQUIRE(
        out > 0 && out <= INT_MAX, ShapeError, "Deconvolution: spatial axis ",
        i, " (axis ", this->channel_axis_ + 1 + i, " of bottom shape ",
        bottom.shape_string(), ") of size ", in, " gives output size stride ",
        this->stride_[i], " * (", in, " - 1) + kernel extent ", extent,
        " (kernel_size ", this->kernel_shape_[i], ", dilation ",
        this->dilation_[i], ") - 2 * pad ", this->pad_[i], " = ", out,
        out > 0 ? ", too large" : ", which is not positive");
    // The convolution's side must pass the forward rule too (its kernels
    // compute positions up to out + 2 * pad + stride - 1), and give back
    // the bottom. See Note [Window sizes in 64 bits] in conv_geometry.cpp.
    const WindowAxis a{out, this->kernel_shape_[i], this->pad_[i],
                       this->stride_[i], this->dilation_[i]};
    WindowRule rule;
    rule.param = "convolution_param";
    rule.axis = i;
    const int back = WindowOutputSize(a, rule);
    CHECK_EQ(back, in) << "Deconvolution: output size " << out
                       << " does not convolve back to " << in;
    this->output_shape_.push_back(static_cast<int>(out));
  }
}

template <typename Dtype>
void DeconvolutionLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                          const vector<Blob<Dtype>*>& bottom,
                                          const vector<Blob<Dtype>*>& top) {
  if (dev == Poseidon::GPU && !this->RunsOnGpu()) {
    this->WarnCpuFallback();
    dev = Poseidon::CPU;
  }
  const ConvPlan<Dtype>& plan = this->plan(dev);
  const Dtype* weights = this->blobs_[0]->data_on(dev);
  for (size_t i = 0; i < bottom.size(); ++i) {
    Dtype* top_data = top[i]->mutable_data_on(dev);
    // The input gradient of the convolution top -> bottom, with the bottom
    // as its output gradient; no weight gradient, so no input is needed.
    plan.Backward(dev, nullptr, bottom[i]->data_on(dev), weights, nullptr,
                  top_data);
    if (this->bias_term_) {
      plan.AddBias(dev, this->blobs_[1]->data_on(dev), top_data);
    }
  }
}

template <typename Dtype>
void DeconvolutionLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                           const vector<Blob<Dtype>*>& top,
                                           const vector<bool>& propagate_down,
                                           const vector<Blob<Dtype>*>& bottom) {
  if (dev == Poseidon::GPU && !this->RunsOnGpu()) {
    this->WarnCpuFallback();
    dev = Poseidon::CPU;
  }
  const ConvPlan<Dtype>& plan = this->plan(dev);
  const Dtype* weights = this->blobs_[0]->data_on(dev);
  Dtype* weight_diff = this->param_propagate_down(0)
                           ? this->blobs_[0]->mutable_diff_on(dev)
                           : nullptr;
  for (size_t i = 0; i < top.size(); ++i) {
    const Dtype* top_diff = top[i]->diff_on(dev);
    if (this->bias_term_ && this->param_propagate_down(1)) {
      plan.AccumulateBiasDiff(dev, top_diff,
                              this->blobs_[1]->mutable_diff_on(dev));
    }
    // Weight gradient of the convolution top -> bottom: its input is the
    // top diff, its output gradient the bottom data.
    if (weight_diff != nullptr) {
      plan.Backward(dev, top_diff, bottom[i]->data_on(dev), weights,
                    weight_diff, nullptr);
    }
    if (propagate_down[i]) {
      plan.Forward(dev, top_diff, weights, bottom[i]->mutable_diff_on(dev));
    }
  }
}

INSTANTIATE_CLASS(DeconvolutionLayer);
REGISTER_LAYER_CLASS(Deconvolution);

}  // namespace poseidon
