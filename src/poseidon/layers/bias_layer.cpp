// Bias on the CPU, and the broadcasting helpers shared with Scale.
#include "poseidon/layers/bias_layer.hpp"

#include "poseidon/filler.hpp"

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
void BiasLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const Dtype* bias = BiasBlob(bottom).cpu_data();
  cpu_copy(bottom[0]->count(), bottom[0]->cpu_data(),
           top[0]->mutable_cpu_data());
  Dtype* y = top[0]->mutable_cpu_data();
  for (int o = 0; o < view_.outer; ++o) {
    for (int d = 0; d < view_.dim; ++d) {
      cpu_add_scalar(view_.inner, bias[d], y);
      y += view_.inner;
    }
  }
}

template <typename Dtype>
void BiasLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  const Dtype* dy = top[0]->cpu_diff();
  const bool learned = bottom.size() == 1;
  const bool bias_grad =
      learned ? this->param_propagate_down(0) : propagate_down[1];
  if (bias_grad) {
    Blob<Dtype>* bias = learned ? this->blobs_[0].get() : bottom[1];
    Dtype* db = bias->mutable_cpu_diff();
    // A learned bias accumulates; a bottom's diff is overwritten.
    if (!learned) cpu_set(view_.dim, Dtype(0), db);
    const Dtype* block = dy;
    for (int o = 0; o < view_.outer; ++o) {
      for (int d = 0; d < view_.dim; ++d) {
        Dtype sum = 0;
        for (int i = 0; i < view_.inner; ++i) sum += block[i];
        db[d] += sum;
        block += view_.inner;
      }
    }
  }
  if (propagate_down[0]) {
    cpu_copy(top[0]->count(), dy, bottom[0]->mutable_cpu_diff());
  }
}

#define POSEIDON_INSTANTIATE_BROADCAST(Dtype)                              \
  template vector<int> LearnedOperandShape<Dtype>(const Blob<Dtype>&, int, \
                                                  int, const string&);     \
  template AxisBroadcast MatchOperand<Dtype>(                              \
      const Blob<Dtype>&, const Blob<Dtype>&, int, const string&)
POSEIDON_INSTANTIATE_BROADCAST(float);
POSEIDON_INSTANTIATE_BROADCAST(double);
#undef POSEIDON_INSTANTIATE_BROADCAST

INSTANTIATE_CLASS(BiasLayer);
REGISTER_LAYER_CLASS(Bias);

}  // namespace poseidon
