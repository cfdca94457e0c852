// AbsVal on the CPU.
#include "poseidon/layers/absval_layer.hpp"

namespace poseidon {

template <typename Dtype>
void AbsValLayer<Dtype>::Forward_cpu(const vector<Blob<Dtype>*>& bottom,
                                     const vector<Blob<Dtype>*>& top) {
  const int count = bottom[0]->count();
  if (this->InPlace(bottom, top)) {
    saved_input_.ReshapeLike(*bottom[0]);
    cpu_copy(count, bottom[0]->cpu_data(), saved_input_.mutable_cpu_data());
  }
  cpu_abs(count, bottom[0]->cpu_data(), top[0]->mutable_cpu_data());
}

template <typename Dtype>
void AbsValLayer<Dtype>::Backward_cpu(const vector<Blob<Dtype>*>& top,
                                      const vector<bool>& propagate_down,
                                      const vector<Blob<Dtype>*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const Dtype* x = this->InPlace(bottom, top) ? saved_input_.cpu_data()
                                              : bottom[0]->cpu_data();
  const Dtype* dy = top[0]->cpu_diff();
  Dtype* dx = bottom[0]->mutable_cpu_diff();
  for (int i = 0; i < count; ++i) {
    const Dtype sign = Dtype((Dtype(0) < x[i]) - (x[i] < Dtype(0)));
    dx[i] = sign * dy[i];
  }
}

INSTANTIATE_CLASS(AbsValLayer);
REGISTER_LAYER_CLASS(AbsVal);

}  // namespace poseidon
