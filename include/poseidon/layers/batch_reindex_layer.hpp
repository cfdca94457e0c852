// BatchReindexLayer: gathers items (indices along axis 0) of bottom[0] in the
// order given by bottom[1]; items may repeat or be left out.
//
//   top[j, ...] = bottom[0][idx[j], ...]
//   d bottom[0][n, ...] = sum over j with idx[j] = n of d top[j, ...]
//
// Bottoms: bottom[0] the data, N items; bottom[1] the indices, a 1-D blob of
//   M integer values in [0, N) stored as Dtype. Top: bottom[0]'s shape with
//   M items. No gradient to the indices: Backward throws if asked for one,
//   and force_backward does not reach them. No parameters.
// On either device (util/block_ops.hpp): forward is a row gather; backward
// zeroes d bottom[0] and adds each top row's diff into its item's row, in
// top order (memcpy/axpy loops on the CPU; on the GPU one thread per output
// element sums its item's contributions, listed by the host: deterministic,
// no atomics). The indices are checked on the host in both passes, as on
// the CPU: free when they come from a data layer, a copy from the device
// when a GPU layer made them.
#ifndef POSEIDON_LAYERS_BATCH_REINDEX_LAYER_HPP_
#define POSEIDON_LAYERS_BATCH_REINDEX_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/util/index_upload.hpp"

namespace poseidon {

template <typename Dtype>
class BatchReindexLayer final : public Layer<Dtype> {
 public:
  explicit BatchReindexLayer(const LayerParameter& param)
      : Layer<Dtype>(param) {}

  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "BatchReindex"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override {
    return bottom_index == 0;
  }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  // Reads the indices, throwing ConfigError on one outside [0, N) or not an
  // integer.
  vector<int> Indices(const vector<Blob<Dtype>*>& bottom) const;

  IndexUpload segments_;  // the backward's row lists, on the GPU
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_BATCH_REINDEX_LAYER_HPP_
