// ConvolutionLayer: the output-size rule and the forward/backward passes on
// top of BaseConvolutionLayer's device-dispatching helpers.
#include "poseidon/layers/conv_layer.hpp"

#include "poseidon/util/im2col.hpp"

namespace poseidon {

template <typename Dtype>
void ConvolutionLayer<Dtype>::compute_output_shape(const Blob<Dtype>& bottom) {
  this->output_shape_.clear();
  for (int i = 0; i < this->num_spatial_axes_; ++i) {
    const int in = this->input_shape_[i];
    const int pad = this->pad_[i];
    const int extent = this->dilation_[i] * (this->kernel_shape_[i] - 1) + 1;
    POSEIDON_REQUIRE(
        in + 2 * pad >= extent, ShapeError, "Convolution: spatial axis ", i,
        " (axis ", this->channel_axis_ + 1 + i, " of bottom shape ",
        bottom.shape_string(), ") has size ", in, ", padded by ", pad,
        " on each side that is ", in + 2 * pad,
        ", smaller than the kernel extent ", extent, " (kernel_size ",
        this->kernel_shape_[i], ", dilation ", this->dilation_[i], ", pad ",
        pad, "), so the output would be empty");
    this->output_shape_.push_back(ConvOutputSize(
        in, this->kernel_shape_[i], pad, this->stride_[i], this->dilation_[i]));
  }
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                        const vector<Blob<Dtype>*>& bottom,
                                        const vector<Blob<Dtype>*>& top) {
  if (dev == Poseidon::GPU && !this->RunsOnGpu()) {
    this->WarnCpuFallback();
    dev = Poseidon::CPU;
  }
  const Dtype* weights = this->blobs_[0]->data_on(dev);
  for (size_t i = 0; i < bottom.size(); ++i) {
    Dtype* top_data = top[i]->mutable_data_on(dev);
    this->ConvForward(dev, bottom[i]->data_on(dev), weights, top_data);
    if (this->bias_term_) {
      this->AddBias(dev, this->blobs_[1]->data_on(dev), top_data);
    }
  }
}

template <typename Dtype>
void ConvolutionLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                         const vector<Blob<Dtype>*>& top,
                                         const vector<bool>& propagate_down,
                                         const vector<Blob<Dtype>*>& bottom) {
  if (dev == Poseidon::GPU && !this->RunsOnGpu()) {
    this->WarnCpuFallback();
    dev = Poseidon::CPU;
  }
  const Dtype* weights = this->blobs_[0]->data_on(dev);
  Dtype* weight_diff = this->param_propagate_down(0)
                           ? this->blobs_[0]->mutable_diff_on(dev)
                           : nullptr;
  for (size_t i = 0; i < top.size(); ++i) {
    const Dtype* top_diff = top[i]->diff_on(dev);
    if (this->bias_term_ && this->param_propagate_down(1)) {
      this->AccumulateBiasDiff(dev, top_diff,
                               this->blobs_[1]->mutable_diff_on(dev));
    }
    this->ConvBackward(
        dev, bottom[i]->data_on(dev), top_diff, weights, weight_diff,
        propagate_down[i] ? bottom[i]->mutable_diff_on(dev) : nullptr);
  }
}

INSTANTIATE_CLASS(ConvolutionLayer);
REGISTER_LAYER_CLASS(Convolution);

}  // namespace poseidon
