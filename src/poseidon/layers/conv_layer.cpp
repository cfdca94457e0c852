// ConvolutionLayer: the output-size rule and the forward/backward passes on
// top of the algorithms BaseConvolutionLayer chose (conv_algorithm.hpp).
#include "poseidon/layers/conv_layer.hpp"

#include "poseidon/layers/conv_geometry.hpp"

namespace poseidon {

template <typename Dtype>
void ConvolutionLayer<Dtype>::compute_output_shape(const Blob<Dtype>& bottom) {
  // See Note [Window sizes in 64 bits] in conv_geometry.cpp.
  this->output_shape_.clear();
  for (int i = 0; i < this->num_spatial_axes_; ++i) {
    const WindowAxis a{this->input_shape_[i], this->kernel_shape_[i],
                       this->pad_[i], this->stride_[i], this->dilation_[i]};
    WindowRule rule;
    rule.param = "convolution_param";
    rule.axis = i;
    rule.bottom_shape = &bottom.shape();
    rule.bottom_axis = this->channel_axis_ + 1 + i;
    this->output_shape_.push_back(WindowOutputSize(a, rule));
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
  const ConvPlan<Dtype>& plan = this->plan(dev);
  const Dtype* weights = this->blobs_[0]->data_on(dev);
  for (size_t i = 0; i < bottom.size(); ++i) {
    Dtype* top_data = top[i]->mutable_data_on(dev);
    plan.Forward(dev, bottom[i]->data_on(dev), weights, top_data);
    if (this->bias_term_) {
      plan.AddBias(dev, this->blobs_[1]->data_on(dev), top_data);
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
    plan.Backward(
        dev, bottom[i]->data_on(dev), top_diff, weights, weight_diff,
        propagate_down[i] ? bottom[i]->mutable_diff_on(dev) : nullptr);
  }
}

INSTANTIATE_CLASS(ConvolutionLayer);
REGISTER_LAYER_CLASS(Convolution);

}  // namespace poseidon
