// Sigmoid: the logistic function, element-wise.
//
//   y = 1 / (1 + exp(-x))
//   dE/dx = dE/dy * y * (1 - y)
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: sigmoid_param { engine: DEFAULT }
//   In GPU mode DEFAULT and CUDNN run cuDNN's activation in builds with
//   cuDNN, CAFFE (and any engine without cuDNN) Poseidon's own kernels, the
//   bodies the CPU runs (kernels/neuron_kernels.hpp); see
//   layers/activation_engine.hpp. The CPU ignores the engine.
// In place is supported: Backward needs only y (cuDNN's too, which is also
// handed x: in place that is y, which it does not read).
#ifndef POSEIDON_LAYERS_SIGMOID_LAYER_HPP_
#define POSEIDON_LAYERS_SIGMOID_LAYER_HPP_

#include <vector>

#include "poseidon/layers/activation_engine.hpp"
#include "poseidon/layers/neuron_layer.hpp"

namespace poseidon {

template <typename Dtype>
class SigmoidLayer final : public NeuronLayer<Dtype> {
 public:
  explicit SigmoidLayer(const LayerParameter& param)
      : NeuronLayer<Dtype>(param) {}

  const char* type() const override { return "Sigmoid"; }

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
    return engine_.UseCudnn(this->layer_param_.sigmoid_param().engine(),
                            this->layer_param_, "");
  }

  ActivationEngine<Dtype> engine_{ActivationKind::kSigmoid};
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_SIGMOID_LAYER_HPP_
