// DummyData ("DummyData"): tops filled by fillers, for tests and timing.
//
//   top[i]: dummy_data_param.shape(i) (or shape(0) for all tops), or the
//           legacy num/channels/height/width lists (each with one value for
//           all tops or one per top; shape and the legacy lists exclude each
//           other).
//   data_filler: none (constant 0), one for all tops, or one per top.
//
// Tops filled by a constant filler are filled once at setup; the others are
// refilled on every Forward. No backward. The fillers run on the host in
// either mode (as in Caffe); in GPU mode a constant top is therefore copied
// to the device once and never written again, and only refilled tops move
// each pass. No CPU fallback (and no warning) in GPU mode.
#ifndef POSEIDON_LAYERS_DUMMY_DATA_LAYER_HPP_
#define POSEIDON_LAYERS_DUMMY_DATA_LAYER_HPP_

#include <memory>

#include "poseidon/filler.hpp"
#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class DummyDataLayer final : public Layer<Dtype> {
 public:
  explicit DummyDataLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override {}

  const char* type() const override { return "DummyData"; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

 protected:
  // Refills the non-constant tops on the host, whatever `dev` is.
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override {}

 private:
  Filler<Dtype>& FillerFor(int top_index) const;
  bool RefillFor(int top_index) const;

  vector<std::unique_ptr<Filler<Dtype>>> fillers_;  // one, or one per top
  vector<bool> refill_;                             // parallel to fillers_
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_DUMMY_DATA_LAYER_HPP_
