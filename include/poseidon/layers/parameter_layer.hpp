// ParameterLayer: exposes one learnable blob as its top, so that other layers
// can take a learned tensor as a bottom (e.g. a learned bias fed to Bias or
// Eltwise).
//
//   top = W                     (a copy, made on every Forward)
//   dW += d top
// Copying rather than aliasing keeps dW accumulating across iter_size
// sub-batches like every other parameter diff.
//
// Bottoms: none. Top: one blob shaped like W.
// Parameters (parameter_param):
//   shape   (required) the shape of W. W starts at zero unless weights are
//           loaded (the layer has no filler, as in Caffe).
// Blobs: blobs()[0] is W.
// Both passes are one math call on the pass's device (copy, axpy).
#ifndef POSEIDON_LAYERS_PARAMETER_LAYER_HPP_
#define POSEIDON_LAYERS_PARAMETER_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class ParameterLayer final : public Layer<Dtype> {
 public:
  explicit ParameterLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Parameter"; }
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_PARAMETER_LAYER_HPP_
