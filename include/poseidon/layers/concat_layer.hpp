// ConcatLayer: joins its bottoms along one axis.
//
//   top = [bottom[0], bottom[1], ..., bottom[K-1]] along `axis`
//   d bottom[k] = the matching slice of d top
//
// Bottoms: K >= 1 blobs with the same number of axes and equal dimensions on
//   every axis except `axis`. Top: that shape with the `axis` dimensions
//   summed. With a single bottom the top aliases it (no copy).
// Both passes are block copies (util/block_ops.hpp): memcpy per block on the
// CPU, one kernel per bottom on the GPU.
// Parameters (concat_param):
//   axis        (default 1) the axis to join along; negative counts from
//               the end.
//   concat_dim  (deprecated, non-negative) the same; give one or the other.
#ifndef POSEIDON_LAYERS_CONCAT_LAYER_HPP_
#define POSEIDON_LAYERS_CONCAT_LAYER_HPP_

#include <vector>

#include "poseidon/layer.hpp"

namespace poseidon {

template <typename Dtype>
class ConcatLayer final : public Layer<Dtype> {
 public:
  explicit ConcatLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Concat"; }
  int MinBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  int concat_axis_ = 1;
  int num_concats_ = 0;        // product of the dims before the axis
  int concat_input_size_ = 0;  // product of the dims after the axis
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_CONCAT_LAYER_HPP_
