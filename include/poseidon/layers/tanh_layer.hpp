// TanH: the hyperbolic tangent, element-wise.
//
//   y = tanh(x)
//   dE/dx = dE/dy * (1 - y^2)
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: tanh_param { engine: DEFAULT }
//   In GPU mode DEFAULT and CUDNN run cuDNN's activation in builds with
//   cuDNN, CAFFE (and any engine without cuDNN) Poseidon's own kernels, the
//   bodies the CPU runs (kernels/neuron_kernels.hpp); see
//   layers/activation_engine.hpp. The CPU ignores the engine.
// In place is supported: Backward needs only y (cuDNN's too, which is also
// handed x: in place that is y, which it does not read).
#ifndef POSEIDON_LAYERS_TANH_LAYER_HPP_
#define POSEIDON_LAYERS_TANH_LAYER_HPP_

#include <vector>

#include "poseidon/layers/activation_engine.hpp"
#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class TanHLayer final : public NeuronLayer<Dtype> {
 public:
  explicit TanHLayer(const LayerParameter& param) : NeuronLayer<Dtype>(param) {}

  const char* type() const override { return "TanH"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;
  // cuDNN or ForwardOn/BackwardOn(GPU), as the engine says.
  void Forward_gpu(const vector<Blob<Dtype>*>& bottom,
                   const vector<Blob<Dtype>*>& top) override;
  void Backward_gpu(const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom) override;

 private:
  bool UseCudnn() {
    return engine_.UseCudnn(this->layer_param_.tanh_param().engine(),
                            this->layer_param_, "");
  }

  ActivationEngine<Dtype> engine_{ActivationKind::kTanH};
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_TANH_LAYER_HPP_
