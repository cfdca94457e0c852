// ReLU on the CPU: branch-free loops (they vectorize), split over
// ParallelFor for large blobs.
#include "poseidon/layers/relu_layer.hpp"

#include <algorithm>

#include "poseidon/util/parallel.hpp"

namespace poseidon {
namespace {

// Blobs with fewer elements stay on the calling thread.
constexpr int kMinParallelCount = 1 << 16;

// Calls fn(begin, end) over [0, count), in ParallelFor ranges when large.
template <typename Fn>
void ForRanges(int count, const Fn& fn) {
  if (count < kMinParallelCount || ParallelForWorkers(count) <= 1) {
    fn(0, count);
    return;
  }
  ParallelFor(count, [&](int begin, int end, int) { fn(begin, end); });
}

// Caffe's form, max(x, 0) + slope * min(x, 0): no branch, so it vectorizes.
template <typename Dtype>
Dtype Rectify(Dtype x, Dtype slope) {
  return std::max(x, Dtype(0)) + slope * std::min(x, Dtype(0));
}

}  // namespace

template <typename Dtype>
void ReLULayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const Dtype slope = this->layer_param_.relu_param().negative_slope();
  const int count = bottom[0]->count();
  if (slope < 0 && this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    cpu_copy(count, bottom[0]->cpu_data(), saved_input_.mutable_cpu_data());
  }
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  ForRanges(count, [&](int begin, int end) {
    if (x == y) {
      // In place: one pointer, so the compiler needs no overlap check.
      Dtype* __restrict p = y;
      for (int i = begin; i < end; ++i) p[i] = Rectify(p[i], slope);
      return;
    }
    const Dtype* __restrict in = x;
    Dtype* __restrict out = y;
    for (int i = begin; i < end; ++i) out[i] = Rectify(in[i], slope);
  });
}

template <typename Dtype>
void ReLULayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const Dtype slope = this->layer_param_.relu_param().negative_slope();
  const int count = bottom[0]->count();
  // The gradient mask comes from the input; in place, the output has the
  // same signs when the slope is >= 0 (see the header).
  const Dtype* sign_source = bottom[0]->cpu_data();
  if (this->InPlace(bottom, top) && slope < 0) {
    sign_source = saved_input_.cpu_data();
  }
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  // The factor: 1 where the input was positive, slope elsewhere.
  auto factor = [slope](Dtype x) {
    const Dtype positive = x > 0 ? Dtype(1) : Dtype(0);
    return positive + slope * (Dtype(1) - positive);
  };
  ForRanges(count, [&](int begin, int end) {
    const Dtype* __restrict s = sign_source;
    if (dx == dy) {
      Dtype* __restrict d = dx;
      for (int i = begin; i < end; ++i) d[i] *= factor(s[i]);
      return;
    }
    const Dtype* __restrict in = dy;
    Dtype* __restrict out = dx;
    for (int i = begin; i < end; ++i) out[i] = in[i] * factor(s[i]);
  });
}

INSTANTIATE_CLASS(ReLULayer);
REGISTER_LAYER_CLASS(ReLU);

}  // namespace poseidon
