// Bias: adds a bias b, broadcast over the axes it does not cover.
//
//   y[o, d, i] = x[o, d, i] + b[d]
//   dE/dx = dE/dy          dE/db[d] = sum_{o, i} dE/dy[o, d, i]
//
// where the bottom is viewed as (outer, dim, inner): b's shape equals
// bottom[0].shape[axis, axis + b.num_axes()), outer is the product of the axes
// before `axis` and inner of those after b's axes. A scalar b (no axes)
// applies to every element.
//
//   bottom[0]: x, any shape          top[0]: y, the same shape
//   bottom[1]: b (optional). Without it, b is a learned parameter (blobs[0])
//              of shape bottom[0].shape[axis, axis + num_axes).
// In place (top == bottom[0]) is supported.
//
// Prototxt: bias_param {
//   axis: 1       first axis of bottom[0] that b covers (negative from end)
//   num_axes: 1   axes b covers when learned; -1 means up to the end, 0 a
//                 scalar; ignored when b is bottom[1]
//   filler        initialises the learned b (default constant 0) }
//
// One body for both devices: y = x + b by a channel functor
// (kernels/channel_kernels.hpp); dE/db summed on the CPU row by row in
// order, on the GPU by two gemv calls against a ones vector
// (ChannelReducer, util/channel_ops.hpp).
//
// The broadcasting helpers below, AddBias and BiasGradient are shared with
// ScaleLayer, which also composes a BiasLayer for its bias_term.
#ifndef POSEIDON_LAYERS_BIAS_LAYER_HPP_
#define POSEIDON_LAYERS_BIAS_LAYER_HPP_

#include <string>
#include <vector>

#include "poseidon/layer.hpp"
#include "poseidon/util/channel_ops.hpp"

namespace poseidon {

// A bottom viewed as (outer, dim, inner) around a broadcast operand.
struct AxisBroadcast {
  int outer = 0;
  int dim = 0;
  int inner = 0;
};

// The shape of a learned operand covering bottom axes [axis, axis + num_axes)
// (num_axes == -1: to the end). `param_name` (e.g. "bias_param") prefixes
// error messages. Throws ConfigError/ShapeError for a bad axis or num_axes.
template <typename Dtype>
vector<int> LearnedOperandShape(const Blob<Dtype>& bottom, int axis,
                                int num_axes, const string& param_name);

// Checks that `operand` matches bottom's shape from `axis` on (a scalar
// operand matches anything) and returns the view of bottom around it.
// Throws ShapeError naming both shapes otherwise; `what` names the operand
// in the message (e.g. "Scale's scale").
template <typename Dtype>
AxisBroadcast MatchOperand(const Blob<Dtype>& bottom,
                           const Blob<Dtype>& operand, int axis,
                           const string& what);

inline bool operator==(const AxisBroadcast& a, const AxisBroadcast& b) {
  return a.outer == b.outer && a.dim == b.dim && a.inner == b.inner;
}

// y = x + b[d] over `view` on `dev` (x may be y).
template <typename Dtype>
void AddBias(Poseidon::Brew dev, const AxisBroadcast& view, const Dtype* x,
             const Dtype* b, Dtype* y);

// db[d] = (accumulate ? db[d] : 0) + sum_{o, i} dy[o, d, i] on `dev`. The
// CPU sums each (o, d) row in order and adds the rows in the order of o; the
// GPU uses `reducer` (two gemv calls, other rounding).
template <typename Dtype>
void BiasGradient(Poseidon::Brew dev, const AxisBroadcast& view,
                  const Dtype* dy, bool accumulate,
                  ChannelReducer<Dtype>* reducer, Dtype* db);

template <typename Dtype>
class BiasLayer final : public Layer<Dtype> {
 public:
  explicit BiasLayer(const LayerParameter& param) : Layer<Dtype>(param) {}

  void LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                  const vector<Blob<Dtype>*>& top) override;
  void Reshape(const vector<Blob<Dtype>*>& bottom,
               const vector<Blob<Dtype>*>& top) override;

  const char* type() const override { return "Bias"; }
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void ForwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& bottom,
                 const vector<Blob<Dtype>*>& top) override;
  void BackwardOn(Poseidon::Brew dev, const vector<Blob<Dtype>*>& top,
                  const vector<bool>& propagate_down,
                  const vector<Blob<Dtype>*>& bottom) override;

 private:
  const Blob<Dtype>& BiasBlob(const vector<Blob<Dtype>*>& bottom) const {
    return bottom.size() > 1 ? *bottom[1] : *this->blobs_[0];
  }

  AxisBroadcast view_;
  ChannelReducer<Dtype> reducer_;
};

}  // namespace poseidon

#endif  // POSEIDON_LAYERS_BIAS_LAYER_HPP_
