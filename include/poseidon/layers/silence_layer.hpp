// SilenceLayer: consumes its bottoms and produces nothing, so that blobs no
// other layer reads (an unused data label, an auxiliary output) are not
// reported as net outputs.
//
//   forward:  nothing
//   d bottom[i] = 0   (for every bottom that asks for a gradient)
//
// Bottoms: one or more blobs of any shape. Tops: none. No parameters.
// The zeroing runs on the pass's device (no CPU fallback in GPU mode).
#ifndef POSEIDON_LAYERS_SILENCE_LAYER_HPP_
#define POSEIDON_LAYERS_SILENCE_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class SilenceLayer final : public Layer<Dtype> {
 public:
  explicit SilenceLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override {}

  const char* type() const override { return "Silence"; }
  int MinBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 0; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override {}
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_SILENCE_LAYER_HPP_
