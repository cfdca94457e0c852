// Dropout: in TRAIN, zeroes each unit independently with probability p and
// rescales the rest so that the expected output is unchanged.
//
//   TRAIN: y = x * m * s,  m ~ Bernoulli(1 - p) per element,
//          s = 1 / (1 - p) if scale_train else 1
//   TEST:  y = x * t,      t = 1 if scale_train else (1 - p)
//   dE/dx = dE/dy * (the same factor as in Forward)
//
//   bottom[0]: any shape      top[0]: the same shape
//
// Prototxt: dropout_param { dropout_ratio: 0.5  scale_train: true }
//   dropout_ratio must lie in [0, 1). The phase is the layer's
//   (LayerParameter.phase). The mask is drawn in every TRAIN Forward, on the
//   device that computes: from the calling thread's generator
//   (Poseidon::rng()) on the CPU, from its cuRAND generator on the GPU (so
//   the two devices drop different units), and reused by Backward.
// In place is supported: Backward needs only the mask.
// One body for both devices (kernels/neuron_kernels.hpp).
#ifndef POSEIDON_LAYERS_DROPOUT_LAYER_HPP_
#define POSEIDON_LAYERS_DROPOUT_LAYER_HPP_

#include <vector>

#include "poseidon/layers/neuron_layer.hpp"
#include "poseidon/util/mask_buffer.hpp"

namespace poseidon {

template <typename Dtype>
class DropoutLayer final : public NeuronLayer<Dtype> {
 public:
  explicit DropoutLayer(const LayerParameter& param)
      : NeuronLayer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Dropout"; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  bool training() const { return this->layer_param_.phase() == TRAIN; }

  // The drop probability p.
  Dtype ratio_ = 0.5;
  // Factor applied to kept units in TRAIN and to every unit in TEST.
  Dtype train_scale_ = 2;
  Dtype test_scale_ = 1;
  // 1 for kept units, 0 for dropped ones, from the last TRAIN Forward.
  MaskBuffer<unsigned int> mask_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_DROPOUT_LAYER_HPP_
