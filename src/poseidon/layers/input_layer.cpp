// The Input layer.
#include "poseidon/layers/input_layer.hpp"

namespace poseidon {

template <typename Dtype>
void InputLayer<Dtype>::LayerSetUp(const vector<Blob<Dtype>*>& bottom,
                                   const vector<Blob<Dtype>*>& top) {
  const InputParameter& param = this->layer_param_.input_param();
  const int num_top = static_cast<int>(top.size());
  const int num_shape = param.shape_size();
  POSEIDON_REQUIRE(num_shape == 0 || num_shape == 1 || num_shape == num_top,
                   ConfigError,
                   "input_param.shape must be given once, once "
                   "per top, or not at all (",
                   num_shape, " shapes for ", num_top, " tops)");
  if (num_shape == 0) return;
  for (int i = 0; i < num_top; ++i) {
    top[i]->Reshape(param.shape(num_shape == 1 ? 0 : i));
  }
}

INSTANTIATE_CLASS(InputLayer);
REGISTER_LAYER_CLASS(Input);

}  // namespace poseidon
