// SPPLayer: spatial pyramid pooling (He et al., 2014). Pools the bottom at
// pyramid levels l = 0 .. pyramid_height - 1 into 2^l x 2^l bins each and
// concatenates the flattened results, giving a fixed-length output for any
// input size.
//
// Level l with b = 2^l bins runs a Pooling layer with, per spatial axis
// (size S):
//   kernel = ceil(S / b), stride = kernel,
//   pad    = (kernel * b - S + 1) / 2   (integer division)
// which Caffe's pooling rule turns into b outputs along the axis.
//
// Bottom: (N, C, H, W).
// Top: pyramid_height > 1: (N, C * sum_l 4^l); per sample the levels in
//   order, each flattened as (C, b, b). pyramid_height == 1: the single
//   level's output (N, C, 1, 1), as in Caffe.
// Parameters (spp_param):
//   pyramid_height (required, >= 1)
//   pool           (default MAX) MAX | AVE | STOCHASTIC.
// An input too small for a level (its pad would reach the kernel, or it
// would not give b x b bins, e.g. fewer than b pixels) is a ShapeError.
// Devices: the levels are Pooling layers (cuDNN or Poseidon's kernels on
// the GPU, see pooling_layer.hpp); the concatenation is one copy kernel
// per level.
#ifndef POSEIDON_LAYERS_SPP_LAYER_HPP_
#define POSEIDON_LAYERS_SPP_LAYER_HPP_

#include <memory>
#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class SPPLayer final : public Layer<Dtype> {
 public:
  explicit SPPLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "SPP"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  // One body for both devices (the Pooling layers inside run in the
  // current mode).
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // The Pooling parameters of `level` for a bottom of height x width.
  LayerParameter LevelParam(int level, int height, int width) const;
  // (Re)creates the per-level pooling layers for the bottom's plane size.
  void BuildLevels(Blob<Dtype>* bottom);

  int pyramid_height_ = 0;
  int height_ = -1, width_ = -1;
  // Per level: the pooling layer, its input (sharing the bottom's data but
  // with its own diff, so the levels' gradients can be summed) and output.
  vector<shared_ptr<Layer<Dtype>>> pooling_;
  vector<std::unique_ptr<Blob<Dtype>>> level_in_;
  vector<std::unique_ptr<Blob<Dtype>>> level_out_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_SPP_LAYER_HPP_
