// TanH on either device: the bodies of kernels/neuron_kernels.hpp, or cuDNN
// in GPU mode when the engine says so (layers/activation_engine.hpp).
#include "poseidon/layers/tanh_layer.hpp"

#include "poseidon/kernels/neuron_kernels.hpp"
#include "poseidon/util/for_each.hpp"

namespace poseidon {

template <typename Dtype>
void TanHLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  for_each(dev, bottom[0]->count(),
           kernels::TanHForward<Dtype>{bottom[0]->data_on(dev),
                                       top[0]->mutable_data_on(dev)});
}

template <typename Dtype>
void TanHLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& top,
                                  const vector<bool>& propagate_down,
                                  const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  for_each(
      dev, bottom[0]->count(),
      kernels::TanHBackward<Dtype>{top[0]->data_on(dev), top[0]->diff_on(dev),
                                   bottom[0]->mutable_diff_on(dev)});
}

template <typename Dtype>
void TanHLayer<Dtype>::Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  if (!UseCudnn()) {
    ForwardOn(Poseidon::GPU, bottom, top);
    return;
  }
  engine_.Forward(bottom[0]->count(), bottom[0]->gpu_data(),
                  top[0]->mutable_gpu_data());
}

template <typename Dtype>
void TanHLayer<Dtype>::Backward_gpu(const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  if (!UseCudnn()) {
    BackwardOn(Poseidon::GPU, top, propagate_down, bottom);
    return;
  }
  // cuDNN takes the derivative from y; x is bottom's data, which in place
  // is y itself (see the header).
  engine_.Backward(bottom[0]->count(), top[0]->gpu_data(), top[0]->gpu_diff(),
                   bottom[0]->gpu_data(), bottom[0]->mutable_gpu_diff());
}

INSTANTIATE_CLASS(TanHLayer);
REGISTER_LAYER_CLASS(TanH);

}  // namespace poseidon
