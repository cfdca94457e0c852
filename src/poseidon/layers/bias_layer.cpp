// Bias on either device, and the helpers shared with Scale.
#include "poseidon/layers/bias_layer.hpp"

#include "poseidon/filler.hpp"
#include "poseidon/kernels/channel_kernels.hpp"

namespace poseidon {

namespace {

// Maps `axis` into [0, bottom.num_axes()), naming `param_name` on failure.
template <typename Dtype>
int OperandStartAxis(const Blob<Dtype>& bottom, int axis,
                     const string& param_name) {
  const int n = bottom.num_axes();
  POSEIDON_REQUIRE(axis >= -n && axis < n, ShapeError, param_name, ".axis ",
                   axis, " is out of range for bottom shape ",
                   bottom.shape_string());
  return axis < 0 ? axis + n : axis;
}

}  // namespace

template <typename Dtype>
vector<int> LearnedOperandShape(const Blob<Dtype>& bottom, int axis,
                                int num_axes, const string& param_name) {
  POSEIDON_REQUIRE(num_axes >= -1, ConfigError, param_name,
                   ".num_axes must be -1 (to the end) or >= 0, got ", num_axes);
  const int start = OperandStartAxis(bottom, axis, param_name);
  const int end = num_axes == -1 ? bottom.num_axes() : start + num_axes;
  POSEIDON_REQUIRE(end <= bottom.num_axes(), ShapeError, param_name,
                   ".num_axes ", num_axes, " from axis ", start,
                   " goes past the end of bottom shape ",
                   bottom.shape_string());
  return vector<int>(bottom.shape().begin() + start,
                     bottom.shape().begin() + end);
}

template <typename Dtype>
AxisBroadcast MatchOperand(const Blob<Dtype>& bottom,
                           const Blob<Dtype>& operand, int axis,
                           const string& what) {
  const int k = operand.num_axes();
  const int start = k == 0 ? 0 : OperandStartAxis(bottom, axis, what);
  bool fits = start + k <= bottom.num_axes();
  for (int i = 0; fits && i < k; ++i) {
    fits = bottom.shape(start + i) == operand.shape(i);
  }
  POSEIDON_REQUIRE(fits, ShapeError, what, " of shape ", operand.shape_string(),
                   " does not match bottom shape ", bottom.shape_string(),
                   " from axis ", start);
  AxisBroadcast view;
  view.outer = bottom.count(0, start);
  view.dim = operand.count();
  view.inner = bottom.count(start + k);
  return view;
}

template <typename Dtype>
void BiasLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                  const vector<Blob<Dtype>*>& top) {
  const BiasParameter& param = this->layer_param_.bias_param();
  if (bottom.size() > 1) {
    POSEIDON_REQUIRE(this->blobs_.empty(), ConfigError,
                     "Bias takes its bias from bottom[1], so it has no "
                     "parameter blob, but ",
                     this->blobs_.size(), " were given");
    return;
  }
  if (this->blobs_.empty()) {
    const vector<int> shape = LearnedOperandShape(
        *bottom[0], param.axis(), param.num_axes(), "bias_param");
    this->blobs_.push_back(std::make_shared<Blob<Dtype>>(shape));
    GetFiller<Dtype>(param.filler())->Fill(this->blobs_[0].get());
  } else {
    POSEIDON_REQUIRE(this->blobs_.size() == 1, ConfigError,
                     "Bias has one parameter blob, but ", this->blobs_.size(),
                     " were given");
  }
  this->set_param_propagate_down(0, true);
}

template <typename Dtype>
void BiasLayer<Dtype>::Reshape(const vector<Blob<Dtype>*>& bottom,
                               const vector<Blob<Dtype>*>& top) {
  view_ = MatchOperand(*bottom[0], BiasBlob(bottom),
                       this->layer_param_.bias_param().axis(), "Bias's bias");
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
}

template <typename Dtype>
void AddBias(Poseidon::Brew dev, const AxisBroadcast& view, const Dtype* x,
             const Dtype* b, Dtype* y) {
  channel_for_each(dev, view.outer, view.dim, view.inner,
                   kernels::BiasForward<Dtype>{x, b, y});
}

template <typename Dtype>
void BiasGradient(Poseidon::Brew dev, const AxisBroadcast& view,
                  const Dtype* dy, bool accumulate,
                  ChannelReducer<Dtype>* reducer, Dtype* db) {
  if (view.dim <= 0) return;
  if (view.outer <= 0 || view.inner <= 0) {
    if (!accumulate) math::set<Dtype>(dev, view.dim, Dtype(0), db);
    return;
  }
  if (dev == Poseidon::GPU) {
    reducer->Sum(dev, view.outer, view.dim, view.inner, dy,
                 accumulate ? Dtype(1) : Dtype(0), db);
    return;
  }
  if (!accumulate) cpu_set(view.dim, Dtype(0), db);
  const Dtype* block = dy;
  for (int o = 0; o < view.outer; ++o) {
    for (int d = 0; d < view.dim; ++d) {
      Dtype sum = 0;
      for (int i = 0; i < view.inner; ++i) sum += block[i];
      db[d] += sum;
      block += view.inner;
    }
  }
}

template <typename Dtype>
void BiasLayer<Dtype>::ForwardOn(Poseidon::Brew dev,
                                 const vector<Blob<Dtype>*>& bottom,
                                 const vector<Blob<Dtype>*>& top) {
  AddBias(dev, view_, bottom[0]->data_on(dev), BiasBlob(bottom).data_on(dev),
          top[0]->mutable_data_on(dev));
}

template <typename Dtype>
void BiasLayer<Dtype>::BackwardOn(Poseidon::Brew dev,
                                  const vector<Blob<Dtype>*>& top,
                                  const vector<bool>& propagate_down,
                                  const vector<Blob<Dtype>*>& bottom) {
  const Dtype* dy = top[0]->diff_on(dev);
  const bool learned = bottom.size() == 1;
  const bool bias_grad =
      learned ? this->param_propagate_down(0) : propagate_down[1];
  if (bias_grad) {
    Blob<Dtype>* bias = learned ? this->blobs_[0].get() : bottom[1];
    // A learned bias accumulates; a bottom's diff is overwritten.
    BiasGradient(dev, view_, dy, learned, &reducer_,
                 bias->mutable_diff_on(dev));
  }
  if (propagate_down[0]) {
    math::copy<Dtype>(dev, top[0]->count(), dy,
                      bottom[0]->mutable_diff_on(dev));
  }
}

#define POSEIDON_INSTANTIATE_BROADCAST(Dtype)                              \
  template vector<int> LearnedOperandShape<Dtype>(const Blob<Dtype>&, int, \
                                                  int, const string&);     \
  template AxisBroadcast MatchOperand<Dtype>(                              \
      const Blob<Dtype>&, const Blob<Dtype>&, int, const string&);         \
  template void AddBias<Dtype>(Poseidon::Brew, const AxisBroadcast&,       \
                               const Dtype*, const Dtype*, Dtype*);        \
  template void BiasGradient<Dtype>(Poseidon::Brew, const AxisBroadcast&,  \
                                    const Dtype*, bool,                    \
                                    ChannelReducer<Dtype>*, Dtype*)
POSEIDON_INSTANTIATE_BROADCAST(float);
POSEIDON_INSTANTIATE_BROADCAST(double);
#undef POSEIDON_INSTANTIATE_BROADCAST

INSTANTIATE_CLASS(BiasLayer);
REGISTER_LAYER_CLASS(Bias);

}  // namespace poseidon
