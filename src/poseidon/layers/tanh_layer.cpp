// TanH on the CPU, split over ParallelFor for large blobs.
#include "poseidon/layers/tanh_layer.hpp"

#include <cmath>

#include "poseidon/util/parallel.hpp"

namespace poseidon {
namespace {

// Blobs with fewer elements stay on the calling thread.
constexpr int kMinParallelCount = 1 << 14;

// Calls fn(begin, end) over [0, count), in ParallelFor ranges when large.
template <typename Fn>
void ForRanges(int count, const Fn& fn) {
  if (count < kMinParallelCount || ParallelForWorkers(count) <= 1) {
    fn(0, count);
    return;
  }
  ParallelFor(count, [&](int begin, int end, int) { fn(begin, end); });
}

}  // namespace

template <typename Dtype>
void TanHLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  const Dtype* x = bottom[0]->cpu_data();
  Dtype* y = top[0]->mutable_cpu_data();
  ForRanges(count, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) y[i] = std::tanh(x[i]);
  });
}

template <typename Dtype>
void TanHLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                    const vector<bool>& propagate_down,
                                    const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const Dtype* y = top[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  ForRanges(count, [&](int begin, int end) {
    for (int i = begin; i < end; ++i) dx[i] = dy[i] * (Dtype(1) - y[i] * y[i]);
  });
}

INSTANTIATE_CLASS(TanHLayer);
REGISTER_LAYER_CLASS(TanH);

}  // namespace poseidon
