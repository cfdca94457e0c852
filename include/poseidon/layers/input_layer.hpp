// Input ("Input"): tops whose values the caller writes (deploy nets, pycaffe's
// net.blobs['data'].data[...] = x). Forward and Backward do nothing.
//
//   top[i]: input_param.shape(i), or input_param.shape(0) for every top when
//           one shape is given; with no shape the tops are left as they are
//           (the caller shapes them).
#ifndef POSEIDON_LAYERS_INPUT_LAYER_HPP_
#define POSEIDON_LAYERS_INPUT_LAYER_HPP_

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class InputLayer final : public Layer<Dtype> {
 public:
  explicit InputLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  // Throws ConfigError unless there are 0, 1 or one-per-top shapes.
  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override {}

  const char* type() const override { return "Input"; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

 protected:
  // No-ops on either device (no CPU fallback in GPU mode): the caller
  // writes the tops, on the host or the device.
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override {}
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override {}
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_INPUT_LAYER_HPP_
