// ReLU on either device: the bodies of kernels/relu_kernels.hpp, or cuDNN
// in GPU mode when the engine says so (layers/activation_engine.hpp).
#include "poseidon/layers/relu_layer.hpp"

#include "poseidon/kernels/relu_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void ReLULayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  const Dtype slope = this->layer_param_.relu_param().negative_slope();
  const int count = bottom[0]->count();
  if (slope < 0 && this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    math::copy<Dtype>(dev, count, bottom[0]->data_on(dev),
                      saved_input_.mutable_data_on(dev));
  }
  for_each(dev, count,
           kernels::ReLUForward<Dtype>{bottom[0]->data_on(dev),
                                       top[0]->mutable_data_on(dev), slope});
}

template <typename Dtype>
void ReLULayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& top,
                                  const vector<bool>& propagate_down,
                                  const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype slope = this->layer_param_.relu_param().negative_slope();
  // The gradient mask comes from the input; in place, the output has the
  // same signs when the slope is >= 0 (see the header).
  const Dtype* sign_source = this->InPlace(bottom, top) && slope < 0
                                 ? saved_input_.data_on(dev)
                                 : bottom[0]->data_on(dev);
  for_each(
      dev, bottom[0]->count(),
      kernels::ReLUBackward<Dtype>{sign_source, top[0]->diff_on(dev),
                                   bottom[0]->mutable_diff_on(dev), slope});
}

template <typename Dtype>
bool ReLULayer<Dtype>::UseCudnn() {
  const ReLUParameter& param = this->layer_param_.relu_param();
  return engine_.UseCudnn(
      param.engine(), this->layer_param_,
      param.negative_slope() == 0
          ? ""
          : "cuDNN has no leaky ReLU (relu_param.negative_slope != 0)");
}

template <typename Dtype>
void ReLULayer<Dtype>::Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  if (!UseCudnn()) {
    ForwardOn(Poseidon::GPU, bottom, top);
    return;
  }
  engine_.Forward(bottom[0]->count(), bottom[0]->gpu_data(),
                  top[0]->mutable_gpu_data());
}

template <typename Dtype>
void ReLULayer<Dtype>::Backward_gpu(const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  if (!UseCudnn()) {
    BackwardOn(Poseidon::GPU, top, propagate_down, bottom);
    return;
  }
  // Slope 0: in place, x is y, which is > 0 exactly where x was.
  engine_.Backward(bottom[0]->count(), top[0]->gpu_data(), top[0]->gpu_diff(),
                   bottom[0]->gpu_data(), bottom[0]->mutable_gpu_diff());
}

INSTANTIATE_CLASS(ReLULayer);
REGISTER_LAYER_CLASS(ReLU);

}  // namespace poseidon
