// Scale: multiplies by a scale s broadcast over the axes it does not cover,
// optionally adding a bias b of the same shape (as Caffe's Scale layer, the
// usual partner of BatchNorm).
//
//   y[o, d, i] = x[o, d, i] * s[d] (+ b[d])
//   dE/dx[o, d, i] = dE/dy[o, d, i] * s[d]
//   dE/ds[d] = sum_{o, i} dE/dy[o, d, i] * x[o, d, i]
//   dE/db[d] = sum_{o, i} dE/dy[o, d, i]
//
// The bottom is viewed as (outer, dim, inner) around s exactly as in
// BiasLayer (see bias_layer.hpp).
//
//   bottom[0]: x, any shape          top[0]: y, the same shape
//   bottom[1]: s (optional). Without it, s is a learned parameter (blobs[0])
//              of shape bottom[0].shape[axis, axis + num_axes).
// Parameter blobs: [s if learned] then [b if bias_term].
// In place (top == bottom[0]) is supported; x is then kept for dE/ds.
//
// Prototxt: scale_param {
//   axis: 1          first axis of bottom[0] that s covers (negative from end)
//   num_axes: 1      axes a learned s covers; -1 to the end, 0 a scalar;
//                    ignored when s is bottom[1]
//   filler           initialises a learned s (default constant 1)
//   bias_term: false adds b, set up by an internal BiasLayer
//   bias_filler      initialises b (default constant 0) }
//
// One body for both devices: y = s * x (+ b) by a channel functor
// (kernels/channel_kernels.hpp; with the bias in the same pass when s and b
// cover the same axes). Backward on the CPU: one pass over dE/dy that sums
// dE/dy * x and dE/dy per row and writes dE/dx (Note [Scale backward in one
// pass] in scale_layer.cpp). On the GPU: dE/dx by the channel functor;
// dE/ds and dE/db: the GPU forms dE/dy * x and sums it with two gemv
// calls against a ones vector (ScaleGradientOnDevice below; BiasGradient in
// bias_layer.hpp), with no host round trip. The product goes to bottom[0]'s
// diff when dE/dx overwrites it afterwards, else to a scratch blob.
#ifndef POSEIDON_LAYERS_SCALE_LAYER_HPP_
#define POSEIDON_LAYERS_SCALE_LAYER_HPP_

#include <memory>
#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/layers/bias_layer.hpp"

namespace poseidon {

// The GPU pass's scale gradient, on `dev`:
//   ds[d] = (accumulate ? ds[d] : 0) + sum_{o, i} dy[o, d, i] * x[o, d, i]
// over `view`; `product` (view-sized scratch, may be dy's or x's blob's
// other buffer but not dy or x) and `reducer` belong to the caller. Tests
// run it on the CPU against the CPU pass.
template <typename Dtype>
void ScaleGradientOnDevice(Poseidon::Brew dev, const AxisBroadcast& view,
                           const Dtype* dy, const Dtype* x, Dtype* product,
                           bool accumulate, ChannelReducer<Dtype>* reducer,
                           Dtype* ds);

template <typename Dtype>
class ScaleLayer final : public Layer<Dtype> {
 public:
  explicit ScaleLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Scale"; }
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

  // Note [BatchNorm + Scale] (net_fold.cpp). Whether this layer, set up on
  // `bottom` and `top`, can fold into a BatchNorm over axis 1 whose top is
  // bottom[0]: in place, a learned scale over axis 1 alone, the bias (if
  // any) over the same axis.
  bool FoldableIntoBatchNorm(const vector<Blob<Dtype>*>& bottom,
                             const vector<Blob<Dtype>*>& top) const;
  // The two halves of a folded pass, called by the Net in place of Forward
  // and Backward (CPU, in place, FoldableIntoBatchNorm). ForwardFolded: the
  // BatchNorm before has written y already; `x_hat`, its normalised value,
  // is this layer's x for the Backward that follows. BackwardFolded: the
  // parameter gradients and channel_sums(); dE/dy stays in the diff for the
  // BatchNorm to finish.
  void ForwardFolded(const vector<Blob<Dtype>*>& bottom,
                     const vector<Blob<Dtype>*>& top, const Blob<Dtype>& x_hat);
  void BackwardFolded(const vector<Blob<Dtype>*>& top,
                      const vector<Blob<Dtype>*>& bottom);
  // After BackwardFolded: 3 x channels values, the sums over the batch
  // of dE/dy and of dE/dy * x, and the scale the pass used.
  const Dtype* channel_sums() const { return channel_sums_.cpu_data(); }
  // The learned scale and the bias (null without bias_term), on the CPU.
  const Dtype* scale_cpu_data() const { return this->blobs_[0]->cpu_data(); }
  const Dtype* bias_cpu_data() const {
    return bias_layer_ ? this->blobs_[bias_param_id_]->cpu_data() : nullptr;
  }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  Blob<Dtype>* ScaleBlob(const vector<Blob<Dtype>*>& bottom) const {
    return bottom.size() > 1 ? bottom[1] : this->blobs_[0].get();
  }
  // The CPU's backward in one pass over dE/dy (Note [Scale backward in one
  // pass], scale_layer.cpp): dx = scale * dy unless scale is null; ds
  // (+)= sum dy * x unless x is null (accumulating when accumulate_ds);
  // db += sum dy unless db is null; sums (when not null, x not null):
  // per channel d, sum dy and then sum dy * x, overwritten. dx may be dy.
  void BackwardCpu(const Dtype* dy, const Dtype* x, const Dtype* scale,
                   Dtype* dx, Dtype* ds, bool accumulate_ds, Dtype* db,
                   Dtype* sums);
  // BackwardOn's body; `folded`: BackwardFolded's (see there).
  void BackwardBody(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                    const vector<bool>& propagate_down,
                    const vector<Blob<Dtype>*>& bottom, bool folded);

  AxisBroadcast view_;
  // Sets up the bias term (its filler, given blobs and shape checks); its
  // parameter blob is also this layer's last blob. Null without bias_term.
  // The bias itself is applied by AddBias/BiasGradient over bias_view_.
  std::unique_ptr<BiasLayer<Dtype>> bias_layer_;
  int bias_param_id_ = -1;
  AxisBroadcast bias_view_;
  // x, kept by Forward when computing in place.
  Blob<Dtype> saved_input_;
  // Where the last Forward's x is: null for saved_input_ in place, else
  // bottom[0]; after ForwardFolded, the BatchNorm's x_hat.
  const Blob<Dtype>* x_source_ = nullptr;
  Blob<Dtype> channel_sums_;
  // GPU: dE/dy * x, unless bottom[0]'s diff can hold it (see the top).
  Blob<Dtype> product_;
  // CPU: per (outer, dim) row, the sums of dE/dy * x and of dE/dy.
  Blob<Dtype> row_sums_;
  ChannelReducer<Dtype> reducer_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_SCALE_LAYER_HPP_
